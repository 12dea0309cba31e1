//! FUSE over io_uring (uf2fs addition; Linux 6.14 and later, with the `fuse` module's
//! `enable_uring` parameter on).
//!
//! The kernel keeps one queue of requests per possible CPU and puts a request on the queue of
//! the CPU its caller runs on. Each queue is served here by threads pinned to that CPU, each
//! with its own io_uring and one registered entry: a header buffer and a payload buffer the
//! kernel fills with a request. The thread decodes the request, runs the same dispatch as the
//! `/dev/fuse` loop and commits the reply with the next fetch in one submission. Caller and
//! server share a CPU, so a request costs two context switches on it instead of two
//! cross-CPU wake-ups (which dominate small-file workloads in a virtual machine).
//!
//! Forgets, interrupts and notifications still travel over `/dev/fuse`; the session keeps one
//! thread there. Until every queue has an entry the kernel holds new requests back, so the
//! threads register as soon as the session runs; if a registration fails the kernel goes back
//! to `/dev/fuse` for good and the ring threads end.
//!
//! Layout facts (include/uapi/linux/fuse.h): the header buffer is `fuse_uring_req_header`,
//! 128 bytes for the in/out header, 128 for the operation's own header, then
//! `fuse_uring_ent_in_out` (flags, commit id, payload size). The command in the SQE128's
//! 80-byte area is `fuse_uring_cmd_req` (flags, commit id, queue id).

use std::io;
use std::io::IoSlice;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::sync::Condvar;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use io_uring::IoUring;
use io_uring::cqueue;
use io_uring::opcode;
use io_uring::squeue;
use io_uring::types;
use log::debug;
use log::warn;

use crate::Filesystem;
use crate::KernelConfig;
use crate::request::RequestWithSender;
use crate::session::SessionEventLoop;

const READ: u32 = 15;
const WRITE: u32 = 16;
const REGISTER: u32 = 1;
const COMMIT_AND_FETCH: u32 = 2;

/// `sizeof(struct fuse_uring_req_header)`.
const HEADER_LEN: usize = 288;
const OP_IN: usize = 128;
const ENT_IN_OUT: usize = 256;
const IN_HEADER_LEN: usize = 40;
const OUT_HEADER_LEN: usize = 16;
/// Room before the payload for the in-header and the largest operation header, so that a
/// request lies in one piece in front of its payload without copying the payload.
const PREFIX: usize = IN_HEADER_LEN + 128;
/// Where the data area starts in an entry's allocation (the header buffer comes first).
const DATA_AT: usize = 512;

/// What the session needs to start the ring threads.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plan {
    /// Queues the kernel keeps: one per possible CPU.
    pub(crate) queues: usize,
    /// Payload buffer per entry: at least the kernel's largest request or reply.
    pub(crate) payload: usize,
    /// Threads serving each queue.
    pub(crate) per_queue: usize,
    /// Serving threads wait in SCHED_IDLE after each reply (see `serve`).
    pub(crate) yield_cpu: bool,
}

impl Plan {
    /// The plan for this machine and the negotiated sizes, after checking that an io_uring
    /// with 128-byte submissions can be made here (a seccomp filter or an old kernel would
    /// refuse it, and the kernel must not be told we serve a ring we cannot open).
    pub(crate) fn new(config: &KernelConfig, session: &crate::Config) -> io::Result<Plan> {
        let queues = possible_cpus()?;
        let page = page_size::get();
        let payload = 8192
            .max(config.max_write as usize)
            .max(usize::from(config.max_pages()) * page);
        IoUring::<squeue::Entry128, cqueue::Entry>::builder()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .build(2)?;
        let per_queue = session.n_threads.unwrap_or(1).div_ceil(queues).max(1);
        let yield_cpu = session.io_uring_yield && can_yield();
        if session.io_uring_yield && !yield_cpu {
            warn!("io_uring: cannot return from SCHED_IDLE here (no CAP_SYS_NICE); not yielding");
        }
        Ok(Plan {
            queues,
            payload,
            per_queue,
            yield_cpu,
        })
    }
}

/// The number of possible CPUs, as the kernel counts its queues (`num_possible_cpus`).
/// How many threads serve the queues when `n_threads` are asked for: one queue per possible
/// CPU, each served by as many threads as it takes to reach `n_threads`. `None` if the CPU
/// list cannot be read (then no ring is started).
pub fn serving_threads(n_threads: usize) -> Option<usize> {
    let queues = possible_cpus().ok()?;
    Some(queues * n_threads.div_ceil(queues).max(1))
}

