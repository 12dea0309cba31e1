//! Data I/O runs without the engine's write lock: while one change's data write is stuck in
//! the device, readers see that change's bytes (from memory), other files are created and
//! written, and a checkpoint waits for the stuck write instead of making a pointer to an
//! unwritten block durable. A checkpoint's own writes run without it too: while they are
//! stuck, reads and changes go on and an fsync that needs the checkpoint waits. The image is then judged by uf2fs and fsck.f2fs. And a reader who
//! walks a dnode while a change is linking new blocks into it finds each block in flight or
//! landed, never an unwritten one.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

mod common;

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;
use uf2fs_engine::uf2fs_device::{BlockDevice, IoCause, IoCounters, MemDevice};
use uf2fs_engine::Fs;
use uf2fs_testkit::{assert_fsck_clean, scratch};

/// A memory device whose first user-data write after `arm` (or first node read after
/// `arm_node_read`, or first checkpoint-area write after `arm_checkpoint`) stops until
/// `release`.
struct GateDevice {
    mem: MemDevice,
    armed: AtomicBool,
    armed_node_read: AtomicBool,
    armed_checkpoint: AtomicBool,
    /// (a write is stuck, released)
    state: Mutex<(bool, bool)>,
    /// Where in memory the bytes of the user-data write that stopped were.
    stopped_at: std::sync::atomic::AtomicUsize,
    changed: Condvar,
}

impl GateDevice {
    fn arm(&self) {
        *self.state.lock().unwrap() = (false, false);
        self.armed.store(true, Ordering::SeqCst);
    }

    fn arm_node_read(&self) {
        *self.state.lock().unwrap() = (false, false);
        self.armed_node_read.store(true, Ordering::SeqCst);
    }

    fn arm_checkpoint(&self) {
        *self.state.lock().unwrap() = (false, false);
        self.armed_checkpoint.store(true, Ordering::SeqCst);
    }

    /// Says "stuck" and waits for `release`.
    fn stop(&self) {
        let mut s = self.state.lock().unwrap();
        s.0 = true;
        self.changed.notify_all();
        while !s.1 {
            s = self.changed.wait(s).unwrap();
        }
    }

    fn wait_stuck(&self) {
        let (g, t) = self
            .changed
            .wait_timeout_while(self.state.lock().unwrap(), Duration::from_secs(30), |s| {
                !s.0
            })
            .unwrap();
        assert!(
            !t.timed_out() && g.0,
            "the armed write never reached the device"
        );
    }

    fn release(&self) {
        self.state.lock().unwrap().1 = true;
        self.changed.notify_all();
    }
}

impl BlockDevice for GateDevice {
    fn block_count(&self) -> u64 {
        self.mem.block_count()
    }
    fn read_blocks(&self, blkaddr: u64, buf: &mut [u8], cause: IoCause) -> io::Result<()> {
        if cause == IoCause::Node && self.armed_node_read.swap(false, Ordering::SeqCst) {
            self.stop();
        }
        self.mem.read_blocks(blkaddr, buf, cause)
    }
    fn write_blocks(&self, blkaddr: u64, buf: &[u8], cause: IoCause) -> io::Result<()> {
        if cause == IoCause::UserData && self.armed.swap(false, Ordering::SeqCst) {
            self.stopped_at
                .store(buf.as_ptr() as usize, Ordering::SeqCst);
            self.stop();
        }
        if cause == IoCause::Checkpoint && self.armed_checkpoint.swap(false, Ordering::SeqCst) {
            self.stop();
        }
        self.mem.write_blocks(blkaddr, buf, cause)
    }
    fn flush(&self) -> io::Result<()> {
        self.mem.flush()
    }
    fn counters(&self) -> &IoCounters {
        self.mem.counters()
    }
    fn is_read_only(&self) -> bool {
        false
    }
}

