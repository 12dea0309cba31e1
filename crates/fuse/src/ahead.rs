//! Reading ahead of a tree walk (`listing_readahead`).
//!
//! A program that walks a tree (`rm -rf`, `cp -a`, `find`, `du`) lists a directory, then each
//! of its subdirectories in the order the listing gave them. Each listing (READDIRPLUS) needs
//! the directory's entry blocks and one inode block per entry, and with a cold cache those
//! reads are most of its time (a reply of a 90-entry directory: 410 us cold, 130 us warm).
//! While one directory is listed, this thread reads what the next listings will want: the
//! first subdirectory of the directory just listed, and the subdirectory after it in its
//! parent. Their entries and inodes land in the engine's caches (bounded as ever), so the
//! walk finds them there.
//!
//! Best effort and never in the way: requests that find the thread busy are dropped, errors
//! end a guess quietly, and each guess reads at most [`MAX_ENTRIES`] entries of a directory
//! and scans at most [`MAX_SCAN`] entries of a parent.

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Weak};
use uf2fs_engine::{FileType, Fs};

/// The entries of one directory whose inodes a guess reads, at most.
const MAX_ENTRIES: usize = 1024;
/// The entries of a parent scanned to find the next subdirectory, at most.
const MAX_SCAN: usize = 4096;
/// Listings waiting for the thread; more are dropped.
const QUEUE: usize = 4;

/// Directories read ahead and their inodes, since mount.
#[derive(Debug, Default)]
pub struct AheadStats {
    pub directories: AtomicU64,
    pub inodes: AtomicU64,
    /// Listings the thread was too busy to take.
    pub dropped: AtomicU64,
}

/// The handle the request threads hold: tells the thread which directory was just listed.
pub struct ListingAhead {
    tx: Option<SyncSender<u32>>,
    stats: Arc<AheadStats>,
}

impl ListingAhead {
    /// Starts the thread (`on`), or a handle that does nothing.
    pub fn start(fs: &Arc<Fs>, on: bool) -> ListingAhead {
        let stats = Arc::new(AheadStats::default());
        if !on {
            return ListingAhead { tx: None, stats };
        }
        let (tx, rx) = sync_channel(QUEUE);
        let (weak, st) = (Arc::downgrade(fs), stats.clone());
        let spawned = std::thread::Builder::new()
            .name("uf2fs-ahead".into())
            .spawn(move || run(&weak, &rx, &st));
        match spawned {
            Ok(_) => ListingAhead {
                tx: Some(tx),
                stats,
            },
            Err(e) => {
                tracing::warn!("no listing read-ahead: {e}");
                ListingAhead { tx: None, stats }
            }
        }
    }

    /// Directory `dir` is being listed from its start.
    pub fn listed(&self, dir: u32) {
        if let Some(tx) = &self.tx {
            if let Err(TrySendError::Full(_)) = tx.try_send(dir) {
                self.stats.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    pub fn stats(&self) -> Arc<AheadStats> {
        self.stats.clone()
    }
}

/// The last guess: the subdirectory read ahead, its parent and its place there, so that the
/// next guess in the same parent resumes the scan there instead of from the start.
#[derive(Clone, Copy)]
struct Last {
    parent: u32,
    dir: u32,
    pos: u64,
}

fn run(fs: &Weak<Fs>, rx: &Receiver<u32>, stats: &AheadStats) {
    let mut last: Option<Last> = None;
    while let Ok(dir) = rx.recv() {
        let Some(fs) = fs.upgrade() else { return };
        // Its first subdirectory: where a depth-first walk goes next.
        if let Some(first) = next_subdir(&fs, dir, 0, None) {
            follow(&fs, &mut last, dir, first, stats);
        }
        // The subdirectory after it in its parent: where the walk goes once this one is done.
        let Ok(parent) = fs.lookup(dir, b"..") else {
            continue;
        };
        if parent == dir {
            continue;
        }
        let next = match last {
            Some(l) if l.parent == parent && l.dir == dir => {
                next_subdir(&fs, parent, l.pos.saturating_add(1), None)
            }
            _ => next_subdir(&fs, parent, 0, Some(dir)),
        };
        if let Some(sibling) = next {
            follow(&fs, &mut last, parent, sibling, stats);
        }
    }
}

/// Reads guessed subdirectory `dir` at `pos` in `parent` ahead, unless it is the last guess
/// (already read), and makes it the last guess.
fn follow(fs: &Fs, last: &mut Option<Last>, parent: u32, (pos, dir): (u64, u32), st: &AheadStats) {
    if last.is_none_or(|l| l.dir != dir) {
        read_listing(fs, dir, st);
    }
    *last = Some(Last { parent, dir, pos });
}

/// The first subdirectory of `parent` at position `from` or after (after the entry naming
/// `after`, when given), with its position; `None` past [`MAX_SCAN`] entries.
fn next_subdir(fs: &Fs, parent: u32, from: u64, after: Option<u32>) -> Option<(u64, u32)> {
    let mut seen_after = after.is_none();
    let mut scanned = 0;
    let mut found = None;
    let _ = fs.readdir_from(parent, from, &mut |pos, e| {
        scanned += 1;
        if scanned > MAX_SCAN {
            return ControlFlow::Break(());
        }
        if !seen_after {
            seen_after = Some(e.ino) == after;
            return ControlFlow::Continue(());
        }
        if e.file_type == Some(FileType::Directory) {
            found = Some((pos, e.ino));
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    });
    found
}

/// Reads directory `dir`'s entries and the inodes they name into the engine's caches.
fn read_listing(fs: &Fs, dir: u32, stats: &AheadStats) {
    let mut nids = Vec::new();
    let _ = fs.readdir_from(dir, 0, &mut |_, e| {
        nids.push(e.ino);
        if nids.len() >= MAX_ENTRIES {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    });
    fs.prefetch_inodes(&nids);
    stats.directories.fetch_add(1, Ordering::Relaxed);
    stats.inodes.fetch_add(nids.len() as u64, Ordering::Relaxed);
}
