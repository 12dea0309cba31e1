//! Android sparse images, the format `img2simg` writes and Android's build and forensic tools
//! hand around: read as a read-only [`BlockDevice`], and written from a raw image.
//!
//! Layout (little-endian): a 28-byte file header (magic `0xed26ff3a`, version 1.0, header
//! sizes 28 and 12, block size, total blocks, chunk count, CRC32 of the whole image or 0),
//! then `total_chunks` chunks, each a 12-byte header (type, reserved, blocks covered, bytes
//! taken including the header) and a body: RAW (`0xcac1`) the blocks' bytes, FILL (`0xcac2`)
//! one 32-bit value repeated, DONT_CARE (`0xcac3`) nothing (zeros here), CRC32 (`0xcac4`) the
//! CRC32 of every byte of the image before it, covering no blocks.
//!
//! Everything is validated when the image is opened (see [`SparseError`]): the header, then
//! every chunk header in order with checked arithmetic, against the file's length, before
//! anything is allocated per chunk; the chunks must cover exactly `total_blks` blocks and end
//! exactly at the end of the file. CRC32 chunks and a nonzero image checksum are checked at
//! open too, in one sequential read of the RAW data (FILL and DONT_CARE runs are hashed by
//! doubling, without expanding them); `img2simg` writes neither, so its images cost only the
//! chunk headers to open. What remains is an index of extents in bytes of the expanded image,
//! binary-searched per read; its size is bounded by the file's (one entry per 12-byte chunk
//! header at most).
//!
//! Block size: any nonzero multiple of 4, the format's own rule. The index is in bytes, so a
//! block size other than F2FS's 4096 costs nothing; the device is the expanded image cut into
//! 4096-byte blocks (a shorter tail is not used, as [`crate::FileDevice`] does).
//!
//! Writing ([`write_sparse`]) follows `img2simg` (Android libsparse 29) byte for byte; the rule
//! and how it was established are in `docs/design.md`.

use crate::{lock, BlockDevice, IoCause, IoCounters, BLOCK_SIZE};
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use zerocopy::little_endian::{U16, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

pub const SPARSE_MAGIC: u32 = 0xed26_ff3a;
const FILE_HEADER_LEN: u16 = 28;
const CHUNK_HEADER_LEN: u16 = 12;
const CHUNK_RAW: u16 = 0xcac1;
const CHUNK_FILL: u16 = 0xcac2;
const CHUNK_DONT_CARE: u16 = 0xcac3;
const CHUNK_CRC32: u16 = 0xcac4;

/// What a writing command says when it meets a sparse image.
pub const SPARSE_READ_ONLY: &str = "sparse images are read-only here; unpack it with \
     `simg2img IMAGE RAW` and change RAW, or write a new one with --sparse \
     (uf2fs mkfs --sparse, uf2fs import --sparse)";

#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Default)]
#[repr(C)]
struct FileHeader {
    magic: U32,
    major_version: U16,
    minor_version: U16,
    file_hdr_sz: U16,
    chunk_hdr_sz: U16,
    blk_sz: U32,
    total_blks: U32,
    total_chunks: U32,
    image_checksum: U32,
}

#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct ChunkHeader {
    chunk_type: U16,
    reserved: U16,
    chunk_sz: U32,
    total_sz: U32,
}

/// Why a sparse image was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SparseError {
    #[error("not a sparse image (magic {0:#010x})")]
    Magic(u32),
    #[error("sparse format version {major}.{minor}: only major version 1 is known")]
    Version { major: u16, minor: u16 },
    #[error(
        "sparse header: file header size {file}, chunk header size {chunk} (expected 28 and 12)"
    )]
    HeaderSizes { file: u16, chunk: u16 },
    #[error("sparse header: block size {0} is not a nonzero multiple of 4")]
    BlockSize(u32),
    #[error("sparse header: the file has {have} bytes, too short for {chunks} chunk headers")]
    TooManyChunks { chunks: u32, have: u64 },
    #[error("sparse image: chunk {index} at byte {offset}: {problem}")]
    Chunk {
        index: u32,
        offset: u64,
        problem: ChunkProblem,
    },
    #[error("sparse image: the chunks cover {covered} blocks, the header says {total}")]
    BlocksDoNotAddUp { covered: u64, total: u32 },
    #[error("sparse image: {0} bytes after the last chunk")]
    TrailingBytes(u64),
    #[error("sparse image: checksum {stored:#010x} in the header, the data's is {computed:#010x}")]
    ImageChecksum { stored: u32, computed: u32 },
    #[error("sparse output: {0} bytes is too large for 32-bit block counts")]
    TooLarge(u64),
}