fn possible_cpus() -> io::Result<usize> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/possible")?;
    let bad = || io::Error::new(io::ErrorKind::InvalidData, format!("cpu list {text:?}"));
    let mut count = 0usize;
    for part in text.trim().split(',') {
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (a.parse::<usize>(), b.parse::<usize>()),
            None => (part.parse::<usize>(), part.parse::<usize>()),
        };
        let (lo, hi) = (lo.map_err(|_| bad())?, hi.map_err(|_| bad())?);
        if hi < lo {
            return Err(bad());
        }
        count += hi - lo + 1;
    }
    if count == 0 || count > 4096 {
        return Err(bad());
    }
    Ok(count)
}

/// The reply to a ring request, filled by the dispatch (through `ReplySender::Ring`) and
/// taken by the queue's thread to commit. One per serving thread, reused from request to
/// request, so that a large reply (a 1 MiB READ) costs a copy and no allocation.
#[derive(Debug, Clone, Default)]
pub(crate) struct RingReply(Arc<(Mutex<Pending>, Condvar)>);

#[derive(Debug, Default)]
pub(crate) struct Pending {
    /// Where a reply may go straight away (see `Target`), while one is expected.
    target: Option<Target>,
    /// The reply went to `target`: the length of its body.
    direct_len: Option<usize>,
    /// Otherwise the reply's bytes, out-header first.
    bytes: Vec<u8>,
    ready: bool,
    /// The serving thread waits in `take` (the reply is coming from another thread): only
    /// then does `put` wake it. A reply sent during the dispatch, the common case, costs no
    /// futex call.
    waiting: bool,
}

/// The entry's out-header and payload buffer, for a request whose bytes lie elsewhere (no
/// payload: READ, GETATTR, READDIR...), so that the reply is copied once, into the buffer the
/// kernel reads, instead of into `bytes` first.
#[derive(Debug, Clone, Copy)]
struct Target {
    header: *mut u8,
    body: *mut u8,
    cap: usize,
}

impl Pending {
    /// The reply is in place: nothing more is written through `target`, and the serving
    /// thread, if it waits in `take`, is woken.
    fn mark_ready(&mut self, ready: &Condvar) {
        self.target = None;
        self.ready = true;
        if self.waiting {
            ready.notify_all();
        }
    }
}

// SAFETY: the pointers are only written through while the serving thread waits in `take` for
// the reply, and it clears them before it touches the buffers again; the `Mutex` orders the
// writes before that.
unsafe impl Send for Pending {}

