//! `--sparse` on `mkfs` and `import`: the file system is made or changed in a raw image as
//! usual, which is then written as an Android sparse image (what `img2simg` would write).
//! The raw image lives beside the destination while it is worked on; the sparse image is
//! written to a temporary name and renamed over the destination, so a failure leaves the
//! destination as it was.

use crate::{CliResult, Failure};
use std::ffi::OsString;
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use uf2fs_engine::uf2fs_device::{is_sparse, write_sparse, SparseDevice};

/// `dest` with `suffix` appended to its file name: a name in the same directory (the same
/// file system, so that a rename replaces `dest` in one step).
fn beside(dest: &Path, suffix: &str) -> PathBuf {
    let mut name = OsString::from(dest.as_os_str());
    name.push(suffix);
    PathBuf::from(name)
}

/// A raw image that is removed when dropped.
pub struct RawStage(pub PathBuf);

impl Drop for RawStage {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A fresh raw staging file beside `dest`.
pub fn stage(dest: &Path) -> Result<RawStage, Failure> {
    let p = beside(dest, ".uf2fs-raw");
    let _ = std::fs::remove_file(&p);
    File::create_new(&p).map_err(|e| format!("{}: {e}", p.display()))?;
    Ok(RawStage(p))
}

/// Writes the raw image `raw` as a sparse image at `dest` (which may be `raw` itself).
pub fn pack(raw: &Path, dest: &Path) -> CliResult {
    let shown = dest.display();
    let src = File::open(raw).map_err(|e| format!("{}: {e}", raw.display()))?;
    let len = src
        .metadata()
        .map_err(|e| format!("{}: {e}", raw.display()))?
        .len();
    let tmp = beside(dest, ".uf2fs-sparse");
    let out = File::create(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
    let written = write_sparse(
        std::io::BufReader::with_capacity(1 << 20, src),
        len,
        BufWriter::with_capacity(1 << 20, &out),
    )
    .and_then(|chunks| out.sync_all().map(|()| chunks))
    .and_then(|chunks| std::fs::rename(&tmp, dest).map(|()| chunks));
    match written {
        Ok(chunks) => {
            println!("{shown}: sparse image, {chunks} chunks");
            Ok(())
        }
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(Failure::Msg(format!(
                "{shown}: writing the sparse image: {e}"
            )))
        }
    }
}

/// `import --sparse`: into `image` as it is when raw (then written back sparse), or into a
/// raw copy of it when it is already sparse.
pub fn import(
    image: &Path,
    src: &Path,
    path: &str,
    opts: &crate::write::ImportOptions,
) -> CliResult {
    let shown = image.display();
    if !is_sparse(image).map_err(|e| format!("{shown}: {e}"))? {
        let imported = crate::write::import(image, src, path, opts);
        if let Err(Failure::Msg(m)) = imported {
            return Err(Failure::Msg(m));
        }
        pack(image, image)?;
        return imported;
    }
    let raw = stage(image)?;
    let dev = SparseDevice::open(image).map_err(|e| format!("{shown}: {e}"))?;
    let out = std::fs::OpenOptions::new()
        .write(true)
        .open(&raw.0)
        .map_err(|e| format!("{}: {e}", raw.0.display()))?;
    dev.unpack_to(&out)
        .map_err(|e| format!("{shown}: unpacking: {e}"))?;
    drop((dev, out));
    let imported = crate::write::import(&raw.0, src, path, opts);
    if let Err(Failure::Msg(m)) = imported {
        return Err(Failure::Msg(m));
    }
    pack(&raw.0, image)?;
    imported
}
