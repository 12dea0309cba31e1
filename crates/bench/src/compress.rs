//! `compress`: reading compressed images (issue 15's benchmark, its read half).
//!
//! A source tree is loaded into a plain image (mkfs.f2fs and sload.f2fs). For each algorithm,
//! Linux 6.1 (tools/linux-f2fs) copies that tree from the plain image, attached as a second
//! disk, into a fresh `-O extra_attr,compression` image mounted with
//! `compress_algorithm=ALG,compress_log_size=N,compress_extension=*`, so every file is
//! compressed as Linux compresses it; the guest's `compr_written_block` and
//! `compr_saved_block` say how much it saved. Then, on the host, caches dropped before each
//! and the images interleaved run by run, uf2fs reads every image two ways: `uf2fs extract`
//! of the whole tree, and `tar -c` of a read-only FUSE mount. Each compressed image's
//! extraction is compared with the source tree (`diff -r`) once. MiB/s are over the tree's
//! file bytes; ratios are to the plain image in the same run.
//!
//! The write half: for the plain case and each algorithm, a fresh `-O
//! extra_attr,compression` image is mounted by uf2fs (for an algorithm with
//! `compress_algorithm=ALG,compress_log_size=N,compress_extension=*`, as Linux was) and the
//! tree copied in with `cp -a` and a sync, caches dropped first, rounds interleaved. The
//! blocks uf2fs saved are the sum of every file's `i_compr_blocks` (what Linux's
//! `compr_saved_block` counts), beside Linux's saving on the same tree; the last round's
//! image is extracted and compared with the tree once.

use crate::shell::{drop_caches, q, sh};
use clap::Args;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

type Res<T> = Result<T, String>;

#[derive(Args)]
pub struct CompressArgs {
    /// Work directory (images, extractions, mount point).
    #[arg(long, default_value = "target/bench/compress")]
    dir: PathBuf,
    /// The tree to load (a directory on the host).
    #[arg(long, default_value = "/usr/include")]
    tree: PathBuf,
    /// Image size (MiB) of every image.
    #[arg(long, default_value_t = 1024)]
    size_mib: u64,
    /// Algorithms, as `compress_algorithm=` names them.
    #[arg(long, value_delimiter = ',', default_value = "lz4,zstd,lzo,lzo-rle")]
    algorithms: Vec<String>,
    /// `compress_log_size` (blocks per cluster, log 2).
    #[arg(long, default_value_t = 2)]
    log_cluster: u32,
    /// Rounds (medians in the table; every value in the JSON).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// The uf2fs binary.
    #[arg(long, default_value = "target/release/uf2fs")]
    uf2fs: PathBuf,
    /// The repository's tools directory (linux-f2fs).
    #[arg(long, default_value = "tools")]
    tools: PathBuf,
    /// JSON output.
    #[arg(long, default_value = "target/bench/compress.json")]
    json: PathBuf,
}

/// Seconds `cmd` took, caches dropped first.
fn timed(cmd: &str) -> Res<f64> {
    drop_caches()?;
    let t = Instant::now();
    sh(cmd)?;
    Ok(t.elapsed().as_secs_f64())
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s.get(s.len() / 2).copied().unwrap_or(f64::NAN)
}

/// One image to read: its name, path, and what Linux said when it wrote it.
struct Image {
    name: String,
    path: PathBuf,
    linux: Value,
}

impl Image {
    /// The blocks Linux saved writing this image, and their % (None for the plain one).
    fn linux_saving(&self) -> (Option<u64>, Option<f64>) {
        (
            self.linux
                .pointer("/compr_saved_block")
                .and_then(Value::as_u64),
            self.linux.pointer("/saved_pct").and_then(Value::as_f64),
        )
    }
}