fn gate_device() -> Arc<GateDevice> {
    Arc::new(GateDevice {
        mem: MemDevice::new(common::crash::fresh_mem_image(), false),
        armed: AtomicBool::new(false),
        armed_node_read: AtomicBool::new(false),
        armed_checkpoint: AtomicBool::new(false),
        state: Mutex::new((false, false)),
        stopped_at: Default::default(),
        changed: Condvar::new(),
    })
}

/// Unmounts, has fsck.f2fs judge the image, and mounts its bytes again read-only.
fn unmount_and_judge(fs: Fs, dev: &GateDevice, name: &str) -> Fs {
    fs.unmount().unwrap();
    let image = dev.mem.contents();
    let img = scratch(name).join("img");
    std::fs::write(&img, &image).unwrap();
    assert_fsck_clean(&img);
    Fs::with_device(Box::new(MemDevice::new(image, true))).unwrap()
}

/// A writable volume on a fresh in-memory image.
fn fresh_fs() -> Fs {
    Fs::with_device_rw(Box::new(MemDevice::new(
        common::crash::fresh_mem_image(),
        false,
    )))
    .unwrap()
}

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| seed.wrapping_add((i / 4096) as u8) ^ (i as u8))
        .collect()
}

/// `len` bytes of `pattern(seed, ..)` starting on a block boundary in memory, as a FUSE
/// request's payload lies (the io_uring transport aligns it): (allocation, offset).
fn aligned_pattern(seed: u8, len: usize) -> (Vec<u8>, usize) {
    common::block_aligned(&pattern(seed, len), 0)
}

/// Runs `f` on a thread of `s` beside something held at the gate and returns what it gives;
/// if it has not finished in 30 s, it waited for the held write: the gate is opened (so
/// that the test ends) and the test fails with `why`.
fn finishes_beside<'scope, T: Send + 'scope>(
    s: &'scope std::thread::Scope<'scope, '_>,
    dev: &GateDevice,
    why: &str,
    f: impl FnOnce() -> T + Send + 'scope,
) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    let done = s.spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(t) => {
            done.join().unwrap();
            t
        }
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            dev.release();
            panic!("{why}");
        }
        // `f` panicked: its own message is the failure.
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            dev.release();
            match done.join() {
                Err(p) => std::panic::resume_unwind(p),
                Ok(()) => panic!("{why}"),
            }
        }
    }
}

fn read_all(fs: &Fs, ino: u32) -> Vec<u8> {
    let mut buf = vec![0u8; fs.getattr(ino).unwrap().size as usize];
    let n = fs.read(ino, 0, &mut buf).unwrap();
    buf.truncate(n);
    buf
}

/// A volume on a gate device with files "a" (`a_len` bytes of a pattern, synced) and "b"
/// (empty): (device, volume, a, b, a's bytes).
fn files_a_and_b(a_len: usize) -> (Arc<GateDevice>, Fs, u32, u32, Vec<u8>) {
    let dev = gate_device();
    let fs = Fs::with_device_rw(Box::new(dev.clone())).unwrap();
    let root = fs.root_ino();
    let a = fs
        .create_node(root, b"a", common::crash::file_mode())
        .unwrap();
    let b = fs
        .create_node(root, b"b", common::crash::file_mode())
        .unwrap();
    let old_a = pattern(1, a_len);
    fs.write(a, 0, &old_a).unwrap();
    fs.sync().unwrap();
    (dev, fs, a, b, old_a)
}

