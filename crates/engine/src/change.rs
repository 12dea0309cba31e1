//! The write lock and change sequencing: every change runs under the lock (`changing`), with
//! its space checked first; a checkpoint being written without the lock is settled by whoever
//! next needs it durable (`ws_settled`). See "Requests and locking" in docs/design.md.

use crate::data::write_batches;
use crate::durability::checkpoint::prepare;
use crate::error::{Error, Result};
use crate::gc::{Pace, Room};
use crate::state::WriteState;
use crate::vol::Fs;
use uf2fs_device::IoCause;

/// How long a change short of the user's space waits for held orphans to be released
/// (`Fs::room_for`): a release already sent is served within milliseconds; a file kept open
/// costs a failing change this much before its ENOSPC.
pub const ORPHAN_RELEASE_WAIT: std::time::Duration = std::time::Duration::from_millis(100);

impl Fs {
    /// Runs a change under the write lock. Space for `blocks` new blocks (and for rewriting
    /// every dirty node at the next checkpoint) is checked before anything changes; an I/O
    /// error, corruption or lack of space met half-way marks the volume failed, so that no
    /// later checkpoint writes a half-made change (the image keeps its last checkpoint).
    pub(crate) fn changing<T>(
        &self,
        blocks: u64,
        f: impl FnOnce(&mut WriteState) -> Result<T>,
    ) -> Result<T> {
        self.changing_from(blocks, &[], f)
    }

    /// [`Fs::changing`] for a change that may leave whole blocks of `source` (the writer's
    /// buffer) in its batches without copying them (`Runs::push_borrowed`): they are written
    /// from `source` here, before this returns, and before any checkpoint this change asks
    /// for, the only landing that could meet them while the change holds the lock.
    pub(crate) fn changing_from<T>(
        &self,
        blocks: u64,
        source: &[u8],
        f: impl FnOnce(&mut WriteState) -> Result<T>,
    ) -> Result<T> {
        self.changing_counted(blocks, &|| Ok(blocks), source, f)
    }

    /// [`Fs::changing_from`] for a change that may add fewer valid blocks than it writes: a
    /// rewrite of blocks a file has takes new blocks on the device (`blocks`, for the space
    /// checks) but frees as many, so only `fresh` (asked under the lock, before the change)
    /// counts against the user's space. A volume filled to ENOSPC still takes rewrites of
    /// what it holds, as Linux's F2FS does.
    pub(crate) fn changing_counted<T>(
        &self,
        blocks: u64,
        fresh: &dyn Fn() -> Result<u64>,
        source: &[u8],
        f: impl FnOnce(&mut WriteState) -> Result<T>,
    ) -> Result<T> {
        let mut ws = self.room_for(blocks, fresh)?;
        self.vol()
            .change_seq
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let mut r = f(&mut ws);
        if r.is_ok() && self.vol().dentries.over_cap() {
            // More changed dentry blocks held than the cache's share: written now, in this
            // change's batches (its room counted them).
            if let Err(e) = self.flush_dentry_blocks(&mut ws) {
                r = Err(e);
            }
        }
        if let Err(e) = &r {
            if matches!(e, Error::Io { .. } | Error::Corrupt(_) | Error::NoSpace) {
                ws.failed = Some(e.to_string());
            }
        }
        // The dirty-node budget's checkpoint: prepared now, with the change complete (it
        // writes the change's data first), written below without the lock.
        let mut early = Ok(());
        let checkpoint = if r.is_ok() && std::mem::take(&mut ws.cp.wanted) {
            ws.cp.requests += 1;
            ws.cp.budget_by_a_change += 1;
            // Its own batches first, while the source is at hand (the checkpoint lands them).
            let mine = std::mem::take(&mut ws.deferred);
            let (dev, inflight) = (&*self.vol().dev, &self.vol().inflight);
            early = write_batches(dev, inflight, &mine, IoCause::UserData, source);
            Some(self.prepare_checkpoint(&mut ws, false))
        } else {
            None
        };
        let batches = std::mem::take(&mut ws.deferred);
        self.publish_counts(&ws);
        drop(ws);
        // The data goes to the device without the write lock: other changes, checkpoints
        // excepted, proceed meanwhile (a checkpoint waits for these blocks to land).
        let written = write_batches(
            &*self.vol().dev,
            &self.vol().inflight,
            &batches,
            IoCause::UserData,
            source,
        );
        let checkpointed = match checkpoint {
            None => Ok(()),
            Some(prepared) => prepared.and_then(|w| self.write_prepared(w)),
        };
        r.and_then(|t| early.and(written).and(checkpointed).map(|()| t))
    }

