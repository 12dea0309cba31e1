//! Reading ahead of sequential streams of user data in the image file.
//!
//! The daemon serves a stream's READs from several threads at once, each a `pread` of up to
//! 1 MiB into the image file. The host keeps one readahead state per open file, and reads
//! that arrive a little out of order from four threads look random to it: it then reads
//! only what each `pread` asks, and the stream waits on the device at every MiB. A stream is
//! recognised here by its position (a large read that starts near where a recent one ended),
//! and the range after it is handed to the host as `POSIX_FADV_WILLNEED`, a window ahead,
//! so that the device is kept busy the way the host's own readahead keeps it busy for one
//! reader of a plain file.

use std::path::PathBuf;
use std::sync::{mpsc, Mutex, OnceLock};

/// Reads smaller than this are not followed: random 4 KiB reads must not pull in a window.
const MIN_READ: u64 = 256 << 10;
/// How far ahead of a stream's furthest read the host is asked to read. On this project's
/// virtual disk a plain file read by one reader keeps about 10 MiB in flight; the window
/// keeps as much queued behind four threads' reads (docs/design.md, "Reading the image
/// ahead of a stream": 8, 16, 32 and 64 MiB measured).
const WINDOW: u64 = 32 << 20;
/// The window is topped up each time a stream has read this much of it, in pieces small
/// enough that the device sees a steady queue rather than bursts.
const STEP: u64 = 2 << 20;
/// A read this close to a stream's end (either side: the threads' reads overtake each
/// other) continues it.
const NEAR: u64 = 4 << 20;
/// Reads that continue a stream before it is read ahead of: two large reads in a row could
/// be chance.
const CONFIRM: u32 = 2;
/// Streams followed at once.
const SLOTS: usize = 4;

#[derive(Clone, Copy, Default)]
struct Stream {
    /// The end of the furthest read of the stream (bytes).
    end: u64,
    /// Up to where the host was asked to read.
    advised: u64,
    /// When the stream was last read (a count of reads), to replace the stalest.
    used: u64,
    /// Reads that continued it.
    hits: u32,
}

pub(crate) struct Ahead {
    slots: Mutex<([Stream; SLOTS], u64)>,
    /// Where the advising thread opens the image again: the device's own descriptor through
    /// /proc (the same file even if its path was renamed or replaced since), else the path.
    reopen: [PathBuf; 2],
    /// The advising thread, started at the first advice; None if it could not be.
    advisor: OnceLock<Option<mpsc::SyncSender<(u64, u64)>>>,
}

impl Ahead {
    /// For the image at `path`, open as `fd` for as long as this lives.
    pub(crate) fn new(path: &std::path::Path, fd: i32) -> Ahead {
        Ahead {
            slots: Mutex::default(),
            reopen: [
                PathBuf::from(format!("/proc/self/fd/{fd}")),
                path.to_path_buf(),
            ],
            advisor: OnceLock::new(),
        }
    }

    /// Follows a read of `len` bytes at `at` and, when it continues a stream, has the host
    /// read the window after it. The advice is given by a thread of its own, so that the
    /// read's reply does not wait for the host to queue the window's I/O.
    pub(crate) fn read(&self, at: u64, len: u64) {
        let Some(range) = self.after_read(at, len, WINDOW) else {
            return;
        };
        let tx = self.advisor.get_or_init(|| {
            // Its own open of the image (a description of its own, so no lock is shared and
            // none outlives the device): the page cache is the file's.
            let file = self
                .reopen
                .iter()
                .find_map(|p| std::fs::File::open(p).ok())?;
            // A short queue: advice that finds it full is dropped, not kept.
            let (tx, rx) = mpsc::sync_channel::<(u64, u64)>(16);
            let spawned = std::thread::Builder::new()
                .name("uf2fs-ahead".into())
                .spawn(move || {
                    while let Ok((from, len)) = rx.recv() {
                        let len = std::num::NonZeroU64::new(len);
                        // Advice only: a refusal changes nothing.
                        let _ = rustix::fs::fadvise(&file, from, len, rustix::fs::Advice::WillNeed);
                    }
                });
            spawned.ok().map(|_| tx)
        });
        if let Some(tx) = tx {
            let _ = tx.try_send(range);
        }
    }

    /// A read of `len` bytes at `at` was made: the range to ask the host for, if any.
    fn after_read(&self, at: u64, len: u64, window: u64) -> Option<(u64, u64)> {
        if len < MIN_READ || window == 0 {
            return None;
        }
        let end = at + len;
        let Ok(mut g) = self.slots.lock() else {
            return None;
        };
        let (slots, clock) = &mut *g;
        *clock += 1;
        let now = *clock;
        let near = |s: &Stream| s.end != 0 && at + NEAR >= s.end && at <= s.end + NEAR;
        let Some(s) = slots.iter_mut().find(|s| near(s)) else {
            // A new stream: its first read says nothing yet about where it goes.
            let stalest = slots.iter_mut().min_by_key(|s| s.used)?;
            *stalest = Stream {
                end,
                advised: end,
                used: now,
                hits: 0,
            };
            return None;
        };
        s.used = now;
        s.end = s.end.max(end);
        s.hits = s.hits.saturating_add(1);
        if s.hits < CONFIRM || s.advised >= s.end + window.saturating_sub(STEP) {
            return None;
        }
        let from = s.advised.max(s.end);
        s.advised = s.end + window;
        Some((from, s.advised - from))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn a_stream_is_confirmed_then_kept_a_window_ahead_in_steps() {
        let a = Ahead::new(std::path::Path::new("/nonexistent"), -1);
        assert_eq!(
            a.after_read(0, MIB, WINDOW),
            None,
            "a first read starts a stream"
        );
        assert_eq!(
            a.after_read(MIB, MIB, WINDOW),
            None,
            "one continuation could be chance"
        );
        assert_eq!(a.after_read(2 * MIB, MIB, WINDOW), Some((3 * MIB, WINDOW)));
        // Out of order, from another thread: the same stream, and nothing new to ask.
        assert_eq!(a.after_read(4 * MIB, MIB, WINDOW), None);
        assert_eq!(a.after_read(3 * MIB, MIB, WINDOW), None);
        // Once a step of the window has been read, the next piece, from where the last ended.
        assert_eq!(
            a.after_read(5 * MIB, MIB, WINDOW),
            Some((3 * MIB + WINDOW, 3 * MIB))
        );
        assert_eq!(a.after_read(6 * MIB, MIB, WINDOW), None);
        assert_eq!(a.after_read(7 * MIB, MIB, WINDOW), None);
        assert_eq!(
            a.after_read(8 * MIB, MIB, WINDOW),
            Some((6 * MIB + WINDOW, 3 * MIB))
        );
    }

    #[test]
    fn small_and_scattered_reads_ask_for_nothing() {
        let a = Ahead::new(std::path::Path::new("/nonexistent"), -1);
        for i in 0..64u64 {
            assert_eq!(a.after_read(i * 4096, 4096, WINDOW), None);
        }
        // Large reads far apart are each a new stream.
        for i in 0..64u64 {
            assert_eq!(a.after_read(i * 100 * MIB, MIB, WINDOW), None, "read {i}");
        }
        assert_eq!(a.after_read(0, MIB, 0), None, "window 0 turns it off");
    }
}
