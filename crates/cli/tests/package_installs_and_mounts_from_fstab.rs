//! The Debian package (`scripts/deb.sh`, cargo-deb) holds the binary, the mount(8) helper, the
//! manual pages and the completions and depends on fuse3; installed with dpkg, its binary and
//! helper mount an image through `mount -t fuse.uf2fs` and through an fstab line (`mount -a`
//! and `mount DIR` with a fstab of the test's own), `umount` lets the daemon write its final
//! checkpoint, and fsck.f2fs finds the image clean each time.
//!
//! It installs into this machine (as CI does, as root) and puts the machine back: the package
//! is removed unless it was installed before, and a helper that no package owned (one left by
//! scripts/fstests.sh) is restored.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;
use uf2fs_testkit::{assert_fsck_clean, root, run, scratch, try_run};

const HELPER: &str = "/sbin/mount.fuse.uf2fs";
const BIN: &str = "/usr/bin/uf2fs";

/// The package installed for the test; dropping it puts the machine back as it was.
struct Installed {
    was_installed: bool,
    /// A helper no package owned, with its mode.
    helper_before: Option<(Vec<u8>, u32)>,
    mounts: Vec<PathBuf>,
}

impl Installed {
    fn new(deb: &Path, mounts: &[PathBuf]) -> Installed {
        let (was_installed, status, _) =
            try_run(Command::new("dpkg-query").args(["-W", "-f=${Status}", "uf2fs"]));
        let was_installed = was_installed && status.contains("install ok installed");
        let owned = try_run(Command::new("dpkg").args(["-S", HELPER])).0;
        let helper_before = match std::fs::read(HELPER) {
            Ok(bytes) if !owned => {
                let mode = std::fs::metadata(HELPER).unwrap().permissions().mode();
                Some((bytes, mode))
            }
            _ => None,
        };
        let guard = Installed {
            was_installed,
            helper_before,
            mounts: mounts.to_vec(),
        };
        run(Command::new("dpkg").arg("-i").arg(deb));
        guard
    }
}

impl Drop for Installed {
    fn drop(&mut self) {
        for m in self.mounts.iter().filter(|m| is_mounted(m)) {
            let _ = Command::new("fusermount3").arg("-uz").arg(m).status();
        }
        if !self.was_installed {
            let _ = Command::new("dpkg").args(["-r", "uf2fs"]).output();
        }
        if let Some((bytes, mode)) = &self.helper_before {
            let _ = std::fs::write(HELPER, bytes);
            let _ = std::fs::set_permissions(HELPER, std::fs::Permissions::from_mode(*mode));
        }
    }
}

fn is_mounted(dir: &Path) -> bool {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let dir = dir.to_str().unwrap();
    info.lines()
        .any(|l| l.split(' ').nth(4) == Some(dir) && l.contains(" - fuse"))
}

/// The daemon's pid, from the package's `uf2fs status`.
fn daemon_pid(dir: &Path) -> u32 {
    let st = run(Command::new(BIN).arg("status").arg("--json").arg(dir));
    let v: serde_json::Value = serde_json::from_str(&st).unwrap();
    v["pid"].as_u64().expect("daemon pid") as u32
}