/// What is wrong with one chunk.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChunkProblem {
    #[error("the file ends inside its header")]
    TruncatedHeader,
    #[error("unknown chunk type {0:#06x}")]
    UnknownType(u16),
    #[error(
        "{kind} chunk of {blocks} blocks should take {expected} bytes, its header says {total_sz}"
    )]
    Size {
        kind: &'static str,
        blocks: u32,
        expected: u64,
        total_sz: u32,
    },
    #[error("its {total_sz} bytes go past the end of the file ({file_len} bytes)")]
    PastEndOfFile { total_sz: u32, file_len: u64 },
    #[error("its {blocks} blocks end past the {total} blocks the header declares")]
    PastTotalBlocks { blocks: u32, total: u32 },
    #[error("a CRC32 chunk covers {0} blocks (it must cover none)")]
    CrcBlocks(u32),
    #[error("CRC32 {stored:#010x} does not match the data before it ({computed:#010x})")]
    Crc { stored: u32, computed: u32 },
}

impl From<SparseError> for io::Error {
    fn from(e: SparseError) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidData, e)
    }
}

/// Where the sparse file's bytes come from: a file, or memory (tests, fuzzing).
trait ReadAt: Send + Sync {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
}

impl ReadAt for File {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        FileExt::read_exact_at(self, buf, offset)
    }
}

impl ReadAt for Vec<u8> {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let src = usize::try_from(offset)
            .ok()
            .and_then(|o| self.get(o..)?.get(..buf.len()))
            .ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))?;
        buf.copy_from_slice(src);
        Ok(())
    }
}

/// What a run of the expanded image holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Body {
    /// Bytes of the sparse file from this offset on.
    Raw(u64),
    /// These four bytes repeated (DONT_CARE is four zeros).
    Fill([u8; 4]),
}

/// One nonempty chunk, in bytes of the expanded image.
#[derive(Debug, Clone, Copy)]
struct Extent {
    start: u64,
    len: u64,
    body: Body,
}

/// A CRC32 chunk: the checksum it holds, and how many extents come before it.
struct CrcMark {
    index: u32,
    offset: u64,
    stored: u32,
    extents_before: usize,
}

/// A sparse image, read-only.
pub struct SparseDevice {
    src: Box<dyn ReadAt>,
    extents: Vec<Extent>,
    blocks: u64,
    counters: IoCounters,
}

/// Whether the file at `path` starts with the sparse magic (a directory, or a file shorter
/// than four bytes, does not).
pub fn is_sparse(path: &Path) -> io::Result<bool> {
    let file = File::open(path)?;
    if file.metadata()?.is_dir() {
        return Ok(false);
    }
    let mut magic = [0u8; 4];
    match FileExt::read_exact_at(&file, &mut magic, 0) {
        Ok(()) => Ok(u32::from_le_bytes(magic) == SPARSE_MAGIC),
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(false),
        Err(e) => Err(e),
    }
}

impl SparseDevice {
    /// Opens and validates the sparse image at `path`, taking a shared lock on it as a
    /// read-only [`crate::FileDevice`] does.
    pub fn open(path: &Path) -> io::Result<SparseDevice> {
        let file = File::open(path)?;
        lock(&file, false)?;
        let len = file.metadata()?.len();
        SparseDevice::parse(Box::new(file), len)
    }

    /// A sparse image held in memory.
    pub fn from_bytes(bytes: Vec<u8>) -> io::Result<SparseDevice> {
        let len = bytes.len() as u64;
        SparseDevice::parse(Box::new(bytes), len)
    }

