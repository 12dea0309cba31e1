//! Waiting for the writes the kernel holds for a FUSE mount, before `uf2fs sync` asks the
//! daemon for a checkpoint.
//!
//! `syncfs(2)` on a FUSE mount starts the writeback of every dirty page and writes the
//! inodes' times back (those requests are answered before it returns), but it does not wait
//! for the data writes it started: recent kernels skip FUSE mappings where `syncfs` waits (a
//! sync must not hang on a server that does not answer; Linux 6.18 on the test machines), and
//! older ones ended a page's writeback as soon as it was copied into the request. So the
//! WRITE requests can still be queued when `syncfs` returns, and a checkpoint written then
//! would miss them.
//!
//! `fsync(2)` does wait, for every write of its inode in flight. Only files that some process
//! holds open or mapped can have dirty pages (a close writes the file back and waits, and so
//! does the unmapping of a shared mapping), and /proc names them all: each one on this mount
//! is opened through its /proc link and fdatasync'd.
//!
//! Nothing of another file system is touched on the way: a descriptor's mount is read from
//! its `fdinfo` and a mapping's device from `maps` before any link is followed, so a hung
//! network mount elsewhere cannot hang the sync.

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

/// The file system whose held files are wanted: its device number, and the IDs of its
/// mounts (the mount and any bind mount of it) as /proc/PID/fdinfo names them.
#[derive(Debug, Clone)]
pub struct Target {
    pub dev: u64,
    pub mount_ids: Vec<u64>,
}

/// The file system directory `dir` is on, as a [`Target`], and its mount: found by the
/// mount ID the kernel gives the descriptor, whatever path named it; its bind mounts by the
/// device mountinfo gives them.
pub fn target_of(dir: &File) -> Result<(Target, uf2fs_fuse::MountInfo), String> {
    let dev = rustix::fs::fstat(dir).map_err(|e| e.to_string())?.st_dev;
    let info = fd_mount(Path::new(&format!(
        "/proc/self/fdinfo/{}",
        std::os::fd::AsRawFd::as_raw_fd(dir)
    )))
    .and_then(uf2fs_fuse::mount_info_by_id)
    .ok_or("its mount is not in /proc/self/mountinfo, so the files open on it cannot be found")?;
    let target = Target {
        dev,
        mount_ids: uf2fs_fuse::mount_ids_of(&info.device),
    };
    Ok((target, info))
}

/// Has every regular file of `target` that a process holds open or mapped written back,
/// waiting for each. A file that a write-back error hit fails the whole call, naming it; a
/// process or descriptor that goes away meanwhile is skipped.
pub fn wait_for_held_files(target: &Target) -> Result<Waited, String> {
    let (links, unreadable) = held_files(target)?;
    let mut files = 0;
    for link in links {
        files += write_back(&link)?;
    }
    Ok(Waited { files, unreadable })
}

/// A /proc link to each regular file of `target` held open or mapped (one per file, whoever
/// holds it how often), and how many processes could not be looked at.
fn held_files(target: &Target) -> Result<(Vec<PathBuf>, usize), String> {
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
        let pid = p.path();
        let mut candidates = Vec::new();
        let mut denied = false;
        match std::fs::read_dir(pid.join("fd")) {
            Ok(fds) => {
                for fd in fds.flatten() {
                    let info = pid.join("fdinfo").join(fd.file_name());
                    if fd_mount(&info).is_some_and(|id| target.mount_ids.contains(&id)) {
                        candidates.push(fd.path());
                    }
                }
            }
            Err(e) => denied |= e.kind() == io::ErrorKind::PermissionDenied,
        }
        match std::fs::read_to_string(pid.join("maps")) {
            Ok(maps) => {
                for range in mapped_from(&maps, target.dev) {
                    candidates.push(pid.join("map_files").join(range));
                }
            }
            Err(e) => denied |= e.kind() == io::ErrorKind::PermissionDenied,
        }
        for link in candidates {
            if held_here(&link, target.dev).is_some_and(|ino| seen.insert(ino)) {
                links.push(link);
            }
        }
        unreadable += usize::from(denied);
    }
    Ok((links, unreadable))
}