impl RingReply {
    pub(crate) fn put(&self, data: &[IoSlice<'_>]) {
        let (lock, ready) = &*self.0;
        if let Ok(mut p) = lock.lock() {
            let total: usize = data.iter().map(|s| s.len()).sum();
            match p.target {
                Some(t) if total >= OUT_HEADER_LEN && total - OUT_HEADER_LEN <= t.cap => {
                    // `at` counts the reply's bytes so far: the first OUT_HEADER_LEN go to
                    // the header, the rest to the body.
                    let mut at = 0usize;
                    for s in data {
                        let head = OUT_HEADER_LEN.saturating_sub(at).min(s.len());
                        let (to_header, to_body) = s.split_at(head);
                        let body_at = (at + head).saturating_sub(OUT_HEADER_LEN);
                        // SAFETY: at + head <= OUT_HEADER_LEN (inside the header), and
                        // body_at + to_body.len() <= total - OUT_HEADER_LEN <= t.cap.
                        unsafe {
                            std::ptr::copy_nonoverlapping(
                                to_header.as_ptr(),
                                t.header.add(at),
                                head,
                            );
                            std::ptr::copy_nonoverlapping(
                                to_body.as_ptr(),
                                t.body.add(body_at),
                                to_body.len(),
                            );
                        }
                        at += s.len();
                    }
                    p.direct_len = Some(total - OUT_HEADER_LEN);
                }
                _ => {
                    p.bytes.clear();
                    for s in data {
                        p.bytes.extend_from_slice(s);
                    }
                    p.direct_len = None;
                }
            }
            p.mark_ready(ready);
        }
    }

    /// uf2fs: a data reply written where the kernel reads it: `fill` gets `len` bytes of the
    /// entry's payload buffer and returns how many of them it wrote (or an errno), and no copy
    /// follows. Gives `fill` back when the reply cannot go there (no entry buffer is expected,
    /// or it is smaller than `len`); the caller then fills a buffer of its own.
    ///
    /// The buffer holds whatever an earlier request left in it: only the bytes `fill` reports
    /// are sent, so it must write every one of them.
    pub(crate) fn fill<F>(&self, unique: u64, len: usize, fill: F) -> Result<(), F>
    where
        F: FnOnce(&mut [u8]) -> Result<usize, crate::Errno>,
    {
        let (lock, ready) = &*self.0;
        // The target is taken out under the lock and `fill` runs without it: a handler that
        // panics in `fill` must not poison the lock, or every later request on this thread
        // would fail; its dropped reply then answers EIO through `put`, as for any handler.
        let t = {
            let Ok(mut p) = lock.lock() else {
                return Err(fill);
            };
            match p.target {
                Some(t) if len <= t.cap => {
                    p.target = None;
                    t
                }
                _ => return Err(fill),
            }
        };
        // SAFETY: `t.body` names `t.cap >= len` bytes of the entry's payload. Nothing else
        // writes through it (it was taken out of `Pending`), and the serving thread reads the
        // buffers only once the reply is marked ready, under the lock, after these writes.
        let body = unsafe { std::slice::from_raw_parts_mut(t.body, len) };
        let (header, sent) = match fill(body) {
            Ok(n) => {
                let n = n.min(len);
                let mut h = error_header(unique, 0);
                h[0..4].copy_from_slice(&((OUT_HEADER_LEN + n) as u32).to_le_bytes());
                (h, n)
            }
            Err(e) => (error_header(unique, -e.code()), 0),
        };
        // SAFETY: the header buffer holds OUT_HEADER_LEN bytes (see `Target`).
        unsafe { std::ptr::copy_nonoverlapping(header.as_ptr(), t.header, OUT_HEADER_LEN) };
        if let Ok(mut p) = lock.lock() {
            p.direct_len = Some(sent);
            p.mark_ready(ready);
        }
        Ok(())
    }

    fn expect(&self, target: Option<Target>) {
        if let Ok(mut p) = self.0.0.lock() {
            p.target = target;
            p.ready = false;
            p.waiting = false;
        }
    }

    /// Waits for the reply (the filesystem may send it from another thread) and hands it to
    /// `f`: the body's length if it went straight to the entry, else its bytes. None if the
    /// lock was poisoned.
    fn take<T>(&self, f: impl FnOnce(Result<usize, &[u8]>) -> T) -> Option<T> {
        let (lock, ready) = &*self.0;
        let mut p = lock.lock().ok()?;
        while !p.ready {
            p.waiting = true;
            let (next, timeout) = ready.wait_timeout(p, Duration::from_secs(10)).ok()?;
            p = next;
            p.waiting = false;
            if timeout.timed_out() && !p.ready {
                warn!("io_uring: still waiting for a reply after 10 s");
            }
        }
        p.ready = false;
        p.target = None;
        let out = match p.direct_len.take() {
            Some(len) => f(Ok(len)),
            None => f(Err(&p.bytes)),
        };
        // A huge reply's buffer is not kept for small ones.
        if p.bytes.capacity() > 4 << 20 {
            p.bytes = Vec::new();
        }
        Some(out)
    }
}

/// One registered entry: the header buffer and the data area (prefix and payload) in one
/// 8-byte-aligned allocation that stays put while the ring lives. The entry starts `off`
/// bytes into the allocation, chosen so that the payload begins on a page boundary: a WRITE's
/// data then lies page-aligned in memory, and the filesystem may hand it to an O_DIRECT write
/// without copying it first.
struct Entry {
    mem: Box<[u64]>,
    off: usize,
    iov: Box<[libc::iovec; 2]>,
    payload: usize,
}

/// The alignment of the payload in memory.
const PAYLOAD_ALIGN: usize = 4096;

impl Entry {
    fn new(payload: usize) -> Entry {
        let words = (PAYLOAD_ALIGN + DATA_AT + PREFIX + payload).div_ceil(8);
        let mut mem = vec![0u64; words].into_boxed_slice();
        let addr = mem.as_ptr() as usize;
        // A multiple of 8 (the allocation and DATA_AT + PREFIX are), below PAYLOAD_ALIGN.
        let off = (PAYLOAD_ALIGN - (addr + DATA_AT + PREFIX) % PAYLOAD_ALIGN) % PAYLOAD_ALIGN;
        let base = mem.as_mut_ptr().cast::<u8>();
        // SAFETY: every offset lies inside `mem` (off + DATA_AT + PREFIX + payload <= words * 8).
        let iov = Box::new(unsafe {
            [
                libc::iovec {
                    iov_base: base.add(off).cast(),
                    iov_len: HEADER_LEN,
                },
                libc::iovec {
                    iov_base: base.add(off + DATA_AT + PREFIX).cast(),
                    iov_len: payload,
                },
            ]
        });
        Entry {
            mem,
            off,
            iov,
            payload,
        }
    }

