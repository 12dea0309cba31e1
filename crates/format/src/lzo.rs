//! An LZO1X decoder and encoder for F2FS's `lzo` (algorithm 0) and `lzo-rle` (algorithm 3)
//! clusters.
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
//!
//! The encoder ([`compress`]) writes LZO1X-1's kind of stream, a greedy hash-table matcher's,
//! from the same description: literal runs and the three match forms (64..255 up to 2 KiB
//! back, 32..63 up to 16 KiB, 16..31 up to 48 KiB), then the end marker `0x11 0 0`; with
//! `rle`, the `17, 1` prefix and every run of four or more zeros in the RLE instruction, as
//! Linux's `lzorle` does. It stops as soon as the stream passes the caller's bound.

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

// ---------------------------------------------------------------------------------------------
// The encoder.

/// Longest match distance of the 16..31 instruction in a plain LZO1X stream (16384 + 32767).
const M4_MAX_DIST: usize = 0xbfff;
/// In an LZO-RLE stream the all-ones distance means a zero run, so matches stop one short.
const M4_MAX_DIST_RLE: usize = 0xbffe;
/// Shortest and longest zero run of one RLE instruction (its count field is 11 bits).
const ZERO_RUN_MIN: usize = 4;
const ZERO_RUN_MAX: usize = ZERO_RUN_MIN + 2047;
/// Largest table of recent positions, indexed by a hash of four bytes: 16 Ki entries (64 KiB).
const HASH_BITS_MAX: u32 = 14;
/// The smallest table, for tiny inputs: 1 Ki entries.
const HASH_BITS_MIN: u32 = 10;

/// Compresses `src` into one LZO1X-1 stream (or, with `rle`, the kernel's LZO-RLE stream:
/// the `17, 1` prefix, then zero runs in their own instruction), or `None` as soon as the
/// stream would be longer than `max_len` bytes.
///
/// F2FS keeps a cluster plain unless compressing it saves a whole block, so a caller passes
/// the largest length it would keep and learns cheaply that the cluster does not fit: the
/// encoder stops at the first instruction that crosses the bound and never holds more than
/// `max_len` plus one instruction.
///
/// The matcher is LZO1X-1's kind: one table of the last position seen for each hash of four
/// bytes, a greedy match when the four bytes agree, extended forwards eight bytes at a time
/// and backwards over pending literals; misses step faster the longer the literal run grows,
/// so incompressible data passes quickly. The stream decodes with liblzo2's
/// `lzo1x_decompress_safe` (plain) and with Linux's decoder (both), and with [`decompress`].
pub fn compress(src: &[u8], rle: bool, max_len: usize) -> Option<Vec<u8>> {
    // Room for the usual case; the bound, not the capacity, limits the stream.
    let cap = max_len.min(src.len().saturating_add(src.len() / 16).saturating_add(16));
    let mut out = Vec::with_capacity(cap);
    compress_into(src, rle, max_len, &mut out).then_some(out)
}

/// [`compress`] appending the stream to `out` (after a cluster header, say) instead of
/// returning it: `true` when it fit in `max_len` bytes; `false`, and `out` as it was, when not.
pub fn compress_into(src: &[u8], rle: bool, max_len: usize, out: &mut Vec<u8>) -> bool {
    let base = out.len();
    let done = encode(src, rle, max_len, out).is_some();
    if !done {
        out.truncate(base);
    }
    done
}