#[test]
fn a_stuck_data_write_blocks_no_other_change_and_no_reader() {
    let (dev, fs, a, b, old_a) = files_a_and_b(300 << 10);
    let root = fs.root_ino();

    let new_a = pattern(7, 200 << 10);
    let data_b = pattern(9, 1 << 20);
    let cps_before = fs.checkpoints_written();
    std::thread::scope(|s| {
        dev.arm();
        let writer = s.spawn(|| fs.write(a, 50 << 10, &new_a).unwrap());
        dev.wait_stuck();

        // A reader sees the stuck write's bytes (they are in memory until they land).
        let mut expect_a = old_a.clone();
        expect_a[50 << 10..(50 << 10) + new_a.len()].copy_from_slice(&new_a);
        assert!(
            read_all(&fs, a) == expect_a,
            "a reader saw the blocks under the stuck write"
        );

        // Other changes go ahead: a new file and a 1 MiB write. (Were they to wait for the
        // stuck write, the gate is opened before failing, so that the test ends.)
        let (fs_, data_b_) = (&fs, &data_b);
        let why = "changes to other files waited for a stuck data write";
        finishes_beside(s, &dev, why, move || {
            let (fs, data_b) = (fs_, data_b_);
            let c = fs
                .create_node(root, b"c", common::crash::file_mode())
                .unwrap();
            fs.write(b, 0, data_b).unwrap();
            fs.write(c, 0, b"written beside a stuck write").unwrap();
        });
        assert!(read_all(&fs, b) == data_b);

        // A checkpoint waits for the stuck write.
        let syncer = s.spawn(|| fs.sync().unwrap());
        std::thread::sleep(Duration::from_millis(300));
        assert!(
            !syncer.is_finished(),
            "a checkpoint completed while a data block it points to was unwritten"
        );
        // (Not `checkpoints_written` here: it takes the write lock, which the waiting
        // checkpoint holds.)
        dev.release();
        assert_eq!(writer.join().unwrap(), new_a.len());
        syncer.join().unwrap();
        assert!(fs.checkpoints_written() > cps_before);
    });

    // Everything is in the checkpoint: a fresh mount of the bytes reads it back.
    let mut expect_a = old_a.clone();
    expect_a[50 << 10..(50 << 10) + new_a.len()].copy_from_slice(&new_a);
    let again = unmount_and_judge(fs, &dev, "concurrent_writes");
    let c = again.resolve(b"/c", true).unwrap();
    assert!(read_all(&again, again.resolve(b"/a", true).unwrap()) == expect_a);
    assert!(read_all(&again, again.resolve(b"/b", true).unwrap()) == data_b);
    assert_eq!(read_all(&again, c), b"written beside a stuck write");
}