/// Linux copies the plain image's tree into a compressed image.
fn linux_copy(a: &CompressArgs, plain: &Path, alg: &str) -> Res<Image> {
    let img = a.dir.join(format!("{alg}.img"));
    let _ = std::fs::remove_file(&img);
    sh(&format!("truncate -s {}M {}", a.size_mib, q(&img)))?;
    sh(&format!(
        "mkfs.f2fs -q -f -O extra_attr,compression {}",
        q(&img)
    ))?;
    let job = a.dir.join(format!("{alg}.job.sh"));
    std::fs::write(
        &job,
        "set -e\n\
         mkdir -p /src\n\
         mount -t f2fs -o ro /dev/vdc /src\n\
         cp -a /src/. $MNT/\n\
         sync\n\
         for f in compr_written_block compr_saved_block compr_new_inode; do\n\
           echo \"$f $(cat /sys/fs/f2fs/vda/$f)\" >> $OUT/compr.txt\n\
         done\n\
         df -k $MNT | tail -n 1 > $OUT/df.txt\n\
         umount /src\n",
    )
    .map_err(|e| format!("{}: {e}", job.display()))?;
    let out = a.dir.join(format!("{alg}.linux"));
    let opts = format!(
        "compress_algorithm={alg},compress_log_size={},compress_extension=*",
        a.log_cluster
    );
    eprintln!("compress: Linux copies the tree into {alg}.img (-o {opts})");
    let said = Command::new(a.tools.join("linux-f2fs"))
        .arg("--out")
        .arg(&out)
        .args(["--mount-opts", &opts, "--timeout", "3600", "--extra-image"])
        .arg(plain)
        .arg(&img)
        .arg(&job)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("linux-f2fs: {e}"))?;
    if !said.status.success() {
        return Err(format!(
            "linux-f2fs ({alg}): {}\n{}{}",
            said.status,
            String::from_utf8_lossy(&said.stdout),
            String::from_utf8_lossy(&said.stderr)
        ));
    }
    let compr = std::fs::read_to_string(out.join("files/compr.txt")).unwrap_or_default();
    let get = |k: &str| {
        compr
            .lines()
            .find_map(|l| l.strip_prefix(k)?.trim().parse::<u64>().ok())
    };
    let (written, saved) = (get("compr_written_block"), get("compr_saved_block"));
    let inodes = get("compr_new_inode");
    if inodes.unwrap_or(0) == 0 {
        return Err(format!(
            "Linux compressed no file with {alg} (compr.txt: {compr:?}): check compress_extension=*"
        ));
    }
    Ok(Image {
        name: alg.to_string(),
        path: img,
        linux: json!({
            "compr_written_block": written,
            "compr_saved_block": saved,
            "compr_new_inode": inodes,
            "saved_pct": match (written, saved) {
                (Some(w), Some(s)) if w + s > 0 => Some(100.0 * s as f64 / (w + s) as f64),
                _ => None,
            },
        }),
    })
}

