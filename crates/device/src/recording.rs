//! A device that records every write and flush, for crash tests.
//!
//! [`RecordingDevice`] starts from a base image and behaves like a [`MemDevice`](crate::MemDevice)
//! (reads see every write so far), while it keeps an ordered log of *events*: each block
//! written (address and bytes; a write of n blocks is logged as n one-block writes, in
//! address order, because the media may persist a multi-block request partly) and each flush.
//! [`RecordingDevice::position`] is the number of events so far: a test notes it when an
//! operation starts and when an fsync returns.
//!
//! [`CrashLog`] (taken from the device) answers "what could the media hold if power failed
//! after event `p`?". The model of the media:
//! - a flush makes every write before it durable;
//! - writes after the last completed flush (the *epoch* still open at the crash) may each
//!   have landed or not, in any combination: the block layer and the drive's cache reorder
//!   freely between flushes. A block written twice in the epoch holds the later bytes if both
//!   landed (per-block write order is kept; that reordering is rare enough not to model);
//! - a block either holds its old or its new 4 KiB, never a torn mix.
//!
//! Two kinds of crash image follow:
//! - [`CrashLog::prefix_image`]: every event before `p` landed, in order (the crash stopped a
//!   device that writes in order). [`Replay`] walks these images write by write without
//!   re-applying the log each time;
//! - [`CrashLog::crash_image`] / [`CrashLog::random_crash`]: the writes before the last flush
//!   preceding `p` landed, and of the open epoch's writes only those chosen (by a predicate, or
//!   a seeded random subset).
//!
//! Positions: [`CrashLog::write_boundaries`] gives, for every count of writes k, the latest
//! position with k writes issued (after any flushes that follow the k-th write), which is the
//! strongest crash point for that prefix image: an fsync that flushed and returned there
//! counts. [`CrashLog::epochs`] lists the flush epochs.

use crate::{BlockDevice, IoCause, IoCounters, BLOCK_SIZE};
use std::io;
use std::sync::Mutex;

/// One thing that reached the device.
#[derive(Clone, Debug)]
pub enum Event {
    /// One block written at `blkaddr`.
    Write { blkaddr: u64, block: Box<[u8]> },
    /// A flush: every earlier write is durable.
    Flush,
}

/// A flush epoch: the writes between two flushes (or the start, or the end of the log).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Epoch {
    /// The position just after the flush that opens the epoch (0 for the first).
    pub start: usize,
    /// The position of the flush that closes it (the log's length when none does): a crash
    /// "at the end of the epoch" is a crash just before that flush completes.
    pub end: usize,
    /// The event indexes of its writes, in order.
    pub writes: Vec<usize>,
}

struct Recording {
    image: Vec<u8>,
    base: Vec<u8>,
    events: Vec<Event>,
}

/// A memory device that logs every write and flush (see the module documentation).
pub struct RecordingDevice {
    state: Mutex<Recording>,
    counters: IoCounters,
}

fn poisoned() -> io::Error {
    io::Error::other("recording device lock poisoned")
}

impl RecordingDevice {
    /// A device holding `base` (its length rounded down to whole blocks), with an empty log.
    pub fn new(mut base: Vec<u8>) -> RecordingDevice {
        base.truncate(base.len() / BLOCK_SIZE * BLOCK_SIZE);
        RecordingDevice {
            state: Mutex::new(Recording {
                image: base.clone(),
                base,
                events: Vec::new(),
            }),
            counters: IoCounters::default(),
        }
    }

    /// Events (writes and flushes) so far.
    pub fn position(&self) -> usize {
        self.state.lock().map(|s| s.events.len()).unwrap_or(0)
    }

    /// The live image (every write so far).
    pub fn contents(&self) -> Vec<u8> {
        self.state
            .lock()
            .map(|s| s.image.clone())
            .unwrap_or_default()
    }

    /// A copy of the log so far, with the base image, to build crash images from.
    pub fn log(&self) -> CrashLog {
        self.state
            .lock()
            .map(|s| CrashLog {
                base: s.base.clone(),
                events: s.events.clone(),
            })
            .unwrap_or_else(|_| CrashLog {
                base: Vec::new(),
                events: Vec::new(),
            })
    }

    /// The log, without copying it.
    pub fn into_log(self) -> CrashLog {
        let s = self.state.into_inner().unwrap_or_else(|e| e.into_inner());
        CrashLog {
            base: s.base,
            events: s.events,
        }
    }
}

