//! Android's canned `fs_config` text (what `sload.f2fs -C` and e2fsdroid read), as
//! `uf2fs import --fs-config` reads it: owner, group, permission bits and file capabilities
//! by path. Our own parser; see "Android-style builds" in docs/design.md.
//!
//! A line is `PATH UID GID MODE [capabilities=N] [selabel=...]`, fields separated by spaces
//! or tabs. PATH has no leading `/` (one is dropped if there) and names the file as the
//! device will see it, under the mount point (`system/bin/sh` for `--mount-point /system`);
//! a line that starts with a blank, or PATH `/`, is the mount point's own directory. A PATH
//! with spaces is written between `'` or `"`. UID and GID are decimal, MODE octal (at most
//! 07777), `capabilities=` a number in C notation (`0x` hex, leading-`0` octal, or decimal);
//! `selabel=` is accepted and ignored, as Android's loader does (labels come from
//! file_contexts). When a path has several lines the last one counts. Blank lines are
//! skipped; anything else malformed is an error naming the file and line.

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;

/// What one line says of a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub uid: u32,
    pub gid: u32,
    /// Permission, set-id and sticky bits.
    pub mode: u16,
    /// Capability bits for `security.capability` (0: none).
    pub capabilities: u64,
}

/// A parsed fs_config: entries by path (no leading `/`; `""` is the mount point itself).
#[derive(Debug, Default)]
pub struct FsConfig {
    entries: HashMap<Vec<u8>, Entry>,
}

/// Reads at most `max` bytes of `path`, refusing a longer file.
pub(crate) fn read_limited(path: &Path, max: u64) -> Result<Vec<u8>, String> {
    let f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut text = Vec::new();
    f.take(max + 1)
        .read_to_end(&mut text)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if text.len() as u64 > max {
        return Err(format!(
            "{}: longer than {} MiB; not a configuration file?",
            path.display(),
            max >> 20
        ));
    }
    Ok(text)
}