pub fn run(a: &CompressArgs) -> Res<()> {
    std::fs::create_dir_all(&a.dir).map_err(|e| format!("{}: {e}", a.dir.display()))?;
    let bytes: u64 = sh(&format!(
        "find {} -type f -printf '%s\\n' | awk '{{s+=$1}} END {{print s+0}}'",
        q(&a.tree)
    ))?
    .trim()
    .parse()
    .map_err(|e| format!("tree size: {e}"))?;
    let mib = bytes as f64 / f64::from(1 << 20);
    eprintln!("compress: {} ({mib:.1} MiB of file data)", a.tree.display());
    let plain = a.dir.join("plain.img");
    let _ = std::fs::remove_file(&plain);
    uf2fs_testkit::mkfs_sload(&plain, a.size_mib, "", &a.tree);
    let mut images = vec![Image {
        name: "plain".into(),
        path: plain.clone(),
        linux: Value::Null,
    }];
    for alg in &a.algorithms {
        images.push(linux_copy(a, &plain, alg)?);
    }
    let out = a.dir.join("out");
    let mnt = a.dir.join("mnt");
    std::fs::create_dir_all(&mnt).map_err(|e| format!("{}: {e}", mnt.display()))?;
    let bin = q(&a.uf2fs);
    // Each compressed image's extraction equals the source tree.
    for im in images.iter().skip(1) {
        let _ = std::fs::remove_dir_all(&out);
        sh(&format!("{bin} extract {} {}", q(&im.path), q(&out)))?;
        sh(&format!("diff -r {} {} > /dev/null", q(&a.tree), q(&out)))
            .map_err(|e| format!("{}: extraction differs from the tree: {e}", im.name))?;
    }
    let mut extract: Vec<Vec<f64>> = vec![Vec::new(); images.len()];
    let mut mount: Vec<Vec<f64>> = vec![Vec::new(); images.len()];
    for round in 0..a.runs {
        for (i, im) in images.iter().enumerate() {
            let _ = std::fs::remove_dir_all(&out);
            let t = timed(&format!("{bin} extract {} {}", q(&im.path), q(&out)))?;
            extract[i].push(t);
            sh(&format!("{bin} mount -o ro {} {}", q(&im.path), q(&mnt)))?;
            let r = timed(&format!("tar -C {} -cf - . | cat > /dev/null", q(&mnt)));
            sh(&format!("{bin} umount {}", q(&mnt)))?;
            mount[i].push(r?);
            eprintln!(
                "compress: round {} {}: extract {:.2} s, mount read {:.2} s",
                round + 1,
                im.name,
                extract[i].last().copied().unwrap_or(0.0),
                mount[i].last().copied().unwrap_or(0.0)
            );
        }
    }
    let writes = write_half(a, &images)?;
    let _ = std::fs::remove_dir_all(&out);
    let base_x = median(&extract[0]);
    let base_m = median(&mount[0]);
    let mut rows = Vec::new();
    println!(
        "compress: {} ({mib:.1} MiB in files), cluster {} KiB, medians of {} runs, caches dropped",
        a.tree.display(),
        4u32 << a.log_cluster,
        a.runs
    );
    println!(
        "{:<9} {:>12} {:>9} {:>10} {:>9} {:>9} {:>10} {:>9} {:>9}",
        "image",
        "Linux saved",
        "saved %",
        "extract s",
        "MiB/s",
        "x plain",
        "mount r s",
        "MiB/s",
        "x plain"
    );
    for (i, im) in images.iter().enumerate() {
        let (x, m) = (median(&extract[i]), median(&mount[i]));
        let (saved, pct) = im.linux_saving();
        println!(
            "{:<9} {:>12} {:>9} {:>10.2} {:>9.1} {:>9.2} {:>10.2} {:>9.1} {:>9.2}",
            im.name,
            saved.map_or("-".into(), |s| format!("{s} blk")),
            pct.map_or("-".into(), |p| format!("{p:.1}")),
            x,
            mib / x,
            base_x / x,
            m,
            mib / m,
            base_m / m,
        );
        rows.push(json!({
            "image": im.name,
            "linux": im.linux,
            "extract_secs": extract[i],
            "mount_read_secs": mount[i],
            "extract_mib_s": mib / x,
            "mount_read_mib_s": mib / m,
            "extract_speed_vs_plain": base_x / x,
            "mount_read_speed_vs_plain": base_m / m,
        }));
    }
    println!();
    println!(
        "{:<9} {:>10} {:>9} {:>9} {:>14} {:>9} {:>12} {:>9}",
        "write", "cp -a s", "MiB/s", "x plain", "uf2fs saved", "saved %", "Linux saved", "saved %"
    );
    let base_w = median(&writes[0].secs);
    let mut write_rows = Vec::new();
    for (w, im) in writes.iter().zip(&images) {
        let t = median(&w.secs);
        let pct = |saved: u64, written: u64| {
            if saved + written == 0 {
                0.0
            } else {
                100.0 * saved as f64 / (saved + written) as f64
            }
        };
        let ours_pct = pct(w.saved, w.written);
        let (linux_saved, linux_pct) = im.linux_saving();
        println!(
            "{:<9} {:>10.2} {:>9.1} {:>9.2} {:>14} {:>9.1} {:>12} {:>9}",
            w.name,
            t,
            mib / t,
            base_w / t,
            format!("{} blk", w.saved),
            ours_pct,
            linux_saved.map_or("-".into(), |s| format!("{s} blk")),
            linux_pct.map_or("-".into(), |p| format!("{p:.1}")),
        );
        write_rows.push(json!({
            "image": w.name,
            "cp_secs": w.secs,
            "cp_mib_s": mib / t,
            "cp_speed_vs_plain": base_w / t,
            "uf2fs_saved_blocks": w.saved,
            "uf2fs_written_blocks": w.written,
            "uf2fs_saved_pct": ours_pct,
            "linux_saved_blocks": linux_saved,
            "linux_saved_pct": linux_pct,
        }));
    }
    let doc = json!({
        "bench": "compress",
        "tree": a.tree.display().to_string(),
        "tree_bytes": bytes,
        "log_cluster_size": a.log_cluster,
        "runs": a.runs,
        "rows": rows,
        "writes": write_rows,
    });
    if let Some(p) = a.json.parent() {
        let _ = std::fs::create_dir_all(p);
    }
    std::fs::write(
        &a.json,
        serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?,
    )
    .map_err(|e| format!("{}: {e}", a.json.display()))?;
    println!("JSON: {}", a.json.display());
    Ok(())
}

