//! `info`, `ls`, `cat`, `stat`: printing what the engine reads.

use crate::{open, out_err, resolve, CliResult, Failure};
use std::io::{self, Write};
use std::path::Path;
use uf2fs_engine::{Attr, FileType, Fs, Time};

fn type_char(t: FileType) -> char {
    match t {
        FileType::Regular => '-',
        FileType::Directory => 'd',
        FileType::Symlink => 'l',
        FileType::CharDevice => 'c',
        FileType::BlockDevice => 'b',
        FileType::Fifo => 'p',
        FileType::Socket => 's',
    }
}

/// `drwxr-xr-x`-style mode string.
pub fn mode_string(t: FileType, perm: u16) -> String {
    let mut s = String::with_capacity(10);
    s.push(type_char(t));
    let bits = [
        (0o400, 'r'),
        (0o200, 'w'),
        (0o100, 'x'),
        (0o040, 'r'),
        (0o020, 'w'),
        (0o010, 'x'),
        (0o004, 'r'),
        (0o002, 'w'),
        (0o001, 'x'),
    ];
    for (i, (bit, c)) in bits.iter().enumerate() {
        let set = perm & bit != 0;
        let special = match i {
            2 => (perm & 0o4000 != 0).then_some(if set { 's' } else { 'S' }),
            5 => (perm & 0o2000 != 0).then_some(if set { 's' } else { 'S' }),
            8 => (perm & 0o1000 != 0).then_some(if set { 't' } else { 'T' }),
            _ => None,
        };
        s.push(special.unwrap_or(if set { *c } else { '-' }));
    }
    s
}

/// RFC 3339 in UTC with nanoseconds ("1970-01-01T00:00:00.000000000Z"), for any time an
/// inode can hold: before 1970 and past 9999 too (the year then has more digits or a sign).
/// By hand: humantime, used before, panics outside 1970..=9999.
fn time_string(t: Time) -> String {
    let days = t.sec.div_euclid(86_400);
    let secs = t.sec.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:09}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        t.nsec.min(999_999_999)
    )
}

/// The proleptic Gregorian (year, month, day) of a count of days since 1970-01-01: eras of
/// 400 years (146 097 days) starting on March 1, so that the leap day ends a year.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468; // days from 0000-03-01
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // day of era, 0..=146_096
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // year of era
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // day of the year from March 1
    let mp = (5 * doy + 2) / 153; // month from March, 0..=11
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

pub fn info(image: &Path, json: bool) -> CliResult {
    let fs = open(image)?;
    let info = fs.info();
    let usage = fs.segment_usage();
    let mut o = io::stdout().lock();
    if json {
        let usage_json = match &usage {
            Ok(u) => serde_json::to_value(u)?,
            Err(e) => serde_json::json!({ "error": e.to_string() }),
        };
        let mut v = serde_json::to_value(&info)?;
        if let Some(m) = v.as_object_mut() {
            m.insert("segment_usage".into(), usage_json);
        }
        writeln!(o, "{}", serde_json::to_string_pretty(&v)?).map_err(out_err)?;
        return Ok(());
    }
    let w = |o: &mut io::StdoutLock, k: &str, v: String| writeln!(o, "{k:<26}{v}");
    let mut lines = vec![
        ("image", image.display().to_string()),
        ("label", info.label.clone()),
        ("uuid", info.uuid.clone()),
        ("features", info.features.join(",")),
        ("written by", info.version.clone()),
        ("made by", info.init_version.clone()),
        (
            "sector / block size",
            format!("{} / {}", info.sector_size, info.block_size),
        ),
        (
            "blocks",
            format!(
                "{} ({} MiB)",
                info.block_count,
                (info.block_count * 4096) >> 20
            ),
        ),
        (
            "main segments",
            format!(
                "{} ({} per section, {} sections per zone)",
                info.segment_count_main, info.segs_per_sec, info.secs_per_zone
            ),
        ),
    ];
    for (i, d) in info.devices.iter().enumerate() {
        lines.push((
            "device",
            format!(
                "{i}: {} ({} segments, blocks {}..{})",
                d.recorded_path, d.segments, d.start, d.end
            ),
        ));
    }
    for (name, start, len) in &info.areas {
        lines.push((
            "area",
            format!("{name:<11} at block {start:>9}, {len} blocks"),
        ));
    }
    let m = &info.mount;
    lines.extend([
        ("superblock copy", m.superblock_copy.to_string()),
        (
            "checkpoint",
            format!(
                "pack {}, version {:#x}, flags {}",
                m.checkpoint_pack,
                m.checkpoint_version,
                m.checkpoint_flags.join(",")
            ),
        ),
        ("user blocks", info.user_block_count.to_string()),
        (
            "valid blocks",
            format!(
                "{} ({:.1}%)",
                info.valid_block_count,
                100.0 * info.valid_block_count as f64 / info.user_block_count.max(1) as f64
            ),
        ),
        ("free segments", info.free_segment_count.to_string()),
        (
            "reserved / overprov segs",
            format!(
                "{} / {}",
                info.reserved_segment_count, info.overprov_segment_count
            ),
        ),
        (
            "valid inodes / nodes",
            format!("{} / {}", info.valid_inode_count, info.valid_node_count),
        ),
        (
            "next free nid / max",
            format!("{} / {}", info.next_free_nid, info.max_nid),
        ),
        ("orphan inodes", m.orphan_inodes.to_string()),
        ("mounted for", format!("{} s", info.elapsed_time)),
    ]);
    for (name, segno, blkoff, alloc) in &info.current_segments {
        lines.push((
            "current segment",
            format!("{name:<9} segment {segno:>6}, next block {blkoff:>3} ({alloc})"),
        ));
    }
    match &usage {
        Ok(u) => {
            lines.push((
                "SIT segments",
                format!(
                    "{} free, {} full, {} partly valid",
                    u.free_segments, u.full_segments, u.dirty_segments
                ),
            ));
            lines.push(("SIT valid blocks", u.valid_blocks.to_string()));
        }
        Err(e) => lines.push(("SIT", format!("unreadable: {e}"))),
    }
    for n in &m.notes {
        lines.push(("note", n.clone()));
    }
    for (k, v) in lines {
        w(&mut o, k, v).map_err(out_err)?;
    }
    Ok(())
}