fn encode(src: &[u8], rle: bool, max_len: usize, out: &mut Vec<u8>) -> Option<()> {
    let base = out.len();
    let mut e = Encoder {
        out,
        limit: base.saturating_add(max_len),
        state_at: None,
        data_start: base,
    };
    if rle {
        // The version prefix: a plain stream never starts with 17 unless it is empty.
        e.push(&[17, 1])?;
        e.data_start = e.out.len();
    }
    let max_dist = if rle { M4_MAX_DIST_RLE } else { M4_MAX_DIST };
    let n = src.len();
    // Table size: enough for the input, at most HASH_BITS_MAX bits.
    let bits = usize::BITS
        .saturating_sub(n.leading_zeros())
        .clamp(HASH_BITS_MIN, HASH_BITS_MAX);
    let mut table = vec![0u32; 1usize << bits];
    let shift = 32 - bits;

    // `anchor`: first byte not yet emitted. A stream starts with literals (a match needs bytes
    // behind it, and the decoder reads a first byte above 17 as a literal count), so the search
    // starts at 1.
    let mut anchor = 0usize;
    let mut ip = 1usize;
    while let Some(v) = load32(src, ip) {
        if rle && v == 0 {
            let run = zero_run(src, ip);
            e.literals(src.get(anchor..ip)?)?;
            e.zero_run(run)?;
            ip += run;
            anchor = ip;
            continue;
        }
        let slot = (v.wrapping_mul(0x9E37_79B1) >> shift) as usize;
        let Some(entry) = table.get_mut(slot) else {
            break;
        };
        let cand = *entry as usize;
        *entry = ip as u32;
        let dist = ip - cand.min(ip);
        if dist == 0 || dist > max_dist || load32(src, cand) != Some(v) {
            ip += 1 + ((ip - anchor) >> 5);
            continue;
        }
        // Four bytes agree: extend forwards, then backwards over the pending literals.
        let mut start = ip;
        let mut from = cand;
        let mut len = 4 + common_len(src, cand + 4, ip + 4);
        while start > anchor && from > 0 && src.get(start - 1) == src.get(from - 1) {
            start -= 1;
            from -= 1;
            len += 1;
        }
        if rle && dist > 0x4000 && (261..=264).contains(&len) && (dist - 0x4000) & 0x403f == 0x403f
        {
            // LZO-RLE reads the two bytes after a long-form far match's first byte as a zero
            // run when they are 0xfc..0xff, 0xff: a length byte of 252..255 followed by a
            // distance byte of all ones. Shorten such a match so its length byte is 251.
            len = 260;
        }
        e.literals(src.get(anchor..start)?)?;
        e.copy(dist, len)?;
        ip = start + len;
        anchor = ip;
        // Remember a position inside the match too: the next repeat often starts there.
        if let Some(w) = load32(src, ip - 2) {
            let s = (w.wrapping_mul(0x9E37_79B1) >> shift) as usize;
            if let Some(entry) = table.get_mut(s) {
                *entry = (ip - 2) as u32;
            }
        }
    }
    e.literals(src.get(anchor..)?)?;
    e.push(&[0x11, 0, 0])
}

/// Little-endian u32 at `at`, if four bytes are there.
#[inline(always)]
fn load32(s: &[u8], at: usize) -> Option<u32> {
    let b: [u8; 4] = s.get(at..at.checked_add(4)?)?.try_into().ok()?;
    Some(u32::from_le_bytes(b))
}

#[inline(always)]
fn load64(s: &[u8], at: usize) -> Option<u64> {
    let b: [u8; 8] = s.get(at..at.checked_add(8)?)?.try_into().ok()?;
    Some(u64::from_le_bytes(b))
}

/// How many bytes from `a` and from `b` (`a < b`) agree, up to the end of `s`.
#[inline(always)]
fn common_len(s: &[u8], a: usize, b: usize) -> usize {
    let mut n = 0;
    while let (Some(x), Some(y)) = (load64(s, a + n), load64(s, b + n)) {
        let diff = x ^ y;
        if diff != 0 {
            return n + (diff.trailing_zeros() / 8) as usize;
        }
        n += 8;
    }
    while let (Some(x), Some(y)) = (s.get(a + n), s.get(b + n)) {
        if x != y {
            break;
        }
        n += 1;
    }
    n
}

/// Zero bytes from `at` (at least four, known), at most one instruction's worth.
fn zero_run(s: &[u8], at: usize) -> usize {
    let end = s.len().min(at.saturating_add(ZERO_RUN_MAX));
    s.get(at..end)
        .map_or(0, |r| r.iter().position(|&b| b != 0).unwrap_or(r.len()))
}