    /// The entry: header buffer at 0, the payload at `DATA_AT + PREFIX`.
    fn bytes(&mut self) -> &mut [u8] {
        let len = self.mem.len() * 8;
        let base = self.mem.as_mut_ptr().cast::<u8>();
        // SAFETY: the allocation is `len` bytes of initialised u64s, viewed as bytes; the
        // kernel writes into it only inside io_uring_enter on this thread.
        let all = unsafe { std::slice::from_raw_parts_mut(base, len) };
        &mut all[self.off..]
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(w)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

/// A `FUSE_IO_URING_CMD_*` submission for queue `qid`.
fn command(
    fd: RawFd,
    op: u32,
    qid: u16,
    commit_id: u64,
    iov: Option<u64>,
    tag: u64,
) -> squeue::Entry128 {
    let mut cmd = [0u8; 80];
    cmd[8..16].copy_from_slice(&commit_id.to_le_bytes());
    cmd[16..18].copy_from_slice(&qid.to_le_bytes());
    let mut b = opcode::UringCmd80::new(types::Fd(fd), op).cmd(cmd);
    if let Some(addr) = iov {
        b = b.addr(Some(addr));
    }
    let sqe = b.build().user_data(tag);
    if iov.is_none() {
        return sqe;
    }
    // A registration names two iovecs (header, payload) in `len`, which the builder does not
    // set: the SQE is `io_uring_sqe` (repr C, 128 bytes with SQE128), `len` at offset 24.
    // SAFETY: Entry128 is a repr(C) 128-byte plain-data struct.
    let mut raw: [u8; 128] = unsafe { std::mem::transmute(sqe) };
    raw[24..28].copy_from_slice(&2u32.to_le_bytes());
    // SAFETY: same layout back; every bit pattern of an SQE is a valid Entry128.
    unsafe { std::mem::transmute::<[u8; 128], squeue::Entry128>(raw) }
}

/// The CPUs this thread may run on now (all of them if the kernel does not say).
fn affinity() -> libc::cpu_set_t {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity and CPU_SET take
    // pointers to it that live for the calls.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            for c in 0..libc::CPU_SETSIZE as usize {
                libc::CPU_SET(c, &mut set);
            }
        }
        set
    }
}

/// The set of CPU `cpu` alone.
fn only_cpu(cpu: usize) -> libc::cpu_set_t {
    // SAFETY: as in `affinity`.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        set
    }
}

/// Lets this thread run on `set`; a failure only costs locality.
fn set_affinity(set: &libc::cpu_set_t, qid: usize) {
    // SAFETY: `set` is a valid cpu_set_t borrowed for the call.
    if unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) } != 0 {
        debug!(
            "io_uring queue {qid}: affinity unchanged: {}",
            io::Error::last_os_error()
        );
    }
}

/// Errors that mean the connection is gone (unmounted or aborted), not a fault.
fn is_teardown(errno: i32) -> bool {
    matches!(
        errno,
        libc::ENOTCONN | libc::ECONNABORTED | libc::ECANCELED | libc::ENODEV
    )
}

