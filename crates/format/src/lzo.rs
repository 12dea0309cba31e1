//! An LZO1X decoder for F2FS's `lzo` (algorithm 0) and `lzo-rle` (algorithm 3) clusters.
//!
//! Written here from the published description of the LZO1X stream (Linux's
//! Documentation/staging/lzo.rst) because no crate under a licence compatible with ours
//! decodes LZO-RLE, the kernel's own variant: a stream that starts with the byte 17 followed by
//! a version byte (nonzero) may encode runs of zero bytes with the 16..31 instruction whose
//! distance field is all ones. Plain LZO1X is the same stream without that prefix, so one
//! decoder reads both, as the kernel's does.
//!
//! The decoder writes into a caller-sized buffer and never past it: every literal copy, match
//! and zero run is checked against the input left and the output room, lengths are summed with
//! checked arithmetic, and a match may not reach before the start of the output. The stream
//! must end with the end marker and consume its input exactly, as Linux requires.

/// Why a stream did not decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LzoError {
    /// The input ended inside an instruction.
    InputOverrun,
    /// The output would grow past the buffer.
    OutputOverrun,
    /// A match reaches before the start of the output.
    LookBehind,
    /// Bytes follow the end marker.
    InputNotConsumed,
    /// The end marker is malformed, or missing.
    BadEnd,
}

impl LzoError {
    /// A short description for error messages.
    pub fn describe(self) -> &'static str {
        match self {
            LzoError::InputOverrun => "LZO stream ends inside an instruction",
            LzoError::OutputOverrun => "LZO stream decodes past the cluster",
            LzoError::LookBehind => "LZO match reaches before the start of the cluster",
            LzoError::InputNotConsumed => "bytes follow the LZO end marker",
            LzoError::BadEnd => "LZO stream has a malformed end marker",
        }
    }
}

struct Reader<'a> {
    src: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn byte(&mut self) -> Result<u8, LzoError> {
        let b = *self.src.get(self.at).ok_or(LzoError::InputOverrun)?;
        self.at += 1;
        Ok(b)
    }

    fn le16(&mut self) -> Result<usize, LzoError> {
        let lo = usize::from(self.byte()?);
        let hi = usize::from(self.byte()?);
        Ok(lo | hi << 8)
    }

    /// A length whose 4-to-5-bit field was zero: `base` plus 255 for every zero byte, plus the
    /// first nonzero byte.
    fn long_length(&mut self, base: usize) -> Result<usize, LzoError> {
        let mut n = base;
        loop {
            let b = self.byte()?;
            if b != 0 {
                return n.checked_add(usize::from(b)).ok_or(LzoError::OutputOverrun);
            }
            n = n.checked_add(255).ok_or(LzoError::OutputOverrun)?;
        }
    }

    fn take(&mut self, n: usize) -> Result<&[u8], LzoError> {
        let end = self.at.checked_add(n).ok_or(LzoError::InputOverrun)?;
        let s = self.src.get(self.at..end).ok_or(LzoError::InputOverrun)?;
        self.at = end;
        Ok(s)
    }
}

struct Writer<'a> {
    dst: &'a mut [u8],
    at: usize,
}

impl Writer<'_> {
    fn room(&self, n: usize) -> Result<usize, LzoError> {
        let end = self.at.checked_add(n).ok_or(LzoError::OutputOverrun)?;
        if end > self.dst.len() {
            return Err(LzoError::OutputOverrun);
        }
        Ok(end)
    }

    fn literal(&mut self, bytes: &[u8]) -> Result<(), LzoError> {
        let end = self.room(bytes.len())?;
        self.dst
            .get_mut(self.at..end)
            .ok_or(LzoError::OutputOverrun)?
            .copy_from_slice(bytes);
        self.at = end;
        Ok(())
    }

    /// Copies `len` bytes from `dist` bytes back, byte by byte (a match may overlap itself).
    fn copy_match(&mut self, dist: usize, len: usize) -> Result<(), LzoError> {
        if dist == 0 || dist > self.at {
            return Err(LzoError::LookBehind);
        }
        let end = self.room(len)?;
        for i in self.at..end {
            let b = *self.dst.get(i - dist).ok_or(LzoError::LookBehind)?;
            *self.dst.get_mut(i).ok_or(LzoError::OutputOverrun)? = b;
        }
        self.at = end;
        Ok(())
    }

    fn zeros(&mut self, len: usize) -> Result<(), LzoError> {
        let end = self.room(len)?;
        self.dst
            .get_mut(self.at..end)
            .ok_or(LzoError::OutputOverrun)?
            .fill(0);
        self.at = end;
        Ok(())
    }
}

fn le16_at(src: &[u8], at: usize) -> Option<usize> {
    let lo = usize::from(*src.get(at)?);
    let hi = usize::from(*src.get(at.checked_add(1)?)?);
    Some(lo | hi << 8)
}