struct Encoder<'a> {
    out: &'a mut Vec<u8>,
    /// The length `out` may reach.
    limit: usize,
    /// The byte of the last instruction whose two low bits count the 1..3 literals after it.
    state_at: Option<usize>,
    /// Where instructions start (after the RLE prefix).
    data_start: usize,
}

impl Encoder<'_> {
    /// Appends `b`, or `None` when the stream would pass the bound.
    fn push(&mut self, b: &[u8]) -> Option<()> {
        if self.out.len().checked_add(b.len())? > self.limit {
            return None;
        }
        self.out.extend_from_slice(b);
        Some(())
    }

    /// Appends a length that did not fit its instruction's field: a zero byte per 255, then the
    /// remainder (1..=255; `rest` is at least 1).
    fn long_length(&mut self, mut rest: usize) -> Option<()> {
        while rest > 255 {
            self.push(&[0])?;
            rest -= 255;
        }
        self.push(&[rest as u8])
    }

    fn literals(&mut self, lit: &[u8]) -> Option<()> {
        let n = lit.len();
        if n == 0 {
            return Some(());
        }
        if self.out.len() == self.data_start && n <= 238 {
            // The stream's first byte: 17 + count.
            self.push(&[(17 + n) as u8])?;
        } else if n <= 3 {
            // Counted in the two low bits of the previous instruction.
            let at = self.state_at?;
            *self.out.get_mut(at)? |= n as u8;
        } else if n <= 18 {
            self.push(&[(n - 3) as u8])?;
        } else {
            self.push(&[0])?;
            self.long_length(n - 18)?;
        }
        self.state_at = None;
        self.push(lit)
    }

    /// A copy of `len` (>= 3) bytes from `dist` (1..=0xbfff) bytes back.
    fn copy(&mut self, dist: usize, len: usize) -> Option<()> {
        if dist <= 0x800 && len <= 8 {
            // 64..255: length 3..8, distance 1..2048 in 3 + 8 bits.
            let d = dist - 1;
            self.push(&[(((len - 1) << 5) | ((d & 7) << 2)) as u8, (d >> 3) as u8])?;
            self.state_at = Some(self.out.len() - 2);
            return Some(());
        }
        let (d, short_max, first) = if dist <= 0x4000 {
            // 32..63: distance 1..16384.
            (dist - 1, 33, 32)
        } else {
            // 16..31: distance 16385..49151, bit 14 of (distance - 16384) in bit 3.
            let d = dist - 0x4000;
            (d, 9, 16 | ((d >> 11) & 8))
        };
        if len <= short_max {
            self.push(&[(first | (len - 2)) as u8])?;
        } else {
            self.push(&[first as u8])?;
            self.long_length(len - short_max)?;
        }
        self.push(&[((d & 0x3f) << 2) as u8, ((d >> 6) & 0xff) as u8])?;
        self.state_at = Some(self.out.len() - 2);
        Some(())
    }

    /// An LZO-RLE zero run of `len` (4..=2051) bytes: 0x18 | low 3 bits of `len - 4`, the
    /// all-ones distance 0xfffc (whose low two bits count the literals after it), then the
    /// high 8 bits of `len - 4`.
    fn zero_run(&mut self, len: usize) -> Option<()> {
        let x = len - ZERO_RUN_MIN;
        self.push(&[0x18 | (x & 7) as u8, 0xfc, 0xff, (x >> 3) as u8])?;
        self.state_at = Some(self.out.len() - 3);
        Some(())
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

    /// `n` bytes of xorshift noise.
    fn noise(n: usize, seed: u64) -> Vec<u8> {
        let mut x = seed | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect()
    }

    fn round_trip(src: &[u8], rle: bool) -> Vec<u8> {
        let z = compress(src, rle, usize::MAX).unwrap();
        let mut out = vec![0u8; src.len()];
        assert_eq!(decompress(&z, &mut out), Ok(src.len()));
        assert_eq!(out, src);
        z
    }

    #[test]
    fn empty_input_is_the_end_marker() {
        assert_eq!(round_trip(b"", false), [0x11, 0, 0]);
        assert_eq!(round_trip(b"", true), [17, 1, 0x11, 0, 0]);
    }

    #[test]
    fn short_inputs_are_one_literal_run() {
        // 17 + count, the bytes, the end marker; the RLE stream only adds its prefix.
        assert_eq!(round_trip(b"a", false), [18, b'a', 0x11, 0, 0]);
        assert_eq!(
            round_trip(b"hello", true),
            [17, 1, 22, b'h', b'e', b'l', b'l', b'o', 0x11, 0, 0]
        );
    }

    #[test]
    fn near_repeat_is_a_two_byte_match() {
        // "abcdabcd": 4 literals, then length 4 from 4 back in the 64..255 form:
        // ((4 - 1) << 5) | ((3 & 7) << 2) = 0x6c, then 3 >> 3 = 0.
        assert_eq!(
            round_trip(b"abcdabcd", false),
            [21, b'a', b'b', b'c', b'd', 0x6c, 0, 0x11, 0, 0]
        );
    }

    #[test]
    fn rle_zero_run_uses_its_instruction() {
        // 'x', 23 zeros, 'y': 18 'x', then 0x18 | (19 & 7), 0xfc | 1 literal, 0xff, 19 >> 3,
        // the literal, the end marker.
        let mut src = vec![b'x'];
        src.extend([0u8; 23]);
        src.push(b'y');
        assert_eq!(
            round_trip(&src, true),
            [17, 1, 18, b'x', 0x18 | 3, 0xfd, 0xff, 2, b'y', 0x11, 0, 0]
        );
        // Without RLE the zeros are an ordinary match at distance 1.
        let plain = round_trip(&src, false);
        assert!(!plain.windows(2).any(|w| w == [0xfd, 0xff]));
    }

    #[test]
    fn stream_past_the_bound_is_refused() {
        let src = noise(5000, 7);
        let full = compress(&src, false, usize::MAX).unwrap();
        assert!(full.len() > src.len(), "random bytes do not compress");
        assert_eq!(compress(&src, false, full.len()).as_ref(), Some(&full));
        assert_eq!(compress(&src, false, full.len() - 1), None);
        assert_eq!(compress(&src, false, 100), None);
        assert_eq!(compress(b"", true, 4), None);
    }

    #[test]
    fn compress_into_appends_or_leaves_the_buffer_alone() {
        let src = b"abcdabcdabcdabcd zero zero zero zero".repeat(20);
        let z = compress(&src, true, usize::MAX).unwrap();
        let mut buf = vec![7u8; 24];
        assert!(compress_into(&src, true, z.len(), &mut buf));
        assert_eq!(buf[..24], [7; 24]);
        assert_eq!(buf[24..], z);
        let mut buf = vec![7u8; 24];
        assert!(!compress_into(&src, true, z.len() - 1, &mut buf));
        assert_eq!(buf, [7; 24]);
    }

    #[test]
    fn rle_far_match_never_reads_as_a_zero_run() {
        // A far match whose long length byte would be 0xfc..0xff and whose distance byte is
        // all ones reads as a zero run under LZO-RLE; the encoder shortens it.
        for len in 258..=266 {
            for d in [0x403f_usize, 0x7fbf, 0x40ff] {
                let dist = 0x4000 + d;
                let pat = noise(len, 3);
                let mut src = pat.clone();
                src.resize(dist, 0x55);
                src.extend(&pat);
                // Three literals after the match set the distance byte's low bits: 0xff.
                for tail in [&b"t"[..], b"ta", b"tai", b"tail"] {
                    let mut src = src.clone();
                    src.extend(tail);
                    let z = round_trip(&src, true);
                    // A found match costs a few bytes; the filler a byte per 255 (its length).
                    assert!(
                        z.len() < len + dist / 255 + 40,
                        "far match missed: {}",
                        z.len()
                    );
                    round_trip(&src, false);
                }
            }
        }
    }
}
