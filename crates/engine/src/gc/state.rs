//! The cleaner's state under the write lock and its counters. Apart from the cleaner's code
//! so that the write lock's `WriteState` can hold it without depending on the cleaner.

/// Sections a change short of space cleans beyond its need before it writes the checkpoint
/// that frees them (`Options::gc_batch`): one checkpoint (and one rewrite of the direct nodes
/// the moves touched) serves that many sections. 8 wins seed 000's jobs (docs/design.md,
/// "The foreground batch"); beyond it the cleaning budget, not the batch, ends a round.
pub const DEFAULT_GC_BATCH: u32 = 8;

/// The cleaner's counters since mount.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct GcStats {
    /// Sections cleaned by changes short of space.
    pub foreground_runs: u64,
    /// Sections cleaned by the background thread.
    pub background_runs: u64,
    /// Sections cleaned on request (`uf2fs gc`).
    pub requested_runs: u64,
    /// Data blocks moved.
    pub data_blocks_moved: u64,
    /// Node blocks moved (marked dirty for the next checkpoint).
    pub node_blocks_moved: u64,
    /// Data victims and node victims.
    pub data_victims: u64,
    pub node_victims: u64,
    /// Blocks whose summary disagreed with their owner: left where they are.
    pub stale_summaries: u64,
    /// Checkpoints written to turn prefree sections free.
    pub checkpoints_for_space: u64,
    /// Sections turned free by those checkpoints (and any other).
    pub sections_freed: u64,
    /// The longest a change waited for space (cleaning and checkpoints), in microseconds.
    pub worst_wait_us: u64,
    /// The longest a change waited that found the write lock held (behind another change, a
    /// cleaning step or a checkpoint being prepared), in microseconds.
    pub worst_lock_wait_us: u64,
    /// Paced changes (`gc_pace`) that cleaned one section and went on.
    pub paced_steps: u64,
    /// Paced changes that waited, without the write lock, for a checkpoint being written.
    pub waits_for_checkpoint: u64,
    /// Changes that cleaned and wrote checkpoints under the lock until there was room (all of
    /// them short of space without pacing; with it, those below the floor with no
    /// checkpoint being written), and the most sections one of them cleaned.
    pub full_waits: u64,
    pub most_sections_one_wait: u64,
    /// The longest one section's cleaning took (under the write lock), in microseconds:
    /// the bound on what a writer waits for the cleaner in one step.
    pub longest_section_us: u64,
    /// The policy victims are picked by.
    pub policy: &'static str,
    /// Sections in the victim index now.
    pub candidate_sections: u64,
    /// Where data goes when free sections run short (`adaptive` or `lfs`).
    pub mode: &'static str,
    /// Used data segments a data log took to fill their holes (slack space recycling), and
    /// the blocks written into holes; the same for node segments and node logs.
    pub ssr_segments: u64,
    pub ssr_blocks: u64,
    pub ssr_node_segments: u64,
    pub ssr_node_blocks: u64,
    /// Which rewrites go in place (`fsync`, `force` or `off`), and the blocks rewritten so.
    pub ipu: &'static str,
    pub ipu_blocks: u64,
    /// Where user overwrites go (`age` or `off`); under `age`, the overwrites sent to the hot
    /// data log and to the warm one, and the age below which an overwrite is hot (blocks of
    /// the allocation clock).
    pub data_temp: &'static str,
    pub hot_rewrites: u64,
    pub warm_rewrites: u64,
    pub hot_age_limit: u64,
}

/// The cleaner's state under the write lock.
#[derive(Default)]
pub(crate) struct GcState {
    pub stats: GcStats,
    /// Free sections ran short: node sections lose their penalty until enough are free.
    pub require_node_gc: bool,
    /// Node sections were cleaned since the last checkpoint: the next one empties them.
    pub nodes_moving: bool,
}

/// How changes hand the background cleaner's thread the checkpoint that turns what they
/// cleaned free (seed 003: a writer does one bounded step and goes on; the checkpoint's I/O
/// happens on that thread, without the write lock).
#[derive(Default)]
pub(crate) struct Pacer {
    /// The background thread, and the checkpoint a change that cleaned asks it for.
    bg: std::sync::Arc<crate::handoff::Handoff>,
    /// When a change last found free space short and stepped.
    stepped: std::sync::Mutex<Option<std::time::Instant>>,
}

impl Pacer {
    /// Whether the background thread steps (a library user may never start one: then
    /// changes write their checkpoints themselves).
    pub fn running(&self) -> bool {
        self.bg.running()
    }

    /// The background thread has started stepping.
    pub fn mark_running(&self) {
        self.bg.mark_running();
    }

    /// A change found free space short and stepped.
    pub fn stepped(&self) {
        *self.stepped.lock().unwrap_or_else(|p| p.into_inner()) = Some(std::time::Instant::now());
    }

    /// Whether changes stepped within `within`: they ask for the checkpoints then, when
    /// what they cleaned makes a batch.
    pub fn stepping(&self, within: std::time::Duration) -> bool {
        self.stepped
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some_and(|t| t.elapsed() < within)
    }

    /// Asks the thread for a checkpoint and wakes it.
    pub fn want_checkpoint(&self) {
        self.bg.ask();
    }

    /// Whether a checkpoint was asked for since the last call.
    pub fn take_wanted(&self) -> bool {
        self.bg.take()
    }

    /// What the background thread sleeps on (`Fs::background_gc_waiter`).
    pub fn handoff(&self) -> std::sync::Arc<crate::handoff::Handoff> {
        self.bg.clone()
    }
}