impl BlockDevice for RecordingDevice {
    fn block_count(&self) -> u64 {
        self.state
            .lock()
            .map(|s| (s.image.len() / BLOCK_SIZE) as u64)
            .unwrap_or(0)
    }

    fn read_blocks(&self, blkaddr: u64, buf: &mut [u8], cause: IoCause) -> io::Result<()> {
        let s = self.state.lock().map_err(|_| poisoned())?;
        let r = crate::block_range(blkaddr, buf.len(), s.image.len())?;
        buf.copy_from_slice(s.image.get(r).unwrap_or(&[]));
        self.counters
            .record_read(cause, (buf.len() / BLOCK_SIZE) as u64);
        Ok(())
    }

    fn write_blocks(&self, blkaddr: u64, buf: &[u8], cause: IoCause) -> io::Result<()> {
        let mut s = self.state.lock().map_err(|_| poisoned())?;
        let r = crate::block_range(blkaddr, buf.len(), s.image.len())?;
        if let Some(dst) = s.image.get_mut(r) {
            dst.copy_from_slice(buf);
        }
        for (i, b) in buf.chunks_exact(BLOCK_SIZE).enumerate() {
            s.events.push(Event::Write {
                blkaddr: blkaddr + i as u64,
                block: b.into(),
            });
        }
        self.counters
            .record_write(cause, (buf.len() / BLOCK_SIZE) as u64);
        Ok(())
    }

    fn flush(&self) -> io::Result<()> {
        let mut s = self.state.lock().map_err(|_| poisoned())?;
        s.events.push(Event::Flush);
        self.counters.record_flush();
        Ok(())
    }

    fn counters(&self) -> &IoCounters {
        &self.counters
    }

    fn is_read_only(&self) -> bool {
        false
    }
}

/// The recorded log and the image it started from: crash images are built from it.
#[derive(Clone)]
pub struct CrashLog {
    base: Vec<u8>,
    events: Vec<Event>,
}

fn apply(image: &mut [u8], e: &Event) {
    if let Event::Write { blkaddr, block } = e {
        let at = usize::try_from(*blkaddr)
            .ok()
            .and_then(|b| b.checked_mul(BLOCK_SIZE));
        if let Some(dst) = at.and_then(|a| image.get_mut(a..a + BLOCK_SIZE)) {
            dst.copy_from_slice(block);
        }
    }
}

/// A small seeded generator (xorshift64*), so that a seed names one subset everywhere.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

impl CrashLog {
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    pub fn base(&self) -> &[u8] {
        &self.base
    }

    /// Block writes in the log.
    pub fn write_count(&self) -> usize {
        self.events
            .iter()
            .filter(|e| matches!(e, Event::Write { .. }))
            .count()
    }

    /// Flushes in the log.
    pub fn flush_count(&self) -> usize {
        self.events.len() - self.write_count()
    }

    /// Writes issued before position `p`.
    pub fn writes_before(&self, p: usize) -> usize {
        self.events
            .iter()
            .take(p)
            .filter(|e| matches!(e, Event::Write { .. }))
            .count()
    }

    /// For k = 0..=writes, the last position at which exactly k writes were issued.
    pub fn write_boundaries(&self) -> Vec<usize> {
        let mut out = Vec::new();
        for (i, e) in self.events.iter().enumerate() {
            if matches!(e, Event::Write { .. }) {
                out.push(i);
            }
        }
        out.push(self.events.len());
        out
    }

    /// The position just after the last flush before position `p` (0 if none): every write
    /// before it is durable at a crash at `p`.
    pub fn durable_at(&self, p: usize) -> usize {
        self.events
            .iter()
            .take(p)
            .rposition(|e| matches!(e, Event::Flush))
            .map_or(0, |i| i + 1)
    }

    /// The flush epochs, in order; epochs without writes are left out.
    pub fn epochs(&self) -> Vec<Epoch> {
        let mut out = Vec::new();
        let mut cur = Epoch {
            start: 0,
            end: 0,
            writes: Vec::new(),
        };
        for (i, e) in self.events.iter().enumerate() {
            match e {
                Event::Write { .. } => cur.writes.push(i),
                Event::Flush => {
                    cur.end = i;
                    let next = Epoch {
                        start: i + 1,
                        end: 0,
                        writes: Vec::new(),
                    };
                    let done = std::mem::replace(&mut cur, next);
                    if !done.writes.is_empty() {
                        out.push(done);
                    }
                }
            }
        }
        if !cur.writes.is_empty() {
            cur.end = self.events.len();
            out.push(cur);
        }
        out
    }