/// A checkpoint is prepared under the write lock and written without it. Stopped at its first
/// NAT, SIT or pack write (its node blocks are on the device by then, and the NAT in memory
/// already points at them), it must hold up no reader and no change: files changed before it
/// read back (their nodes from memory), new files are made and written, a file is unlinked.
/// An fsync that needs it waits; a directory fsync it covers is served by it (merged). Then
/// the image, judged by fsck.f2fs, holds everything.
#[test]
fn a_checkpoint_being_written_blocks_no_change_and_no_reader() {
    let dev = gate_device();
    let fs = Fs::with_device_rw(Box::new(dev.clone())).unwrap();
    let root = fs.root_ino();
    let mode = common::crash::file_mode();
    let dir_mode = common::node(0o040755);
    let a = fs.create_node(root, b"a", mode).unwrap();
    let gone = fs.create_node(root, b"gone", mode).unwrap();
    let d = fs.create_node(root, b"d", dir_mode).unwrap();
    let old_a = pattern(1, 300 << 10);
    fs.write(a, 0, &old_a).unwrap();
    fs.write(gone, 0, &pattern(2, 64 << 10)).unwrap();
    fs.sync().unwrap();

    // Changes the checkpoint will hold: many nodes (so the NAT journal overflows into NAT
    // blocks, which readers must then find in memory), a rewrite of `a`, a file in `d`.
    let mut many = Vec::new();
    for i in 0..80 {
        let n = fs.create_node(d, format!("f{i}").as_bytes(), mode).unwrap();
        fs.write(n, 0, format!("file {i}").as_bytes()).unwrap();
        many.push(n);
    }
    let new_a = pattern(7, 100 << 10);
    fs.write(a, 20 << 10, &new_a).unwrap();
    let mut expect_a = old_a.clone();
    expect_a[20 << 10..(20 << 10) + new_a.len()].copy_from_slice(&new_a);
    let merged_before = fs.status().unwrap().checkpoints.merged;
    let cps_before = fs.checkpoints_written();

    let data_c = pattern(9, 512 << 10);
    std::thread::scope(|s| {
        dev.arm_checkpoint();
        let syncer = s.spawn(|| fs.sync().unwrap());
        dev.wait_stuck();

        let (fs_, data_c_, many_, expect_a_) = (&fs, &data_c, &many, &expect_a);
        let why = "reads or changes waited for a checkpoint's writes";
        let c = finishes_beside(s, &dev, why, move || {
            let fs = fs_;
            // Reads of what the stuck checkpoint writes.
            assert!(
                read_all(fs, a) == *expect_a_,
                "file a read wrong beside a checkpoint"
            );
            for (i, n) in many_.iter().enumerate() {
                assert_eq!(fs.lookup(d, format!("f{i}").as_bytes()).unwrap(), *n);
                assert_eq!(read_all(fs, *n), format!("file {i}").as_bytes());
            }
            // Changes.
            let c = fs.create_node(root, b"c", mode).unwrap();
            fs.write(c, 0, data_c_).unwrap();
            fs.unlink(root, b"gone").unwrap();
            fs.create_node(root, b"e", dir_mode).unwrap();
            c
        });

        // An fsync of the new file needs the checkpoint (its chain follows it): it waits.
        let fs_ = &fs;
        let fsyncer = s.spawn(move || fs_.fsync(c, false).unwrap());
        // A directory fsync whose changes the checkpoint holds is served by it.
        let dir_fsyncer = s.spawn(|| fs.fsync(d, false).unwrap());
        std::thread::sleep(Duration::from_millis(300));
        let early = fsyncer.is_finished() || dir_fsyncer.is_finished();
        dev.release();
        syncer.join().unwrap();
        fsyncer.join().unwrap();
        dir_fsyncer.join().unwrap();
        assert!(
            !early,
            "an fsync returned before the checkpoint it needs had landed"
        );
    });
    let st = fs.status().unwrap();
    assert!(
        st.checkpoints.merged > merged_before,
        "the directory fsync was not merged"
    );
    assert!(fs.checkpoints_written() > cps_before);

    let again = unmount_and_judge(fs, &dev, "concurrent_checkpoint");
    assert!(read_all(&again, again.resolve(b"/a", true).unwrap()) == expect_a);
    assert!(read_all(&again, again.resolve(b"/c", true).unwrap()) == data_c);
    assert!(again.resolve(b"/gone", true).is_err());
    assert!(again.resolve(b"/e", true).is_ok());
    for i in 0..80 {
        let n = again.resolve(format!("/d/f{i}").as_bytes(), true).unwrap();
        assert_eq!(read_all(&again, n), format!("file {i}").as_bytes());
    }
}