    fn parse(src: Box<dyn ReadAt>, file_len: u64) -> io::Result<SparseDevice> {
        let mut hb = [0u8; FILE_HEADER_LEN as usize];
        src.read_exact_at(&mut hb, 0).map_err(|e| match e.kind() {
            io::ErrorKind::UnexpectedEof => io::Error::new(
                io::ErrorKind::InvalidData,
                format!("sparse image: {file_len} bytes, shorter than its 28-byte header"),
            ),
            _ => e,
        })?;
        let h =
            FileHeader::read_from_bytes(&hb).map_err(|_| io::Error::other("sparse header size"))?;
        if h.magic.get() != SPARSE_MAGIC {
            return Err(SparseError::Magic(h.magic.get()).into());
        }
        if h.major_version.get() != 1 {
            return Err(SparseError::Version {
                major: h.major_version.get(),
                minor: h.minor_version.get(),
            }
            .into());
        }
        if h.file_hdr_sz.get() != FILE_HEADER_LEN || h.chunk_hdr_sz.get() != CHUNK_HEADER_LEN {
            return Err(SparseError::HeaderSizes {
                file: h.file_hdr_sz.get(),
                chunk: h.chunk_hdr_sz.get(),
            }
            .into());
        }
        let blk_sz = h.blk_sz.get();
        if blk_sz == 0 || !blk_sz.is_multiple_of(4) {
            return Err(SparseError::BlockSize(blk_sz).into());
        }
        let total_blks = h.total_blks.get();
        let total_chunks = h.total_chunks.get();
        // Every chunk has a header: a count the file cannot hold is refused before anything
        // is read or allocated per chunk.
        let min_len = u64::from(FILE_HEADER_LEN) + u64::from(total_chunks) * 12;
        if min_len > file_len {
            return Err(SparseError::TooManyChunks {
                chunks: total_chunks,
                have: file_len,
            }
            .into());
        }
        let blk = u64::from(blk_sz);
        let mut extents = Vec::new();
        let mut crcs = Vec::new();
        let mut pos = u64::from(FILE_HEADER_LEN);
        let mut block = 0u64;
        for index in 0..total_chunks {
            let bad = |problem| SparseError::Chunk {
                index,
                offset: pos,
                problem,
            };
            let mut cb = [0u8; CHUNK_HEADER_LEN as usize];
            src.read_exact_at(&mut cb, pos)
                .map_err(|e| match e.kind() {
                    io::ErrorKind::UnexpectedEof => bad(ChunkProblem::TruncatedHeader).into(),
                    _ => e,
                })?;
            let c = ChunkHeader::read_from_bytes(&cb)
                .map_err(|_| io::Error::other("sparse chunk header size"))?;
            let (chunk_sz, total_sz) = (c.chunk_sz.get(), c.total_sz.get());
            let (kind, body_len) = match c.chunk_type.get() {
                CHUNK_RAW => ("RAW", u64::from(chunk_sz) * blk),
                CHUNK_FILL => ("FILL", 4),
                CHUNK_DONT_CARE => ("DONT_CARE", 0),
                CHUNK_CRC32 => ("CRC32", 4),
                t => return Err(bad(ChunkProblem::UnknownType(t)).into()),
            };
            let expected = u64::from(CHUNK_HEADER_LEN) + body_len;
            if u64::from(total_sz) != expected {
                return Err(bad(ChunkProblem::Size {
                    kind,
                    blocks: chunk_sz,
                    expected,
                    total_sz,
                })
                .into());
            }
            let end = pos + u64::from(total_sz);
            if end > file_len {
                return Err(bad(ChunkProblem::PastEndOfFile { total_sz, file_len }).into());
            }
            let body_at = pos + u64::from(CHUNK_HEADER_LEN);
            let body = match c.chunk_type.get() {
                CHUNK_RAW => Body::Raw(body_at),
                CHUNK_FILL => {
                    let mut v = [0u8; 4];
                    src.read_exact_at(&mut v, body_at)?;
                    Body::Fill(v)
                }
                CHUNK_CRC32 => {
                    if chunk_sz != 0 {
                        return Err(bad(ChunkProblem::CrcBlocks(chunk_sz)).into());
                    }
                    let mut v = [0u8; 4];
                    src.read_exact_at(&mut v, body_at)?;
                    crcs.push(CrcMark {
                        index,
                        offset: pos,
                        stored: u32::from_le_bytes(v),
                        extents_before: extents.len(),
                    });
                    Body::Fill([0; 4])
                }
                _ => Body::Fill([0; 4]),
            };
            let next = block + u64::from(chunk_sz);
            if next > u64::from(total_blks) {
                return Err(bad(ChunkProblem::PastTotalBlocks {
                    blocks: chunk_sz,
                    total: total_blks,
                })
                .into());
            }
            // Empty chunks (img2simg writes some, see write_sparse) take no room in the index.
            if chunk_sz > 0 {
                extents.push(Extent {
                    start: block * blk,
                    len: u64::from(chunk_sz) * blk,
                    body,
                });
            }
            block = next;
            pos = end;
        }
        if block != u64::from(total_blks) {
            return Err(SparseError::BlocksDoNotAddUp {
                covered: block,
                total: total_blks,
            }
            .into());
        }
        if pos != file_len {
            return Err(SparseError::TrailingBytes(file_len - pos).into());
        }
        let dev = SparseDevice {
            src,
            extents,
            blocks: block * blk / BLOCK_SIZE as u64,
            counters: IoCounters::default(),
        };
        if !crcs.is_empty() || h.image_checksum.get() != 0 {
            dev.check_crcs(&crcs, h.image_checksum.get())?;
        }
        Ok(dev)
    }

    /// Checks each CRC32 chunk against the data before it, and the header's checksum (when
    /// nonzero) against the whole image, in one pass.
    fn check_crcs(&self, crcs: &[CrcMark], image_checksum: u32) -> io::Result<()> {
        let mut h = crc32fast::Hasher::new();
        let mut done = 0;
        let mut buf = vec![0u8; 1 << 20];
        for mark in crcs.iter().map(Some).chain([None]) {
            let upto = mark.map_or(self.extents.len(), |m| m.extents_before);
            for e in self.extents.get(done..upto).unwrap_or(&[]) {
                match e.body {
                    Body::Fill(v) => crc_repeat(&mut h, &v, e.len / 4),
                    Body::Raw(at) => {
                        let mut off = 0;
                        while off < e.len {
                            let n = (e.len - off).min(buf.len() as u64) as usize;
                            let piece = buf.get_mut(..n).unwrap_or(&mut []);
                            self.src.read_exact_at(piece, at + off)?;
                            h.update(piece);
                            off += n as u64;
                        }
                    }
                }
            }
            done = upto;
            let computed = h.clone().finalize();
            match mark {
                Some(m) if m.stored != computed => {
                    return Err(SparseError::Chunk {
                        index: m.index,
                        offset: m.offset,
                        problem: ChunkProblem::Crc {
                            stored: m.stored,
                            computed,
                        },
                    }
                    .into())
                }
                Some(_) => {}
                None if image_checksum != 0 && image_checksum != computed => {
                    return Err(SparseError::ImageChecksum {
                        stored: image_checksum,
                        computed,
                    }
                    .into())
                }
                None => {}
            }
        }
        Ok(())
    }

