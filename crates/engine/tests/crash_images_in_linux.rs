//! Linux 6.1 recovers the crash images that uf2fs's own crash test cuts, and shows what uf2fs
//! shows after its own recovery of the same image.
//!
//! Two workloads run over a [`RecordingDevice`](uf2fs_engine::uf2fs_device::RecordingDevice)
//! with the model of `common/crash.rs` (each path's versions and the fsync/sync that
//! acknowledged them): small appends, overwrites and a new file in a checkpointed directory,
//! each fsync'd, then a sync; and a file written past its inode's addresses into two direct
//! nodes and fsync'd, then overwritten across the node boundaries with fdatasync. From their
//! logs a few crash images that matter are cut, each named for what it is:
//! - *after an fsync's final flush*: the chain is complete, no checkpoint since;
//! - *a torn fsync*: the in-order prefix ends among the fsync's node writes, so some of its
//!   direct nodes landed and its inode (the commit record) did not;
//! - *a reordered epoch*: of the fsync's node writes, all but its first landed (the inode
//!   too), crashing before the closing flush: the chain breaks at its start;
//! - *in the middle of a checkpoint*: everything but its trailing block landed;
//! - *the end of the log*: every fsync complete, no checkpoint since the large write.
//!
//! Each image (one Linux boot each, ~15 s: linux-f2fs takes one image per boot) is judged:
//! - Linux mounts it (its roll-forward runs) with no F2FS complaint in dmesg, and the job
//!   lists the tree and sha256sums every regular file (busybox only);
//! - every path shows, in Linux, the version its last acknowledgement before the crash point
//!   named or a later one begun before the crash point, and no name the model never made
//!   (the rule of `crash_consistency.rs`, on bytes: busybox shows no xattrs, and these
//!   workloads set none);
//! - after Linux's unmount, fsck.f2fs (`tools/f2fs-verdict`) finds the image clean,
//!   and uf2fs reads it (read-only) with the same view as Linux;
//! - the differential test: uf2fs, mounting the same crash image read-write (its own
//!   recovery), passes the model's judge and shows the same names, types and sha256 per file
//!   as Linux.
//!
//! Each image prints its crash point, what it is, the count of Linux's `recover_*` dmesg
//! lines and the verdict; all images run, then the test fails naming every disagreement.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

mod common;

use common::crash::{judge_tree, Covers, Model, Overlay, Run, State};
use std::collections::{BTreeMap, HashMap};
use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use uf2fs_engine::uf2fs_device::{CrashLog, Event, FileDevice};
use uf2fs_engine::{FileType, Fs};
use uf2fs_testkit::{fsck_f2fs, kernel_f2fs, scratch, Rng};

/// What a path is, as both sides can show it: a directory, or a regular file's sha256.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Seen {
    Dir,
    File(String),
    Other(String),
}

type View = BTreeMap<String, Seen>;

