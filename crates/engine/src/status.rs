//! What `uf2fs status` reports: usage, segments, checkpoints, cleaning and the device writes
//! by cause since mount, from the live state of a writable mount or from the mounted
//! checkpoint of a read-only one.

use crate::error::Result;
use crate::fs::StatFs;
use crate::space::sit::SegmentUsage;
use crate::vol::{Fs, Options};
use std::collections::BTreeMap;
use uf2fs_device::IoCause;

#[derive(Debug, Clone, serde::Serialize)]
pub struct Status {
    pub writable: bool,
    /// Version of the checkpoint the volume was mounted from.
    pub mounted_checkpoint: u64,
    /// Whether that checkpoint was written at a clean unmount.
    pub mounted_clean: bool,
    pub options: Options,
    pub usage: StatFs,
    pub segments: SegmentUsage,
    /// Space emptied since the last checkpoint; free after the next one.
    pub prefree_segments: u32,
    pub checkpoints: CheckpointStats,
    /// How fsyncs were served since mount (engine side; the FUSE layer counts requests too).
    pub fsync: crate::durability::state::FsyncStats,
    /// What roll-forward recovery replayed at mount (none: there was no chain).
    pub recovery: Option<crate::durability::state::RecoveryStats>,
    pub gc: crate::gc::GcStats,
    /// Compressed writes since the mount (`None`: the image has no compression feature).
    pub compression: Option<crate::state::CompressStats>,
    /// Changed dentry blocks held in memory until a checkpoint (`ns/dentry_cache.rs`).
    pub dentry_cache: crate::ns::dentry_cache::DentryCacheStats,
    pub io: IoStats,
}

#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct CheckpointStats {
    /// Requests for a checkpoint (sync, fsync, unmount, the dirty-node budget).
    pub requested: u64,
    /// Checkpoints written.
    pub written: u64,
    /// Requests served by a checkpoint that another caller had begun after them (merging).
    pub merged: u64,
    /// The longest one checkpoint's writes took (its blocks and both flushes), in µs.
    pub longest_write_us: u64,
    /// Checkpoints for the dirty-node budget: written by the background thread while
    /// changes went on, and by a change that reached the whole budget (its caller waited).
    pub budget_in_background: u64,
    pub budget_by_a_change: u64,
}

#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct IoStats {
    /// Blocks written to the device since mount, by cause.
    pub written_blocks: BTreeMap<&'static str, u64>,
    pub read_blocks: u64,
    /// Device reads since mount, by cause (a read of a run of blocks is one).
    pub read_requests: BTreeMap<&'static str, u64>,
    pub flushes: u64,
    /// Device blocks written per block of user data written (none before any data).
    pub write_amplification: Option<f64>,
    /// Large runs of file data written with O_DIRECT: "on", "off", "refused by the host"
    /// (buffered since) or "not available" (the host refused O_DIRECT at open, or the
    /// device has no such path).
    pub direct_writes: &'static str,
    /// Runs written with O_DIRECT since mount.
    pub direct_write_runs: u64,
    /// Small runs of file data held and written later (`write_behind`).
    pub write_behind: WriteBehindStats,
}

/// How write-behind stands (`uf2fs_device::Behind`): the bound (0: off), what is held now,
/// writes held since mount, the device requests they went down in, and the times a writer
/// found the bound reached or a write met held blocks and had them written first.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct WriteBehindStats {
    pub limit_bytes: u64,
    pub held_bytes: u64,
    pub deferred: u64,
    pub written_runs: u64,
    pub writer_drains: u64,
    pub overlap_drains: u64,
}

