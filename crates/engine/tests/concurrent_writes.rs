//! Data I/O runs without the engine's write lock: while one change's data write is stuck in
//! the device, readers see that change's bytes (from memory), other files are created and
//! written, and a checkpoint waits for the stuck write instead of making a pointer to an
//! unwritten block durable. The image is then judged by uf2fs and fsck.f2fs.

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

/// A memory device whose first user-data write after `arm` stops until `release`.
struct GateDevice {
    mem: MemDevice,
    armed: AtomicBool,
    /// (a write is stuck, released)
    state: Mutex<(bool, bool)>,
    changed: Condvar,
}

impl GateDevice {
    fn arm(&self) {
        *self.state.lock().unwrap() = (false, false);
        self.armed.store(true, Ordering::SeqCst);
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
        self.mem.read_blocks(blkaddr, buf, cause)
    }
    fn write_blocks(&self, blkaddr: u64, buf: &[u8], cause: IoCause) -> io::Result<()> {
        if cause == IoCause::UserData && self.armed.swap(false, Ordering::SeqCst) {
            let mut s = self.state.lock().unwrap();
            s.0 = true;
            self.changed.notify_all();
            while !s.1 {
                s = self.changed.wait(s).unwrap();
            }
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

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| seed.wrapping_add((i / 4096) as u8) ^ (i as u8))
        .collect()
}

fn read_all(fs: &Fs, ino: u32) -> Vec<u8> {
    let mut buf = vec![0u8; fs.getattr(ino).unwrap().size as usize];
    let n = fs.read(ino, 0, &mut buf).unwrap();
    buf.truncate(n);
    buf
}

#[test]
fn a_stuck_data_write_blocks_no_other_change_and_no_reader() {
    let dev = Arc::new(GateDevice {
        mem: MemDevice::new(common::crash::fresh_mem_image(), false),
        armed: AtomicBool::new(false),
        state: Mutex::new((false, false)),
        changed: Condvar::new(),
    });
    let fs = Fs::with_device_rw(Box::new(dev.clone())).unwrap();
    let root = fs.root_ino();
    let a = fs
        .create_node(root, b"a", common::crash::file_mode())
        .unwrap();
    let b = fs
        .create_node(root, b"b", common::crash::file_mode())
        .unwrap();
    let old_a = pattern(1, 300 << 10);
    fs.write(a, 0, &old_a).unwrap();
    fs.sync().unwrap();

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
        let (tx, rx) = std::sync::mpsc::channel();
        let (fs_, data_b_) = (&fs, &data_b);
        let others = s.spawn(move || {
            let (fs, data_b) = (fs_, data_b_);
            let c = fs
                .create_node(root, b"c", common::crash::file_mode())
                .unwrap();
            fs.write(b, 0, data_b).unwrap();
            fs.write(c, 0, b"written beside a stuck write").unwrap();
            tx.send(()).unwrap();
        });
        if rx.recv_timeout(Duration::from_secs(30)).is_err() {
            dev.release();
            panic!("changes to other files waited for a stuck data write");
        }
        others.join().unwrap();
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
    fs.unmount().unwrap();
    let image = dev.mem.contents();
    let again = Fs::with_device(Box::new(MemDevice::new(image.clone(), true))).unwrap();
    let c = again.resolve(b"/c", true).unwrap();
    assert!(read_all(&again, again.resolve(b"/a", true).unwrap()) == expect_a);
    assert!(read_all(&again, again.resolve(b"/b", true).unwrap()) == data_b);
    assert_eq!(read_all(&again, c), b"written beside a stuck write");
    let dir = scratch("concurrent_writes");
    let img = dir.join("img");
    std::fs::write(&img, image).unwrap();
    assert_fsck_clean(&img);
}