/// A write that spans two dnodes links its blocks into the first (which goes into the node
/// cache at once, where readers look without the write lock) before it reads the second from
/// the device. Stopped at that read, the change must already have put its blocks in flight:
/// a reader of the first dnode's range then gets each block's old or new bytes, never those of
/// an address that is linked but neither in flight nor written (zeros here).
#[test]
fn a_reader_never_finds_a_linked_block_that_is_neither_in_flight_nor_written() {
    const B: usize = 4096;
    let dev = gate_device();
    let fs = Fs::with_device_rw(Box::new(dev.clone())).unwrap();
    let root = fs.root_ino();
    let a = fs
        .create_node(root, b"a", common::crash::file_mode())
        .unwrap();
    // 1960 blocks: the inode's own slots (864 for a new inode; 923 at most), all of the first
    // dnode (1018 slots) and the start of the second. The write below covers blocks 1850 to
    // 1959, across the boundary between the two dnodes (at block 1882, or 1941 at most).
    let mut before = pattern(1, 1960 * B);
    for (i, chunk) in before.chunks(256 * B).enumerate() {
        fs.write(a, (i * 256 * B) as u64, chunk).unwrap();
    }
    fs.sync().unwrap();
    // Mounted again, nothing is cached: a node a change edits comes from the device unless
    // it is dirty or was read since the mount (edits use the clean node cache too).
    fs.unmount().unwrap();
    let mut fs = Fs::with_device_rw(Box::new(dev.clone())).unwrap();
    // Under `data_temp=age` the change would read the second dnode for its old slots before
    // linking anything, and stop there with nothing linked: the window this test is about is
    // the one between linking into the first dnode and reading the second.
    let mut o = fs.options();
    o.data_temp = uf2fs_engine::DataTemp::Off;
    fs.set_options(o);
    // Block 1850 is in the first dnode whatever the inode's slot count: rewriting it leaves
    // that dnode dirty in memory (linking into it reads nothing); the second is neither dirty
    // nor cached, so linking into it reads it from the device, where the gate stops the change.
    let one = pattern(3, B);
    fs.write(a, (1850 * B) as u64, &one).unwrap();
    before[1850 * B..1851 * B].copy_from_slice(&one);

    let new = pattern(7, 110 * B);
    let mut after = before.clone();
    after[1850 * B..].copy_from_slice(&new);
    std::thread::scope(|s| {
        dev.arm_node_read();
        let writer = s.spawn(|| fs.write(a, (1850 * B) as u64, &new).unwrap());
        dev.wait_stuck();
        let seen = read_all(&fs, a);
        dev.release();
        assert_eq!(writer.join().unwrap(), new.len());
        assert_eq!(seen.len(), before.len());
        for blk in 0..1960 {
            let r = blk * B..(blk + 1) * B;
            assert!(
                seen[r.clone()] == before[r.clone()] || seen[r.clone()] == after[r.clone()],
                "block {blk}: a reader beside the write got bytes that are neither the old nor \
                 the new ones (first bytes {:?})",
                &seen[r.start..r.start + 8]
            );
        }
    });
    assert!(read_all(&fs, a) == after);
    let again = unmount_and_judge(fs, &dev, "concurrent_writes_link");
    assert!(read_all(&again, again.resolve(b"/a", true).unwrap()) == after);
}

/// Readers take no write lock, so a getxattr can read the inode (naming its xattr node) just
/// before a removexattr frees that node. generic/403 does this through FUSE (a getfattr loop
/// beside setfattr/setfattr -x of a 512-byte value) and once saw EIO ("NAT entry is free for
/// a node in use"). The reader must get the small attribute every time.
#[test]
fn getxattr_beside_an_xattr_node_coming_and_going() {
    let fs = fresh_fs();
    let root = fs.root_ino();
    let f = fs
        .create_node(root, b"f", common::crash::file_mode())
        .unwrap();
    fs.setxattr(f, b"trusted.small", b"a", 0).unwrap();
    let big = vec![b'a'; 512];
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let reader = s.spawn(|| {
            let mut n = 0u64;
            while !done.load(Ordering::SeqCst) {
                assert_eq!(fs.getxattr(f, b"trusted.small").unwrap(), b"a");
                n += 1;
            }
            n
        });
        for _ in 0..3000 {
            fs.setxattr(f, b"trusted.big", &big, 0).unwrap();
            fs.removexattr(f, b"trusted.big").unwrap();
        }
        done.store(true, Ordering::SeqCst);
        assert!(reader.join().unwrap() > 0);
    });
}