impl Fs {
    /// The volume's status now.
    pub fn status(&self) -> Result<Status> {
        let io = self.device_counters();
        let written_blocks: BTreeMap<&'static str, u64> = IoCause::ALL
            .iter()
            .zip(io.written_blocks)
            .map(|(c, n)| (c.name(), n))
            .collect();
        let data = written_blocks
            .get(IoCause::UserData.name())
            .copied()
            .unwrap_or(0);
        let direct = self.vol().dev.direct_writes_state();
        let io = IoStats {
            written_blocks,
            read_blocks: io.total_read(),
            read_requests: IoCause::ALL
                .iter()
                .zip(io.read_requests)
                .map(|(c, n)| (c.name(), n))
                .collect(),
            flushes: io.flushes,
            write_amplification: (data > 0).then(|| io.total_written() as f64 / data as f64),
            direct_writes: match direct {
                d if !d.available => "not available",
                d if d.refused => "refused by the host",
                d if d.on => "on",
                _ => "off",
            },
            direct_write_runs: direct.runs,
            write_behind: {
                let w = self.vol().dev.write_behind_state();
                WriteBehindStats {
                    limit_bytes: w.limit,
                    held_bytes: w.held,
                    deferred: w.deferred,
                    written_runs: w.written_runs,
                    writer_drains: w.writer_drains,
                    overlap_drains: w.overlap_drains,
                }
            },
        };
        let live = match self.vol().write.as_ref() {
            Some(w) => {
                let mut ws = w.lock().map_err(|_| {
                    crate::Error::InvalidArgument("internal lock poisoned by an earlier failure")
                })?;
                let ssr = ws.segs.slack_counts();
                Some((
                    ws.segs.usage(),
                    ws.segs.prefree_segments() as u32,
                    ws.compress,
                    CheckpointStats {
                        requested: ws.cp.requests,
                        written: ws.cp.written,
                        merged: ws.sync.stats.merged,
                        longest_write_us: ws.cp.longest_io_us,
                        budget_in_background: ws.cp.budget_in_background,
                        budget_by_a_change: ws.cp.budget_by_a_change,
                    },
                    ws.sync.stats,
                    crate::gc::GcStats {
                        policy: self.options().gc_policy.name(),
                        candidate_sections: ws.segs.candidates() as u64,
                        mode: match self.options().mode {
                            crate::vol::AllocMode::Adaptive => "adaptive",
                            crate::vol::AllocMode::Lfs => "lfs",
                        },
                        ipu: match self.options().ipu {
                            crate::vol::IpuPolicy::Fsync => "fsync",
                            crate::vol::IpuPolicy::Force => "force",
                            crate::vol::IpuPolicy::Off => "off",
                        },
                        data_temp: self.options().data_temp.name(),
                        hot_rewrites: ws.segs.temperature_counts().0,
                        warm_rewrites: ws.segs.temperature_counts().1,
                        hot_age_limit: ws.segs.temperature_counts().2,
                        ssr_segments: ssr.data_segments,
                        ssr_blocks: ssr.data_blocks,
                        ssr_node_segments: ssr.node_segments,
                        ssr_node_blocks: ssr.node_blocks,
                        ..ws.gc.stats.clone()
                    },
                ))
            }
            None => None,
        };
        let (segments, prefree_segments, compression, checkpoints, fsync, gc) = match live {
            Some(l) => l,
            None => (
                self.segment_usage()?,
                0,
                Default::default(),
                CheckpointStats::default(),
                Default::default(),
                Default::default(),
            ),
        };
        Ok(Status {
            writable: self.is_writable(),
            mounted_checkpoint: self.checkpoint().version(),
            mounted_clean: self
                .checkpoint()
                .has_flag(uf2fs_format::checkpoint::flags::UMOUNT),
            options: self.options(),
            usage: self.statfs(),
            segments,
            prefree_segments,
            checkpoints,
            fsync,
            recovery: self.vol().recovery,
            gc,
            compression: self
                .vol()
                .sb
                .has(uf2fs_format::superblock::feature::COMPRESSION)
                .then_some(compression),
            dentry_cache: self.vol().dentries.stats(),
            io,
        })
    }
}