    /// Writes the expanded image to `out` (from its start), leaving holes where it is zeros.
    pub fn unpack_to(&self, out: &File) -> io::Result<()> {
        out.set_len(0)?;
        let mut buf = vec![0u8; 1 << 20];
        for e in &self.extents {
            let mut off = 0;
            while off < e.len {
                let n = (e.len - off).min(buf.len() as u64) as usize;
                let piece = buf.get_mut(..n).unwrap_or(&mut []);
                match e.body {
                    Body::Fill([0, 0, 0, 0]) => break,
                    Body::Fill(v) => fill(piece, v, 0),
                    Body::Raw(at) => self.src.read_exact_at(piece, at + off)?,
                }
                out.write_all_at(piece, e.start + off)?;
                off += n as u64;
            }
        }
        out.set_len(self.extents.last().map_or(0, |e| e.start + e.len))?;
        out.sync_data()
    }
}

/// Fills `buf` with `v` repeated, starting `phase` bytes into the pattern.
fn fill(buf: &mut [u8], v: [u8; 4], phase: u64) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = v
            .get(((phase + i as u64) % 4) as usize)
            .copied()
            .unwrap_or(0);
    }
}

/// Adds `unit` repeated `count` times to `h`, by doubling (O(log count) combines).
fn crc_repeat(h: &mut crc32fast::Hasher, unit: &[u8], mut count: u64) {
    let mut piece = crc32fast::Hasher::new();
    piece.update(unit);
    while count > 0 {
        if count & 1 == 1 {
            h.combine(&piece);
        }
        count >>= 1;
        if count > 0 {
            let copy = piece.clone();
            piece.combine(&copy);
        }
    }
}

impl BlockDevice for SparseDevice {
    fn block_count(&self) -> u64 {
        self.blocks
    }

    fn read_blocks(&self, blkaddr: u64, buf: &mut [u8], cause: IoCause) -> io::Result<()> {
        let n = (buf.len() / BLOCK_SIZE) as u64;
        if !buf.len().is_multiple_of(BLOCK_SIZE)
            || blkaddr.checked_add(n).is_none_or(|e| e > self.blocks)
        {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "blocks {blkaddr}..{} are past the end of the sparse image ({} blocks)",
                    blkaddr.saturating_add(n),
                    self.blocks
                ),
            ));
        }
        let mut off = blkaddr * BLOCK_SIZE as u64;
        let mut i = self.extents.partition_point(|e| e.start + e.len <= off);
        let mut rest: &mut [u8] = buf;
        while !rest.is_empty() {
            let Some(e) = self.extents.get(i) else {
                // The extents cover the image without gaps: this cannot happen.
                return Err(io::Error::other("sparse index ends before the image"));
            };
            let inside = off - e.start;
            let take = (e.len - inside).min(rest.len() as u64) as usize;
            let (piece, tail) = rest.split_at_mut(take);
            match e.body {
                Body::Raw(at) => self.src.read_exact_at(piece, at + inside)?,
                Body::Fill(v) => fill(piece, v, inside),
            }
            rest = tail;
            off += take as u64;
            i += 1;
        }
        self.counters.record_read(cause, n);
        Ok(())
    }

    fn write_blocks(&self, _blkaddr: u64, _buf: &[u8], _cause: IoCause) -> io::Result<()> {
        Err(io::Error::new(
            io::ErrorKind::ReadOnlyFilesystem,
            SPARSE_READ_ONLY,
        ))
    }

    fn flush(&self) -> io::Result<()> {
        self.counters.record_flush();
        Ok(())
    }

    fn counters(&self) -> &IoCounters {
        &self.counters
    }

    fn is_read_only(&self) -> bool {
        true
    }
}

/// Blocks in a run `img2simg` keeps in one piece: its run length is a 32-bit count of bytes,
/// which wraps to 0 at 2^32 bytes and ends the run there.
const WRAP_BLOCKS: u64 = 1 << 20;
/// The largest RAW chunk: its `total_sz` (header and data) must fit in 32 bits.
const MAX_RAW_BLOCKS: u64 = (u32::MAX as u64 - CHUNK_HEADER_LEN as u64) / BLOCK_SIZE as u64;

static ZEROS: [u8; BLOCK_SIZE] = [0; BLOCK_SIZE];