/// Serves queue `qid` with one entry until the connection ends.
pub(crate) fn serve<FS: Filesystem>(
    se: &SessionEventLoop<FS>,
    fd: RawFd,
    qid: usize,
    plan: Plan,
) -> io::Result<()> {
    // Unpinned is the affinity the daemon was started with (`taskset`, a cgroup's cpuset).
    let (unpinned, pinned_set) = (affinity(), only_cpu(qid));
    set_affinity(&pinned_set, qid);
    let mut pinned = true;
    let q = u16::try_from(qid).map_err(|_| io::Error::other("queue id"))?;
    let mut ring = IoUring::<squeue::Entry128, cqueue::Entry>::builder()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .build(4)?;
    let mut ent = Entry::new(plan.payload);
    let slot = RingReply::default();
    let register = |ring: &mut IoUring<squeue::Entry128, cqueue::Entry>, ent: &Entry| {
        let sqe = command(fd, REGISTER, q, 0, Some(ent.iov.as_ptr() as u64), 0);
        // SAFETY: the iovecs and the buffers they name live in `ent` until the ring is dropped.
        unsafe { ring.submission().push(&sqe) }.map_err(|_| io::Error::other("SQ full"))
    };
    register(&mut ring, &ent)?;
    let mut registered = true;
    let mut idle = false;
    let mut last_was_read = false;
    // With the yield, this thread stays in SCHED_IDLE from one small request to the next (see
    // below); the guard lifts one that a busier program keeps off its CPU.
    let watch = plan.yield_cpu.then(guard::register);
    loop {
        let asked = std::time::Instant::now();
        match ring.submit_and_wait(1) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
        let Some(cqe) = ring.completion().next() else {
            continue;
        };
        let res = cqe.result();
        if res < 0 {
            let errno = -res;
            if is_teardown(errno) {
                debug!("io_uring queue {qid}: connection closed");
                return Ok(());
            }
            if registered {
                // The kernel refused the registration and went back to /dev/fuse.
                return Err(io::Error::from_raw_os_error(errno));
            }
            // A commit the kernel refused: the entry is gone; register it again.
            warn!(
                "io_uring queue {qid}: commit failed: {}",
                io::Error::from_raw_os_error(errno)
            );
            register(&mut ring, &ent)?;
            registered = true;
            continue;
        }
        registered = false;
        let streaming = is_streaming(ent.bytes());
        // A small READ right after a READ on this thread: a reader whose requests are all
        // reads, each likely to wait for the device (random reads), rather than one file's
        // read among other requests (tar -c), where leaving the pin costs more than it saves.
        // Pinned, the thread slept on its queue's CPU while the device's completion came to
        // whichever CPU took the interrupt, and waking it there cost a cross-CPU wake-up of
        // a halted vCPU (fio random 4 KiB reads at QD1: median 91-117 us pinned, 82-86 us
        // unpinned, 75 us on the raw file); unpinned it wakes where the completion lands,
        // and the caller, woken by the reply, follows it there.
        // Only when no other READ is being served and this thread had to wait for the
        // request: with many readers at once (16 threads of random 4 KiB reads) the next
        // request is there at each commit, every CPU is busy, and unpinned threads crowded
        // onto one CPU (954-1180 MiB/s pinned, 389-707 unpinned; with these two conditions
        // 971-1268 against 971-1292 pinned, and at QD1 41-45 MiB/s against 29-41 in six
        // alternated rounds).
        let read = u32_at(ent.bytes(), 4) == READ;
        let alone = read && READS_SERVED.fetch_add(1, Ordering::Relaxed) == 0;
        let reading = alone && last_was_read && asked.elapsed() >= QUIET_WAIT;
        last_was_read = read;
        match &watch {
            // Served in SCHED_IDLE: the guard watches it.
            Some(w) if idle && !streaming => w.start(),
            _ if idle => idle = !set_idle(false),
            _ => {}
        }
        let unpin = streaming || reading;
        if unpin == pinned {
            // A stream's requests all come to its reader's (or flusher's) CPU, where that
            // program runs too: served there, both share one CPU while the other idles.
            // Unpinned, this thread may run wherever the scheduler finds room; the next small
            // request other than a READ pins it back (see `is_streaming`).
            pinned = !unpin;
            set_affinity(if pinned { &pinned_set } else { &unpinned }, qid);
        }
        let commit_id = handle(se, &mut ent, &slot);
        if read {
            READS_SERVED.fetch_sub(1, Ordering::Relaxed);
        }
        if watch.as_ref().is_some_and(|w| w.finish()) {
            // The guard put this thread back in SCHED_OTHER while it served.
            idle = false;
        }
        let sqe = command(fd, COMMIT_AND_FETCH, q, commit_id, None, 0);
        // SAFETY: as for the registration; the commit reuses the registered buffers.
        unsafe { ring.submission().push(&sqe) }.map_err(|_| io::Error::other("SQ full"))?;
        if plan.yield_cpu && !streaming && !idle {
            // The commit wakes the caller. The scheduler puts a woken task on an idle CPU
            // rather than on a busy one, and this thread is busy until it waits again: the
            // caller would hop to the other CPU (a cross-CPU wake-up, and its next request on
            // the other queue) at every reply. A CPU that runs only SCHED_IDLE tasks counts as
            // free, so the caller stays here and runs at once.
            //
            // The thread then stays in SCHED_IDLE while it serves the next small requests:
            // taking SCHED_OTHER back at each request and leaving it at each reply cost two
            // `sched_setscheduler` calls per request, a quarter of the daemon's CPU in a tree
            // of small files (docs/design.md, stop 39). Alone on its CPU (the caller waits
            // for the reply) an idle thread runs as fast as any; beside a busier program it
            // would wait, perhaps holding a lock others need, so the guard (`guard`) puts a
            // thread that has served one request for `guard::STUCK` back in SCHED_OTHER, and
            // a stream's request (`is_streaming`) takes it back at once.
            idle = set_idle(true);
        }
    }
}