/// sha256 of `data` in hex, by the host's `sha256sum` (the guest uses busybox's).
fn sha256(data: &[u8]) -> String {
    let mut c = Command::new("sha256sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("sha256sum");
    let mut stdin = c.stdin.take().unwrap();
    let data = data.to_vec();
    let feeder = std::thread::spawn(move || stdin.write_all(&data));
    let out = c.wait_with_output().unwrap();
    feeder.join().unwrap().unwrap();
    assert!(out.status.success(), "sha256sum failed");
    String::from_utf8(out.stdout).unwrap()[..64].to_owned()
}

// ---------------------------------------------------------------------------------------
// Spans of operations in the log, and the crash points cut from them.

/// Where an operation's events lie in the log: `start..end`.
#[derive(Clone, Copy, Debug)]
struct Span {
    start: usize,
    end: usize,
}

/// A crash image to try: the blocks that landed and the crash position the model judges at.
struct Cut {
    what: String,
    /// The crash position: acknowledgements at or before it count.
    q: usize,
    /// The prefix of the log that landed in order.
    prefix: usize,
    /// Event indexes after `prefix` (and before `q`) that landed as well (a reordering).
    also: Vec<usize>,
    /// A dmesg line that is Linux's expected verdict on this crash, not a complaint.
    expected_warning: Option<&'static str>,
}

fn flushes_in(log: &CrashLog, s: Span) -> Vec<usize> {
    (s.start..s.end)
        .filter(|&i| matches!(log.events()[i], Event::Flush))
        .collect()
}

fn writes_in(log: &CrashLog, from: usize, to: usize) -> Vec<usize> {
    (from..to)
        .filter(|&i| matches!(log.events()[i], Event::Write { .. }))
        .collect()
}

/// The node writes of an fsync by chain: the writes of the epoch its last flush closes.
/// Panics unless the span ends with that flush (posix mode: nodes, then a flush).
fn fsync_nodes(log: &CrashLog, s: Span) -> (usize, Vec<usize>) {
    let f = flushes_in(log, s);
    let last = *f.last().expect("an fsync by chain flushes");
    assert_eq!(last + 1, s.end, "the fsync's last event is its flush");
    let from = f.iter().rev().nth(1).map_or(s.start, |p| p + 1);
    (last, writes_in(log, from, last))
}

/// Crash just after an fsync returned (its final flush done).
fn after_fsync(log: &CrashLog, s: Span, what: &str) -> Cut {
    let _ = fsync_nodes(log, s);
    Cut {
        what: format!("after the final flush of {what}: chain complete, no checkpoint since"),
        q: s.end,
        prefix: s.end,
        also: Vec::new(),
        expected_warning: None,
    }
}

/// Crash in the middle of an fsync's node writes, in order: half its nodes landed, not the
/// inode.
fn torn_fsync(log: &CrashLog, s: Span, what: &str) -> Cut {
    let (_, nodes) = fsync_nodes(log, s);
    assert!(
        nodes.len() >= 3,
        "{what}: wanted 3 node writes at least, got {nodes:?}"
    );
    let p = nodes[nodes.len() / 2];
    Cut {
        what: format!(
            "torn {what}: {} of its {} node writes landed in order, not its inode",
            nodes.len() / 2,
            nodes.len()
        ),
        q: p,
        prefix: p,
        also: Vec::new(),
        expected_warning: None,
    }
}

/// Crash before an fsync's closing flush with every node write landed but its first.
fn reordered_fsync(log: &CrashLog, s: Span, what: &str) -> Cut {
    let (flush, nodes) = fsync_nodes(log, s);
    assert!(nodes.len() >= 2, "{what}: wanted 2 node writes at least");
    Cut {
        what: format!(
            "reordered epoch of {what}: {} of its {} node writes landed (the inode too), the first did not",
            nodes.len() - 1,
            nodes.len()
        ),
        q: flush,
        prefix: nodes[0],
        also: nodes[1..].to_vec(),
        expected_warning: None,
    }
}

/// Crash inside a checkpoint (a sync), with everything but its trailing block landed.
fn mid_checkpoint(log: &CrashLog, s: Span, what: &str) -> Cut {
    let w = writes_in(log, s.start, s.end);
    let last = *w.last().expect("a checkpoint writes");
    assert!(
        matches!(log.events()[last - 1], Event::Flush),
        "{what}: a flush comes before the checkpoint's trailing block"
    );
    Cut {
        what: format!(
            "in the middle of {what}: {} of its {} writes landed, not its trailing block",
            w.len() - 1,
            w.len()
        ),
        q: last,
        prefix: last,
        also: Vec::new(),
        // Linux reads both packs at mount; this one's trailing block was never written (zeros), so
        // Linux warns that it has no CRC offset and takes the other pack, as it would after a
        // power cut in its own checkpoint at the same place.
        expected_warning: Some("invalid crc_offset: 0"),
    }
}

fn image_of(log: &CrashLog, c: &Cut) -> Overlay {
    let over: HashMap<u64, Box<[u8]>> = c
        .also
        .iter()
        .filter_map(|&i| match &log.events()[i] {
            Event::Write { blkaddr, block } => Some((*blkaddr, block.clone())),
            Event::Flush => None,
        })
        .collect();
    Overlay::new(Arc::new(log.prefix_image(c.prefix)), over)
}

// ---------------------------------------------------------------------------------------
// The two sides' views and the judges.

/// uf2fs's view of a mounted image: every name under the root.
fn uf2fs_view(fs: &Fs) -> Result<View, String> {
    let mut out = View::new();
    let mut dirs = vec![(String::new(), fs.root_ino())];
    while let Some((dir, ino)) = dirs.pop() {
        for e in fs
            .readdir(ino)
            .map_err(|e| format!("/{dir}: readdir: {e}"))?
        {
            let name = String::from_utf8_lossy(&e.name).into_owned();
            let p = if dir.is_empty() {
                name
            } else {
                format!("{dir}/{name}")
            };
            let a = fs.getattr(e.ino).map_err(|e| format!("/{p}: {e}"))?;
            let seen = match a.file_type {
                FileType::Directory => {
                    dirs.push((p.clone(), e.ino));
                    Seen::Dir
                }
                FileType::Regular => {
                    let mut data = vec![0u8; a.size as usize];
                    let n = fs
                        .read(e.ino, 0, &mut data)
                        .map_err(|e| format!("/{p}: {e}"))?;
                    if n != data.len() {
                        return Err(format!("/{p}: read {n} of {} bytes", data.len()));
                    }
                    Seen::File(sha256(&data))
                }
                t => Seen::Other(format!("{t:?}")),
            };
            out.insert(p, seen);
        }
    }
    Ok(out)
}

/// The guest's job: every name (`find`), the directories, and sha256 of every regular file.
const LIST_JOB: &str = r#"
set -e
cd /mnt
find . > $OUT/all.txt
find . -type d > $OUT/dirs.txt
find . -type f | while read -r f; do sha256sum "$f"; done > $OUT/sums.txt
"#;

/// Linux's view from the job's output.
fn linux_view(out: &Path) -> View {
    let read =
        |n: &str| std::fs::read_to_string(out.join(n)).unwrap_or_else(|e| panic!("{n}: {e}"));
    let rel = |l: &str| l.trim().trim_start_matches("./").to_owned();
    let mut v = View::new();
    for l in read("all.txt").lines() {
        if l.trim() != "." {
            v.insert(rel(l), Seen::Other("not a file or directory".into()));
        }
    }
    for l in read("dirs.txt").lines() {
        if l.trim() != "." {
            v.insert(rel(l), Seen::Dir);
        }
    }
    for l in read("sums.txt").lines() {
        let (sum, path) = l.split_once("  ").expect("sha256sum line");
        v.insert(rel(path), Seen::File(sum.to_owned()));
    }
    v
}

/// Judges a view against the model for a crash at `q` (bytes only): the rule of
/// `common::crash::judge_tree`.
fn judge_view(
    v: &View,
    m: &Model,
    q: usize,
    sums: &mut HashMap<Vec<u8>, String>,
) -> Result<(), String> {
    for (path, h) in &m.paths {
        let got = v.get(path);
        let (allowed, ack) = m.allowed(h, q, Covers::Data);
        let matches = |s: &State, sums: &mut HashMap<Vec<u8>, String>| match (s, got) {
            (State::Absent, None) => true,
            (State::Dir, Some(Seen::Dir)) => true,
            (State::File { data, .. }, Some(Seen::File(sum))) => {
                sums.entry(data.clone()).or_insert_with(|| sha256(data)) == sum
            }
            _ => false,
        };
        if allowed.iter().any(|&i| matches(&h.versions[i].state, sums)) {
            continue;
        }
        let shown = (0..h.versions.len())
            .find(|&i| matches(&h.versions[i].state, sums))
            .map_or_else(
                || format!("{got:?}, no version of the model"),
                |i| format!("version {i} of {}", h.versions.len()),
            );
        return Err(format!(
            "/{path} shows {shown}; allowed versions {allowed:?}{}",
            ack.map_or_else(String::new, |a| format!(
                " ({} acknowledged version {})",
                a.by, a.version
            ))
        ));
    }
    if let Some(p) = v.keys().find(|p| !m.paths.contains_key(*p)) {
        return Err(format!("/{p} is listed but was never made"));
    }
    Ok(())
}

fn differences(linux: &View, uf2fs: &View) -> Vec<String> {
    let mut d = Vec::new();
    for (p, l) in linux {
        match uf2fs.get(p) {
            Some(u) if u == l => {}
            Some(u) => d.push(format!("/{p}: Linux shows {l:?}, uf2fs {u:?}")),
            None => d.push(format!("/{p}: Linux shows {l:?}, uf2fs shows no such name")),
        }
    }
    for (p, u) in uf2fs {
        if !linux.contains_key(p) {
            d.push(format!("/{p}: uf2fs shows {u:?}, Linux shows no such name"));
        }
    }
    d
}

/// Judges one crash image on both sides; the problems found (empty: all agree and pass).
fn judge_in_linux(name: &str, log: &CrashLog, m: &Model, c: &Cut, work: &Path) -> Vec<String> {
    let started = std::time::Instant::now();
    let mut problems = Vec::new();
    let mut sums = HashMap::new();
    let image = image_of(log, c);
    std::fs::create_dir_all(work).unwrap();
    let img = work.join("crash.img");
    image.write_sparse(&img);

    // uf2fs's own recovery of the image (in memory: the file stays the crash image).
    let fs = Fs::with_device_rw(Box::new(image)).map_err(|e| e.to_string());
    let uf2fs = match fs {
        Ok(fs) => {
            if let Err(e) = judge_tree(&fs, m, c.q) {
                problems.push(format!("uf2fs after recovery: {e}"));
            }
            uf2fs_view(&fs).unwrap_or_else(|e| {
                problems.push(format!("uf2fs view: {e}"));
                View::new()
            })
        }
        Err(e) => {
            problems.push(format!("uf2fs refuses the read-write mount: {e}"));
            View::new()
        }
    };

    // Linux's.
    let k = kernel_f2fs(&img, LIST_JOB, work);
    let recover = k
        .dmesg
        .lines()
        .filter(|l| l.contains("F2FS-fs") && l.contains("recover_"))
        .count();
    if k.exit != 0 {
        problems.push(format!(
            "Linux job exit {} (90: mount refused):\n{}\n{}",
            k.exit, k.job_log, k.dmesg
        ));
    } else {
        let complaints: Vec<String> = k
            .f2fs_complaints()
            .into_iter()
            .filter(|l| c.expected_warning.is_none_or(|w| !l.contains(w)))
            .collect();
        if !complaints.is_empty() {
            problems.push(format!("Linux's dmesg complains: {complaints:#?}"));
        }
        let linux = linux_view(&k.out);
        if let Err(e) = judge_view(&linux, m, c.q, &mut sums) {
            problems.push(format!("Linux after recovery: {e}"));
        }
        let d = differences(&linux, &uf2fs);
        if !d.is_empty() {
            problems.push(format!("Linux and uf2fs disagree:\n  {}", d.join("\n  ")));
        }
        let (clean, report) = fsck_f2fs(&img);
        if !clean {
            problems.push(format!("fsck.f2fs after Linux's unmount:\n{report}"));
        }
        // And what Linux recovered and checkpointed reads the same in uf2fs.
        match FileDevice::open(&img, false)
            .map_err(|e| e.to_string())
            .and_then(|d| Fs::with_device(Box::new(d)).map_err(|e| e.to_string()))
            .and_then(|fs| uf2fs_view(&fs))
        {
            Ok(after) => {
                let d = differences(&linux, &after);
                if !d.is_empty() {
                    problems.push(format!(
                        "uf2fs reads Linux's recovered image differently:\n  {}",
                        d.join("\n  ")
                    ));
                }
            }
            Err(e) => problems.push(format!("uf2fs cannot read Linux's recovered image: {e}")),
        }
    }
    println!(
        "{name} crash at event {} (prefix {}, {} more landed): {}; Linux recover_* lines: {recover}; {} ({:.1} s)",
        c.q,
        c.prefix,
        c.also.len(),
        c.what,
        if problems.is_empty() {
            "Linux and uf2fs agree, model and fsck.f2fs satisfied".to_owned()
        } else {
            format!("FAILED: {}", problems.join("; "))
        },
        started.elapsed().as_secs_f64()
    );
    let _ = std::fs::remove_file(&img);
    problems
}

// ---------------------------------------------------------------------------------------
// The workloads and the test.

/// Appends, an overwrite and a new file in a checkpointed directory, each fsync'd, then a
/// sync: the spans of the fsync of the new file and of the sync.
fn small_files(r: &mut Run) -> (Span, Span) {
    let mut rng = Rng::new(61);
    r.mkdir("d");
    let a = r.create("d/a");
    let d = rng.bytes(9000);
    r.write(a, 0, &d);
    let log = r.create("log");
    let d = rng.bytes(300);
    r.append(log, &d);
    r.sync(); // the checkpointed base
    let d = rng.bytes(5000);
    r.append(log, &d);
    r.fsync(log, false);
    let d = rng.bytes(4096);
    r.write(a, 2048, &d);
    r.fsync(a, false);
    let n = r.create("d/new");
    let d = rng.bytes(12_000);
    r.write(n, 0, &d);
    let s = r.pos();
    r.fsync(n, false); // DENT: a new name recovered into d
    let fsync_new = Span {
        start: s,
        end: r.pos(),
    };
    let d = rng.bytes(100);
    r.append(log, &d);
    r.fsync(log, true);
    let d = rng.bytes(700);
    r.append(a, &d); // never synced before the sync below
    let s = r.pos();
    r.sync();
    let sync = Span {
        start: s,
        end: r.pos(),
    };
    (fsync_new, sync)
}

/// A file written past its inode's addresses into two direct nodes, fsync'd, then overwritten
/// across the node boundaries with fdatasync: the span of the first fsync.
fn large_write(r: &mut Run) -> Span {
    let mut rng = Rng::new(62);
    let f = r.create("big");
    let d = rng.bytes(5000);
    r.write(f, 0, &d);
    r.sync();
    // 2300 blocks: the inode's 923 addresses and two direct nodes (1018 each).
    let d = rng.bytes(2300 * 4096 + 77);
    for (i, c) in d.chunks(512 * 4096).enumerate() {
        r.write(f, i * 512 * 4096, c);
    }
    let s = r.pos();
    r.fsync(f, false);
    let span = Span {
        start: s,
        end: r.pos(),
    };
    for (blk, n) in [(900, 50), (1930, 20)] {
        let d = rng.bytes(n * 4096);
        r.write(f, blk * 4096, &d);
        r.fsync(f, true);
    }
    span
}

/// `mode=adaptive` near full, every rewrite fsync'd: once free sections run short the warm
/// node log fills the holes of node segments, so the roll-forward chain runs from hole to
/// hole. Goes on until at least 30 fsyncs since the last checkpoint wrote their nodes into
/// holes; the crash image is the whole log (every fsync complete), which Linux must replay.
fn node_holes(r: &mut Run) {
    let mut rng = Rng::new(63);
    const FILE: usize = 4 * 4096;
    let files = r.fill_adaptive(FILE, 64, &mut rng);
    let count = files.len();
    let counts = |r: &Run| {
        let s = r.fs.status().unwrap();
        (s.checkpoints.written, s.gc.ssr_node_blocks)
    };
    let (mut cps, mut holes) = counts(r);
    let mut since = 0;
    for i in 0..count * 8 {
        let k = rng.below(count as u64) as usize;
        let d = rng.bytes(4096);
        r.write(files[k], rng.below(4) as usize * 4096, &d);
        r.fsync(files[k], i % 2 == 1);
        let (c, h) = counts(r);
        if c != cps {
            (cps, holes, since) = (c, h, 0);
        } else if h > holes {
            (holes, since) = (h, since + 1);
        }
        if since >= 30 {
            return;
        }
    }
    panic!(
        "no run of 30 fsyncs through node holes after a checkpoint: {:?}",
        r.fs.status().unwrap().gc
    );
}

#[test]
fn linux_recovers_uf2fs_crash_images() {
    let started = std::time::Instant::now();
    let dir = scratch("crash-images-in-linux");
    let mut failures = Vec::new();

    let mut r = Run::new();
    let (fsync_new, sync) = small_files(&mut r);
    let (log, m) = r.crash();
    let cuts = [
        after_fsync(&log, fsync_new, "the fsync of new file d/new"),
        mid_checkpoint(&log, sync, "the sync's checkpoint"),
    ];
    for (i, c) in cuts.iter().enumerate() {
        let p = judge_in_linux("small_files", &log, &m, c, &dir.join(format!("s{i}")));
        failures.extend(
            p.into_iter()
                .map(|p| format!("small_files, {}: {p}", c.what)),
        );
    }

    let mut r = Run::new();
    let fsync_big = large_write(&mut r);
    let (log, m) = r.crash();
    let end = log.events().len();
    let cuts = [
        torn_fsync(&log, fsync_big, "the fsync of the 2300-block write"),
        reordered_fsync(&log, fsync_big, "the fsync of the 2300-block write"),
        Cut {
            what: "the end of the log: the 2300-block fsync and two fdatasyncs complete".into(),
            q: end,
            prefix: end,
            also: Vec::new(),
            expected_warning: None,
        },
    ];
    for (i, c) in cuts.iter().enumerate() {
        let p = judge_in_linux("large_write", &log, &m, c, &dir.join(format!("l{i}")));
        failures.extend(
            p.into_iter()
                .map(|p| format!("large_write, {}: {p}", c.what)),
        );
    }

    let mut r = Run::new();
    node_holes(&mut r);
    let (log, m) = r.crash();
    let end = log.events().len();
    let c = Cut {
        what: "the end of the log: fsync chains through node holes, every fsync complete".into(),
        q: end,
        prefix: end,
        also: Vec::new(),
        expected_warning: None,
    };
    let p = judge_in_linux("node_holes", &log, &m, &c, &dir.join("n0"));
    failures.extend(
        p.into_iter()
            .map(|p| format!("node_holes, {}: {p}", c.what)),
    );

    println!(
        "6 crash images in Linux: {} failures; {:.1} s",
        failures.len(),
        started.elapsed().as_secs_f64()
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The judges of this test can fail, without a Linux boot: uf2fs's view of the image cut just
/// before the fsync of d/new, judged as if that fsync had returned, misses d/new; and it
/// differs from the view just after.
#[test]
fn the_view_judges_catch_a_lost_fsync() {
    let mut r = Run::new();
    let (fsync_new, _) = small_files(&mut r);
    let (log, m) = r.crash();
    let view_at = |p: usize| {
        let img = Overlay::new(Arc::new(log.prefix_image(p)), HashMap::new());
        uf2fs_view(&Fs::with_device_rw(Box::new(img)).unwrap()).unwrap()
    };
    let before = view_at(fsync_new.start);
    let after = view_at(fsync_new.end);
    let mut sums = HashMap::new();
    assert_eq!(judge_view(&after, &m, fsync_new.end, &mut sums), Ok(()));
    let e = judge_view(&before, &m, fsync_new.end, &mut sums).unwrap_err();
    assert!(
        e.starts_with("/d/new shows version 0 of 3; allowed versions [2]"),
        "{e}"
    );
    let d = differences(&after, &before);
    assert_eq!(
        d,
        [format!(
            "/d/new: Linux shows {:?}, uf2fs shows no such name",
            after["d/new"]
        )]
    );
}
