//! Test and benchmark support. Builds real images with Debian's `mkfs.f2fs` and `sload.f2fs`
//! from seeded source trees, and calls the repository's own judges in `tools/`: `treeview`
//! (tree views, built static once per target dir), `f2fs-verdict` (fsck.f2fs's verdict) and
//! `linux-f2fs` (Linux's F2FS under qemu). Panics with a clear message when a judge cannot
//! run: tests need `scripts/setup.sh` to have run.

use std::fs;
use std::io::Write;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap_or_else(|_| PathBuf::from("."))
}

/// The repository's judges: `tools/` at the workspace root.
pub fn tools() -> PathBuf {
    root().join("tools")
}

/// A fresh scratch directory under target/, unique to this call. The first call of a test
/// process removes the directories of test processes that are no longer running.
pub fn scratch(name: &str) -> PathBuf {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    static SWEPT: std::sync::Once = std::sync::Once::new();
    let top = root().join("target/scratch");
    SWEPT.call_once(|| sweep(&top));
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let d = top.join(format!("{name}-{}-{n}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).expect("create scratch dir");
    d
}

/// Removes the scratch directories (`name-PID-n`) whose process is gone. Every test process
/// makes its own and keeps them for a look after a failure; nothing else removes them, and
/// images of a few hundred MiB each filled tens of GiB over a few sessions.
fn sweep(top: &Path) {
    let Ok(entries) = fs::read_dir(top) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        let pid = name.rsplit('-').nth(1).and_then(|p| p.parse::<u32>().ok());
        if let Some(pid) = pid {
            let gone = pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists();
            if gone {
                let _ = fs::remove_dir_all(e.path());
            }
        }
    }
}

/// The last `n` bytes of a command's output, for failure messages.
fn tail(b: &[u8], n: usize) -> String {
    String::from_utf8_lossy(&b[b.len().saturating_sub(n)..]).into_owned()
}

/// Runs a command; returns (success, stdout, stderr).
pub fn try_run(cmd: &mut Command) -> (bool, String, String) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e} (did scripts/setup.sh run?)"));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `uf2fs status --json` of a mount point or image, parsed (`bin`: the uf2fs binary).
pub fn status_json(bin: &Path, target: &Path) -> serde_json::Value {
    let out = run(Command::new(bin).args(["status", "--json"]).arg(target));
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("uf2fs status --json: {e}: {out}"))
}

/// Runs a command and panics with (the end of) its output if it fails.
pub fn run(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e} (did scripts/setup.sh run?)"));
    if !out.status.success() {
        panic!(
            "{cmd:?} failed ({}):\n{}\n{}",
            out.status,
            tail(&out.stdout, 3000),
            tail(&out.stderr, 3000)
        );
    }
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The static treeview binary (tools/treeview.c), built once.
pub fn treeview() -> PathBuf {
    static_bin("treeview", &tools().join("treeview.c"))
}

/// The static workload generator (`crates/bench/wload.c`), the same program on the host and
/// in the linux-f2fs guest.
pub fn wload() -> PathBuf {
    static_bin("wload", &root().join("crates/bench/wload.c"))
}

/// A static helper from `tests/images/NAME.c` (such as `shutdown`), built once per target dir:
/// the same binary runs in the linux-f2fs guest and on the host.
pub fn image_helper(name: &str) -> PathBuf {
    static_bin(name, &root().join("tests/images").join(format!("{name}.c")))
}

/// `gcc -O2 -static` of `src` into target/testkit/NAME, once per process and name.
fn static_bin(name: &str, src: &Path) -> PathBuf {
    static BUILT: std::sync::Mutex<Vec<(String, PathBuf)>> = std::sync::Mutex::new(Vec::new());
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, bin)) = built.iter().find(|(n, _)| n == name) {
        return bin.clone();
    }
    let dir = root().join("target/testkit");
    fs::create_dir_all(&dir).expect("target/testkit");
    let bin = dir.join(name);
    // Built beside and renamed into place, so a test binary running in parallel never sees
    // half a file.
    let tmp = dir.join(format!("{name}.{}", std::process::id()));
    run(Command::new("gcc")
        .args(["-O2", "-static", "-Wall", "-o"])
        .arg(&tmp)
        .arg(src));
    fs::rename(&tmp, &bin).unwrap_or_else(|e| panic!("install {name}: {e}"));
    built.push((name.to_owned(), bin.clone()));
    bin
}

