//! The layout mkfs.f2fs 1.15 gives a device: metadata area sizes, main area, reserved and
//! overprovision segments, and where the six logs start. Pure arithmetic on the device size,
//! so `uf2fs mkfs` and its tests can compare it with mkfs.f2fs field by field.
//!
//! Rules (read from f2fs-tools 1.15, written here in our words):
//! - segment0 is the first zone boundary at or after 8 KiB (two superblock blocks);
//! - segments = whole segments after segment0, rounded down to whole zones;
//! - SIT: one bit per block of every segment, both copies; NAT: enough 455-entry blocks for
//!   every block outside CP and SIT, capped so the NAT bitmap fits in the CP block beside the
//!   SIT bitmap (a SIT bitmap too big for the CP block moves to `cp_payload` blocks);
//! - with a large NAT bitmap (mkfs.f2fs `-i`): NAT segments are a fifth of what every block
//!   would need (at least one), uncapped, and `cp_payload` holds whatever of the two bitmaps
//!   (NAT then SIT, after the CRC that moves to byte 192) does not fit the CP block;
//! - SSA: one block per remaining segment plus one, padded so the main area starts on a zone;
//! - overprovision: unless given, the ratio (10, 15 … 95 % below 256 main segments, else
//!   0.01 … 10 % in steps of 0.01 summed in double precision) that leaves the most user space,
//!   with `reserved = (2 · (100 / ratio + 1) + 6) · segs_per_sec`;
//! - logs: hot, warm, cold node and hot data in the first four zones, cold data at a quarter
//!   and warm data at half of the main area (or the next free zones if those collide).

use crate::nat::NAT_ENTRIES_PER_BLOCK;
use crate::sit::SIT_ENTRIES_PER_BLOCK;
use crate::BLOCKS_PER_SEG;

const SEG: u64 = BLOCKS_PER_SEG as u64;
/// Bytes available for the SIT and NAT version bitmaps in a CP block.
const BITMAPS_IN_CP: u64 = 4092 - 192;
/// The NAT bitmap keeps at least this many bytes in the CP block.
const MIN_NAT_BITMAP: u64 = 64;
/// The largest SIT bitmap mkfs plans for (16 TiB of segments).
const MAX_SIT_BITMAP: u64 = (8 * 1024 * 1024u64)
    .div_ceil(SIT_ENTRIES_PER_BLOCK as u64)
    .div_ceil(SEG)
    * SEG
    / 8;
const MIN_SEGMENTS: u64 = 9;
/// With a large NAT bitmap, the share (percent) of the NAT segments a full NAT would need.
const NAT_RATIO_PERCENT: u64 = 20;

/// What the caller chooses.
#[derive(Debug, Clone, Copy)]
pub struct GeometryOptions {
    /// Device size in bytes.
    pub device_bytes: u64,
    pub sector_size: u32,
    pub segs_per_sec: u32,
    pub secs_per_zone: u32,
    /// Overprovision percentage; `None` picks the best one as mkfs.f2fs does.
    pub overprovision: Option<f64>,
    /// The large NAT bitmap layout (mkfs.f2fs `-i`).
    pub large_nat_bitmap: bool,
    /// The read-only layout (`-O ro`): segment 0 right after the superblocks, no SSA, no
    /// reserved or overprovision segments, two logs (hot node at main segment 0, hot data
    /// at 1; the four others name segment 0 and are never used).
    pub read_only: bool,
}

/// The computed layout: every superblock geometry field and the CP's segment counts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Geometry {
    pub log_sectorsize: u32,
    pub log_sectors_per_block: u32,
    pub block_count: u64,
    pub segs_per_sec: u32,
    pub secs_per_zone: u32,
    pub segment0_blkaddr: u32,
    pub segment_count: u32,
    pub segment_count_ckpt: u32,
    pub segment_count_sit: u32,
    pub segment_count_nat: u32,
    pub segment_count_ssa: u32,
    pub segment_count_main: u32,
    pub section_count: u32,
    pub sit_blkaddr: u32,
    pub nat_blkaddr: u32,
    pub ssa_blkaddr: u32,
    pub main_blkaddr: u32,
    pub cp_payload: u32,
    pub overprovision: f64,
    pub reserved_segments: u32,
    pub overprov_segments: u32,
    pub free_segments: u32,
    pub user_block_count: u64,
    /// Segment numbers of hot/warm/cold data, then hot/warm/cold node (curseg order).
    pub cursegs: [u32; 6],
}