/// The run being gathered into one chunk.
enum Run {
    /// Data blocks; the chunk header is patched in at `header_at` when the run ends.
    Raw { header_at: u64, blocks: u64 },
    /// Blocks of one 32-bit value repeated.
    Fill { value: [u8; 4], blocks: u64 },
}

/// Writes the raw image read from `src` (`len` bytes) to `out` as a sparse image, exactly as
/// `img2simg` 29 does (see `docs/design.md`): 4096-byte blocks; a block made of one 32-bit
/// value repeated (zeros included) is FILL, any other block (and a short last block, padded
/// with zeros) is RAW; neighbours of one kind (and one value) share a chunk; no CRC32 chunks
/// and no image checksum. Returns the number of chunks written.
pub fn write_sparse<R: Read, W: Write + Seek>(mut src: R, len: u64, mut out: W) -> io::Result<u32> {
    let total_blks = u32::try_from(len.div_ceil(BLOCK_SIZE as u64))
        .map_err(|_| io::Error::from(SparseError::TooLarge(len)))?;
    let base = out.stream_position()?;
    out.write_all(FileHeader::default().as_bytes())?;
    let mut w = SparseWriter {
        out,
        pos: base + u64::from(FILE_HEADER_LEN),
        chunks: 0,
        run: None,
    };
    let mut buf = vec![0u8; 256 * BLOCK_SIZE];
    let mut left = len;
    while left > 0 {
        let want = left.min(buf.len() as u64) as usize;
        let got = buf.get_mut(..want).unwrap_or(&mut []);
        src.read_exact(got)?;
        left -= want as u64;
        for block in got.chunks(BLOCK_SIZE) {
            w.add(block)?;
        }
    }
    w.end_run()?;
    let header = FileHeader {
        magic: SPARSE_MAGIC.into(),
        major_version: 1.into(),
        minor_version: 0.into(),
        file_hdr_sz: FILE_HEADER_LEN.into(),
        chunk_hdr_sz: CHUNK_HEADER_LEN.into(),
        blk_sz: (BLOCK_SIZE as u32).into(),
        total_blks: total_blks.into(),
        total_chunks: w.chunks.into(),
        image_checksum: 0.into(),
    };
    w.out.seek(SeekFrom::Start(base))?;
    w.out.write_all(header.as_bytes())?;
    w.out.seek(SeekFrom::Start(w.pos))?;
    w.out.flush()?;
    Ok(w.chunks)
}

struct SparseWriter<W> {
    out: W,
    /// Where the next byte goes.
    pos: u64,
    chunks: u32,
    run: Option<Run>,
}

impl<W: Write + Seek> SparseWriter<W> {
    fn add(&mut self, block: &[u8]) -> io::Result<()> {
        let mut words = block.chunks_exact(4);
        let value = match words.next() {
            Some(v) if block.len() == BLOCK_SIZE && words.all(|w| w == v) => {
                <[u8; 4]>::try_from(v).ok()
            }
            _ => None,
        };
        match (&mut self.run, value) {
            (Some(Run::Fill { value: v, blocks }), Some(value))
                if *v == value && *blocks < WRAP_BLOCKS =>
            {
                *blocks += 1;
            }
            (Some(Run::Raw { blocks, .. }), None) if *blocks < MAX_RAW_BLOCKS => {
                self.write_data(block)?;
                if let Some(Run::Raw { blocks, .. }) = &mut self.run {
                    *blocks += 1;
                }
            }
            _ => {
                self.end_run()?;
                self.run = Some(match value {
                    Some(value) => Run::Fill { value, blocks: 1 },
                    None => {
                        let header_at = self.pos;
                        self.out.write_all(&[0; CHUNK_HEADER_LEN as usize])?;
                        self.pos += u64::from(CHUNK_HEADER_LEN);
                        self.write_data(block)?;
                        Run::Raw {
                            header_at,
                            blocks: 1,
                        }
                    }
                });
            }
        }
        Ok(())
    }

    fn write_data(&mut self, block: &[u8]) -> io::Result<()> {
        self.out.write_all(block)?;
        // A short last block is padded with zeros, as img2simg does.
        let pad = BLOCK_SIZE - block.len();
        self.out.write_all(ZEROS.get(..pad).unwrap_or(&[]))?;
        self.pos += BLOCK_SIZE as u64;
        Ok(())
    }

    fn chunk(&mut self, kind: u16, blocks: u64, body: &[u8]) -> io::Result<()> {
        let header = ChunkHeader {
            chunk_type: kind.into(),
            reserved: 0.into(),
            chunk_sz: (blocks as u32).into(),
            total_sz: ((u64::from(CHUNK_HEADER_LEN) + body.len() as u64) as u32).into(),
        };
        self.out.write_all(header.as_bytes())?;
        self.out.write_all(body)?;
        self.pos += u64::from(CHUNK_HEADER_LEN) + body.len() as u64;
        self.chunks += 1;
        Ok(())
    }