/// Unmounts with plain umount(8), then waits for the daemon to write its final checkpoint and
/// exit (umount returns first; see docs/design.md, "The mount").
fn umount_and_wait(dir: &Path) {
    let pid = daemon_pid(dir);
    run(Command::new("umount").arg(dir));
    assert!(
        !is_mounted(dir),
        "{} still mounted after umount",
        dir.display()
    );
    let stat = PathBuf::from(format!("/proc/{pid}/stat"));
    for _ in 0..6000 {
        let s = std::fs::read_to_string(&stat).unwrap_or_default();
        if s.is_empty() || s.contains(") Z ") {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("the uf2fs daemon (pid {pid}) did not exit after umount");
}

#[test]
fn package_installs_and_mounts_through_mount_and_fstab() {
    assert!(
        rustix::process::geteuid().is_root(),
        "this test installs a package and mounts: run it as root (CI does)"
    );
    let t = Instant::now();
    let deb = run(Command::new("bash")
        .arg(root().join("scripts/deb.sh"))
        .args(["--profile", "dev", "--no-build"]));
    let deb = PathBuf::from(
        deb.lines()
            .last()
            .expect("deb.sh prints the package")
            .trim(),
    );
    eprintln!("package {} built in {:.1?}", deb.display(), t.elapsed());

    let contents = run(Command::new("dpkg").arg("-c").arg(&deb));
    for path in [
        "./usr/bin/uf2fs",
        "./sbin/mount.fuse.uf2fs",
        "./usr/share/man/man1/uf2fs.1.gz",
        "./usr/share/man/man1/uf2fs-mount.1.gz",
        "./usr/share/man/man1/uf2fs-mkfs.1.gz",
        "./usr/share/bash-completion/completions/uf2fs",
        "./usr/share/zsh/vendor-completions/_uf2fs",
        "./usr/share/fish/vendor_completions.d/uf2fs.fish",
    ] {
        assert!(
            contents.lines().any(|l| l.ends_with(&format!(" {path}"))),
            "{path} is not in the package:\n{contents}"
        );
    }
    let depends = run(Command::new("dpkg-deb")
        .args(["-f"])
        .arg(&deb)
        .arg("Depends"));
    assert!(depends.contains("fuse3"), "Depends: {depends}");

    let dir = scratch("package");
    let img = dir.join("a.img");
    let mnt = dir.join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let installed = Installed::new(&deb, std::slice::from_ref(&mnt));
    run(Command::new(BIN)
        .arg("mkfs")
        .arg(&img)
        .args(["--size", "128M"]));
    let (_, man, err) = try_run(Command::new("man").args(["-w", "uf2fs-mount"]));
    assert!(
        man.contains("/usr/share/man/man1/uf2fs-mount.1"),
        "man does not find the installed page ({man}{err}); a dpkg path-exclude for \
         /usr/share/man (slim images) would drop it"
    );

    // 1. mount -t fuse.uf2fs, with options only fstab means among the daemon's own.
    run(Command::new("mount")
        .args(["-t", "fuse.uf2fs"])
        .arg(&img)
        .arg(&mnt)
        .args(["-o", "defaults,allow_other,nofail,x-uf2fs.test=1,noatime"]));
    // The helper returns once the mount is live.
    assert!(
        is_mounted(&mnt),
        "mount -t fuse.uf2fs returned before the mount was live"
    );
    std::fs::write(mnt.join("by-mount-t"), b"written through mount -t\n").unwrap();
    umount_and_wait(&mnt);
    assert_fsck_clean(&img);

    // 2. An fstab line, with mount -a (a fstab of the test's own).
    let fstab = dir.join("fstab");
    std::fs::write(
        &fstab,
        format!(
            "# uf2fs package test\n{} {} fuse.uf2fs defaults,allow_other,_netdev,comment=test 0 0\n",
            img.display(),
            mnt.display()
        ),
    )
    .unwrap();
    run(Command::new("mount").arg("-a").arg("-T").arg(&fstab));
    assert!(is_mounted(&mnt), "mount -a did not mount {}", mnt.display());
    assert_eq!(
        std::fs::read(mnt.join("by-mount-t")).unwrap(),
        b"written through mount -t\n"
    );
    std::fs::write(mnt.join("by-mount-a"), vec![7u8; 300_000]).unwrap();
    // mount -a again leaves a mounted line alone.
    run(Command::new("mount").arg("-a").arg("-T").arg(&fstab));
    umount_and_wait(&mnt);
    assert_fsck_clean(&img);

    // 3. The same line by its directory: mount DIR.
    run(Command::new("mount").arg("-T").arg(&fstab).arg(&mnt));
    assert!(
        is_mounted(&mnt),
        "mount DIR did not mount {}",
        mnt.display()
    );
    assert_eq!(
        std::fs::read(mnt.join("by-mount-a")).unwrap(),
        vec![7u8; 300_000]
    );
    std::fs::remove_file(mnt.join("by-mount-t")).unwrap();
    umount_and_wait(&mnt);
    assert_fsck_clean(&img);
    // The image holds what the mounts wrote.
    let ls = run(Command::new(BIN).arg("ls").arg(&img));
    assert_eq!(ls.split_whitespace().collect::<Vec<_>>(), ["by-mount-a"]);

    drop(installed);
    eprintln!("whole test {:.1?}", t.elapsed());
    let _ = std::fs::remove_dir_all(&dir);
}