/// Sorted treeview lines of `dir` with `fields` (None: all default fields).
pub fn view(dir: &Path, fields: Option<&str>) -> Vec<String> {
    let mut c = Command::new(treeview());
    if let Some(f) = fields {
        c.args(["-f", f]);
    }
    let out = run(c.arg(dir));
    let mut lines: Vec<String> = out.lines().map(str::to_owned).collect();
    lines.sort();
    lines
}

/// The lines of a treeview without their `mtime=` field (for trees whose times were set, as
/// `--timestamp` and `sload -T` set them all).
pub fn untimed(v: Vec<String>) -> Vec<String> {
    v.into_iter()
        .map(|l| {
            l.split('\t')
                .filter(|f| !f.starts_with("mtime="))
                .collect::<Vec<_>>()
                .join("\t")
        })
        .collect()
}

/// Asserts two views are equal, showing the first differences.
pub fn assert_same_view(expected: &[String], got: &[String], what: &str) {
    if expected == got {
        return;
    }
    let missing: Vec<_> = expected
        .iter()
        .filter(|l| !got.contains(l))
        .take(10)
        .collect();
    let extra: Vec<_> = got
        .iter()
        .filter(|l| !expected.contains(l))
        .take(10)
        .collect();
    panic!("{what}: views differ ({} vs {} lines)\nexpected but not got:\n{missing:#?}\ngot but not expected:\n{extra:#?}", expected.len(), got.len());
}

/// A small deterministic generator (xorshift64*), so trees are the same for a seed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    /// A generator in exactly this state (nonzero), for a sequence fixed elsewhere.
    pub fn from_state(state: u64) -> Rng {
        Rng(state.max(1))
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(n + 8);
        while v.len() < n {
            v.extend_from_slice(&self.next_u64().to_le_bytes());
        }
        v.truncate(n);
        v
    }
}

/// What a generated tree holds.
#[derive(Clone, Copy, Debug)]
pub struct TreeSpec {
    pub files: usize,
    /// Largest regular file, in bytes.
    pub max_file: u64,
    /// Entries of the one big directory (several hash levels from ~500 on).
    pub big_dir: usize,
    pub depth: usize,
}

impl TreeSpec {
    pub const SMALL: TreeSpec = TreeSpec {
        files: 120,
        max_file: 3_000_000,
        big_dir: 700,
        depth: 6,
    };
}

/// Counts of what `gen_tree` made.
#[derive(Debug, Default, Clone, Copy)]
pub struct TreeStats {
    pub entries: usize,
    pub bytes: u64,
}

fn name(rng: &mut Rng, i: usize) -> String {
    match rng.below(6) {
        0 => format!("f{i}"),
        1 => format!("{}_{i}", "long_name_".repeat(1 + rng.below(24) as usize)),
        2 => format!("sp ace {i}.txt"),
        3 => format!("ünïcødé-{i}-日本"),
        4 => format!("{i}{}", "x".repeat(255 - i.to_string().len())),
        _ => format!("file.{i}.dat"),
    }
}

fn file_size(rng: &mut Rng, max: u64) -> u64 {
    let s = match rng.below(8) {
        0 => 0,
        1 => 1 + rng.below(100),
        2 => 3000 + rng.below(1000), // around the inline limit
        3 => 4096 * (1 + rng.below(4)),
        4 => rng.below(64 * 1024),
        5 => rng.below(1 << 20),
        6 => 3_560_000 + rng.below(200_000), // past the inode's own slots
        _ => rng.below(max),
    };
    s.min(max)
}