    /// The image after every event before position `p`, in order.
    pub fn prefix_image(&self, p: usize) -> Vec<u8> {
        let mut r = self.replay();
        r.advance_to(p);
        r.image
    }

    /// The image of a crash at position `p` in which the writes of the open epoch (after the
    /// last flush before `p`) landed only where `landed(event index)` says so.
    pub fn crash_image(&self, p: usize, landed: &dyn Fn(usize) -> bool) -> Vec<u8> {
        let durable = self.durable_at(p);
        let mut image = self.prefix_image(durable);
        self.land(&mut image, durable, p, landed);
        image
    }

    /// Applies to `image` (which must be the prefix image at `from`) the writes in
    /// `from..to` that `landed` selects.
    pub fn land(&self, image: &mut [u8], from: usize, to: usize, landed: &dyn Fn(usize) -> bool) {
        let to = to.min(self.events.len());
        for (i, e) in self.events.iter().enumerate().take(to).skip(from) {
            if landed(i) {
                apply(image, e);
            }
        }
    }

    /// A seeded random subset of the writes that are not durable at a crash at `p` (each
    /// lands with probability 1/2): the event indexes that did not land, and the image.
    pub fn random_crash(&self, p: usize, seed: u64) -> (Vec<usize>, Vec<u8>) {
        let durable = self.durable_at(p);
        let lost = self.random_lost(durable, p, seed);
        let mut image = self.prefix_image(durable);
        self.land(&mut image, durable, p, &|i| lost.binary_search(&i).is_err());
        (lost, image)
    }

    /// The writes in `from..to` that a seeded coin drops, sorted.
    pub fn random_lost(&self, from: usize, to: usize, seed: u64) -> Vec<usize> {
        let mut rng = Rng::new(seed);
        self.events
            .iter()
            .enumerate()
            .take(to.min(self.events.len()))
            .skip(from)
            .filter(|(_, e)| matches!(e, Event::Write { .. }))
            .filter(|_| rng.next_u64() & 1 == 0)
            .map(|(i, _)| i)
            .collect()
    }

    /// A walk over the prefix images from the base image on.
    pub fn replay(&self) -> Replay<'_> {
        Replay {
            log: self,
            image: self.base.clone(),
            at: 0,
        }
    }
}

/// The prefix image at a moving position: advancing applies only the new events.
pub struct Replay<'a> {
    log: &'a CrashLog,
    image: Vec<u8>,
    at: usize,
}