/// READs being served now, by every queue's threads (one session per process).
static READS_SERVED: AtomicUsize = AtomicUsize::new(0);

/// How long a serving thread must have waited for its request for the queue to count as
/// quiet (see `serve`): a commit that finds the next request already queued returns within a
/// few microseconds; a reader at QD1 takes its reply and sends the next one in more.
const QUIET_WAIT: Duration = Duration::from_micros(10);

/// A large READ or WRITE (64 KiB or more): readahead and writeback, which the kernel keeps
/// several of in flight. Nobody waits on this CPU for the one reply, and yielding would make
/// the next one wait for the program to block (a SCHED_IDLE thread does not get the CPU from
/// a running program), so the stream would stop being pipelined.
fn is_streaming(header: &[u8]) -> bool {
    let opcode = u32_at(header, 4);
    // fuse_read_in and fuse_write_in: fh (8), offset (8), size (4).
    matches!(opcode, READ | WRITE) && u32_at(header, OP_IN + 16) >= 64 << 10
}

/// Decodes the request in `ent`, dispatches it and leaves the reply in `ent` (through
/// `slot`, this thread's reply buffer); returns the commit id.
fn handle<FS: Filesystem>(se: &SessionEventLoop<FS>, ent: &mut Entry, slot: &RingReply) -> u64 {
    let payload_cap = ent.payload;
    let b = ent.bytes();
    let len = u32_at(b, 0) as usize;
    let unique = u64_at(b, 8);
    let commit_id = u64_at(b, ENT_IN_OUT + 8);
    let payload = u32_at(b, ENT_IN_OUT + 16) as usize;
    let dispatched = match len.checked_sub(IN_HEADER_LEN + payload) {
        Some(op_len) if op_len <= 128 && op_len % 8 == 0 && payload <= payload_cap => {
            // Lay the request out in one piece: in-header and operation header just before
            // the payload the kernel wrote at DATA_AT + PREFIX.
            let start = PREFIX - IN_HEADER_LEN - op_len;
            let (header, data) = b.split_at_mut(DATA_AT);
            data[start..start + IN_HEADER_LEN].copy_from_slice(&header[..IN_HEADER_LEN]);
            data[start + IN_HEADER_LEN..PREFIX].copy_from_slice(&header[OP_IN..OP_IN + op_len]);
            let (prefix, body) = data.split_at_mut(PREFIX);
            let (request, target) = if payload == 0 {
                // The request is all in `prefix`: the reply may go straight to the buffers.
                let target = Target {
                    header: header.as_mut_ptr(),
                    body: body.as_mut_ptr(),
                    cap: payload_cap.min(body.len()),
                };
                (&prefix[start..], Some(target))
            } else {
                // The request runs on into the payload; the reply goes through `bytes`.
                let end = PREFIX + payload;
                let whole = ent_request(prefix, body, start, end);
                (whole, None)
            };
            slot.expect(target);
            match RequestWithSender::new(se.ch.sender(), request) {
                Some(mut req) => {
                    req.ring = Some(slot.clone());
                    if let Ok(crate::ll::Operation::Destroy(_)) = req.request.operation() {
                        slot.put(&[IoSlice::new(&error_header(unique, 0))]);
                    } else {
                        // A handler that panics must not take the queue's only server with
                        // it (requests from this CPU would wait for ever): the reply it
                        // dropped while unwinding answered EIO, and the thread goes on.
                        let run = std::panic::AssertUnwindSafe(|| req.dispatch(se));
                        if std::panic::catch_unwind(run).is_err() {
                            log::error!("io_uring: a request handler panicked; answered EIO");
                        }
                    }
                    true
                }
                None => {
                    slot.expect(None);
                    false
                }
            }
        }
        _ => false,
    };
    let written = dispatched
        && slot.take(|r| match r {
            Ok(body) => {
                b[ENT_IN_OUT + 16..ENT_IN_OUT + 20].copy_from_slice(&(body as u32).to_le_bytes());
                true
            }
            Err(bytes) => write_reply(b, bytes, payload_cap),
        }) == Some(true);
    if !written {
        warn!("io_uring: request or reply unusable (length {len}, payload {payload}): EIO");
        write_reply(b, &error_header(unique, -libc::EIO), payload_cap);
    }
    commit_id
}