/// Makes a seeded tree under `dir`: files of many sizes, symlinks (short and stored in a
/// block), hard links, one big directory, nested directories, odd names, various modes.
pub fn gen_tree(dir: &Path, seed: u64, spec: TreeSpec) -> TreeStats {
    let mut rng = Rng::new(seed);
    let mut st = TreeStats::default();
    fs::create_dir_all(dir).expect("tree root");
    let mut dirs = vec![dir.to_path_buf()];
    let mut nested = dir.to_path_buf();
    for d in 0..spec.depth {
        nested = nested.join(format!("level{d}"));
        fs::create_dir(&nested).expect("nested dir");
        dirs.push(nested.clone());
        st.entries += 1;
    }
    let big = dir.join("bigdir");
    fs::create_dir(&big).expect("big dir");
    st.entries += 1;
    for i in 0..spec.big_dir {
        let n = name(&mut rng, i);
        fs::write(big.join(n), format!("{i}\n")).expect("big dir entry");
        st.entries += 1;
        st.bytes += format!("{i}\n").len() as u64;
    }
    let mut files = Vec::new();
    for i in 0..spec.files {
        let d = &dirs[rng.below(dirs.len() as u64) as usize];
        let p = d.join(name(&mut rng, i));
        let size = file_size(&mut rng, spec.max_file);
        let mut f = fs::File::create(&p).expect("file");
        let data = rng.bytes(size as usize);
        f.write_all(&data).expect("write");
        st.bytes += size;
        st.entries += 1;
        let mode = [0o644, 0o600, 0o755, 0o444, 0o4755, 0o640][rng.below(6) as usize];
        fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(mode)).expect("chmod");
        files.push(p);
    }
    for i in 0..spec.files / 10 + 1 {
        let d = &dirs[rng.below(dirs.len() as u64) as usize];
        let target = if i % 3 == 0 {
            "t".repeat(3900 + i % 100)
        } else {
            format!("target-{i}")
        };
        symlink(&target, d.join(format!("link{i}"))).expect("symlink");
        st.entries += 1;
        if let Some(f) = files.get(rng.below(files.len() as u64) as usize) {
            let l = d.join(format!("hard{i}"));
            if fs::hard_link(f, &l).is_ok() {
                st.entries += 1;
            }
        }
    }
    let empty = dir.join("empty-dir");
    fs::create_dir(&empty).expect("empty dir");
    st.entries += 1;
    st
}

/// Adds what `gen_tree` does not make to `dir`: a 40 MiB sparse file with data in the middle,
/// a fifo, and a character device (1,3) owned by 1234:567.
pub fn add_special_files(dir: &Path) {
    let sparse = fs::File::create(dir.join("sparse")).expect("sparse file");
    sparse.set_len(40 << 20).expect("sparse size");
    std::os::unix::fs::FileExt::write_all_at(&sparse, b"middle", 20 << 20).expect("sparse data");
    run(Command::new("mkfifo").arg(dir.join("fifo")));
    run(Command::new("mknod")
        .arg(dir.join("null"))
        .args(["c", "1", "3"]));
    run(Command::new("chown")
        .args(["-h", "1234:567"])
        .arg(dir.join("null")));
}

/// Makes `img`, a new file of `size_mb` MiB, with `mkfs.f2fs -f -q ARGS`.
pub fn mkfs_f2fs(img: &Path, size_mb: u64, args: &[&str]) {
    let _ = fs::remove_file(img);
    let f = fs::File::create(img).expect("image");
    f.set_len(size_mb << 20).expect("size image");
    run(Command::new("mkfs.f2fs")
        .args(["-f", "-q"])
        .args(args)
        .arg(img));
}

/// Makes `img` of `size_mb` with mkfs.f2fs (`features` as for `-O`, may be empty) and fills
/// it from `src` with sload.f2fs. Returns sload's output.
pub fn mkfs_sload(img: &Path, size_mb: u64, features: &str, src: &Path) -> String {
    if features.is_empty() {
        mkfs_f2fs(img, size_mb, &[]);
    } else {
        mkfs_f2fs(img, size_mb, &["-O", features]);
    }
    // sload.f2fs 1.15 exits 1 when its own closing fsck pass repairs inode checksums it wrote
    // (seen with inode_checksum); the image that remains is what we judge, with fsck.
    let (_, out, err) = try_run(Command::new("sload.f2fs").arg("-f").arg(src).arg(img));
    out + &err
}