/// A lookup racing an unlink (fstests generic/011, dirstress): the name is found, the inode is
/// freed before it is read. The racing reader gets the inode or NotFound, never "corrupt".
#[test]
fn lookup_beside_create_and_unlink_is_found_or_not_found() {
    let fs = fresh_fs();
    let root = fs.root_ino();
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let reader = s.spawn(|| {
            let (mut found, mut missing) = (0u64, 0u64);
            while !done.load(Ordering::SeqCst) {
                match fs.lookup_attr_shared(root, b"x") {
                    Ok((ino, a)) => {
                        assert_eq!(a.ino, ino);
                        // A node id the kernel holds, asked after the unlink: gone, not bad.
                        match fs.getattr_shared(ino) {
                            Ok(_) | Err(uf2fs_engine::Error::NotFound) => {}
                            Err(e) => panic!("getattr of a just-unlinked inode: {e}"),
                        }
                        found += 1;
                    }
                    Err(uf2fs_engine::Error::NotFound) => missing += 1,
                    Err(e) => panic!("lookup beside an unlink: {e}"),
                }
            }
            (found, missing)
        });
        for _ in 0..3000 {
            fs.create_node(root, b"x", common::crash::file_mode())
                .unwrap();
            fs.unlink(root, b"x").unwrap();
        }
        done.store(true, Ordering::SeqCst);
        let (found, missing) = reader.join().unwrap();
        assert!(found + missing > 0);
    });
}

/// A write whose whole blocks lie block-aligned in the caller's buffer is not copied: the
/// device gets the caller's own bytes (O_DIRECT-able), written by the writer's thread once the
/// write lock is let go. Until they land they exist nowhere else, so a reader of those blocks
/// waits for them, never reading the old blocks or an unwritten one; other files' changes go
/// on. Then the image, judged by fsck.f2fs, holds the new bytes.
#[test]
fn a_write_from_an_aligned_buffer_is_not_copied_and_its_readers_wait_for_it() {
    let (dev, fs, a, b, old_a) = files_a_and_b(512 << 10);

    let (mem, at) = aligned_pattern(7, 256 << 10);
    let new_a = &mem[at..at + (256 << 10)];
    let mut expect_a = old_a.clone();
    expect_a[64 << 10..(64 << 10) + new_a.len()].copy_from_slice(new_a);
    std::thread::scope(|s| {
        dev.arm();
        let writer = s.spawn(|| fs.write(a, 64 << 10, new_a).unwrap());
        dev.wait_stuck();
        assert_eq!(
            dev.stopped_at.load(Ordering::SeqCst),
            new_a.as_ptr() as usize,
            "the device was not given the writer's own bytes"
        );
        // A reader of the file waits for the blocks in the writer's buffer.
        let reader = s.spawn(|| read_all(&fs, a));
        // Another file is written meanwhile.
        let fs_ = &fs;
        let why = "a change to another file waited for a borrowed write";
        finishes_beside(s, &dev, why, move || {
            fs_.write(b, 0, b"beside a borrowed write").unwrap()
        });
        std::thread::sleep(Duration::from_millis(300));
        let early = reader.is_finished();
        dev.release();
        assert_eq!(writer.join().unwrap(), new_a.len());
        let seen = reader.join().unwrap();
        assert!(
            !early,
            "a reader finished before the blocks it reads had landed"
        );
        assert!(seen == expect_a, "the reader did not see the landed write");
    });
    let again = unmount_and_judge(fs, &dev, "borrowed_write");
    assert!(read_all(&again, again.resolve(b"/a", true).unwrap()) == expect_a);
    assert_eq!(
        read_all(&again, again.resolve(b"/b", true).unwrap()),
        b"beside a borrowed write"
    );
}