/// The mount ID an fdinfo file gives its descriptor.
fn fd_mount(info: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(info).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("mnt_id:"))
        .and_then(|v| v.trim().parse().ok())
}

/// The address ranges (`start-end`, as /proc/PID/map_files names them) of the mappings in a
/// `maps` text whose file is on device `dev` (`maps` writes it as hex `major:minor`).
fn mapped_from(maps: &str, dev: u64) -> Vec<String> {
    let want = (
        u64::from(rustix::fs::major(dev)),
        u64::from(rustix::fs::minor(dev)),
    );
    maps.lines()
        .filter_map(|l| {
            let mut f = l.split_ascii_whitespace();
            let range = f.next()?;
            let dev = f.nth(2)?;
            let inode: u64 = f.next()?.parse().ok()?;
            let (major, minor) = dev.split_once(':')?;
            let at = (
                u64::from_str_radix(major, 16).ok()?,
                u64::from_str_radix(minor, 16).ok()?,
            );
            (inode != 0 && at == want).then(|| range.to_string())
        })
        .collect()
}

/// The inode number of the regular file on `dev` that a /proc link leads to.
fn held_here(link: &Path, dev: u64) -> Option<u64> {
    // Follows the link (to a file of the mount: checked before): the file's own metadata.
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
    use std::os::fd::AsRawFd;

    /// A file this process holds open twice is found once and written back; a file system
    /// nobody uses gives nothing.
    #[test]
    fn files_held_open_on_the_mount_are_found_once() {
        let dir = std::env::temp_dir().join(format!("uf2fs-held-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("held");
        let mut a = File::create(&path).unwrap();
        a.write_all(&[7; 8192]).unwrap();
        let b = File::open(&path).unwrap();
        let dev = std::fs::metadata(&path).unwrap().dev();
        let info = format!("/proc/self/fdinfo/{}", b.as_raw_fd());
        let target = Target {
            dev,
            mount_ids: vec![fd_mount(Path::new(&info)).unwrap()],
        };
        let (links, _) = held_files(&target).unwrap();
        let ours = links
            .iter()
            .filter(|l| std::fs::read_link(l).is_ok_and(|t| t == path))
            .count();
        assert_eq!(ours, 1, "{links:?}");
        assert!(wait_for_held_files(&target).unwrap().files >= 1);
        let nobody = Target {
            dev: u64::MAX,
            mount_ids: vec![],
        };
        let (none, _) = held_files(&nobody).unwrap();
        assert!(none.is_empty(), "{none:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A file only mapped (this test's own program: no descriptor of it is matched, the
    /// target names no mount) is found through /proc/PID/maps and its map_files link.
    #[test]
    fn files_held_only_by_a_mapping_are_found() {
        let exe = std::env::current_exe().unwrap().canonicalize().unwrap();
        let meta = std::fs::metadata(&exe).unwrap();
        let target = Target {
            dev: meta.dev(),
            mount_ids: vec![],
        };
        let (links, _) = held_files(&target).unwrap();
        assert!(
            links
                .iter()
                .any(|l| l.to_string_lossy().contains("/map_files/")
                    && std::fs::read_link(l).is_ok_and(|t| t == exe)),
            "{links:?}"
        );
    }

    #[test]
    fn mappings_are_matched_by_their_device_in_hex() {
        let maps = "7f00-7f10 rw-s 00000000 00:58 1234    /mnt/f\n\
                    7f10-7f20 r--p 00000000 fe:00 99      /usr/bin/x\n\
                    7f20-7f30 rw-p 00000000 00:58 0       [heap]\n";
        let dev = rustix::fs::makedev(0, 0x58);
        assert_eq!(mapped_from(maps, dev), vec!["7f00-7f10".to_string()]);
        assert!(mapped_from(maps, rustix::fs::makedev(0, 0x59)).is_empty());
    }
}