/// What uf2fs's compressed writes of the tree cost and saved, for one image kind.
struct Written {
    name: String,
    secs: Vec<f64>,
    /// Sum of i_compr_blocks over the tree (Linux's compr_saved_block).
    saved: u64,
    /// Blocks holding compressed clusters (Linux's compr_written_block).
    written: u64,
}

/// The write half (see the module's comment): `images` names the kinds (plain first).
fn write_half(a: &CompressArgs, images: &[Image]) -> Res<Vec<Written>> {
    let bin = q(&a.uf2fs);
    let mnt = a.dir.join("mnt");
    let img = a.dir.join("write.img");
    let mut out: Vec<Written> = images
        .iter()
        .map(|im| Written {
            name: im.name.clone(),
            secs: Vec::new(),
            saved: 0,
            written: 0,
        })
        .collect();
    for round in 0..a.runs {
        for w in out.iter_mut() {
            let _ = std::fs::remove_file(&img);
            sh(&format!("truncate -s {}M {}", a.size_mib, q(&img)))?;
            sh(&format!(
                "mkfs.f2fs -q -f -O extra_attr,compression {}",
                q(&img)
            ))?;
            let opts = if w.name == "plain" {
                String::new()
            } else {
                format!(
                    "-o compress_algorithm={},compress_log_size={},compress_extension=*",
                    w.name, a.log_cluster
                )
            };
            sh(&format!("{bin} mount {opts} {} {}", q(&img), q(&mnt)))?;
            let t = timed(&format!(
                "cp -a {}/. {}/ && sync -f {}",
                q(&a.tree),
                q(&mnt),
                q(&mnt)
            ));
            sh(&format!("{bin} umount {}", q(&mnt)))?;
            w.secs.push(t?);
            eprintln!(
                "compress: round {} write {}: cp -a {:.2} s",
                round + 1,
                w.name,
                w.secs.last().copied().unwrap_or(0.0)
            );
            if round + 1 == a.runs {
                let (saved, written) = compressed_blocks(&img)?;
                w.saved = saved;
                w.written = written;
                let check = a.dir.join("write.out");
                let _ = std::fs::remove_dir_all(&check);
                sh(&format!("{bin} extract {} {}", q(&img), q(&check)))?;
                sh(&format!("diff -r {} {} > /dev/null", q(&a.tree), q(&check)))
                    .map_err(|e| format!("{}: uf2fs's written tree differs: {e}", w.name))?;
                let _ = std::fs::remove_dir_all(&check);
            }
        }
    }
    let _ = std::fs::remove_file(&img);
    Ok(out)
}

/// (saved, written) blocks of the compressed files in image `img`: the sum of
/// i_compr_blocks, and the blocks holding compressed clusters, as Linux counts both.
fn compressed_blocks(img: &Path) -> Res<(u64, u64)> {
    let fs = uf2fs_engine::Fs::open(img).map_err(|e| format!("{}: {e}", img.display()))?;
    let mut stack = vec![fs.root_ino()];
    let (mut saved, mut written) = (0u64, 0u64);
    while let Some(d) = stack.pop() {
        for e in fs.readdir(d).map_err(|e| e.to_string())? {
            match e.file_type {
                Some(uf2fs_engine::FileType::Directory) => stack.push(e.ino),
                Some(uf2fs_engine::FileType::Regular) => {
                    if let Some(c) = fs.compression(e.ino).map_err(|e| e.to_string())? {
                        saved += c.compr_blocks;
                        // Blocks holding compressed clusters (Linux's compr_written_block):
                        // the addresses after a cluster's COMPRESS_ADDR.
                        let cb = c.cluster_blocks();
                        let mut in_compressed: Option<u64> = None;
                        fs.data_slots(e.ino, &mut |fblk, addr| {
                            if addr == uf2fs_engine::COMPRESS_ADDR && fblk % cb == 0 {
                                in_compressed = Some(fblk / cb);
                            } else if in_compressed == Some(fblk / cb)
                                && addr != uf2fs_engine::NEW_ADDR
                            {
                                written += 1;
                            }
                            Ok(())
                        })
                        .map_err(|e| e.to_string())?;
                    }
                }
                _ => {}
            }
        }
    }
    Ok((saved, written))
}
