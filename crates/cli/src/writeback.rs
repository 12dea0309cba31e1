//! Waiting for the writes the kernel holds for a FUSE mount, before `uf2fs sync` asks the
//! daemon for a checkpoint.
//!
//! `syncfs(2)` on a FUSE mount starts the writeback of every dirty page and writes the
//! inodes' times back (those requests are answered before it returns), but it does not wait
//! for the data writes it started: recent kernels skip FUSE mappings where `syncfs` waits (a
//! sync must not hang on a server that does not answer; Linux 6.18 on the test machines), and
//! older ones ended a page's writeback as soon as it was copied into the request. So the WRITE requests can
//! still be queued when `syncfs` returns, and a checkpoint written then would miss them.
//!
//! `fsync(2)` does wait, for every write of its inode in flight. Only files that some process
//! holds open or mapped can have dirty pages (a close writes the file back and waits, and so
//! does the unmapping of a shared mapping), and /proc names them all: each one on this mount
//! is opened through its /proc link and fdatasync'd.

use std::collections::HashSet;
use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// What waiting for a mount's held files came to.
#[derive(Debug, Default)]
pub struct Waited {
    /// Distinct files of the mount found open or mapped and fdatasync'd.
    pub files: usize,
    /// Processes whose open files this caller may not look at (another user's, not root).
    pub unreadable: usize,
}

/// Has every regular file of the file system `dev` that a process holds open or mapped
/// written back, waiting for each. A file that a write-back error hit fails the whole call,
/// naming it; a process or descriptor that goes away meanwhile is skipped.
pub fn wait_for_held_files(dev: u64) -> Result<Waited, String> {
    let (links, unreadable) = held_files(dev)?;
    let mut files = 0;
    for link in links {
        files += write_back(&link)?;
    }
    Ok(Waited { files, unreadable })
}

/// A /proc link to each regular file of `dev` held open or mapped (one per file, whoever
/// holds it how often), and how many processes could not be looked at.
fn held_files(dev: u64) -> Result<(Vec<PathBuf>, usize), String> {
    let mut links = Vec::new();
    let mut unreadable = 0;
    let mut seen = HashSet::new();
    let procs = std::fs::read_dir("/proc").map_err(|e| format!("/proc: {e}"))?;
    for p in procs.flatten() {
        let name = p.file_name();
        if !name
            .to_str()
            .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        {
            continue;
        }
        let mut denied = false;
        for list in ["fd", "map_files"] {
            let entries = match std::fs::read_dir(p.path().join(list)) {
                Ok(entries) => entries,
                Err(e) => {
                    denied |= e.kind() == io::ErrorKind::PermissionDenied;
                    continue;
                }
            };
            for link in entries.flatten().map(|e| e.path()) {
                if held_here(&link, dev).is_some_and(|ino| seen.insert(ino)) {
                    links.push(link);
                }
            }
        }
        unreadable += usize::from(denied);
    }
    Ok((links, unreadable))
}

/// The inode number of the regular file on `dev` that a /proc link leads to.
fn held_here(link: &Path, dev: u64) -> Option<u64> {
    // Follows the link: the metadata of the file itself, not of the link.
    let meta = std::fs::metadata(link).ok()?;
    (meta.is_file() && meta.dev() == dev).then(|| meta.ino())
}

/// Opens the file through its /proc link and fdatasyncs it: 1 if it was written back, 0 if
/// it went away first.
fn write_back(link: &Path) -> Result<usize, String> {
    let name = || std::fs::read_link(link).unwrap_or_else(|_| PathBuf::from(link));
    let file = match File::open(link) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(e) => {
            return Err(format!(
                "opening {} to write it back: {e}",
                name().display()
            ))
        }
    };
    file.sync_data()
        .map_err(|e| format!("writing back {}: {e}", name().display()))?;
    Ok(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A file this process holds open twice is found once and written back; a file system
    /// nobody uses gives nothing.
    #[test]
    fn files_held_open_on_the_device_are_found_once() {
        let dir = std::env::temp_dir().join(format!("uf2fs-held-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("held");
        let mut a = File::create(&path).unwrap();
        a.write_all(b"data").unwrap();
        let _b = File::open(&path).unwrap();
        let dev = std::fs::metadata(&path).unwrap().dev();
        let (links, _) = held_files(dev).unwrap();
        let ours = links
            .iter()
            .filter(|l| std::fs::read_link(l).is_ok_and(|t| t == path))
            .count();
        assert_eq!(ours, 1, "{links:?}");
        assert!(wait_for_held_files(dev).unwrap().files >= 1);
        let (none, _) = held_files(u64::MAX).unwrap();
        assert!(none.is_empty(), "{none:?}");
        drop(a);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
