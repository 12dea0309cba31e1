//! [`JoinedDevice`]: several devices seen as one address space, each holding a consecutive
//! range of block addresses (a multi-device volume). A run that crosses from one device to the
//! next is split at the boundary; a flush flushes every device.
//!
//! Each part must be at least as large as its range: the join refuses a short one when it is
//! made, so that a missing tail is an error at open and not an I/O error in the middle of a
//! write. A part larger than its range keeps its extra blocks unused.

use crate::{BlockDevice, IoCause, IoCounters, BLOCK_SIZE};
use std::io;

/// One device of a join: what to call it in messages, the device, and how many blocks of the
/// joined address space it holds.
pub struct Part {
    pub name: String,
    pub device: Box<dyn BlockDevice>,
    pub blocks: u64,
}

struct Placed {
    name: String,
    device: Box<dyn BlockDevice>,
    start: u64,
    end: u64,
}

/// Devices joined end to end by block address.
pub struct JoinedDevice {
    parts: Vec<Placed>,
    end: u64,
    counters: IoCounters,
}

impl JoinedDevice {
    /// Joins `parts` in order: the first holds blocks `[0, blocks)`, the next the following
    /// ones, and so on. Refuses an empty list and a part smaller than its range, naming it.
    pub fn new(parts: Vec<Part>) -> io::Result<JoinedDevice> {
        if parts.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "no devices to join",
            ));
        }
        let mut placed = Vec::with_capacity(parts.len());
        let mut next = 0u64;
        for p in parts {
            let have = p.device.block_count();
            if have < p.blocks {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "{} has {have} blocks of 4 KiB but the volume keeps {} blocks on it \
                         (addresses {next}..{}): wrong device, or truncated?",
                        p.name,
                        p.blocks,
                        next.saturating_add(p.blocks)
                    ),
                ));
            }
            let end = next.checked_add(p.blocks).ok_or_else(|| {
                io::Error::new(io::ErrorKind::InvalidInput, "device ranges overflow")
            })?;
            placed.push(Placed {
                name: p.name,
                device: p.device,
                start: next,
                end,
            });
            next = end;
        }
        Ok(JoinedDevice {
            parts: placed,
            end: next,
            counters: IoCounters::default(),
        })
    }

    /// Names and ranges of the parts, in order.
    pub fn parts(&self) -> Vec<(String, u64, u64)> {
        self.parts
            .iter()
            .map(|p| (p.name.clone(), p.start, p.end))
            .collect()
    }

    /// Calls `each(part, address on the part, byte range of the buffer)` for the pieces of
    /// the run of `len` bytes at `blkaddr`, in order.
    fn split(
        &self,
        blkaddr: u64,
        len: usize,
        mut each: impl FnMut(&Placed, u64, std::ops::Range<usize>) -> io::Result<()>,
    ) -> io::Result<u64> {
        let n = crate::run_blocks(blkaddr, len, self.end, "the volume's devices", "")?;
        let end = blkaddr + n;
        let mut at = blkaddr;
        for p in &self.parts {
            if at >= end {
                break;
            }
            if at >= p.end {
                continue;
            }
            let upto = end.min(p.end);
            let from = ((at - blkaddr) as usize) * BLOCK_SIZE;
            let to = ((upto - blkaddr) as usize) * BLOCK_SIZE;
            each(p, at - p.start, from..to).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("{} (blocks {at}..{upto} of the volume): {e}", p.name),
                )
            })?;
            at = upto;
        }
        Ok(n)
    }
}

impl BlockDevice for JoinedDevice {
    fn block_count(&self) -> u64 {
        self.end
    }

    fn read_blocks(&self, blkaddr: u64, buf: &mut [u8], cause: IoCause) -> io::Result<()> {
        let len = buf.len();
        let n = self.split(blkaddr, len, |p, addr, r| match buf.get_mut(r) {
            Some(piece) => p.device.read_blocks(addr, piece, cause),
            None => Err(io::Error::other("piece outside the buffer")),
        })?;
        self.counters.record_read(cause, n);
        Ok(())
    }

    fn write_blocks(&self, blkaddr: u64, buf: &[u8], cause: IoCause) -> io::Result<()> {
        let n = self.split(blkaddr, buf.len(), |p, addr, r| match buf.get(r) {
            Some(piece) => p.device.write_blocks(addr, piece, cause),
            None => Err(io::Error::other("piece outside the buffer")),
        })?;
        self.counters.record_write(cause, n);
        Ok(())
    }

    fn write_blocks_buffered(&self, blkaddr: u64, buf: &[u8], cause: IoCause) -> io::Result<()> {
        let n = self.split(blkaddr, buf.len(), |p, addr, r| match buf.get(r) {
            Some(piece) => p.device.write_blocks_buffered(addr, piece, cause),
            None => Err(io::Error::other("piece outside the buffer")),
        })?;
        self.counters.record_write(cause, n);
        Ok(())
    }