/// Why a device cannot hold an F2FS volume with these options.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GeometryError {
    #[error("sector size {0} is not a power of two from 512 to 4096")]
    SectorSize(u32),
    #[error("segments per section and sections per zone must be powers of two from 1 ({0}, {1})")]
    SectionSize(u32, u32),
    #[error("overprovision ratio {0} is not between 0 and 100 percent")]
    Overprovision(f64),
    #[error("the device is too small for an F2FS volume with these options ({0} bytes)")]
    TooSmall(u64),
    #[error("the device is too large: F2FS addresses at most 16 TiB")]
    TooLarge,
}

/// The best overprovision ratio: the one that leaves the most user space.
fn best_overprovision(main_segs: u64, usable: u64, per_section: u64) -> f64 {
    let (mut candidate, end, step) = if main_segs < 256 {
        (10.0, 95.0, 5.0)
    } else {
        (0.01, 10.0, 0.01)
    };
    let usable = usable as f64;
    let (mut best, mut best_space) = (0.0, 0.0);
    while candidate <= end {
        let reserved = (2.0 * (100.0 / candidate + 1.0) + 6.0) * per_section as f64;
        let ovp = (usable - reserved) * candidate / 100.0;
        let space = usable - reserved - ovp;
        if best_space < space {
            best_space = space;
            best = candidate;
        }
        candidate += step;
    }
    best
}

/// The logs a fresh volume puts in use, each in a segment of its own that is not free: the
/// six of every layout, or the read-only layout's two (hot node and hot data).
pub fn logs_in_use(read_only: bool) -> u32 {
    if read_only {
        2
    } else {
        6
    }
}

