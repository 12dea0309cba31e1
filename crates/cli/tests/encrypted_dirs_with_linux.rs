//! Encrypted directories without their key, judged by Linux 6.1 (tools/linux-f2fs) on an
//! image made by `mkfs.f2fs -O encrypt` (with extra_attr, inode_checksum and sb_checksum).
//! The static helper `tests/images/fscrypt.c` sets the policies, lists trees and probes
//! changes in the guest, and runs on the host against a uf2fs FUSE mount alike.
//!
//! `nokey_view_equals_linux`:
//! 1. Linux adds a key and makes a v2 directory (AES-256-XTS/AES-256-CTS, names padded to
//!    32) and a v1 directory (padded to 4), each with names of 1, 15, 16, 100, 128, 129, 145,
//!    149 and 255 bytes (whole and SHA-256-abbreviated no-key names), a subdirectory with a
//!    file and a directory, a short, a 200-byte and a 1000-byte symlink, a hard link, and 300 names in one
//!    directory (dentry blocks, hash buckets); then unmounts, mounts again without the key
//!    and lists the tree: no-key names, inode numbers, entry and inode types, sizes, link
//!    counts, symlink targets and open answers. fsck.f2fs is clean.
//! 2. uf2fs (the engine, then a FUSE mount with the same lister) shows exactly that listing;
//!    every no-key name is found again by lookup; `uf2fs ls` lists the names, `cat` of an
//!    encrypted file fails naming the key, `stat` names the policy and key, `extract` makes
//!    the directories and symlinks, leaves the encrypted files out and says so (exit 1).
//! 3. Linux probes the encrypted directory without the key (create, mkdir, symlink, rename,
//!    link, truncate, chattr +F: ENOKEY; chmod works; unlink of a no-key name works) and
//!    lists again; uf2fs, through its mount on a copy, answers every probe alike and then
//!    lists what Linux lists. It also writes to the plain part (files, a directory, a rename of the encrypted
//!    directory itself) and removes an empty encrypted directory by its no-key name.
//!    fsck.f2fs is clean, and Linux lists exactly what uf2fs lists and reads the new plain
//!    files back.
//!
//! `encrypted_casefolded_dir_equals_linux`: a directory both encrypted and casefolded (its
//! stored hashes are keyed SipHashes that only Linux with the key can compute): uf2fs lists
//! Linux's no-key names and finds each again; an unlink by a no-key name through the mount
//! leaves fsck.f2fs clean.
//!
//! `fsync_in_encrypted_dirs_recovers_like_linux`: new files fsync'd in an encrypted and in
//! an encrypted casefolded directory, then a crash (F2FS_IOC_SHUTDOWN, no checkpoint); uf2fs
//! replays their entries by the ciphertext names their inodes record (the casefolded one by
//! the hash kept after the name) and lists what Linux lists after its own recovery; fsck.f2fs
//! is clean and Linux reads the image uf2fs recovered alike.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

use std::fs;
use std::path::Path;
use std::process::Command;
use uf2fs_engine::{Error, FileType, Fs};
use uf2fs_testkit::{
    assert_fsck_clean, image_helper, kernel_f2fs_args, run, scratch, try_run, Mount,
};

fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_uf2fs"))
}