    /// Flushes every part, even after one fails; the first failure is returned.
    fn flush(&self) -> io::Result<()> {
        let mut first = None;
        for p in &self.parts {
            if let Err(e) = p.device.flush() {
                first.get_or_insert(io::Error::new(e.kind(), format!("{}: {e}", p.name)));
            }
        }
        self.counters.record_flush();
        first.map_or(Ok(()), Err)
    }

    fn counters(&self) -> &IoCounters {
        &self.counters
    }

    fn is_read_only(&self) -> bool {
        self.parts.iter().any(|p| p.device.is_read_only())
    }

    fn set_direct_writes(&self, on: bool) {
        for p in &self.parts {
            p.device.set_direct_writes(on);
        }
    }

    /// Available and on if any part is; refused if any part refused; runs of all parts.
    fn direct_writes_state(&self) -> crate::DirectWrites {
        self.parts
            .iter()
            .map(|p| p.device.direct_writes_state())
            .fold(crate::DirectWrites::default(), |a, d| crate::DirectWrites {
                available: a.available || d.available,
                on: a.on || d.on,
                refused: a.refused || d.refused,
                runs: a.runs + d.runs,
            })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]
    use super::*;
    use crate::MemDevice;
    use std::sync::Arc;

    fn part(name: &str, dev: &Arc<MemDevice>, blocks: u64) -> Part {
        Part {
            name: name.into(),
            device: Box::new(dev.clone()),
            blocks,
        }
    }

    /// Two memory devices of 4 and 3 blocks, the first holding 3 blocks of the volume (its
    /// fourth is unused), the second 3.
    fn two() -> (JoinedDevice, Arc<MemDevice>, Arc<MemDevice>) {
        let a = Arc::new(MemDevice::new(vec![0u8; 4 * BLOCK_SIZE], false));
        let b = Arc::new(MemDevice::new(vec![0u8; 3 * BLOCK_SIZE], false));
        let j = JoinedDevice::new(vec![part("a", &a, 3), part("b", &b, 3)]).unwrap();
        (j, a, b)
    }

    #[test]
    fn a_run_across_the_boundary_is_split() {
        let (j, a, b) = two();
        assert_eq!(j.block_count(), 6);
        let buf: Vec<u8> = (0..4 * BLOCK_SIZE)
            .map(|i| (i / BLOCK_SIZE) as u8 + 1)
            .collect();
        j.write_blocks(1, &buf, IoCause::UserData).unwrap();
        let (a, b) = (a.contents(), b.contents());
        assert_eq!(a[BLOCK_SIZE], 1);
        assert_eq!(a[2 * BLOCK_SIZE], 2);
        assert_eq!(a[3 * BLOCK_SIZE], 0, "the unused tail of a is not written");
        assert_eq!(b[0], 3);
        assert_eq!(b[BLOCK_SIZE], 4);
        assert_eq!(b[2 * BLOCK_SIZE], 0);
        let mut back = vec![0u8; 4 * BLOCK_SIZE];
        j.read_blocks(1, &mut back, IoCause::UserData).unwrap();
        assert_eq!(back, buf);
        let s = j.counters().snapshot();
        assert_eq!((s.written_blocks[0], s.write_requests[0]), (4, 1));
        assert_eq!((s.read_blocks[0], s.read_requests[0]), (4, 1));
    }

    #[test]
    fn past_the_last_device_is_an_error() {
        let (j, _, _) = two();
        let mut buf = vec![0u8; 2 * BLOCK_SIZE];
        let e = j.read_blocks(5, &mut buf, IoCause::Meta).unwrap_err();
        assert!(e.to_string().contains("past the end of the volume"), "{e}");
        j.read_blocks(4, &mut buf, IoCause::Meta).unwrap();
    }

    #[test]
    fn a_short_part_is_refused_by_name() {
        let a = Arc::new(MemDevice::new(vec![0u8; 4 * BLOCK_SIZE], false));
        let b = Arc::new(MemDevice::new(vec![0u8; 2 * BLOCK_SIZE], false));
        let e = JoinedDevice::new(vec![part("a", &a, 4), part("/dev/vdc", &b, 3)])
            .err()
            .unwrap();
        let msg = e.to_string();
        assert!(msg.contains("/dev/vdc has 2 blocks"), "{msg}");
        assert!(msg.contains("keeps 3 blocks"), "{msg}");
    }

    #[test]
    fn read_only_when_any_part_is() {
        let a = Arc::new(MemDevice::new(vec![0u8; BLOCK_SIZE], false));
        let b = Arc::new(MemDevice::new(vec![0u8; BLOCK_SIZE], true));
        let j = JoinedDevice::new(vec![part("a", &a, 1), part("b", &b, 1)]).unwrap();
        assert!(j.is_read_only());
        let e = j
            .write_blocks(1, &[0u8; BLOCK_SIZE], IoCause::Meta)
            .unwrap_err();
        assert!(e.to_string().starts_with("b (blocks 1..2"), "{e}");
    }
}