/// Decodes the LZO1X or LZO-RLE stream `src` into `dst`; returns the bytes written.
pub fn decompress(src: &[u8], dst: &mut [u8]) -> Result<usize, LzoError> {
    if src.len() < 3 {
        return Err(LzoError::InputOverrun);
    }
    let mut r = Reader { src, at: 0 };
    let mut w = Writer { dst, at: 0 };
    // A versioned (RLE) stream: 17, then the version byte; at least 5 bytes in all.
    let mut rle = false;
    if src.len() >= 5 && src.first() == Some(&17) {
        rle = src.get(1).is_some_and(|&v| v != 0);
        r.at = 2;
    }
    // `state`: literals copied by the previous instruction (4 = four or more), which decides
    // what an instruction byte below 16 means.
    let mut state: usize;
    let first = *src.get(r.at).ok_or(LzoError::InputOverrun)?;
    if first > 17 {
        r.at += 1;
        let n = usize::from(first - 17);
        let lit = r.take(n)?;
        w.literal(lit)?;
        state = n.min(4);
    } else {
        state = 0;
    }
    loop {
        let t = usize::from(r.byte()?);
        let (dist, len, next_lits);
        if t < 16 {
            match state {
                0 => {
                    // A run of four or more literals.
                    let n = if t == 0 { r.long_length(18)? } else { t + 3 };
                    let lit = r.take(n)?;
                    w.literal(lit)?;
                    state = 4;
                    continue;
                }
                1..=3 => {
                    // Two bytes from at most 1 KiB back.
                    let h = usize::from(r.byte()?);
                    dist = (h << 2) + (t >> 2) + 1;
                    len = 2;
                }
                _ => {
                    // Three bytes from 2..3 KiB back.
                    let h = usize::from(r.byte()?);
                    dist = (h << 2) + (t >> 2) + 2049;
                    len = 3;
                }
            }
            next_lits = t & 3;
        } else if t < 32 {
            // Version 1 only: a run of zeros when H is set and the distance bits are all ones
            // (checked on the two bytes that follow, before any long-length bytes).
            let peek = le16_at(src, r.at);
            if rle && (t & 0xf8) == 0x18 && peek.is_some_and(|d| d & 0xfffc == 0xfffc) {
                let d = r.le16()?;
                let x = usize::from(r.byte()?);
                w.zeros(((x << 3) | (t & 7)) + 4)?;
                state = d & 3;
                let lit = r.take(state)?;
                w.literal(lit)?;
                continue;
            }
            let l = t & 7;
            let len_field = if l == 0 { r.long_length(7)? } else { l };
            let d = r.le16()?;
            let high = (t & 8) << 11;
            let distance = 16384 + high + (d >> 2);
            if distance == 16384 {
                // The end marker: a length-3 match at distance 16384, then nothing.
                if len_field + 2 != 3 {
                    return Err(LzoError::BadEnd);
                }
                if r.at != src.len() {
                    return Err(LzoError::InputNotConsumed);
                }
                return Ok(w.at);
            }
            dist = distance;
            len = len_field + 2;
            next_lits = d & 3;
        } else if t < 64 {
            let l = t & 31;
            let len_field = if l == 0 { r.long_length(31)? } else { l };
            let d = r.le16()?;
            dist = (d >> 2) + 1;
            len = len_field + 2;
            next_lits = d & 3;
        } else {
            let h = usize::from(r.byte()?);
            dist = (h << 3) + ((t >> 2) & 7) + 1;
            len = if t < 128 {
                3 + ((t >> 5) & 1)
            } else {
                5 + ((t >> 5) & 3)
            };
            next_lits = t & 3;
        }
        w.copy_match(dist, len)?;
        state = next_lits;
        let lit = r.take(state)?;
        w.literal(lit)?;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "test code")]
    use super::*;

    #[test]
    fn literal_run_then_end() {
        // 22 = 5 literals, then the end marker 0x11 0x00 0x00.
        let src = [22, b'h', b'e', b'l', b'l', b'o', 0x11, 0, 0];
        let mut out = [0u8; 8];
        assert_eq!(decompress(&src, &mut out), Ok(5));
        assert_eq!(&out[..5], b"hello");
    }

    #[test]
    fn overlapping_match() {
        // 'a' then a 64..127 match: length 3 + L, distance 1 -> "aaaa".
        // literal: 18 = 1 literal; match byte 0b0_1_1_000_00 (L=1, D=0, S=0), H=0.
        let src = [18, b'a', 0b0110_0000, 0, 0x11, 0, 0];
        let mut out = [0u8; 16];
        assert_eq!(decompress(&src, &mut out), Ok(5));
        assert_eq!(&out[..5], b"aaaaa");
    }

    #[test]
    fn rle_zero_run() {
        // version marker 17 1, then 1 literal (18 'x'), a zero run of (2 << 3 | 3) + 4 = 23,
        // then the end marker.
        let src = [17, 1, 18, b'x', 0x18 | 3, 0xfc, 0xff, 2, 0x11, 0, 0];
        let mut out = [0xAAu8; 64];
        assert_eq!(decompress(&src, &mut out), Ok(24));
        assert_eq!(out[0], b'x');
        assert!(out[1..24].iter().all(|&b| b == 0));
    }

    #[test]
    fn hostile_streams_fail_cleanly() {
        let mut out = [0u8; 16];
        // match before the start of the output
        assert_eq!(
            decompress(&[18, b'a', 0b0110_0100, 9, 0x11, 0, 0], &mut out),
            Err(LzoError::LookBehind)
        );
        // literal run longer than the output
        assert_eq!(
            decompress(&[40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], &mut out),
            Err(LzoError::InputOverrun)
        );
        let long = [255u8; 300];
        assert_eq!(decompress(&long, &mut out), Err(LzoError::OutputOverrun));
        // trailing bytes after the end marker
        assert_eq!(
            decompress(&[18, b'a', 0x11, 0, 0, 7], &mut out),
            Err(LzoError::InputNotConsumed)
        );
        // no end marker
        assert_eq!(
            decompress(&[18, b'a', 18], &mut out),
            Err(LzoError::InputOverrun)
        );
        // endless zero-length bytes stop at the input's end, not in an overflow
        let mut zeros = vec![0u8; 10_000];
        zeros[0] = 0;
        assert_eq!(decompress(&zeros, &mut out), Err(LzoError::InputOverrun));
    }
}