/// Computes the layout mkfs.f2fs 1.15 makes for these options.
pub fn plan(o: &GeometryOptions) -> Result<Geometry, GeometryError> {
    if !o.sector_size.is_power_of_two() || !(512..=4096).contains(&o.sector_size) {
        return Err(GeometryError::SectorSize(o.sector_size));
    }
    if !o.segs_per_sec.is_power_of_two() || !o.secs_per_zone.is_power_of_two() {
        return Err(GeometryError::SectionSize(o.segs_per_sec, o.secs_per_zone));
    }
    if let Some(r) = o.overprovision {
        if !(r > 0.0 && r < 100.0) {
            return Err(GeometryError::Overprovision(r));
        }
    }
    let too_small = GeometryError::TooSmall(o.device_bytes);
    let log_sectorsize = o.sector_size.trailing_zeros();
    let spz = u64::from(o.segs_per_sec) * u64::from(o.secs_per_zone);
    let zone_bytes = 4096 * SEG * spz;
    let segment0_bytes = if o.read_only {
        2 * 4096
    } else {
        (2 * 4096u64).div_ceil(zone_bytes) * zone_bytes
    };
    if o.device_bytes < segment0_bytes {
        return Err(too_small);
    }
    let total_segments = (o.device_bytes - segment0_bytes) / (4096 * SEG);
    if total_segments > 8 * 1024 * 1024 {
        return Err(GeometryError::TooLarge);
    }
    let segment_count = total_segments / spz * spz;
    let segment0 = segment0_bytes / 4096;
    let ckpt = 2u64;
    let sit_segs = segment_count
        .div_ceil(SIT_ENTRIES_PER_BLOCK as u64)
        .div_ceil(SEG);
    let seg_sit = 2 * sit_segs;
    let avail = segment_count
        .checked_sub(ckpt + seg_sit)
        .ok_or(too_small.clone())?
        * SEG;
    let mut nat_segs = avail.div_ceil(NAT_ENTRIES_PER_BLOCK as u64).div_ceil(SEG);
    let sit_bitmap = seg_sit / 2 * SEG / 8;
    let max_sit_bitmap = sit_bitmap.min(MAX_SIT_BITMAP);
    let cp_payload = if o.large_nat_bitmap {
        nat_segs = (nat_segs * NAT_RATIO_PERCENT / 100).max(1);
        let bitmaps = max_sit_bitmap + nat_segs * SEG / 8;
        bitmaps.saturating_sub(BITMAPS_IN_CP).div_ceil(4096)
    } else {
        let (max_nat_bitmap, cp_payload) = if max_sit_bitmap > BITMAPS_IN_CP - MIN_NAT_BITMAP {
            (BITMAPS_IN_CP, max_sit_bitmap.div_ceil(4096))
        } else {
            (BITMAPS_IN_CP - max_sit_bitmap, 0)
        };
        nat_segs = nat_segs.min(max_nat_bitmap * 8 / SEG);
        cp_payload
    };
    let seg_nat = 2 * nat_segs;
    let avail = segment_count
        .checked_sub(ckpt + seg_sit + seg_nat)
        .ok_or(too_small.clone())?
        * SEG;
    let mut seg_ssa = if o.read_only {
        0
    } else {
        (avail / SEG + 1).div_ceil(SEG)
    };
    let meta = ckpt + seg_sit + seg_nat + seg_ssa;
    if !meta.is_multiple_of(spz) {
        seg_ssa += spz - meta % spz;
    }
    let meta_zones = meta.div_ceil(spz);
    let sit_blkaddr = segment0 + ckpt * SEG;
    let nat_blkaddr = sit_blkaddr + seg_sit * SEG;
    let ssa_blkaddr = nat_blkaddr + seg_nat * SEG;
    let main_blkaddr = segment0 + meta_zones * spz * SEG;
    let total_zones = (segment_count / spz)
        .checked_sub(meta_zones)
        .ok_or(too_small.clone())?;
    let section_count = total_zones * u64::from(o.secs_per_zone);
    let main_segs = section_count * u64::from(o.segs_per_sec);
    // mkfs.f2fs counts "usable" segments as every whole segment of the device after the
    // metadata, including those the rounding to whole zones left out of the main area.
    let usable = total_segments
        .checked_sub((main_blkaddr - segment0) / SEG)
        .ok_or(too_small.clone())?;
    // The reserve is counted in whole sections: ceil(usable / sections) segments each.
    let per_section = usable.div_ceil(section_count.max(1));
    // The read-only layout keeps no space for cleaning and uses two logs.
    let logs = u64::from(logs_in_use(o.read_only));
    let ovp = match o.overprovision {
        _ if o.read_only => 0.0,
        Some(r) => r,
        None => best_overprovision(main_segs, usable, per_section),
    };
    if (ovp == 0.0 && !o.read_only) || total_segments < MIN_SEGMENTS || total_zones <= logs {
        return Err(too_small);
    }
    let (reserved, overprov) = if o.read_only {
        (0, 0)
    } else {
        let reserved = ((2.0 * (100.0 / ovp + 1.0) + 6.0) * per_section as f64) as u64;
        let overprov = ((usable.saturating_sub(reserved)) as f64 * ovp / 100.0) as u64 + reserved;
        (reserved, overprov)
    };
    if main_segs.saturating_sub(logs) < reserved || usable <= overprov {
        return Err(too_small);
    }
    let free = usable - logs;
    let user_block_count = (free + logs - overprov) * SEG;
    // Logs, in mkfs's order: node hot/warm/cold, then data hot/cold/warm.
    let last_zone = |zones: u64| zones.saturating_sub(1) * spz;
    let (hot_node, warm_node, cold_node, hot_data) = (0, spz, 2 * spz, 3 * spz);
    let cold_data = last_zone(total_zones >> 2).max(hot_data + spz);
    let warm_data = last_zone(total_zones >> 1).max(cold_data + spz);
    let mut segs = [
        hot_data, warm_data, cold_data, hot_node, warm_node, cold_node,
    ];
    let order = [
        hot_node, warm_node, cold_node, hot_data, warm_data, cold_data,
    ];
    let collide = order
        .iter()
        .enumerate()
        .any(|(i, a)| order.iter().skip(i + 1).any(|b| a == b));
    if o.read_only {
        segs = [1, 0, 0, 0, 0, 0];
    } else if collide {
        // Reassigned in curseg type order (hot data first), one zone apart.
        for (i, s) in segs.iter_mut().enumerate() {
            *s = i as u64 * spz;
        }
    }
    let u32_of = |v: u64| u32::try_from(v).map_err(|_| GeometryError::TooLarge);
    let mut cursegs = [0u32; 6];
    for (c, s) in cursegs.iter_mut().zip(segs) {
        *c = u32_of(s)?;
    }
    Ok(Geometry {
        log_sectorsize,
        log_sectors_per_block: 12 - log_sectorsize,
        block_count: o.device_bytes / 4096,
        segs_per_sec: o.segs_per_sec,
        secs_per_zone: o.secs_per_zone,
        segment0_blkaddr: u32_of(segment0)?,
        segment_count: u32_of(segment_count)?,
        segment_count_ckpt: 2,
        segment_count_sit: u32_of(seg_sit)?,
        segment_count_nat: u32_of(seg_nat)?,
        segment_count_ssa: u32_of(seg_ssa)?,
        segment_count_main: u32_of(main_segs)?,
        section_count: u32_of(section_count)?,
        sit_blkaddr: u32_of(sit_blkaddr)?,
        nat_blkaddr: u32_of(nat_blkaddr)?,
        ssa_blkaddr: u32_of(ssa_blkaddr)?,
        main_blkaddr: u32_of(main_blkaddr)?,
        cp_payload: u32_of(cp_payload)?,
        overprovision: ovp,
        reserved_segments: u32_of(reserved)?,
        overprov_segments: u32_of(overprov)?,
        free_segments: u32_of(free)?,
        user_block_count,
        cursegs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(mib: u64) -> GeometryOptions {
        GeometryOptions {
            device_bytes: mib << 20,
            sector_size: 512,
            segs_per_sec: 1,
            secs_per_zone: 1,
            overprovision: None,
            large_nat_bitmap: false,
            read_only: false,
        }
    }

    #[test]
    fn matches_the_format_notes_for_512m_and_2g() {
        let g = plan(&opts(512)).unwrap();
        assert_eq!(
            (g.segment_count, g.segment_count_main, g.main_blkaddr),
            (255, 248, 4096)
        );
        assert_eq!(
            (
                g.reserved_segments,
                g.overprov_segments,
                g.free_segments,
                g.user_block_count
            ),
            (28, 50, 242, 101376)
        );
        assert_eq!(g.cursegs, [3, 123, 61, 0, 1, 2]);
        let g = plan(&opts(2048)).unwrap();
        assert_eq!(
            (g.segment_count_nat, g.segment_count_ssa, g.main_blkaddr),
            (6, 2, 6656)
        );
        assert_eq!(
            (g.reserved_segments, g.overprov_segments, g.user_block_count),
            (52, 94, 469504)
        );
        assert_eq!(g.cursegs, [3, 504, 251, 0, 1, 2]);
    }

    /// mkfs.f2fs 1.15 `-O ro` on 64 MiB (read from its image): segment 0 at block 2, no SSA,
    /// no reserve, every main segment the user's.
    #[test]
    fn read_only_layout_matches_mkfs_f2fs() {
        let g = plan(&GeometryOptions {
            read_only: true,
            ..opts(64)
        })
        .unwrap();
        assert_eq!(
            (g.segment0_blkaddr, g.segment_count, g.segment_count_ssa),
            (2, 31, 0)
        );
        assert_eq!(
            (g.main_blkaddr, g.ssa_blkaddr, g.segment_count_main),
            (3074, 3074, 25)
        );
        assert_eq!(
            (g.reserved_segments, g.overprov_segments, g.free_segments),
            (0, 0, 23)
        );
        assert_eq!(g.user_block_count, 12800);
        assert_eq!(g.cursegs, [1, 0, 0, 0, 0, 0]);
    }

    /// mkfs.f2fs 1.15 `-i` on 64 MiB, 8 GiB, 200 GiB and 300 GiB (read from its images).
    #[test]
    fn large_nat_bitmap_matches_mkfs_f2fs() {
        let large = |mib| {
            plan(&GeometryOptions {
                large_nat_bitmap: true,
                ..opts(mib)
            })
            .unwrap()
        };
        let g = large(64);
        assert_eq!((g.segment_count_nat, g.cp_payload), (2, 0));
        let g = large(8 << 10);
        assert_eq!(
            (g.segment_count_sit, g.segment_count_nat, g.cp_payload),
            (2, 2, 0)
        );
        let g = large(200 << 10);
        assert_eq!(
            (g.segment_count_sit, g.segment_count_nat, g.cp_payload),
            (8, 90, 0)
        );
        let g = large(300 << 10);
        assert_eq!(
            (g.segment_count_sit, g.segment_count_nat, g.cp_payload),
            (12, 134, 1)
        );
    }

    #[test]
    fn tiny_devices_are_refused() {
        assert!(matches!(plan(&opts(8)), Err(GeometryError::TooSmall(_))));
        assert!(matches!(plan(&opts(0)), Err(GeometryError::TooSmall(_))));
    }
}