fn long_line(fs: &Fs, a: &Attr, name: &[u8], o: &mut impl Write) -> io::Result<()> {
    let size = match a.file_type {
        FileType::CharDevice | FileType::BlockDevice => format!("{}, {}", a.rdev.0, a.rdev.1),
        _ => a.size.to_string(),
    };
    write!(
        o,
        "{} {:>3} {:>5} {:>5} {:>12} {} ",
        mode_string(a.file_type, a.perm),
        a.nlink,
        a.uid,
        a.gid,
        size,
        time_string(a.mtime)
    )?;
    o.write_all(name)?;
    if a.file_type == FileType::Symlink {
        if let Ok(t) = fs.readlink(a.ino) {
            o.write_all(b" -> ")?;
            o.write_all(&t)?;
        }
    }
    o.write_all(b"\n")
}

pub fn ls(image: &Path, path: &str, long: bool, recursive: bool) -> CliResult {
    let fs = open(image)?;
    let ino = resolve(&fs, path, false)?;
    let attr = fs.getattr(ino).map_err(|e| format!("{path}: {e}"))?;
    let mut o = io::BufWriter::new(io::stdout().lock());
    let mut failed = false;
    if recursive {
        fs.walk(ino, &mut |item| {
            match item {
                uf2fs_engine::WalkItem::Entry { path: p, attr, .. } => {
                    if p.is_empty() {
                        return Ok(true);
                    }
                    let r = if long {
                        long_line(&fs, attr, p, &mut o)
                    } else {
                        o.write_all(p).and_then(|_| o.write_all(b"\n"))
                    };
                    if let Err(e) = r {
                        return Err(uf2fs_engine::Error::InvalidArgument(
                            if e.kind() == io::ErrorKind::BrokenPipe {
                                "broken pipe"
                            } else {
                                "cannot write output"
                            },
                        ));
                    }
                }
                uf2fs_engine::WalkItem::Error { path: p, error } => {
                    failed = true;
                    eprintln!("uf2fs: ls: {path}/{}: {error}", String::from_utf8_lossy(p));
                }
            }
            Ok(true)
        })
        .map_err(|e| format!("{path}: {e}"))?;
    } else if attr.file_type == FileType::Directory {
        let mut entries = fs.readdir(ino).map_err(|e| format!("{path}: {e}"))?;
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        for e in entries {
            if long {
                match fs.getattr(e.ino) {
                    Ok(a) => long_line(&fs, &a, &e.name, &mut o).map_err(out_err)?,
                    Err(err) => {
                        failed = true;
                        eprintln!(
                            "uf2fs: ls: {path}/{}: {err}",
                            String::from_utf8_lossy(&e.name)
                        );
                    }
                }
            } else {
                o.write_all(&e.name)
                    .and_then(|_| o.write_all(b"\n"))
                    .map_err(out_err)?;
            }
        }
    } else {
        let name = path.as_bytes();
        if long {
            long_line(&fs, &attr, name, &mut o).map_err(out_err)?;
        } else {
            o.write_all(name)
                .and_then(|_| o.write_all(b"\n"))
                .map_err(out_err)?;
        }
    }
    o.flush().map_err(out_err)?;
    if failed {
        return Err(Failure::Quiet);
    }
    Ok(())
}