/// A number as C's strtoull with base 0 reads it, but whole: `0x1f`, `017`, `15`.
fn c_number(s: &[u8]) -> Option<u64> {
    let s = std::str::from_utf8(s).ok()?;
    let (digits, radix) = if let Some(h) = s.strip_prefix("0x").or(s.strip_prefix("0X")) {
        (h, 16)
    } else if s.len() > 1 && s.starts_with('0') {
        (s.get(1..)?, 8)
    } else {
        (s, 10)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

fn decimal_u32(s: &[u8]) -> Option<u32> {
    if s.is_empty() || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(s).ok()?.parse().ok()
}

/// Splits a line into its path and the rest.
fn split_path(line: &[u8]) -> Result<(&[u8], &[u8]), String> {
    match line.first() {
        Some(&q) if q == b'"' || q == b'\'' => {
            let rest = line.get(1..).unwrap_or(&[]);
            let end = rest
                .iter()
                .position(|&b| b == q)
                .ok_or("the quoted path has no closing quote")?;
            Ok((
                rest.get(..end).unwrap_or(&[]),
                rest.get(end + 1..).unwrap_or(&[]),
            ))
        }
        _ => {
            let end = line
                .iter()
                .position(|b| *b == b' ' || *b == b'\t')
                .unwrap_or(line.len());
            Ok((
                line.get(..end).unwrap_or(&[]),
                line.get(end..).unwrap_or(&[]),
            ))
        }
    }
}

/// Checks a path of the file: relative components only, none empty, `.` or `..`.
fn check_path(path: &[u8]) -> Result<(), String> {
    if path.is_empty() {
        return Ok(());
    }
    for c in path.split(|&b| b == b'/') {
        match c {
            b"" => return Err("the path has an empty component (// or a trailing /)".into()),
            b"." | b".." => {
                return Err(format!(
                    "the path has a {:?} component; paths name files below the mount point",
                    String::from_utf8_lossy(c)
                ))
            }
            _ if c.contains(&0) => return Err("the path holds a NUL byte".into()),
            _ => {}
        }
    }
    Ok(())
}

fn parse_line(line: &[u8]) -> Result<(Vec<u8>, Entry), String> {
    // Android's loader reads a line that starts with a blank as the root's.
    let (path, rest) = if line.starts_with(b" ") || line.starts_with(b"\t") {
        (&b""[..], line)
    } else {
        split_path(line)?
    };
    let path = path.strip_prefix(b"/").unwrap_or(path);
    check_path(path)?;
    let fields: Vec<&[u8]> = rest
        .split(|b| *b == b' ' || *b == b'\t')
        .filter(|f| !f.is_empty())
        .collect();
    let [uid, gid, mode, extra @ ..] = fields.as_slice() else {
        return Err("want PATH UID GID MODE [capabilities=N]".into());
    };
    let shown = |f: &[u8]| String::from_utf8_lossy(f).into_owned();
    let uid = decimal_u32(uid).ok_or_else(|| format!("uid {:?} is not a number", shown(uid)))?;
    let gid = decimal_u32(gid).ok_or_else(|| format!("gid {:?} is not a number", shown(gid)))?;
    let mode = std::str::from_utf8(mode)
        .ok()
        .filter(|m| !m.is_empty() && m.bytes().all(|b| (b'0'..=b'7').contains(&b)))
        .and_then(|m| u32::from_str_radix(m, 8).ok())
        .filter(|&m| m <= 0o7777)
        .ok_or_else(|| {
            format!(
                "mode {:?} is not octal permission bits (0 to 7777)",
                shown(mode)
            )
        })? as u16;
    let mut capabilities = 0;
    for f in extra {
        if let Some(v) = f.strip_prefix(b"capabilities=") {
            capabilities = c_number(v)
                .ok_or_else(|| format!("capabilities {:?} is not a number", shown(v)))?;
        } else if !f.starts_with(b"selabel=") {
            return Err(format!(
                "unknown field {:?} (only capabilities= and selabel= may follow the mode)",
                shown(f)
            ));
        }
    }
    Ok((
        path.to_vec(),
        Entry {
            uid,
            gid,
            mode,
            capabilities,
        },
    ))
}

impl FsConfig {
    /// Reads and parses `path`; errors name the file and line.
    pub fn load(path: &Path) -> Result<FsConfig, String> {
        let text = read_limited(path, 256 << 20)?;
        FsConfig::parse(&text, &path.display().to_string())
    }

    /// Parses the text of an fs_config; `name` is the file's name for errors.
    pub fn parse(text: &[u8], name: &str) -> Result<FsConfig, String> {
        let mut entries = HashMap::new();
        for (i, line) in text.split(|&b| b == b'\n').enumerate() {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.iter().all(|b| *b == b' ' || *b == b'\t') {
                continue;
            }
            let (path, e) = parse_line(line).map_err(|e| format!("{name}:{}: {e}", i + 1))?;
            entries.insert(path, e);
        }
        Ok(FsConfig { entries })
    }

    /// The entry of `path` (relative to the mount point's parent, no leading `/`).
    pub fn lookup(&self, path: &[u8]) -> Option<&Entry> {
        self.entries.get(path)
    }
}

/// `security.capability` for `caps` as the kernel stores it: `struct vfs_cap_data` revision
/// 2 (20 bytes, little-endian): magic 0x02000000 with the effective flag (1) set, then
/// permitted and inheritable for capabilities 0-31, then for 32-63. Inheritable is empty,
/// as Android's image tools write it. No capabilities: no xattr (`None`).
pub fn vfs_cap_data(caps: u64) -> Option<[u8; 20]> {
    if caps == 0 {
        return None;
    }
    let mut v = [0u8; 20];
    let words = [0x0200_0001u32, caps as u32, 0, (caps >> 32) as u32, 0];
    for (chunk, w) in v.chunks_exact_mut(4).zip(words) {
        chunk.copy_from_slice(&w.to_le_bytes());
    }
    Some(v)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test code")]
    use super::{vfs_cap_data, Entry, FsConfig};

    fn entry(uid: u32, gid: u32, mode: u16, capabilities: u64) -> Entry {
        Entry {
            uid,
            gid,
            mode,
            capabilities,
        }
    }

    #[test]
    fn android_lines_parse() {
        let f = FsConfig::parse(
            b" 0 0 0755\nsystem/bin 0 2000 0751\nsystem/bin/ping 0 2000 04750 capabilities=0x3000\n\
              /system/xbin/su\t0\t2000 06755 selabel=u:object_r:su_exec:s0 capabilities=0\n\
              \"system/a b\" 1000 1000 0644\n\nsystem/caps 0 0 0755 capabilities=8589934592\n",
            "fsc",
        )
        .unwrap();
        assert_eq!(f.lookup(b""), Some(&entry(0, 0, 0o755, 0)));
        assert_eq!(f.lookup(b"system/bin"), Some(&entry(0, 2000, 0o751, 0)));
        assert_eq!(
            f.lookup(b"system/bin/ping"),
            Some(&entry(0, 2000, 0o4750, 0x3000))
        );
        assert_eq!(
            f.lookup(b"system/xbin/su"),
            Some(&entry(0, 2000, 0o6755, 0))
        );
        assert_eq!(f.lookup(b"system/a b"), Some(&entry(1000, 1000, 0o644, 0)));
        assert_eq!(f.lookup(b"system/caps").unwrap().capabilities, 1 << 33);
        assert_eq!(f.lookup(b"system"), None);
    }

    #[test]
    fn the_last_line_for_a_path_counts() {
        let f = FsConfig::parse(b"a 0 0 0755\na 1 2 0700\n", "fsc").unwrap();
        assert_eq!(f.lookup(b"a"), Some(&entry(1, 2, 0o700, 0)));
    }

    #[test]
    fn malformed_lines_are_refused_with_their_line() {
        let cases: [(&[u8], &str); 10] = [
            (b"a 0 0 0755\nb 0 0\n", "fsc:2: want PATH UID GID MODE"),
            (b"a x 0 0755\n", "fsc:1: uid \"x\" is not a number"),
            (b"a 0 -1 0755\n", "fsc:1: gid \"-1\" is not a number"),
            (b"a 0 0 0758\n", "fsc:1: mode \"0758\" is not octal"),
            (b"a 0 0 170755\n", "fsc:1: mode \"170755\" is not octal"),
            (
                b"a 0 0 0755 capabilities=0xq\n",
                "fsc:1: capabilities \"0xq\"",
            ),
            (
                b"a 0 0 0755 capabilites=1\n",
                "fsc:1: unknown field \"capabilites=1\"",
            ),
            (
                b"a/../../etc 0 0 0755\n",
                "fsc:1: the path has a \"..\" component",
            ),
            (b"a//b 0 0 0755\n", "fsc:1: the path has an empty component"),
            (
                b"\"a b 0 0 0755\n",
                "fsc:1: the quoted path has no closing quote",
            ),
        ];
        for (text, want) in cases {
            let e = FsConfig::parse(text, "fsc").unwrap_err();
            assert!(e.starts_with(want), "{e} (want {want})");
        }
        let e = FsConfig::parse(b"a 0 0 0755\n\nb 99999999999 0 0755\n", "fsc").unwrap_err();
        assert!(e.starts_with("fsc:3: uid"), "{e}");
    }

    #[test]
    fn capabilities_are_stored_as_vfs_cap_data_revision_2() {
        assert_eq!(vfs_cap_data(0), None);
        let v = vfs_cap_data(0x1_0000_3000).unwrap();
        assert_eq!(
            v,
            [0x01, 0, 0, 0x02, 0x00, 0x30, 0, 0, 0, 0, 0, 0, 0x01, 0, 0, 0, 0, 0, 0, 0]
        );
    }
}