    /// The write lock, with room for a change of `blocks` new blocks (`Fs::make_room`, paced:
    /// a change does at most one bounded cleaning step, and waits for a checkpoint being
    /// written only below the floor, without the lock).
    fn room_for(
        &self,
        blocks: u64,
        fresh: &dyn Fn() -> Result<u64>,
    ) -> Result<std::sync::MutexGuard<'_, WriteState>> {
        let asked = std::time::Instant::now();
        let mut ws = self.ws()?;
        // Behind someone else's work (a cleaning step, a checkpoint being prepared): this
        // change has waited its share already.
        let contended = asked.elapsed() >= std::time::Duration::from_millis(1);
        let mut waited_for_orphans = false;
        // Past the user's space: `fresh` (at most `blocks`) is asked only near full.
        let short = |ws: &WriteState| -> Result<bool> {
            let user = ws.cp.head.user_block_count.get();
            let valid = ws.counts.valid_blocks;
            Ok(valid + blocks > user && valid + fresh()? > user)
        };
        loop {
            if short(&ws)? {
                // An unlinked file that is still open keeps its blocks until its last handle
                // is released. A FUSE kernel sends that release without waiting for it, so a
                // program that closed and removed a file can ask for the space before the
                // daemon has freed it (fstests generic/371: a loop writing and removing an
                // 80 MiB file beside one allocating and removing another, on 256 MiB). While
                // orphans are held, wait a little for their release before saying ENOSPC.
                if waited_for_orphans || ws.orphans.list.is_empty() {
                    return Err(Error::NoSpace);
                }
                drop(ws);
                self.await_orphan_releases(asked, || Ok(!short(&*self.ws()?)?))?;
                waited_for_orphans = true;
                ws = self.ws()?;
                continue;
            }
            // The held dentry blocks are written by this change or the next checkpoint.
            let held = self.vol().dentries.len() as u64;
            match self.make_room(&mut ws, blocks + held, Pace::Step { contended })? {
                Room::Ready => {
                    // The lock, a step and any checkpoint waited for: all of what this
                    // change waited before it could begin.
                    let us = asked.elapsed().as_micros() as u64;
                    let st = &mut ws.gc.stats;
                    st.worst_wait_us = st.worst_wait_us.max(us);
                    if contended {
                        st.worst_lock_wait_us = st.worst_lock_wait_us.max(us);
                    }
                    return Ok(ws);
                }
                Room::Await(io) => {
                    drop(ws);
                    // The outcome is taken from `settle_this` below, under the lock.
                    let _ = io.wait();
                    ws = self.ws()?;
                    crate::durability::checkpoint::settle_this(&self.vol, &mut ws, &io)?;
                    ws.gc.stats.waits_for_checkpoint += 1;
                }
                Room::Checkpoint(writes) => {
                    drop(ws);
                    self.write_prepared(*writes)?;
                    ws = self.ws()?;
                    ws.gc.stats.waits_for_checkpoint += 1;
                }
            }
        }
    }

    /// Waits, while files unlinked while open are still held, until `ready` (asked after each
    /// millisecond's sleep) says what the caller needs is there, at most
    /// `ORPHAN_RELEASE_WAIT` from `asked`; returns whether it came. Called without the write
    /// lock. A FUSE kernel sends a closed file's RELEASE without waiting for it, so a program
    /// that closed and removed a file can ask for its space before the daemon has freed it
    /// (fstests generic/371; docs/design.md, "Space still held by a file being released").
    pub fn await_orphan_releases(
        &self,
        asked: std::time::Instant,
        mut ready: impl FnMut() -> Result<bool>,
    ) -> Result<bool> {
        loop {
            let held = self.ws()?.orphans.list.len();
            if held == 0 || asked.elapsed() >= ORPHAN_RELEASE_WAIT {
                return Ok(false);
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
            if ready()? {
                return Ok(true);
            }
        }
    }

    pub(crate) fn ws(&self) -> Result<std::sync::MutexGuard<'_, WriteState>> {
        let mut ws = self.ws_raw()?;
        if ws.failed.is_none() {
            ws.failed = self.vol.inflight.failure();
        }
        if let Some(why) = &ws.failed {
            return Err(Error::ReadOnly(format!(
                "an earlier change failed ({why}); the image keeps its last checkpoint"
            )));
        }
        Ok(ws)
    }

    /// The write lock even after a failure (to settle a checkpoint whose writes failed).
    pub(crate) fn ws_raw(&self) -> Result<std::sync::MutexGuard<'_, WriteState>> {
        self.vol
            .write
            .as_ref()
            .ok_or_else(|| Error::ReadOnly("the volume is mounted read-only".into()))?
            .lock()
            .map_err(|_| Error::InvalidArgument("internal lock poisoned by an earlier failure"))
    }

    /// The write lock with no checkpoint pending: one whose blocks another thread is writing
    /// is waited for without the lock (so changes go on meanwhile), then settled. If another
    /// thread settled it and began the next one meanwhile, that one is waited for the same way.
    pub(crate) fn ws_settled(&self) -> Result<std::sync::MutexGuard<'_, WriteState>> {
        loop {
            let ws = self.ws()?;
            let Some(io) = ws.cp.pending.as_ref().map(|p| p.io.clone()) else {
                return Ok(ws);
            };
            drop(ws);
            // The outcome is taken from `settle_this` below, under the lock.
            let _ = io.wait();
            let mut ws = self.ws()?;
            crate::durability::checkpoint::settle_this(&self.vol, &mut ws, &io)?;
            if ws.cp.pending.is_none() {
                return Ok(ws);
            }
        }
    }

    /// Prepares a checkpoint under the write lock (`checkpoint::prepare`), the quota files'
    /// changes written first so that the checkpoint records them with the inodes they count.
    pub(crate) fn prepare_checkpoint(
        &self,
        ws: &mut WriteState,
        umount: bool,
    ) -> Result<crate::durability::checkpoint::CheckpointWrites> {
        self.flush_held_or_fail(ws)?;
        prepare(self.vol(), ws, umount)
    }

    /// Writes a checkpoint under the write lock (`checkpoint::write_checkpoint`), the quota
    /// files' changes first.
    pub(crate) fn checkpoint_now(&self, ws: &mut WriteState, umount: bool) -> Result<()> {
        self.flush_held_or_fail(ws)?;
        crate::durability::checkpoint::write_checkpoint(self.vol(), ws, umount)
    }

    /// Writes what changes keep in memory (held dentry blocks, the quota files' changes)
    /// before a checkpoint; a failure marks the volume failed.
    fn flush_held_or_fail(&self, ws: &mut WriteState) -> Result<()> {
        if ws.failed.is_some() {
            return Ok(()); // `prepare` refuses with the reason
        }
        if let Err(e) = self.flush_dentry_blocks(ws) {
            ws.failed = Some(format!("dentry blocks: {e}"));
            return Err(e);
        }
        let r = self.flush_quota(ws);
        if let Err(e) = &r {
            ws.failed = Some(format!("quota files: {e}"));
        }
        r
    }

    /// Writes the blocks of a checkpoint prepared under the lock (`checkpoint::prepare`, the
    /// lock since let go), then settles it.
    pub(crate) fn write_prepared(
        &self,
        writes: crate::durability::checkpoint::CheckpointWrites,
    ) -> Result<()> {
        let (io, r) = writes.run(&self.vol);
        let s = crate::durability::checkpoint::settle_this(&self.vol, &mut *self.ws_raw()?, &io);
        r.and(s)
    }
}
