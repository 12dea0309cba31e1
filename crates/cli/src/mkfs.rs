//! `mkfs`: argument checks (size suffixes, refusing to overwrite data without --force), then
//! the engine's mkfs on an image file (made when it does not exist) or a block device.

use crate::{CliResult, Failure};
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use uf2fs_engine::uf2fs_device::{BlockDevice, FileDevice};
use uf2fs_engine::{mkfs, mkfs_devices, parse_features, MkfsDevice, MkfsOptions};

/// Parses `512M`, `2G`, `1.5T`, `4096` (bytes), with K/M/G/T as powers of 1024.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m = match c.to_ascii_uppercase() {
                'K' => 1u64 << 10,
                'M' => 1 << 20,
                'G' => 1 << 30,
                'T' => 1 << 40,
                _ => {
                    return Err(format!(
                        "size {s:?}: unknown suffix {c:?} (use K, M, G or T)"
                    ))
                }
            };
            (t.get(..i).unwrap_or(""), m)
        }
        _ => (t, 1),
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("size {s:?} is not a number"))?;
    if !(v.is_finite() && v > 0.0) {
        return Err(format!("size {s:?} must be positive"));
    }
    let bytes = v * mult as f64;
    if bytes > u64::MAX as f64 / 2.0 {
        return Err(format!("size {s:?} is too large"));
    }
    Ok(bytes as u64)
}

/// Whether the first MiB of `path` holds anything but zeros.
fn has_data(path: &Path) -> std::io::Result<bool> {
    let mut buf = Vec::with_capacity(1 << 20);
    std::fs::File::open(path)?
        .take(1 << 20)
        .read_to_end(&mut buf)?;
    Ok(buf.iter().any(|&b| b != 0))
}

/// An existing file or device of a multi-device volume may be overwritten with --force, or
/// when it holds no data.
fn check_overwrite(path: &Path, force: bool) -> CliResult {
    let shown = path.display();
    let m = std::fs::metadata(path).map_err(|e| format!("device {shown}: {e}"))?;
    if m.is_dir() {
        return Err(Failure::Msg(format!("device {shown} is a directory")));
    }
    if !force && has_data(path).map_err(|e| format!("device {shown}: {e}"))? {
        return Err(Failure::Msg(format!(
            "device {shown} is not empty: use --force to overwrite it"
        )));
    }
    Ok(())
}

/// One device of a multi-device volume, opened for writing; its path is recorded as given
/// (as mkfs.f2fs records its arguments: give absolute paths).
fn mkfs_device(path: &Path) -> Result<MkfsDevice, Failure> {
    let shown = path.display();
    let dev = FileDevice::open(path, true).map_err(|e| format!("{shown}: {e}"))?;
    let m = std::fs::metadata(path).map_err(|e| format!("{shown}: {e}"))?;
    let bytes = if m.is_file() {
        m.len()
    } else {
        dev.block_count() * 4096
    };
    Ok(MkfsDevice {
        path: path.as_os_str().as_bytes().to_vec(),
        bytes,
        device: Box::new(dev),
    })
}

pub struct Args<'a> {
    pub image: &'a Path,
    pub size: Option<&'a str>,
    pub overprovision: Option<f64>,
    pub segs_per_sec: u32,
    pub label: &'a str,
    pub features: &'a str,
    pub force: bool,
    /// Write IMAGE as an Android sparse image (made raw beside it first).
    pub sparse: bool,
    /// mkfs.f2fs `-i`: the large NAT bitmap layout.
    pub large_nat_bitmap: bool,
    /// A fixed uuid (hex, dashes allowed) instead of a random one.
    pub uuid: Option<&'a str>,
    /// A fixed time (seconds) for what mkfs writes instead of now.
    pub timestamp: Option<u64>,
}

/// Parses a uuid written as 32 hex digits, with or without the usual dashes.
pub fn parse_uuid(s: &str) -> Result<[u8; 16], String> {
    let hex: Vec<u8> = s.bytes().filter(|&b| b != b'-').collect();
    let bad =
        || format!("uuid {s:?}: want 32 hex digits such as 0123abcd-4567-89ab-cdef-0123456789ab");
    if hex.len() != 32 || !hex.iter().all(u8::is_ascii_hexdigit) {
        return Err(bad());
    }
    let mut out = [0u8; 16];
    for (o, pair) in out.iter_mut().zip(hex.chunks_exact(2)) {
        let text = std::str::from_utf8(pair).map_err(|_| bad())?;
        *o = u8::from_str_radix(text, 16).map_err(|_| bad())?;
    }
    Ok(out)
}