/// Borrowed writes that push the dirty nodes over their budget: the checkpoint the change asks
/// for lands the change's own borrowed blocks first (no one else can write them), so the
/// volume neither stops nor loses them. Each write dirties a new direct node (one block every
/// 1018), with the smallest cache, until two such checkpoints were written.
#[test]
fn borrowed_writes_that_ask_for_checkpoints_land_before_them() {
    let dev = gate_device();
    let mut fs = Fs::with_device_rw(Box::new(dev.clone())).unwrap();
    fs.set_options(uf2fs_engine::Options {
        cache_bytes: uf2fs_engine::MIN_CACHE_BYTES,
        ..Default::default()
    });
    let root = fs.root_ino();
    let f = fs
        .create_node(root, b"sparse", common::crash::file_mode())
        .unwrap();
    let stride = 1018 * 4096u64;
    let n = 1400u64;
    let before = fs.checkpoints_written();
    let blocks: Vec<(Vec<u8>, usize)> = (0..n).map(|i| aligned_pattern(i as u8, 4096)).collect();
    for (i, (mem, at)) in blocks.iter().enumerate() {
        let i = i as u64;
        fs.write(f, i * stride, &mem[*at..at + 4096]).unwrap();
    }
    let asked = fs.checkpoints_written() - before;
    assert!(
        asked >= 2,
        "the writes asked for {asked} checkpoints: the budget never tripped"
    );
    let again = unmount_and_judge(fs, &dev, "borrowed_budget");
    let f = again.resolve(b"/sparse", true).unwrap();
    let mut b = vec![0u8; 4096];
    for (i, (mem, at)) in blocks.iter().enumerate() {
        assert_eq!(again.read(f, i as u64 * stride, &mut b).unwrap(), 4096);
        assert!(b == mem[*at..at + 4096], "block {i} read back wrong");
    }
}

/// One write whose blocks go to two logs in turn (`data_temp=age`: rewrites of blocks the file
/// has go hot, blocks in its holes warm), held at the device: a reader sees every new block,
/// from memory, though the write's runs are not in address order; then the same with the
/// writer's buffer block-aligned (borrowed runs, which the reader waits for).
#[test]
fn a_reader_finds_every_block_of_a_write_split_between_two_logs() {
    for aligned in [false, true] {
        let dev = gate_device();
        let fs = Fs::with_device_rw(Box::new(dev.clone())).unwrap();
        let root = fs.root_ino();
        let f = fs
            .create_node(root, b"f", common::crash::file_mode())
            .unwrap();
        let blocks = 64usize;
        // Every other block written, the rest holes.
        for i in (0..blocks).step_by(2) {
            fs.write(f, (i * 4096) as u64, &pattern(i as u8, 4096))
                .unwrap();
        }
        fs.sync().unwrap();
        let (mem, at) = aligned_pattern(99, blocks * 4096);
        let plain = pattern(99, blocks * 4096);
        let new: &[u8] = if aligned {
            &mem[at..at + blocks * 4096]
        } else {
            &plain
        };
        std::thread::scope(|s| {
            dev.arm();
            let writer = s.spawn(|| fs.write(f, 0, new).unwrap());
            dev.wait_stuck();
            let reader = s.spawn(|| read_all(&fs, f));
            if !aligned {
                // Copied runs: served from memory while the write is held.
                let seen = reader.join().unwrap();
                dev.release();
                writer.join().unwrap();
                assert!(seen == new, "a reader saw old blocks under a held write");
            } else {
                std::thread::sleep(Duration::from_millis(200));
                let early = reader.is_finished();
                dev.release();
                writer.join().unwrap();
                let seen = reader.join().unwrap();
                assert!(!early, "a reader of borrowed blocks did not wait for them");
                assert!(seen == new, "a reader saw old blocks under a held write");
            }
        });
        let gc = fs.status().unwrap().gc;
        assert!(
            gc.hot_rewrites >= blocks as u64 / 2,
            "the rewrites did not go to the hot log: the write was not split ({gc:?})"
        );
        let again = unmount_and_judge(fs, &dev, "split_write");
        assert!(read_all(&again, again.resolve(b"/f", true).unwrap()) == new);
    }
}