/// The guest's part: make, list without the key.
const MAKE: &str = r#"
set -e
P=$PAYLOAD/fscrypt
M=/tmp/m; mkdir -p $M; mount -t f2fs /dev/vda $M; cd $M
mkdir e2 e1 plain
$P setup e2 v2 32 > $OUT/key2
$P setup e1 v1 4 > $OUT/key1
name() { printf "$1%.0s" $(seq $2); }
for d in e2 e1; do
  echo hello > $d/a
  echo x > $d/$(name b 15)
  head -c 70000 /dev/urandom > $d/$(name c 16)
  for n in d:100 e:128 f:129 g:145 h:149 i:255; do touch $d/$(name ${n%:*} ${n#*:}); done
  mkdir $d/sub; echo deep > $d/sub/file; mkdir $d/sub/inner
  ln -s a $d/shortlink
  ln -s $(name T 200) $d/longlink
  ln -s $(name U 1000) $d/verylonglink
  ln $d/a $d/hardlink
  echo v > $d/victim
  mkdir $d/many; i=0; while [ $i -lt 300 ]; do touch $d/many/file$i; i=$((i+1)); done
done
echo plain > plain/p
stat -c %i e2/victim > $OUT/victim
$P list $M > $OUT/with_key.txt
cd /; umount $M; mount -t f2fs /dev/vda $M
$P list $M > $OUT/nokey.txt
umount $M
"#;

/// The guest's part: probe without the key, list again.
const PROBE: &str = r#"
set -e
P=$PAYLOAD/fscrypt
M=/tmp/m; mkdir -p $M; mount -t f2fs /dev/vda $M
$P probe $M/e2 $(cat $PAYLOAD/victim) > $OUT/probe.txt
$P list $M > $OUT/after_probe.txt
umount $M
"#;

/// The guest's part: list what uf2fs left, and read its plain files.
const CHECK: &str = r#"
set -e
P=$PAYLOAD/fscrypt
M=/tmp/m; mkdir -p $M; mount -t f2fs /dev/vda $M
$P list $M > $OUT/list.txt
cat $M/plain/new > $OUT/new.txt
cat $M/plain/dir/deeper > $OUT/deeper.txt
umount $M
"#;

fn linux(img: &Path, job: &str, work: &Path, extra: &[&Path]) -> std::path::PathBuf {
    let helper = image_helper("fscrypt");
    let mut payload = vec![helper.as_path()];
    payload.extend_from_slice(extra);
    let k = kernel_f2fs_args(img, job, work, &payload, &["--no-mount"]);
    assert_eq!(k.exit, 0, "Linux job failed:\n{}", k.job_log);
    assert!(
        k.f2fs_complaints().is_empty(),
        "F2FS complained: {:?}",
        k.f2fs_complaints()
    );
    k.out
}

fn errno_name(e: &Error) -> String {
    match e.errno() {
        126 => "ENOKEY".into(),
        2 => "ENOENT".into(),
        117 => "EUCLEAN".into(),
        n => format!("errno {n}"),
    }
}

fn tchar(t: FileType) -> char {
    match t {
        FileType::Regular => 'f',
        FileType::Directory => 'd',
        FileType::Symlink => 'l',
        _ => 'o',
    }
}

/// The helper's `list`, spelled by the engine: the same walk (depth-first, readdir order).
fn engine_list(fs: &Fs) -> String {
    let mut out = String::new();
    fn walk(fs: &Fs, dir: u32, rel: &str, out: &mut String) {
        for e in fs.readdir(dir).unwrap() {
            let name = String::from_utf8(e.name.clone()).unwrap();
            let r = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            // The listed name finds the entry again.
            assert_eq!(fs.lookup(dir, &e.name).unwrap(), e.ino, "lookup {r}");
            let a = fs.getattr(e.ino).unwrap();
            let what = match a.file_type {
                FileType::Symlink => match fs.readlink(e.ino) {
                    Ok(t) => format!("link {}", String::from_utf8(t).unwrap()),
                    Err(err) => format!("link err {}", errno_name(&err)),
                },
                FileType::Regular => match fs.check_open(e.ino) {
                    Ok(()) => "open ok".into(),
                    Err(err) => format!("open err {}", errno_name(&err)),
                },
                _ => "-".into(),
            };
            out.push_str(&format!(
                "{r}\tino {}\tdtype {}\ttype {}\tsize {}\tnlink {}\t{what}\n",
                e.ino,
                e.file_type.map(tchar).unwrap_or('o'),
                tchar(a.file_type),
                a.size,
                a.nlink
            ));
            if a.file_type == FileType::Directory {
                walk(fs, e.ino, &r, out);
            }
        }
    }
    walk(fs, fs.root_ino(), "", &mut out);
    out
}

/// The helper's `list` run on the host against a uf2fs mount of `img`.
fn mount_list(img: &Path, mnt: &Path) -> String {
    let m = Mount::new(bin(), img, mnt, &[]);
    let l = run(Command::new(image_helper("fscrypt"))
        .arg("list")
        .arg(&m.dir));
    m.umount();
    l
}

#[test]
fn nokey_view_equals_linux() {
    let dir = scratch("encrypted_nokey_view");
    let img = dir.join("img");
    fs::File::create(&img).unwrap().set_len(256 << 20).unwrap();
    run(Command::new("mkfs.f2fs")
        .args([
            "-q",
            "-f",
            "-O",
            "extra_attr,inode_checksum,sb_checksum,encrypt",
        ])
        .arg(&img));

    // 1. Linux makes the tree and lists it without the key.
    let out = linux(&img, MAKE, &dir.join("make"), &[]);
    let nokey = fs::read_to_string(out.join("nokey.txt")).unwrap();
    let with_key = fs::read_to_string(out.join("with_key.txt")).unwrap();
    let key2 = fs::read_to_string(out.join("key2")).unwrap();
    let key1 = fs::read_to_string(out.join("key1")).unwrap();
    let victim = out.join("victim");
    assert_eq!(nokey.lines().count(), 2 * (18 + 300) + 4, "{nokey}");
    assert_eq!(with_key.lines().count(), nokey.lines().count());
    assert!(with_key.contains("e2/a\t"), "the key was there: {with_key}");
    assert!(!nokey.contains("e2/a\t"), "the key is gone: {nokey}");
    // Both forms of no-key names are there: 252 characters (abbreviated) and shorter.
    let lens: Vec<usize> = nokey
        .lines()
        .map(|l| {
            l.split('\t')
                .next()
                .unwrap()
                .rsplit('/')
                .next()
                .unwrap()
                .len()
        })
        .collect();
    assert!(
        lens.contains(&252) && lens.iter().any(|&n| n < 100),
        "{lens:?}"
    );
    assert_fsck_clean(&img);
    run(Command::new(bin()).arg("fsck").arg(&img));

    // 2. uf2fs shows Linux's listing, through the engine and through a mount.
    let fs_ = Fs::open(&img).unwrap();
    let mine = engine_list(&fs_);
    assert_eq!(mine, nokey, "engine listing differs from Linux's");
    let e2 = fs_.lookup(fs_.root_ino(), b"e2").unwrap();
    let enc = fs_.encryption(e2).unwrap().expect("e2 has a context");
    assert_eq!(format!("{}\n", enc.key), key2);
    assert_eq!(
        (enc.contents_mode, enc.filenames_mode, enc.padding()),
        (1, 4, 32)
    );
    let e1 = fs_.lookup(fs_.root_ino(), b"e1").unwrap();
    let enc1 = fs_.encryption(e1).unwrap().expect("e1 has a context");
    assert_eq!(format!("{}\n", enc1.key), key1);
    assert_eq!((enc1.version(), enc1.padding()), (1, 4));
    // A name that is not a no-key name finds nothing, as in Linux.
    assert!(matches!(fs_.lookup(e2, b"a"), Err(Error::NotFound)));
    // An encrypted file's contents need the key; the plain file reads.
    let a_line = nokey
        .lines()
        .find(|l| l.starts_with("e2/") && l.contains("\tsize 6\t"))
        .unwrap();
    let a_path = format!("/{}", a_line.split('\t').next().unwrap());
    let a_ino = fs_.resolve(a_path.as_bytes(), false).unwrap();
    let err = fs_.read(a_ino, 0, &mut [0u8; 16]).unwrap_err();
    assert_eq!(err.errno(), 126);
    assert!(err.to_string().contains(key2.trim()), "{err}");
    drop(fs_);
    assert_eq!(mount_list(&img, &dir.join("mnt")), nokey, "mount listing");

    // The CLI: ls, cat, stat, extract.
    let ls = run(Command::new(bin()).arg("ls").arg(&img).arg("/e2"));
    let mut want: Vec<&str> = nokey
        .lines()
        .map(|l| l.split('\t').next().unwrap())
        .filter_map(|p| p.strip_prefix("e2/"))
        .filter(|p| !p.contains('/'))
        .collect();
    want.sort_unstable();
    assert_eq!(ls.lines().collect::<Vec<_>>(), want, "uf2fs ls (sorted)");
    let (ok, _, err) = try_run(Command::new(bin()).arg("cat").arg(&img).arg(&a_path));
    assert!(!ok);
    assert!(
        err.contains("is encrypted and no key was given") && err.contains(key2.trim()),
        "{err}"
    );
    let st = run(Command::new(bin()).arg("stat").arg(&img).arg("/e2"));
    assert!(
        st.contains("encryption: v2 policy, contents AES-256-XTS, names AES-256-CTS")
            && st.contains(key2.trim()),
        "{st}"
    );
    let x = dir.join("extracted");
    let (ok, _, err) = try_run(Command::new(bin()).arg("extract").arg(&img).arg(&x));
    assert!(!ok, "extract must say it could not read everything");
    let regular_encrypted = nokey
        .lines()
        .filter(|l| l.contains("open err ENOKEY"))
        .count();
    assert!(
        err.contains(&format!(
            "{regular_encrypted} of them encrypted files, whose contents need a key"
        )),
        "{err}"
    );
    assert_eq!(fs::read_to_string(x.join("plain/p")).unwrap(), "plain\n");
    for l in nokey.lines() {
        let f: Vec<&str> = l.split('\t').collect();
        let p = x.join(f[0]);
        match f[3] {
            "type d" => assert!(p.is_dir(), "{l}"),
            "type l" => assert_eq!(
                fs::read_link(&p).unwrap().to_str().unwrap(),
                f[6].strip_prefix("link ").unwrap(),
                "{l}"
            ),
            _ if l.ends_with("open err ENOKEY") => {
                assert!(fs::symlink_metadata(&p).is_err(), "{l}: no file is made")
            }
            _ => assert!(p.is_file(), "{l}"),
        }
    }

    // 3. Probes without the key: Linux on the image, uf2fs through its mount on a copy.
    let copy = dir.join("copy");
    fs::copy(&img, &copy).unwrap();
    let out = linux(&img, PROBE, &dir.join("probe"), &[&victim]);
    let linux_probe = fs::read_to_string(out.join("probe.txt")).unwrap();
    let linux_after = fs::read_to_string(out.join("after_probe.txt")).unwrap();
    assert!(linux_probe.contains("create err ENOKEY"), "{linux_probe}");
    assert!(linux_probe.contains("unlink ok"), "{linux_probe}");
    assert!(linux_probe.contains("casefold err ENOKEY"), "{linux_probe}");
    let m = Mount::new(bin(), &copy, &dir.join("mnt"), &[]);
    let victim_ino = fs::read_to_string(&victim).unwrap();
    let mine = run(Command::new(image_helper("fscrypt"))
        .arg("probe")
        .arg(m.dir.join("e2"))
        .arg(victim_ino.trim()));
    assert_eq!(mine, linux_probe, "probe answers");
    let mine = run(Command::new(image_helper("fscrypt"))
        .arg("list")
        .arg(&m.dir));
    assert_eq!(mine, linux_after, "listing after the probes");
    // The plain part stays writable.
    fs::write(m.dir.join("plain/new"), b"written by uf2fs\n").unwrap();
    fs::create_dir(m.dir.join("plain/dir")).unwrap();
    fs::write(m.dir.join("plain/dir/deeper"), vec![7u8; 100_000]).unwrap();
    fs::rename(m.dir.join("e1"), m.dir.join("plain/e1-moved")).unwrap();
    fs::remove_file(m.dir.join("plain/p")).unwrap();
    // An empty encrypted directory goes by its no-key name, as in Linux.
    let inner = linux_after
        .lines()
        .map(|l| l.split('\t').collect::<Vec<_>>())
        .find(|f| f[0].starts_with("e2/") && f[0].matches('/').count() == 2 && f[3] == "type d")
        .map(|f| f[0].to_owned())
        .unwrap();
    fs::remove_dir(m.dir.join(&inner)).unwrap();
    m.umount();
    assert_fsck_clean(&copy);
    let mine = mount_list(&copy, &dir.join("mnt"));
    let out = linux(&copy, CHECK, &dir.join("check"), &[]);
    assert_eq!(
        fs::read_to_string(out.join("list.txt")).unwrap(),
        mine,
        "Linux lists what uf2fs left"
    );
    assert!(mine.contains("plain/e1-moved/"), "{mine}");
    assert!(!mine.contains(&format!("{inner}\t")), "{mine}");
    assert_eq!(
        fs::read_to_string(out.join("new.txt")).unwrap(),
        "written by uf2fs\n"
    );
    assert_eq!(
        fs::read(out.join("deeper.txt")).unwrap(),
        vec![7u8; 100_000]
    );
    assert_fsck_clean(&copy);
}

/// The guest's part for an encrypted and casefolded directory (the stored hashes are Linux's
/// keyed SipHash of the folded plaintext: only the hash in the no-key name finds them).
const CASEFOLD: &str = r#"
set -e
P=$PAYLOAD/fscrypt
M=/tmp/m; mkdir -p $M; mount -t f2fs /dev/vda $M; cd $M
mkdir cf
$P setup cf v2 32 > /dev/null
$PAYLOAD/casefold setflag cf > $OUT/setflag
echo x > cf/ReadMe.TXT
echo y > cf/Straße
i=0; while [ $i -lt 120 ]; do touch cf/File$i; i=$((i+1)); done
cat cf/README.txt > $OUT/ci_lookup
cd /; umount $M; mount -t f2fs /dev/vda $M
$P list $M > $OUT/nokey.txt
umount $M
"#;

#[test]
fn encrypted_casefolded_dir_equals_linux() {
    let dir = scratch("encrypted_casefold");
    let img = dir.join("img");
    fs::File::create(&img).unwrap().set_len(128 << 20).unwrap();
    run(Command::new("mkfs.f2fs")
        .args(["-q", "-f", "-O", "encrypt,casefold", "-C", "utf8"])
        .arg(&img));
    let cf = image_helper("casefold");
    let out = linux(&img, CASEFOLD, &dir.join("make"), &[&cf]);
    assert_eq!(fs::read_to_string(out.join("setflag")).unwrap(), "ok\n");
    assert_eq!(
        fs::read_to_string(out.join("ci_lookup")).unwrap(),
        "x\n",
        "casefolded with the key"
    );
    let nokey = fs::read_to_string(out.join("nokey.txt")).unwrap();
    assert_eq!(nokey.lines().count(), 1 + 122, "{nokey}");
    assert_fsck_clean(&img);
    run(Command::new(bin()).arg("fsck").arg(&img));
    let fs_ = Fs::open(&img).unwrap();
    assert_eq!(
        engine_list(&fs_),
        nokey,
        "engine listing differs from Linux's"
    );
    drop(fs_);
    // Unlinking by a no-key name through the mount (Linux allows it without the key).
    let m = Mount::new(bin(), &img, &dir.join("mnt"), &[]);
    let first = nokey.lines().nth(1).unwrap().split('\t').next().unwrap();
    fs::remove_file(m.dir.join(first)).unwrap();
    assert!(fs::symlink_metadata(m.dir.join(first)).is_err());
    m.umount();
    assert_fsck_clean(&img);
    let after = mount_list(&img, &dir.join("mnt"));
    let want: String = nokey
        .lines()
        .filter(|l| !l.starts_with(&format!("{first}\t")))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(after, want);
}

/// The guest's part of a crash: files made and fsync'd in an encrypted and in an encrypted
/// casefolded directory after the last checkpoint, then F2FS_IOC_SHUTDOWN without a sync.
const CRASH: &str = r#"
set -e
P=$PAYLOAD/fscrypt
M=/tmp/m; mkdir -p $M; mount -t f2fs /dev/vda $M; cd $M
mkdir e2 cf
$P setup e2 v2 32 > /dev/null
$P setup cf v2 16 > /dev/null
$PAYLOAD/casefold setflag cf > /dev/null
echo old > e2/old
echo old > cf/Old
sync
head -c 9000 /dev/urandom > e2/newfile
echo hello > cf/NewFile
$PAYLOAD/shutdown fsync e2/newfile cf/NewFile
$PAYLOAD/shutdown $M nosync
cd /; umount $M || true
"#;

/// The guest's part after a crash or a recovery: mount (Linux recovers what it finds), list.
const LIST: &str = r#"
set -e
M=/tmp/m; mkdir -p $M; mount -t f2fs /dev/vda $M
$PAYLOAD/fscrypt list $M > $OUT/list.txt
umount $M
"#;

#[test]
fn fsync_in_encrypted_dirs_recovers_like_linux() {
    let dir = scratch("encrypted_recovery");
    let img = dir.join("img");
    fs::File::create(&img).unwrap().set_len(128 << 20).unwrap();
    run(Command::new("mkfs.f2fs")
        .args(["-q", "-f", "-O", "encrypt,casefold", "-C", "utf8"])
        .arg(&img));
    let cf = image_helper("casefold");
    let sd = image_helper("shutdown");
    linux(&img, CRASH, &dir.join("crash"), &[&cf, &sd]);
    let copy = dir.join("copy");
    fs::copy(&img, &copy).unwrap();
    // Linux recovers a copy of the crash image and lists it without the key.
    let linux_list =
        fs::read_to_string(linux(&copy, LIST, &dir.join("linux-recovers"), &[]).join("list.txt"))
            .unwrap();
    assert!(linux_list.contains("\tsize 9000\t"), "{linux_list}");
    assert_eq!(linux_list.lines().count(), 6, "{linux_list}");
    // uf2fs replays the same chain: in memory, then for good.
    let fs_ = Fs::open(&img).unwrap();
    assert!(
        fs_.mount_notes()
            .iter()
            .any(|n| n.contains("2 files, 2 entries")),
        "{:?}",
        fs_.mount_notes()
    );
    assert_eq!(engine_list(&fs_), linux_list, "read-only replay");
    drop(fs_);
    let fs_ = Fs::open_rw(&img).unwrap();
    assert_eq!(engine_list(&fs_), linux_list, "writable replay");
    fs_.unmount().unwrap();
    assert_fsck_clean(&img);
    let after =
        fs::read_to_string(linux(&img, LIST, &dir.join("linux-after"), &[]).join("list.txt"))
            .unwrap();
    assert_eq!(after, linux_list, "Linux reads what uf2fs recovered");
}