/// The request bytes `start..end` of the data area, which straddle `prefix` and `body`:
/// the two halves are one allocation, split only for the borrow checker.
fn ent_request<'a>(prefix: &'a [u8], body: &'a [u8], start: usize, end: usize) -> &'a [u8] {
    debug_assert_eq!(prefix.as_ptr_range().end, body.as_ptr());
    let len = end - start;
    // SAFETY: `prefix` and `body` are adjacent parts of one slice (split_at_mut), so
    // `prefix[start..]` followed by `body[..end - PREFIX]` is one valid range, borrowed here
    // for no longer than both halves.
    unsafe { std::slice::from_raw_parts(prefix.as_ptr().add(start), len) }
}

/// Puts a reply (out-header, then body) where the kernel reads it; false if it does not fit.
fn write_reply(b: &mut [u8], reply: &[u8], payload_cap: usize) -> bool {
    let Some(body) = reply.len().checked_sub(OUT_HEADER_LEN) else {
        return false;
    };
    if body > payload_cap {
        return false;
    }
    b[..OUT_HEADER_LEN].copy_from_slice(&reply[..OUT_HEADER_LEN]);
    b[DATA_AT + PREFIX..DATA_AT + PREFIX + body].copy_from_slice(&reply[OUT_HEADER_LEN..]);
    b[ENT_IN_OUT + 16..ENT_IN_OUT + 20].copy_from_slice(&(body as u32).to_le_bytes());
    true
}

/// A `fuse_out_header` with no body.
fn error_header(unique: u64, error: i32) -> [u8; OUT_HEADER_LEN] {
    let mut h = [0u8; OUT_HEADER_LEN];
    h[0..4].copy_from_slice(&(OUT_HEADER_LEN as u32).to_le_bytes());
    h[4..8].copy_from_slice(&error.to_le_bytes());
    h[8..16].copy_from_slice(&unique.to_le_bytes());
    h
}

/// Puts this thread in SCHED_IDLE or back in SCHED_OTHER; true if the kernel agreed.
fn set_idle(idle: bool) -> bool {
    set_policy(0, idle)
}

/// Puts thread `tid` (0: this one) in SCHED_IDLE or SCHED_OTHER; true if the kernel agreed.
fn set_policy(tid: libc::pid_t, idle: bool) -> bool {
    let param = libc::sched_param { sched_priority: 0 };
    let policy = if idle {
        libc::SCHED_IDLE
    } else {
        libc::SCHED_OTHER
    };
    // SAFETY: `param` lives for the call.
    unsafe { libc::sched_setscheduler(tid, policy, &param) == 0 }
}

/// uf2fs: the guard of serving threads that stay in SCHED_IDLE while they serve small
/// requests (see `serve`). A SCHED_IDLE thread runs at full speed on a CPU nobody else wants,
/// which is the usual case (the caller waits for the reply), but beside a busy program it
/// gets a sliver of the CPU, and while it holds one of the filesystem's locks every other
/// request waits too. The guard checks the threads every `PERIOD` while any serves (less often
/// while none does) and puts one that has served a single request for `STUCK` or more back
/// in SCHED_OTHER; that thread leaves it again after its reply.
pub(crate) mod guard {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::{Arc, Mutex, OnceLock};
    use std::time::{Duration, Instant};

    /// Serving one request this long makes a thread count as kept off its CPU.
    pub(crate) const STUCK: Duration = Duration::from_millis(2);
    /// How often the guard looks while threads serve.
    const PERIOD: Duration = Duration::from_millis(2);
    /// How long it sleeps at most when it last found nobody serving (doubling up to this;
    /// the next request wakes it).
    const QUIET_PERIOD: Duration = Duration::from_millis(256);

    /// Threads put back in SCHED_OTHER so far, by every session of this process.
    static LIFTED: AtomicU64 = AtomicU64::new(0);

    /// How many times the guard has put a serving thread back in SCHED_OTHER.
    pub(crate) fn lifted() -> u64 {
        LIFTED.load(Ordering::Relaxed)
    }

    /// One serving thread, as the guard sees it.
    pub(crate) struct Watch {
        tid: libc::pid_t,
        /// Microseconds since `epoch()` plus one when its request began; 0 while it waits.
        busy_since: AtomicU64,
        /// Set by the guard when it lifted the thread to SCHED_OTHER.
        boosted: AtomicBool,
    }