    fn end_run(&mut self) -> io::Result<()> {
        match self.run.take() {
            None => Ok(()),
            // img2simg's run of 2^32 zero bytes: its length wrapped to 0, so it writes an
            // empty FILL and then skips the blocks, which read back as the zeros they were.
            Some(Run::Fill {
                value: [0, 0, 0, 0],
                blocks,
            }) if blocks == WRAP_BLOCKS => {
                self.chunk(CHUNK_FILL, 0, &[0; 4])?;
                self.chunk(CHUNK_DONT_CARE, blocks, &[])
            }
            // Of any other value img2simg would write the same, which reads back as zeros: we
            // write the value (the one place our output differs, on purpose).
            Some(Run::Fill { value, blocks }) => self.chunk(CHUNK_FILL, blocks, &value),
            Some(Run::Raw { header_at, blocks }) => {
                let header = ChunkHeader {
                    chunk_type: CHUNK_RAW.into(),
                    reserved: 0.into(),
                    chunk_sz: (blocks as u32).into(),
                    total_sz: ((u64::from(CHUNK_HEADER_LEN) + blocks * BLOCK_SIZE as u64) as u32)
                        .into(),
                };
                self.out.seek(SeekFrom::Start(header_at))?;
                self.out.write_all(header.as_bytes())?;
                self.out.seek(SeekFrom::Start(self.pos))?;
                self.chunks += 1;
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::io::Cursor;

    /// A sparse image by hand: a header (block size 4096, checksum 0) and chunks given as
    /// (type, blocks, body).
    fn image(chunks: &[(u16, u32, Vec<u8>)]) -> Vec<u8> {
        let total: u32 = chunks.iter().map(|c| c.1).sum();
        let mut v = FileHeader {
            magic: SPARSE_MAGIC.into(),
            major_version: 1.into(),
            minor_version: 0.into(),
            file_hdr_sz: 28.into(),
            chunk_hdr_sz: 12.into(),
            blk_sz: 4096.into(),
            total_blks: total.into(),
            total_chunks: (chunks.len() as u32).into(),
            image_checksum: 0.into(),
        }
        .as_bytes()
        .to_vec();
        for (t, blocks, body) in chunks {
            let h = ChunkHeader {
                chunk_type: (*t).into(),
                reserved: 0.into(),
                chunk_sz: (*blocks).into(),
                total_sz: (12 + body.len() as u32).into(),
            };
            v.extend_from_slice(h.as_bytes());
            v.extend_from_slice(body);
        }
        v
    }

    fn sample() -> Vec<u8> {
        image(&[
            (CHUNK_RAW, 2, (0..8192).map(|i| (i % 251) as u8).collect()),
            (CHUNK_FILL, 3, vec![1, 2, 3, 4]),
            (CHUNK_DONT_CARE, 1, vec![]),
            (CHUNK_RAW, 1, vec![9; 4096]),
        ])
    }

    fn expanded() -> Vec<u8> {
        let mut v: Vec<u8> = (0..8192).map(|i| (i % 251) as u8).collect();
        v.extend([1u8, 2, 3, 4].repeat(3 * 1024));
        v.extend([0u8; 4096]);
        v.extend([9u8; 4096]);
        v
    }

    fn read_all(d: &SparseDevice) -> Vec<u8> {
        let mut b = vec![0u8; d.block_count() as usize * BLOCK_SIZE];
        d.read_blocks(0, &mut b, IoCause::Meta).unwrap();
        b
    }

    fn refused(bytes: Vec<u8>) -> SparseError {
        let e = SparseDevice::from_bytes(bytes).err().expect("refused");
        e.into_inner()
            .and_then(|e| e.downcast::<SparseError>().ok())
            .map(|e| *e)
            .expect("a SparseError")
    }

    fn set(v: &mut [u8], at: usize, bytes: &[u8]) {
        v[at..at + bytes.len()].copy_from_slice(bytes);
    }

    #[test]
    fn chunks_expand_to_the_image() {
        let d = SparseDevice::from_bytes(sample()).unwrap();
        assert_eq!(d.block_count(), 7);
        assert_eq!(read_all(&d), expanded());
        // A read that starts inside a chunk and spans three.
        let mut b = vec![0u8; 3 * BLOCK_SIZE];
        d.read_blocks(1, &mut b, IoCause::Meta).unwrap();
        assert_eq!(b, expanded()[4096..4 * 4096]);
        let e = d.read_blocks(6, &mut b, IoCause::Meta).unwrap_err();
        assert!(e.to_string().contains("past the end"), "{e}");
        assert!(d.write_blocks(0, &b[..4096], IoCause::Meta).is_err());
    }

    #[test]
    fn writer_output_reads_back() {
        let raw = expanded();
        let mut out = Cursor::new(Vec::new());
        let chunks = write_sparse(&raw[..], raw.len() as u64, &mut out).unwrap();
        // RAW 2, FILL 3 (1234), FILL 1 (zeros), RAW 1.
        assert_eq!(chunks, 4);
        let d = SparseDevice::from_bytes(out.into_inner()).unwrap();
        assert_eq!(read_all(&d), raw);
    }

    #[test]
    fn a_zero_run_of_2_pow_32_bytes_is_cut_as_img2simg_cuts_it() {
        // img2simg 29 on 5 GiB of zeros wrote FILL(0 blocks), DONT_CARE(1048576),
        // FILL(262144); a shorter tail shows the same cut.
        let len = (WRAP_BLOCKS + 5) * BLOCK_SIZE as u64;
        let mut out = Cursor::new(Vec::new());
        write_sparse(io::repeat(0).take(len), len, &mut out).unwrap();
        let want = image(&[
            (CHUNK_FILL, 0, vec![0; 4]),
            (CHUNK_DONT_CARE, WRAP_BLOCKS as u32, vec![]),
            (CHUNK_FILL, 5, vec![0; 4]),
        ]);
        assert_eq!(out.into_inner(), want);
    }

    #[test]
    fn a_short_last_block_is_raw_and_padded() {
        let mut raw = vec![0u8; 4096];
        raw.extend([7u8; 100]);
        let mut out = Cursor::new(Vec::new());
        write_sparse(&raw[..], raw.len() as u64, &mut out).unwrap();
        let mut last = vec![7u8; 100];
        last.resize(4096, 0);
        assert_eq!(
            out.into_inner(),
            image(&[(CHUNK_FILL, 1, vec![0; 4]), (CHUNK_RAW, 1, last)])
        );
    }

    #[test]
    fn header_fields_are_checked() {
        let mut v = sample();
        set(&mut v, 0, &[0; 4]);
        assert_eq!(refused(v), SparseError::Magic(0));
        let mut v = sample();
        set(&mut v, 4, &2u16.to_le_bytes());
        assert_eq!(refused(v), SparseError::Version { major: 2, minor: 0 });
        let mut v = sample();
        set(&mut v, 8, &32u16.to_le_bytes());
        assert_eq!(
            refused(v),
            SparseError::HeaderSizes {
                file: 32,
                chunk: 12
            }
        );
        let mut v = sample();
        set(&mut v, 12, &4098u32.to_le_bytes());
        assert_eq!(refused(v), SparseError::BlockSize(4098));
        let mut v = sample();
        set(&mut v, 12, &0u32.to_le_bytes());
        assert_eq!(refused(v), SparseError::BlockSize(0));
        let e = SparseDevice::from_bytes(sample()[..20].to_vec())
            .err()
            .unwrap();
        assert!(
            e.to_string().contains("shorter than its 28-byte header"),
            "{e}"
        );
    }

    #[test]
    fn a_huge_chunk_count_is_refused_before_reading_chunks() {
        let mut v = sample();
        set(&mut v, 20, &u32::MAX.to_le_bytes());
        assert_eq!(
            refused(v.clone()),
            SparseError::TooManyChunks {
                chunks: u32::MAX,
                have: v.len() as u64
            }
        );
    }

    #[test]
    fn chunk_problems_name_the_chunk() {
        let chunk1 = 28 + 12 + 8192;
        // A RAW chunk whose size does not match its blocks.
        let mut v = sample();
        set(&mut v, 28 + 4, &3u32.to_le_bytes());
        assert!(matches!(
            refused(v),
            SparseError::Chunk {
                index: 0,
                offset: 28,
                problem: ChunkProblem::Size {
                    kind: "RAW",
                    blocks: 3,
                    ..
                }
            }
        ));
        // An unknown type.
        let mut v = sample();
        set(&mut v, chunk1, &0xcac5u16.to_le_bytes());
        assert_eq!(
            refused(v),
            SparseError::Chunk {
                index: 1,
                offset: chunk1 as u64,
                problem: ChunkProblem::UnknownType(0xcac5)
            }
        );
        // Truncated: the last chunk's data is cut short.
        let mut v = sample();
        v.truncate(v.len() - 1);
        assert!(matches!(
            refused(v),
            SparseError::Chunk {
                index: 3,
                problem: ChunkProblem::PastEndOfFile { .. },
                ..
            }
        ));
        // Truncated inside a chunk header.
        let mut v = sample();
        v.truncate(chunk1 + 5);
        assert!(matches!(
            refused(v),
            SparseError::Chunk {
                index: 1,
                problem: ChunkProblem::TruncatedHeader,
                ..
            }
        ));
        // Blocks that do not add up, one way and the other.
        let mut v = sample();
        set(&mut v, 16, &8u32.to_le_bytes());
        assert_eq!(
            refused(v),
            SparseError::BlocksDoNotAddUp {
                covered: 7,
                total: 8
            }
        );
        let mut v = sample();
        set(&mut v, 16, &6u32.to_le_bytes());
        assert!(matches!(
            refused(v),
            SparseError::Chunk {
                index: 3,
                problem: ChunkProblem::PastTotalBlocks {
                    blocks: 1,
                    total: 6
                },
                ..
            }
        ));
        // A FILL chunk that claims more than its value, and bytes after the last chunk.
        let mut v = sample();
        set(&mut v, chunk1 + 8, &20u32.to_le_bytes());
        assert!(matches!(
            refused(v),
            SparseError::Chunk {
                index: 1,
                problem: ChunkProblem::Size { kind: "FILL", .. },
                ..
            }
        ));
        let mut v = sample();
        v.push(0);
        assert_eq!(refused(v), SparseError::TrailingBytes(1));
    }

    #[test]
    fn crc_chunks_and_the_image_checksum_are_checked() {
        let data = expanded();
        let crc = crc32fast::hash(&data[..5 * 4096]);
        let good = |crc: u32| {
            image(&[
                (CHUNK_RAW, 2, data[..8192].to_vec()),
                (CHUNK_FILL, 3, vec![1, 2, 3, 4]),
                (CHUNK_CRC32, 0, crc.to_le_bytes().to_vec()),
                (CHUNK_DONT_CARE, 1, vec![]),
                (CHUNK_RAW, 1, vec![9; 4096]),
            ])
        };
        let d = SparseDevice::from_bytes(good(crc)).unwrap();
        assert_eq!(read_all(&d), data);
        assert_eq!(
            refused(good(crc ^ 1)),
            SparseError::Chunk {
                index: 2,
                offset: 28 + 12 + 8192 + 16,
                problem: ChunkProblem::Crc {
                    stored: crc ^ 1,
                    computed: crc
                }
            }
        );
        let mut v = good(crc);
        set(&mut v, 24, &crc32fast::hash(&data).to_le_bytes());
        SparseDevice::from_bytes(v.clone()).unwrap();
        set(&mut v, 24, &1u32.to_le_bytes());
        assert!(matches!(
            refused(v),
            SparseError::ImageChecksum { stored: 1, .. }
        ));
        let mut v = good(crc);
        set(&mut v, 28 + 12 + 8192 + 16 + 4, &1u32.to_le_bytes());
        assert!(matches!(
            refused(v),
            SparseError::Chunk {
                index: 2,
                problem: ChunkProblem::CrcBlocks(1),
                ..
            }
        ));
    }

    #[test]
    fn crc_of_a_repeat_is_the_crc_of_the_bytes() {
        for count in [0u64, 1, 2, 3, 1000, 1025] {
            let mut h = crc32fast::Hasher::new();
            h.update(b"ab");
            crc_repeat(&mut h, &[5, 6, 7, 8], count);
            let mut want = b"ab".to_vec();
            want.extend([5u8, 6, 7, 8].repeat(count as usize));
            assert_eq!(h.finalize(), crc32fast::hash(&want), "count {count}");
        }
    }

    proptest! {
        /// Arbitrary bytes after a valid header never panic: they open or are refused, and
        /// what opens reads whole.
        #[test]
        fn arbitrary_chunks_never_panic(
            blocks in 0u32..64,
            chunks in 0u32..8,
            body in proptest::collection::vec(any::<u8>(), 0..600),
            blk_sz in prop_oneof![Just(4096u32), Just(4u32), Just(8u32), any::<u32>()],
        ) {
            let mut v = image(&[]);
            set(&mut v, 12, &blk_sz.to_le_bytes());
            set(&mut v, 16, &blocks.to_le_bytes());
            set(&mut v, 20, &chunks.to_le_bytes());
            v.extend(body);
            if let Ok(d) = SparseDevice::from_bytes(v) {
                // DONT_CARE chunks of a huge block size expand to a lot: read the start.
                let mut b = vec![0u8; d.block_count().min(64) as usize * BLOCK_SIZE];
                d.read_blocks(0, &mut b, IoCause::Meta).unwrap();
            }
        }

        /// Chunk headers built from arbitrary small fields (the types that exist, sizes near
        /// right): never a panic either.
        #[test]
        fn near_valid_chunks_never_panic(
            parts in proptest::collection::vec(
                (prop_oneof![Just(CHUNK_RAW), Just(CHUNK_FILL), Just(CHUNK_DONT_CARE), Just(CHUNK_CRC32)],
                 0u32..3, 0usize..3), 0..6),
        ) {
            let chunks: Vec<(u16, u32, Vec<u8>)> = parts.iter().map(|&(t, n, skew)| {
                let len = match t { CHUNK_RAW => n as usize * 8, CHUNK_DONT_CARE => 0, _ => 4 };
                (t, n, vec![0x5a; len + skew])
            }).collect();
            let mut v = image(&chunks);
            set(&mut v, 12, &8u32.to_le_bytes());
            if let Ok(d) = SparseDevice::from_bytes(v) {
                let mut b = vec![0u8; d.block_count() as usize * BLOCK_SIZE];
                d.read_blocks(0, &mut b, IoCause::Meta).unwrap();
            }
        }
    }
}
