//! The image file's holes, allocated ahead of user data writes.
//!
//! An image made by `mkfs` is a sparse file, and a direct (O_DIRECT) write into a hole makes
//! the host's file system allocate blocks under the file's exclusive lock, waiting for every
//! other direct write to the file first (ext4 and XFS both do): the daemon's request threads
//! then write one at a time, and the device sees about one write in flight. A direct write
//! into allocated blocks (written, or preallocated and still unwritten) takes the lock shared,
//! so the threads' writes overlap. Before a direct write, each piece of the file it touches
//! ([`PIECE`]) is therefore allocated with `fallocate`, once: F2FS fills its logs a segment at
//! a time, so a piece allocated for one write is written by the next ones, and the image grows
//! only where the volume writes, at most a piece ahead of each log.
//!
//! Buffered writes of user data take the same path: a write into a hole makes the host's
//! file system reserve and account each new block (ext4's delayed allocation) under the
//! writer's call, which a write into preallocated blocks skips. A small file's WRITE in
//! `tar -x` went from 18.7 to 15.6 us of the daemon's time on an image allocated beforehand
//! (docs/design.md, stop 41).

use std::fs::File;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The piece of the file allocated at once: eight F2FS segments. Allocating waits for the
/// file's direct writes in flight, so it is done rarely; 2 MiB pieces (one per segment)
/// drained the writes every other MiB and gained nothing (docs/design.md).
const PIECE: u64 = 16 << 20;

pub(crate) struct Holes {
    /// One bit per piece: known to be allocated.
    done: Box<[AtomicU64]>,
    /// The file's length: pieces are clipped to it, so that its size never changes.
    len: u64,
    /// The host refused `fallocate` (a file system without it): nothing more is tried.
    refused: AtomicBool,
}

impl Holes {
    pub(crate) fn new(len: u64) -> Holes {
        let pieces = len.div_ceil(PIECE);
        let words = usize::try_from(pieces.div_ceil(64)).unwrap_or(0);
        Holes {
            done: (0..words).map(|_| AtomicU64::new(0)).collect(),
            len,
            refused: AtomicBool::new(false),
        }
    }

    /// Allocates what may still be a hole in `[at, at + n)`, a piece at a time. A failure is
    /// not reported: the write that follows meets the same condition and says so itself.
    pub(crate) fn fill(&self, file: &File, at: u64, n: u64) {
        if n == 0 || self.refused.load(Ordering::Relaxed) {
            return;
        }
        let end = at.saturating_add(n).min(self.len);
        let mut piece = at / PIECE;
        while piece * PIECE < end {
            let (word, bit) = ((piece / 64) as usize, 1u64 << (piece % 64));
            let Some(w) = self.done.get(word) else {
                return;
            };
            if w.load(Ordering::Relaxed) & bit == 0 {
                let from = piece * PIECE;
                let len = PIECE.min(self.len - from);
                let flags = rustix::fs::FallocateFlags::KEEP_SIZE;
                match rustix::fs::fallocate(file, flags, from, len) {
                    Ok(()) => {
                        w.fetch_or(bit, Ordering::Relaxed);
                    }
                    Err(rustix::io::Errno::OPNOTSUPP) | Err(rustix::io::Errno::NOSYS) => {
                        self.refused.store(true, Ordering::Relaxed);
                        return;
                    }
                    // No room on the host, or another error: the write will tell.
                    Err(_) => return,
                }
            }
            piece += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{FileExt, MetadataExt};

    #[test]
    fn pieces_under_writes_are_allocated_once_and_the_size_stays() {
        let dir = std::env::temp_dir().join(format!("uf2fs-holes-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("img");
        let len = 10 * PIECE + 4096;
        let f = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        f.set_len(len).unwrap();
        f.write_all_at(b"kept", 3 * PIECE + 100).unwrap();
        let holes = Holes::new(len);
        // Across pieces 3 and 4, then the clipped last piece.
        holes.fill(&f, 3 * PIECE + PIECE / 2, PIECE);
        holes.fill(&f, 10 * PIECE, 4096);
        let m = f.metadata().unwrap();
        assert_eq!(m.len(), len, "the size is kept");
        if !holes.refused.load(Ordering::Relaxed) {
            // 512-byte units: two whole pieces and the 4 KiB tail, nothing else.
            assert_eq!(m.blocks() * 512, 2 * PIECE + 4096, "allocated");
            assert_eq!(holes.done[0].load(Ordering::Relaxed), 0b100_0001_1000);
        }
        let mut b = [0u8; 4];
        f.read_exact_at(&mut b, 3 * PIECE + 100).unwrap();
        assert_eq!(&b, b"kept", "data in an allocated piece is untouched");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