pub fn cat(image: &Path, path: &str) -> CliResult {
    let fs = open(image)?;
    let ino = resolve(&fs, path, true)?;
    let mut o = io::stdout().lock();
    let mut buf = vec![0u8; 1 << 20];
    let mut off = 0u64;
    loop {
        let n = fs
            .read(ino, off, &mut buf)
            .map_err(|e| format!("{path}: {e}"))?;
        if n == 0 {
            break;
        }
        o.write_all(buf.get(..n).unwrap_or(&[])).map_err(out_err)?;
        off += n as u64;
    }
    o.flush().map_err(out_err)?;
    Ok(())
}

fn uf2fs_format_mode(mode: u8) -> String {
    match uf2fs_engine::fscrypt::mode_name(mode) {
        "unknown" => format!("unknown mode {mode}"),
        n => n.to_string(),
    }
}

fn escape(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|&b| {
            if (0x20..0x7f).contains(&b) && b != b'\\' {
                (b as char).to_string()
            } else {
                format!("\\x{b:02x}")
            }
        })
        .collect()
}

pub fn stat(image: &Path, path: &str, json: bool) -> CliResult {
    let fs = open(image)?;
    let ino = resolve(&fs, path, false)?;
    let a = fs.getattr(ino).map_err(|e| format!("{path}: {e}"))?;
    let i = fs.inode(ino).map_err(|e| format!("{path}: {e}"))?;
    let xattrs = fs.xattrs(ino).map_err(|e| format!("{path}: xattrs: {e}"))?;
    let target = if a.file_type == FileType::Symlink {
        Some(fs.readlink(ino).map_err(|e| format!("{path}: {e}"))?)
    } else {
        None
    };
    let nids: Vec<u32> = (0..5).map(|k| i.nid(k)).collect();
    // A context that cannot be read is shown as such: the rest of the inode is still worth
    // seeing.
    let encryption = match fs.encryption(ino) {
        Err(e) => Some(format!("unreadable ({e})")),
        Ok(c) => c.map(|c| {
            format!(
                "v{} policy, contents {}, names {}, name padding {}, flags {:#04x}, {} (no key given: names and symlink targets are shown in Linux's no-key form, contents cannot be read)",
                c.version(),
                uf2fs_format_mode(c.contents_mode),
                uf2fs_format_mode(c.filenames_mode),
                c.padding(),
                c.flags,
                c.key
            )
        }),
    };
    let mut o = io::stdout().lock();
    if json {
        let v = serde_json::json!({
            "path": path,
            "attr": a,
            "i_mode": i.mode,
            "i_advise": i.advise,
            "i_inline": i.inline,
            "i_blocks": i.blocks,
            "i_generation": i.generation,
            "i_current_depth": i.current_depth,
            "i_xattr_nid": i.xattr_nid,
            "i_flags": i.flags,
            "i_pino": i.pino,
            "i_name": escape(&i.name),
            "i_dir_level": i.dir_level,
            "i_extra_isize": i.extra_isize,
            "i_inline_xattr_size": i.inline_xattr_words,
            "i_projid": i.projid,
            "i_inode_checksum": i.checksum,
            "i_nid": nids,
            "inline_data": i.has_inline_data(),
            "inline_dentry": i.has_inline_dentry(),
            "symlink_target": target.as_deref().map(escape),
            "encryption": encryption,
            "xattrs": xattrs.iter().map(|(n, v)| serde_json::json!({"name": escape(n), "value": escape(v)})).collect::<Vec<_>>(),
        });
        writeln!(o, "{}", serde_json::to_string_pretty(&v)?).map_err(out_err)?;
        return Ok(());
    }
    let mut lines = vec![
        format!(
            "  File: {path}{}",
            target
                .as_deref()
                .map(|t| format!(" -> {}", escape(t)))
                .unwrap_or_default()
        ),
        format!(
            "  Type: {}  Inode (nid): {}  Links: {}",
            uf2fs_engine::type_name(a.file_type),
            ino,
            a.nlink
        ),
        format!(
            "  Mode: {:04o} ({})  Uid: {}  Gid: {}",
            a.perm,
            mode_string(a.file_type, a.perm),
            a.uid,
            a.gid
        ),
        format!(
            "  Size: {}  i_blocks: {} (4 KiB, node blocks included)  Blocks: {} (512 B)",
            a.size, i.blocks, a.blocks_512
        ),
    ];
    if matches!(a.file_type, FileType::CharDevice | FileType::BlockDevice) {
        lines.push(format!("  Device: {},{}", a.rdev.0, a.rdev.1));
    }
    lines.extend([
        format!("Access: {}", time_string(a.atime)),
        format!("Modify: {}", time_string(a.mtime)),
        format!("Change: {}", time_string(a.ctime)),
        format!(" Birth: {}", a.crtime.map(time_string).unwrap_or_else(|| "-".into())),
        format!("  i_inline: {:#04x}  i_advise: {:#04x}  i_flags: {:#x}  i_generation: {}", i.inline, i.advise, i.flags, i.generation),
        format!("  i_pino: {}  i_name: {}", i.pino, escape(&i.name)),
        format!("  i_extra_isize: {}  i_inline_xattr_size: {} words  i_projid: {}  i_inode_checksum: {}", i.extra_isize, i.inline_xattr_words, i.projid.map(|p| p.to_string()).unwrap_or_else(|| "-".into()), i.checksum.map(|c| format!("{c:#010x}")).unwrap_or_else(|| "-".into())),
        format!("  i_current_depth: {}  i_dir_level: {}  i_xattr_nid: {}  i_nid: {:?}", i.current_depth, i.dir_level, i.xattr_nid, nids),
        format!("  data: {}", if i.has_inline_data() { "inline" } else if i.has_inline_dentry() { "inline dentries" } else { "blocks" }),
    ]);
    if let Some(c) = &i.compression {
        lines.push(format!(
            "  compression: {}{}  cluster: {} blocks ({} KiB)  checksum: {}  i_compr_blocks: {}{}",
            c.algorithm.name(),
            if c.level != 0 {
                format!(":{}", c.level)
            } else {
                String::new()
            },
            c.cluster_blocks(),
            c.cluster_bytes() / 1024,
            if c.checksum { "yes" } else { "no" },
            c.compr_blocks,
            if c.released {
                "  (saved blocks released)"
            } else {
                ""
            }
        ));
    }
    if let Some(e) = &encryption {
        lines.push(format!("  encryption: {e}"));
    }
    for (n, v) in &xattrs {
        lines.push(format!(" xattr: {}=\"{}\"", escape(n), escape(v)));
    }
    for l in lines {
        writeln!(o, "{l}").map_err(out_err)?;
    }
    Ok(())
}