/// A file as the image holds it, read by `uf2fs cat` (the binary `bin`) with nothing mounted;
/// panics with uf2fs's message if it fails.
pub fn uf2fs_cat(bin: &Path, img: &Path, path: &str) -> Vec<u8> {
    let out = Command::new(bin)
        .arg("cat")
        .arg(img)
        .arg(path)
        .output()
        .expect("run uf2fs cat");
    assert!(
        out.status.success(),
        "uf2fs cat {path}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Runs `tools/f2fs-verdict` and panics unless the image is clean.
pub fn assert_fsck_clean(img: &Path) {
    let (clean, report) = fsck_f2fs(img);
    assert!(
        clean,
        "fsck.f2fs finds {} not clean:\n{report}",
        img.display()
    );
}

/// fsck.f2fs's verdict on `img` through `tools/f2fs-verdict` (true: clean) and its report.
/// Panics when there is no verdict (fsck.f2fs missing, image unreadable).
pub fn fsck_f2fs(img: &Path) -> (bool, String) {
    let out = Command::new(tools().join("f2fs-verdict"))
        .arg(img)
        .output()
        .unwrap_or_else(|e| panic!("cannot run tools/f2fs-verdict: {e}"));
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    match out.status.code() {
        Some(0) => (true, report),
        Some(1) => (false, report),
        _ => panic!(
            "tools/f2fs-verdict gave no verdict on {} (did scripts/setup.sh run?):\n{report}",
            img.display()
        ),
    }
}

/// Decompresses a `.img.gz` fixture from tests/fixtures into `dest`.
pub fn fixture(name: &str, dest: &Path) -> PathBuf {
    let src = root().join("tests/fixtures").join(format!("{name}.img.gz"));
    let input = fs::File::open(&src).unwrap_or_else(|e| panic!("{}: {e}", src.display()));
    let mut gz = flate2::read::GzDecoder::new(input);
    let out = dest.join(format!("{name}.img"));
    let mut f = fs::File::create(&out).expect("fixture image");
    std::io::copy(&mut gz, &mut f).expect("decompress fixture");
    out
}

/// Names of the fixtures in tests/fixtures (without `.img.gz`).
pub fn fixtures() -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(root().join("tests/fixtures"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter_map(|e| {
                    e.file_name()
                        .to_str()
                        .and_then(|n| n.strip_suffix(".img.gz"))
                        .map(str::to_owned)
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// What a linux-f2fs run left: the job's exit code, its log, dmesg, and $OUT's files.
pub struct KernelRun {
    pub exit: i32,
    pub out: PathBuf,
    pub job_log: String,
    pub dmesg: String,
}

impl KernelRun {
    /// F2FS lines in dmesg that report trouble (errors, warnings, inconsistency, fsck).
    pub fn f2fs_complaints(&self) -> Vec<String> {
        self.dmesg
            .lines()
            .filter(|l| l.contains("F2FS-fs"))
            .filter(|l| {
                let l = l.to_lowercase();
                [
                    "error",
                    "warn",
                    "inconsistent",
                    "corrupt",
                    "fsck",
                    "invalid",
                    "wrong",
                ]
                .iter()
                .any(|w| l.contains(w))
            })
            .map(str::to_owned)
            .collect()
    }
}

/// Runs `job` (busybox sh, in /mnt) on `img` under Linux through `tools/linux-f2fs`, with the
/// static treeview in `$PAYLOAD`.
pub fn kernel_f2fs(img: &Path, job: &str, work: &Path) -> KernelRun {
    kernel_f2fs_with(img, job, work, &[])
}

/// [`kernel_f2fs`] with more files in `$PAYLOAD` (each under its own file name): static
/// helpers, expected checksums...
pub fn kernel_f2fs_with(img: &Path, job: &str, work: &Path, payload_files: &[&Path]) -> KernelRun {
    kernel_f2fs_args(img, job, work, payload_files, &[])
}

/// [`kernel_f2fs_with`] with more options for tools/linux-f2fs (`--no-mount`: the job mounts
/// the image itself, as often as it likes, and leaves it unmounted).
pub fn kernel_f2fs_args(
    img: &Path,
    job: &str,
    work: &Path,
    payload_files: &[&Path],
    args: &[&str],
) -> KernelRun {
    let payload = work.join("payload");
    fs::create_dir_all(&payload).expect("payload dir");
    fs::copy(treeview(), payload.join("treeview")).expect("copy treeview");
    for f in payload_files {
        let name = f.file_name().expect("payload file name");
        fs::copy(f, payload.join(name)).unwrap_or_else(|e| panic!("payload {}: {e}", f.display()));
    }
    let job_path = work.join("job.sh");
    fs::write(&job_path, job).expect("job");
    let out = work.join("kernel-out");
    let (_, stdout, stderr) = try_run(
        Command::new(tools().join("linux-f2fs"))
            .arg("--out")
            .arg(&out)
            .arg("--payload")
            .arg(&payload)
            .args(args)
            .arg(img)
            .arg(&job_path),
    );
    let read = |name: &str| {
        fs::read(out.join(name))
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    };
    let exit = read("exit_code")
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("linux-f2fs gave no exit code:\n{stdout}\n{stderr}"));
    KernelRun {
        exit,
        job_log: read("job.log"),
        dmesg: read("dmesg.txt"),
        out: out.join("files"),
    }
}

/// A live `uf2fs mount` for a test. Dropping it without [`Mount::umount`] (a failed test)
/// detaches the mount so that no stale mount outlives the test.
pub struct Mount {
    pub dir: PathBuf,
    pub pid: u32,
    bin: PathBuf,
    done: bool,
}

impl Mount {
    /// Mounts `img` on `dir` (made if missing) with `uf2fs mount` (the daemon) and options.
    pub fn new(bin: &Path, img: &Path, dir: &Path, opts: &[&str]) -> Mount {
        fs::create_dir_all(dir).expect("mount point");
        let mut cmd = Command::new(bin);
        cmd.arg("mount").arg(img).arg(dir);
        for o in opts {
            cmd.arg("-o").arg(o);
        }
        run(&mut cmd);
        let st = run(Command::new(bin).arg("status").arg("--json").arg(dir));
        let v: serde_json::Value = serde_json::from_str(&st).expect("status json");
        let pid = v["pid"].as_u64().expect("daemon pid") as u32;
        Mount {
            dir: dir.to_path_buf(),
            pid,
            bin: bin.to_path_buf(),
            done: false,
        }
    }

    /// Unmounts with `uf2fs umount` (which returns after the final checkpoint).
    pub fn umount(mut self) {
        run(Command::new(&self.bin).arg("umount").arg(&self.dir));
        self.wait_exit();
        self.done = true;
    }

    /// Unmounts some other way (`fusermount3 -u`, a signal): `how` does it, then the daemon
    /// must exit by itself within 60 s.
    pub fn umount_with(mut self, how: impl FnOnce(&Path, u32)) {
        how(&self.dir, self.pid);
        self.wait_exit();
        self.done = true;
    }

    fn wait_exit(&self) {
        let proc = PathBuf::from(format!("/proc/{}", self.pid));
        for _ in 0..6000 {
            // A zombie (not reaped by a test's parent) is done too, once its other threads
            // are gone: a thread group's leader shows Z while the others still exit, and
            // the image's lock goes only with the last of them (a `uf2fs cat` right after a
            // SIGKILL once found it still held, on a loaded machine).
            let state = fs::read_to_string(proc.join("stat")).unwrap_or_default();
            let threads = fs::read_dir(proc.join("task")).map_or(0, |d| d.count());
            if state.is_empty() || (state.contains(") Z ") && threads <= 1) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        panic!("the uf2fs daemon (pid {}) did not exit", self.pid);
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        if !self.done {
            let _ = Command::new("fusermount3")
                .arg("-uz")
                .arg(&self.dir)
                .status();
        }
    }
}

/// Linux's view of the whole image (every treeview field, sorted), after checking that the job
/// ran and that the kernel's F2FS complained of nothing.
pub fn linux_view(img: &Path, work: &Path) -> Vec<String> {
    let k = kernel_f2fs(
        img,
        "set -e\n$PAYLOAD/treeview -f type,mode,uid,gid,size,mtime,hash,target,links,xattr,rdev /mnt | sort > $OUT/view.txt\n",
        work,
    );
    assert_eq!(k.exit, 0, "Linux read job: {}", k.job_log);
    assert!(k.f2fs_complaints().is_empty(), "{:#?}", k.f2fs_complaints());
    fs::read_to_string(k.out.join("view.txt"))
        .expect("Linux's view")
        .lines()
        .map(str::to_owned)
        .collect()
}