    /// A serving thread's registration; it leaves the guard's list when dropped.
    pub(crate) struct Registered(Arc<Watch>);

    fn epoch() -> Instant {
        static EPOCH: OnceLock<Instant> = OnceLock::new();
        *EPOCH.get_or_init(Instant::now)
    }

    fn now_us() -> u64 {
        u64::try_from(epoch().elapsed().as_micros()).unwrap_or(u64::MAX - 1) + 1
    }

    fn watched() -> &'static Mutex<Vec<Arc<Watch>>> {
        static WATCHED: Mutex<Vec<Arc<Watch>>> = Mutex::new(Vec::new());
        &WATCHED
    }

    /// The guard's thread, once started.
    static GUARD: OnceLock<Option<std::thread::Thread>> = OnceLock::new();
    /// Set while the guard sleeps longer than `AWAKE` (it found nobody serving several times
    /// running): the next request wakes it. A request is thus looked at within `AWAKE`
    /// after it has served `STUCK`, and a busy mount does not pay a wake-up per request.
    static DOZING: AtomicBool = AtomicBool::new(false);
    /// The longest the guard sleeps without being woken by the next request.
    const AWAKE: Duration = Duration::from_millis(8);

    /// Registers the calling thread, starting the guard with the first one.
    pub(crate) fn register() -> Registered {
        GUARD.get_or_init(|| {
            match std::thread::Builder::new()
                .name("fuser-ring-guard".into())
                .spawn(run)
            {
                Ok(h) => Some(h.thread().clone()),
                Err(e) => {
                    super::warn!("io_uring: the serving threads' guard did not start: {e}");
                    None
                }
            }
        });
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        let w = Arc::new(Watch {
            tid,
            busy_since: AtomicU64::new(0),
            boosted: AtomicBool::new(false),
        });
        if let Ok(mut list) = watched().lock() {
            list.push(w.clone());
        }
        Registered(w)
    }

    impl Registered {
        /// A request begins.
        pub(crate) fn start(&self) {
            self.0.busy_since.store(now_us(), Ordering::Release);
            if DOZING.load(Ordering::Relaxed) && DOZING.swap(false, Ordering::AcqRel) {
                if let Some(Some(guard)) = GUARD.get() {
                    guard.unpark();
                }
            }
        }

        /// The request is answered; whether the guard lifted the thread meanwhile.
        pub(crate) fn finish(&self) -> bool {
            self.0.busy_since.store(0, Ordering::Release);
            self.0.boosted.swap(false, Ordering::AcqRel)
        }
    }

    impl Drop for Registered {
        fn drop(&mut self) {
            if let Ok(mut list) = watched().lock() {
                list.retain(|w| !Arc::ptr_eq(w, &self.0));
            }
        }
    }

    /// Lifts every thread that has served one request for `STUCK` or more at `now` (in
    /// `now_us` units); how many threads were serving.
    fn check(now: u64) -> usize {
        let Ok(list) = watched().lock() else {
            return 0;
        };
        let stuck = u64::try_from(STUCK.as_micros()).unwrap_or(u64::MAX);
        let mut serving = 0;
        for w in list.iter() {
            let since = w.busy_since.load(Ordering::Acquire);
            if since == 0 {
                continue;
            }
            serving += 1;
            if now.saturating_sub(since) >= stuck && !w.boosted.load(Ordering::Acquire) {
                // If the request ended meanwhile, the thread serves its next one in
                // SCHED_OTHER and leaves it after that reply: two calls, no harm.
                if super::set_policy(w.tid, false) {
                    w.boosted.store(true, Ordering::Release);
                    LIFTED.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        serving
    }

    fn run() {
        let mut wait = PERIOD;
        loop {
            DOZING.store(wait > AWAKE, Ordering::Release);
            std::thread::park_timeout(wait);
            wait = if check(now_us()) > 0 {
                PERIOD
            } else {
                (wait * 2).min(QUIET_PERIOD)
            };
        }
    }
}

/// Whether a thread here may go to SCHED_IDLE and come back: coming back needs
/// CAP_SYS_NICE or an RLIMIT_NICE of 20, so an unprivileged daemon without them must never
/// leave SCHED_OTHER. Tried on a thread of its own.
fn can_yield() -> bool {
    std::thread::spawn(|| set_idle(true) && set_idle(false))
        .join()
        .unwrap_or(false)
}