pub fn fsck(image: &Path, json: bool) -> CliResult {
    // The checkpoint's structures are what is checked; a roll-forward chain after it (what
    // fsync wrote before a crash) is replayed by the next writable mount, and only noted here.
    let fs = match uf2fs_engine::Fs::open_at_checkpoint_with(image, crate::devices()) {
        Ok(fs) => fs,
        Err(e) => {
            if json {
                println!(
                    "{}",
                    serde_json::json!({ "clean": false, "findings": [format!("cannot mount: {e}")] })
                );
            } else {
                println!("{}: cannot mount: {e}", image.display());
            }
            return Err(Failure::Quiet);
        }
    };
    let r = fs
        .check()
        .map_err(|e| format!("{}: {e}", image.display()))?;
    let chain = fs.roll_forward_blocks().unwrap_or(0);
    let mut o = io::stdout().lock();
    if json {
        let v = serde_json::json!({ "clean": r.findings.is_empty(), "report": r, "roll_forward_blocks": chain });
        writeln!(o, "{}", serde_json::to_string_pretty(&v)?).map_err(out_err)?;
    } else {
        for f in &r.findings {
            writeln!(o, "{}: {f}", image.display()).map_err(out_err)?;
        }
        if chain > 0 {
            writeln!(
                o,
                "{}: note: {chain} node blocks fsync'd after the checkpoint (a writable mount replays them)",
                image.display()
            )
            .map_err(out_err)?;
        }
        writeln!(
            o,
            "{}: {} ({} inodes, {} nodes, {} data blocks, {} directories, {} names)",
            image.display(),
            if r.findings.is_empty() {
                "clean".to_string()
            } else {
                format!("{} findings", r.findings.len())
            },
            r.inodes,
            r.nodes,
            r.blocks,
            r.directories,
            r.names
        )
        .map_err(out_err)?;
    }
    if r.findings.is_empty() {
        Ok(())
    } else {
        Err(Failure::Quiet)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_print_before_1970_and_after_9999() {
        let t = |sec, nsec| time_string(Time { sec, nsec });
        assert_eq!(t(0, 0), "1970-01-01T00:00:00.000000000Z");
        assert_eq!(t(-1, 500_000_000), "1969-12-31T23:59:59.500000000Z");
        assert_eq!(t(951_782_400, 7), "2000-02-29T00:00:00.000000007Z");
        assert_eq!(t(-2_208_988_800, 0), "1900-01-01T00:00:00.000000000Z");
        assert_eq!(t(253_402_300_800, 0), "10000-01-01T00:00:00.000000000Z");
        // Every value an inode can hold prints without a panic.
        for sec in [
            i64::MIN / 86_400 * 86_400 / 400,
            i64::MAX / 1000,
            -62_135_596_800,
        ] {
            assert!(t(sec, 999_999_999).ends_with('Z'));
        }
    }
}