pub fn run(a: Args<'_>) -> CliResult {
    if !crate::devices().is_empty() {
        if a.sparse || a.size.is_some() {
            return Err(Failure::Msg(
                "a multi-device volume (--device) uses each device whole: \
                 --size and --sparse cannot be given with it"
                    .into(),
            ));
        }
        for d in crate::devices() {
            check_overwrite(d, a.force)?;
        }
    }
    if !a.sparse {
        return make(&a, a.image);
    }
    let shown = a.image.display();
    if a.size.is_none() {
        return Err(Failure::Msg(format!(
            "{shown}: --sparse needs --size (the raw image is made first)"
        )));
    }
    match std::fs::metadata(a.image) {
        Ok(m) if m.is_dir() => return Err(Failure::Msg(format!("{shown} is a directory"))),
        Ok(m) if !m.is_file() => {
            return Err(Failure::Msg(format!(
                "{shown}: --sparse writes a file, not a device"
            )))
        }
        Ok(_) if !a.force && has_data(a.image).map_err(|e| format!("{shown}: {e}"))? => {
            return Err(Failure::Msg(format!(
                "{shown} is not empty: use --force to overwrite it"
            )))
        }
        _ => {}
    }
    let raw = crate::sparse::stage(a.image)?;
    make(&a, &raw.0)?;
    crate::sparse::pack(&raw.0, a.image)
}

/// Makes the file system on `image` (the raw image, which `a.image` names unless --sparse).
fn make(a: &Args<'_>, image: &Path) -> CliResult {
    let shown = a.image.display();
    let size = a.size.map(parse_size).transpose()?;
    let features = parse_features(a.features).map_err(|e| format!("--features: {e}"))?;
    let uuid = a.uuid.map(parse_uuid).transpose()?;
    match std::fs::metadata(image) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let Some(size) = size else {
                return Err(Failure::Msg(format!(
                    "{shown} does not exist: give --size to make an image file"
                )));
            };
            let f = std::fs::File::create_new(image).map_err(|e| format!("{shown}: {e}"))?;
            f.set_len(size).map_err(|e| format!("{shown}: {e}"))?;
        }
        Err(e) => return Err(Failure::Msg(format!("{shown}: {e}"))),
        Ok(m) => {
            if m.is_dir() {
                return Err(Failure::Msg(format!("{shown} is a directory")));
            }
            if !a.force && has_data(image).map_err(|e| format!("{shown}: {e}"))? {
                return Err(Failure::Msg(format!(
                    "{shown} is not empty: use --force to overwrite it"
                )));
            }
            if m.is_file() {
                if let Some(size) = size {
                    if size != m.len() {
                        if !a.force && m.len() != 0 {
                            return Err(Failure::Msg(format!(
                                "{shown} has {} bytes, not {size}: use --force to resize it",
                                m.len()
                            )));
                        }
                        let f = std::fs::OpenOptions::new()
                            .write(true)
                            .open(image)
                            .map_err(|e| format!("{shown}: {e}"))?;
                        f.set_len(size).map_err(|e| format!("{shown}: {e}"))?;
                    }
                }
            }
        }
    }
    let opts = MkfsOptions {
        size,
        overprovision: a.overprovision,
        segs_per_sec: a.segs_per_sec,
        label: a.label.to_owned(),
        features,
        large_nat_bitmap: a.large_nat_bitmap,
        uuid,
        time: a.timestamp,
        ..MkfsOptions::default()
    };
    let g = if crate::devices().is_empty() {
        let dev = FileDevice::open(image, true).map_err(|e| format!("{shown}: {e}"))?;
        mkfs(&dev, &opts).map_err(|e| format!("{shown}: {e}"))?
    } else {
        let mut devices = vec![mkfs_device(image)?];
        for d in crate::devices() {
            devices.push(mkfs_device(d)?);
        }
        mkfs_devices(devices, &opts).map_err(|e| format!("{shown}: {e}"))?
    };
    println!(
        "{shown}: F2FS, {} MiB, {} main segments of 2 MiB ({} per section), overprovision {:.3}% ({} segments, {} reserved), {} MiB for data",
        (g.block_count * 4096) >> 20,
        g.segment_count_main,
        g.segs_per_sec,
        g.overprovision,
        g.overprov_segments,
        g.reserved_segments,
        (g.user_block_count * 4096) >> 20
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn uuids_parse_with_or_without_dashes() {
        let want = [
            0x01, 0x23, 0xab, 0xcd, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0x01, 0x23, 0x45, 0x67,
            0x89, 0xab,
        ];
        assert_eq!(
            super::parse_uuid("0123abcd-4567-89ab-cdef-0123456789ab"),
            Ok(want)
        );
        assert_eq!(
            super::parse_uuid("0123ABCD456789abcdef0123456789ab"),
            Ok(want)
        );
        assert!(super::parse_uuid("0123abcd").is_err());
        assert!(super::parse_uuid("0123abcd-4567-89ab-cdef-0123456789ag").is_err());
        assert!(super::parse_uuid("+123abcd-4567-89ab-cdef-0123456789ab").is_err());
    }

    #[test]
    fn sizes_parse_with_suffixes() {
        assert_eq!(parse_size("512M"), Ok(512 << 20));
        assert_eq!(parse_size("1.5G"), Ok(3 << 29));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("2t"), Ok(2 << 40));
        assert!(parse_size("12Q").is_err());
        assert!(parse_size("-1G").is_err());
        assert!(parse_size("").is_err());
    }
}