impl Replay<'_> {
    /// Moves forward to position `p` (never back: a smaller `p` leaves it where it is).
    pub fn advance_to(&mut self, p: usize) {
        let p = p.min(self.log.events.len());
        for e in self.log.events.iter().take(p).skip(self.at) {
            apply(&mut self.image, e);
        }
        self.at = self.at.max(p);
    }

    pub fn position(&self) -> usize {
        self.at
    }

    /// The prefix image at [`Replay::position`].
    pub fn image(&self) -> &[u8] {
        &self.image
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blk(v: u8) -> Vec<u8> {
        vec![v; BLOCK_SIZE]
    }

    fn at(image: &[u8], b: usize) -> u8 {
        image[b * BLOCK_SIZE]
    }

    /// Base of 4 blocks of 0; writes: b0=1, flush, (b1=2, b2=3 in one request), flush, b3=4,
    /// b1=5.
    fn sample() -> RecordingDevice {
        let d = RecordingDevice::new(vec![0u8; 4 * BLOCK_SIZE + 7]);
        d.write_blocks(0, &blk(1), IoCause::Meta).unwrap();
        d.flush().unwrap();
        let mut two = blk(2);
        two.extend(blk(3));
        d.write_blocks(1, &two, IoCause::Node).unwrap();
        d.flush().unwrap();
        d.write_blocks(3, &blk(4), IoCause::UserData).unwrap();
        d.write_blocks(1, &blk(5), IoCause::UserData).unwrap();
        d
    }

    #[test]
    fn reads_see_every_write_and_the_log_is_per_block() {
        let d = sample();
        assert_eq!(d.block_count(), 4);
        let mut b = vec![0u8; 2 * BLOCK_SIZE];
        d.read_blocks(1, &mut b, IoCause::Meta).unwrap();
        assert_eq!((b[0], b[BLOCK_SIZE]), (5, 3));
        assert_eq!(d.position(), 7);
        let log = d.log();
        assert_eq!((log.write_count(), log.flush_count()), (5, 2));
        assert!(matches!(log.events()[2], Event::Write { blkaddr: 1, .. }));
        assert!(matches!(log.events()[3], Event::Write { blkaddr: 2, .. }));
        assert_eq!(d.counters().snapshot().written_blocks[1], 2);
        assert!(d.write_blocks(4, &blk(9), IoCause::Meta).is_err());
        assert_eq!(d.position(), 7, "a refused write is not logged");
    }

    #[test]
    fn prefix_images_apply_events_in_order() {
        let log = sample().into_log();
        let img = |p| {
            let i = log.prefix_image(p);
            (0..4).map(|b| at(&i, b)).collect::<Vec<u8>>()
        };
        assert_eq!(img(0), [0, 0, 0, 0]);
        assert_eq!(img(1), [1, 0, 0, 0]);
        assert_eq!(img(3), [1, 2, 0, 0], "a two-block write may land half");
        assert_eq!(img(7), [1, 5, 3, 4]);
        assert_eq!(img(99), [1, 5, 3, 4]);
        let mut r = log.replay();
        for p in 0..=7 {
            r.advance_to(p);
            assert_eq!(r.image(), &log.prefix_image(p)[..], "replay at {p}");
        }
        r.advance_to(2);
        assert_eq!(r.position(), 7, "a replay never goes back");
    }

    #[test]
    fn boundaries_and_epochs() {
        let log = sample().into_log();
        // Writes are events 0, 2, 3, 5, 6; flushes 1 and 4.
        assert_eq!(log.write_boundaries(), [0, 2, 3, 5, 6, 7]);
        assert_eq!(
            log.epochs(),
            [
                Epoch {
                    start: 0,
                    end: 1,
                    writes: vec![0]
                },
                Epoch {
                    start: 2,
                    end: 4,
                    writes: vec![2, 3]
                },
                Epoch {
                    start: 5,
                    end: 7,
                    writes: vec![5, 6]
                },
            ]
        );
        assert_eq!(
            (log.durable_at(0), log.durable_at(1), log.durable_at(2)),
            (0, 0, 2)
        );
        assert_eq!((log.durable_at(4), log.durable_at(5)), (2, 5));
        assert_eq!(log.writes_before(5), 3);
        let d = RecordingDevice::new(vec![0u8; BLOCK_SIZE]);
        d.flush().unwrap();
        d.flush().unwrap();
        assert!(
            d.log().epochs().is_empty(),
            "epochs without writes are left out"
        );
    }

    #[test]
    fn crash_images_keep_what_is_durable_and_choose_in_the_open_epoch() {
        let log = sample().into_log();
        // A crash at the end: b0, b1=2, b2=3 are durable; b3=4 and b1=5 may each be lost.
        let only = |keep: usize| {
            let i = log.crash_image(7, &|e| e == keep);
            (0..4).map(|b| at(&i, b)).collect::<Vec<u8>>()
        };
        assert_eq!(only(5), [1, 2, 3, 4], "the later write lost");
        assert_eq!(only(6), [1, 5, 3, 0], "the earlier write lost");
        assert_eq!(only(99), [1, 2, 3, 0], "both lost");
        // In the middle epoch, block 2 can land without block 1.
        let i = log.crash_image(4, &|e| e == 3);
        assert_eq!((0..4).map(|b| at(&i, b)).collect::<Vec<_>>(), [1, 0, 3, 0]);
        // Seeded subsets: a seed gives one answer; over seeds every combination shows up.
        let (lost, img) = log.random_crash(7, 42);
        assert_eq!(log.random_crash(7, 42), (lost.clone(), img));
        assert!(lost.iter().all(|e| [5, 6].contains(e)));
        let mut seen = std::collections::BTreeSet::new();
        for seed in 0..64 {
            seen.insert(log.random_crash(7, seed).0);
        }
        assert_eq!(seen.len(), 4, "{seen:?}");
    }
}
