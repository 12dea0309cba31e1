//! Opening a volume's devices: the image or device the user names, and, when its superblock
//! lists more devices (`mkfs.f2fs -c`), the others, joined by block range
//! ([`JoinedDevice`]).
//!
//! The superblock records the path each device had when the volume was formatted
//! (`/dev/vdc`...), which is rarely valid where the image is opened later. The caller may
//! name the other devices, in `devs[]` order after the first; a device it does not name is
//! looked for at its recorded path. Each must be at least as large as the range of the volume
//! it holds.

use crate::error::{Error, Result};
use crate::mount::read_superblock;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use uf2fs_device::{BlockDevice, FileDevice, JoinedDevice, Part};

/// How the CLI and the mount let a user name the other devices (for messages).
const HOW_TO_NAME: &str =
    "name the volume's other devices in order with --device PATH (mount: -o device=PATH)";

/// Opens the volume whose first device is `path`, with `extra` naming its other devices (in
/// `devs[]` order after the first; the rest are looked for where the superblock recorded
/// them). A single-device volume is `path` alone. A superblock that cannot be read is left
/// for the mount to report, unless devices were named.
pub(crate) fn open_volume(
    path: &Path,
    extra: &[PathBuf],
    writable: bool,
) -> Result<Box<dyn BlockDevice>> {
    let shown = path.display().to_string();
    let first: Box<dyn BlockDevice> = if writable {
        if uf2fs_device::is_sparse(path).map_err(|e| Error::io(&shown, e))? {
            return Err(Error::ReadOnly(uf2fs_device::SPARSE_READ_ONLY.into()));
        }
        Box::new(FileDevice::open(path, true).map_err(|e| Error::io(&shown, e))?)
    } else {
        uf2fs_device::open_image(path, false).map_err(|e| Error::io(&shown, e))?
    };
    let sb = match read_superblock(&*first) {
        Ok((sb, _)) => sb,
        Err(_) if extra.is_empty() => return Ok(first),
        Err(e) => return Err(e),
    };
    let devs = sb.devices();
    let others = devs.len().saturating_sub(1);
    if extra.len() > others {
        return Err(Error::Device(if others == 0 {
            format!(
                "{shown} is a single-device volume, but {} more device(s) were named",
                extra.len()
            )
        } else {
            format!(
                "{shown} is a volume of {} devices, but {} more were named",
                devs.len(),
                extra.len()
            )
        }));
    }
    if others == 0 {
        return Ok(first);
    }
    let first_blocks = devs.first().map_or(0, |d| d.blocks());
    let mut parts = Vec::with_capacity(devs.len());
    parts.push(Part {
        name: format!("device 0 ({shown})"),
        device: first,
        blocks: first_blocks,
    });
    for (i, d) in devs.iter().enumerate().skip(1) {
        let recorded = d.path_lossy();
        let (p, name) = match extra.get(i - 1) {
            Some(p) => (p.clone(), format!("device {i} ({})", p.display())),
            None => (
                PathBuf::from(OsStr::from_bytes(&d.path)),
                format!("device {i} ({recorded}, the path recorded in the superblock)"),
            ),
        };
        let dev = FileDevice::open(&p, writable).map_err(|e| {
            if e.kind() == std::io::ErrorKind::ResourceBusy {
                return Error::Busy(format!("{name}: {e}"));
            }
            if extra.get(i - 1).is_none() && e.kind() == std::io::ErrorKind::NotFound {
                return Error::Device(format!(
                    "device {i} of the volume, recorded in the superblock as {recorded}, is not \
                     there: {HOW_TO_NAME}"
                ));
            }
            Error::Device(format!("{name}: {e}"))
        })?;
        parts.push(Part {
            name,
            device: Box::new(dev),
            blocks: d.blocks(),
        });
    }
    let joined = JoinedDevice::new(parts).map_err(|e| {
        Error::Device(if extra.len() < others {
            format!("{e} ({HOW_TO_NAME})")
        } else {
            e.to_string()
        })
    })?;
    Ok(Box::new(joined))
}
