//! Directories: inline dentries in the inode, or dentry blocks arranged as a multi-level hash
//! table. Listing reads every written block; lookup reads only the buckets the name's hash
//! selects at each level. In a casefolded directory the hash is taken over the folded name and
//! names compare folded (`uf2fs_format::casefold`), as Linux 6.1 does. Entry inode numbers
//! are checked before use.
//!
//! An encrypted directory is read without its key as Linux 6.1 reads it: its entries are
//! listed by their no-key names (`uf2fs_format::fscrypt`), and a lookup decodes such a name
//! and walks the buckets of the hash it carries, comparing ciphertext (or its prefix and
//! SHA-256). Casefolding plays no part there: the stored hash is all a no-key lookup has.
//!
//! Changed dentry blocks are held in memory until the next checkpoint (`ns/dentry_cache.rs`):
//! every read of a directory's blocks goes through [`Vol::dir_blocks`] (or, under the write
//! lock, [`Vol::dentry_block`]), and every change of one through `Fs::put_dentry_block`.

use crate::error::{Error, Result};
use crate::ns::dentry_cache::on_device;
use crate::ns::edit::Editing;
use crate::space::Log;
use crate::state::WriteState;
use crate::vol::Vol;
use std::collections::BTreeMap;
use std::ops::ControlFlow;
use uf2fs_format::casefold::{DirName, Encoding};
use uf2fs_format::dentry::{blocks_per_bucket, bucket_block, buckets_at, DentryArea, DirEntry};
use uf2fs_format::fscrypt::NoKeyName;
use uf2fs_format::inode::{FileType, Inode, MAX_NAME_LEN};
use uf2fs_format::nat::check_nid;
use uf2fs_format::{Block, CorruptKind, BLOCK_SIZE};

/// Blocks of directory data (i_size rounded up).
fn dir_blocks(dir: &Inode) -> u64 {
    dir.size.div_ceil(BLOCK_SIZE as u64)
}

/// What a lookup compares entries with.
pub(crate) enum Query<'a> {
    /// A name as given (folded in a casefolded directory).
    Plain(DirName<'a>, Option<Encoding>),
    /// A no-key name of an encrypted directory, decoded.
    NoKey(NoKeyName),
    /// An on-disk name with its stored hash, compared byte for byte (recovery's lookup of
    /// the ciphertext name an inode records in an encrypted directory).
    Raw { name: &'a [u8], hash: u32 },
}

impl Query<'_> {
    /// The hash whose buckets hold the entry.
    pub(crate) fn hash(&self) -> u32 {
        match self {
            Query::Plain(dn, _) => dn.hash(),
            Query::NoKey(n) => n.hash,
            Query::Raw { hash, .. } => *hash,
        }
    }

    /// Whether the stored hash must match in an inline directory too (Linux compares it in
    /// casefolded and encrypted directories; plain ones have always matched by name alone).
    pub(crate) fn inline_hash(&self) -> bool {
        match self {
            Query::Plain(_, enc) => enc.is_some(),
            Query::NoKey(_) | Query::Raw { .. } => true,
        }
    }

    /// Whether on-disk name `name` is the one asked for (hashes compared by the caller).
    pub(crate) fn matches(&self, name: &[u8]) -> bool {
        match self {
            Query::Plain(dn, enc) => dn.matches(name, enc.as_ref()),
            Query::NoKey(n) => n.matches(name),
            Query::Raw { name: want, .. } => *want == name,
        }
    }
}

/// Where a directory entry was found: the inline area (block `None`) or a dentry block.
pub(crate) struct Found {
    pub ino: u32,
    pub fblk: Option<u64>,
    pub slot: usize,
    /// The length of the name on disk.
    pub len: usize,
}

/// A visitor over the area at `fblk` (`None`: inline) that stops at the entry `q` asks for
/// and stores its place; with a hash, only entries whose stored hash matches are compared (as
/// the kernel's bucket scan does).
fn finder<'a>(
    found: &'a mut Option<Found>,
    q: &'a Query<'a>,
    hash: Option<u32>,
    fblk: Option<u64>,
) -> impl FnMut(&DirEntry<'_>) -> Result<ControlFlow<()>> + 'a {
    move |e| {
        if hash.is_none_or(|h| e.hash == h) && q.matches(e.name) {
            *found = Some(Found {
                ino: e.ino,
                fblk,
                slot: e.slot,
                len: e.name.len(),
            });
            return Ok(ControlFlow::Break(()));
        }
        Ok(ControlFlow::Continue(()))
    }
}

type Each<'a> = dyn FnMut(&DirEntry<'_>) -> Result<ControlFlow<()>> + 'a;

impl Vol {
    fn check_dir(&self, dir: &Inode) -> Result<()> {
        if dir.file_type != FileType::Directory {
            return Err(Error::NotADirectory);
        }
        Ok(())
    }

    /// Calls `f` for each entry of one dentry area (with `hash`, only for the entries that
    /// store it); stops early on `Break`.
    fn scan_area(
        &self,
        dir: &Inode,
        area: DentryArea<'_>,
        block: u64,
        hash: Option<u32>,
        f: &mut Each,
    ) -> Result<ControlFlow<()>> {
        let entries = match hash {
            Some(h) => area.iter_hash(h),
            None => area.iter(),
        };
        for e in entries {
            let e = e.map_err(|d| CorruptKind::Dentry {
                ino: dir.ino,
                block,
                slot: d.slot,
                why: d.why,
            })?;
            if check_nid(&self.layout, e.ino).is_err() {
                return Err(CorruptKind::Dentry {
                    ino: dir.ino,
                    block,
                    slot: e.slot,
                    why: "inode number out of range",
                }
                .into());
            }
            if f(&e)?.is_break() {
                return Ok(ControlFlow::Break(()));
            }
        }
        Ok(ControlFlow::Continue(()))
    }

    /// The encoding names in `dir` follow: `Some` for a casefolded directory. A casefolded
    /// directory on an image without the casefold feature is refused (Linux has no encoding
    /// to compare its names with).
    pub(crate) fn casefold_of(&self, dir: &Inode) -> Result<Option<Encoding>> {
        if !dir.is_casefolded() || dir.file_type != FileType::Directory {
            return Ok(None);
        }
        match self.sb.encoding() {
            Some(e) => Ok(Some(e)),
            None => Err(uf2fs_format::Incompatible::CasefoldWithoutFeature { ino: dir.ino }.into()),
        }
    }

    /// `name` as `dir` looks for it: folded in a casefolded directory. A name without a
    /// folded form (not UTF-8, or folding to nothing or past 254 bytes) is refused in strict
    /// mode, as Linux answers EINVAL.
    pub(crate) fn dir_name<'a>(
        &self,
        dir: &Inode,
        name: &'a [u8],
    ) -> Result<(DirName<'a>, Option<Encoding>)> {
        let enc = self.casefold_of(dir)?;
        let dn = DirName::new(name, enc.as_ref()).map_err(|_| {
            Error::InvalidArgument(
                "the name is not valid UTF-8 for this casefolded directory (strict encoding)",
            )
        })?;
        Ok((dn, enc))
    }

    /// What a lookup of `name` in `dir` compares entries with: in an encrypted directory
    /// (we never hold a key) the decoded no-key name, '.' and '..' as they are; a name that
    /// cannot be a no-key name finds nothing, as in Linux (ENOENT).
    pub(crate) fn dir_query<'a>(&self, dir: &Inode, name: &'a [u8]) -> Result<Query<'a>> {
        if dir.is_encrypted() && name != b"." && name != b".." {
            return NoKeyName::decode(name)
                .map(Query::NoKey)
                .ok_or(Error::NotFound);
        }
        let (dn, enc) = self.dir_name(dir, name)?;
        Ok(Query::Plain(dn, enc))
    }

    /// Every entry of `dir`, '.' and '..' included, in on-disk order; stops early on `Break`.
    pub(crate) fn for_each_dentry(&self, dir: &Inode, f: &mut Each) -> Result<()> {
        self.for_each_dentry_from(dir, 0, &mut |_, e| f(e))
    }

    /// Calls `f(block, entry)` for each entry of `dir` in dentry block `from_block` and after,
    /// in order (an inline directory's entries are block 0's: converting it keeps their slots);
    /// stops early on `Break`. Blocks are read a few at a time, two first and twice as many
    /// each time after up to 64, so a walk that stops early (a READDIRPLUS reply holds
    /// about 25 entries) reads little more of a large directory than it needs.
    pub(crate) fn for_each_dentry_from(
        &self,
        dir: &Inode,
        from_block: u64,
        f: &mut dyn FnMut(u64, &DirEntry<'_>) -> Result<ControlFlow<()>>,
    ) -> Result<()> {
        self.check_dir(dir)?;
        if dir.has_inline_dentry() {
            if from_block == 0 {
                let area = DentryArea::inline(dir.inline_area());
                let _stopped = self.scan_area(dir, area, 0, None, &mut |e| f(0, e))?;
            }
            return Ok(());
        }
        const MAX_STEP: u64 = 64;
        let mut step = 2;
        let mut nblocks = dir_blocks(dir);
        let mut at = from_block;
        while at < nblocks {
            let end = at.saturating_add(step).min(nblocks);
            step = (step * 2).min(MAX_STEP);
            // Read as they are now (held copies included), the directory's size with them.
            let now = self.dir_blocks(dir, at, end)?;
            nblocks = dir_blocks(&now.dir);
            for (fblk, b) in now.iter() {
                if self
                    .scan_area(&now.dir, DentryArea::block(b), fblk, None, &mut |e| {
                        f(fblk, e)
                    })?
                    .is_break()
                {
                    return Ok(());
                }
            }
            at = end;
        }
        Ok(())
    }

    /// The inode number of `name` in `dir`.
    pub(crate) fn lookup(&self, dir: &Inode, name: &[u8]) -> Result<u32> {
        self.check_dir(dir)?;
        if name.len() > MAX_NAME_LEN {
            return Err(Error::NameTooLong);
        }
        if name.is_empty() {
            return Err(Error::NotFound);
        }
        let q = self.dir_query(dir, name)?;
        self.lookup_query(dir, &q)
    }

    /// The inode number of the entry `q` asks for in `dir`.
    pub(crate) fn lookup_query(&self, dir: &Inode, q: &Query<'_>) -> Result<u32> {
        self.find_query(dir, q).map(|f| f.ino)
    }

    /// The entry `q` asks for in `dir`, with its place: in the inline area, or in the buckets
    /// its hash selects at each level (a removal or a rename reads no more of a large
    /// directory than a lookup does).
    pub(crate) fn find_query(&self, dir: &Inode, q: &Query<'_>) -> Result<Found> {
        self.check_dir(dir)?;
        let hash = q.hash();
        let mut found = None;
        if dir.has_inline_dentry() {
            let h = q.inline_hash().then_some(hash);
            let area = DentryArea::inline(dir.inline_area());
            let _stopped = self.scan_area(dir, area, 0, h, &mut finder(&mut found, q, h, None))?;
            return found.ok_or(Error::NotFound);
        }
        let nblocks = dir_blocks(dir);
        for level in 0..dir.current_depth {
            let buckets = buckets_at(level, dir.dir_level);
            let first = bucket_block(level, dir.dir_level, u64::from(hash) % buckets);
            if first >= nblocks {
                break;
            }
            let end = (first + blocks_per_bucket(level)).min(nblocks);
            for (fblk, b) in self.dir_blocks(dir, first, end)?.iter() {
                let flow = self.scan_area(
                    dir,
                    DentryArea::block(b),
                    fblk,
                    Some(hash),
                    &mut finder(&mut found, q, Some(hash), Some(fblk)),
                )?;
                if let (ControlFlow::Break(()), Some(f)) = (flow, found.take()) {
                    return Ok(f);
                }
            }
        }
        Err(Error::NotFound)
    }
}

impl crate::vol::Fs {
    /// Whether `nid` is an inode in use now: a node id that was never one, or whose inode was
    /// freed, is not (NFS-style file handles name inodes by nid and must go stale then).
    pub fn is_inode(&self, nid: u32) -> Result<bool> {
        let v = self.vol();
        match v.nat.entry(&*v.dev, nid) {
            Ok(e) => Ok(!e.is_free() && e.ino == nid),
            Err(Error::Corrupt(CorruptKind::NidRange { .. })) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// Blocks of a directory as a reader sees them ([`Vol::dir_blocks`]), looked at where they
/// are: held copies shared with the cache, the others read into one buffer (neighbours on
/// the device in one read). Until stop 40 each block was copied out of the cache or read
/// alone and copied again into a list: in `rm -rf` those were most of the daemon's 4 KiB
/// copies, themselves a quarter of its own work.
pub(crate) struct DirBlocks {
    /// The directory's inode they were read through.
    pub dir: std::sync::Arc<Inode>,
    /// (file block, where its contents are), holes left out, in file order.
    blocks: Vec<(u64, Held)>,
    /// The blocks read from the device, back to back.
    read: Vec<u8>,
}

/// Where a block of [`DirBlocks`] is.
enum Held {
    /// In the cache of changed blocks.
    Cached(std::sync::Arc<Block>),
    /// The n-th block of `DirBlocks::read`.
    Read(usize),
}

impl DirBlocks {
    /// (file block, contents) in file order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, &Block)> + '_ {
        self.blocks.iter().filter_map(|(fblk, h)| {
            let b: &Block = match h {
                Held::Cached(b) => b,
                Held::Read(i) => self
                    .read
                    .get(i * BLOCK_SIZE..(i + 1) * BLOCK_SIZE)?
                    .try_into()
                    .ok()?,
            };
            Some((*fblk, b))
        })
    }
}

/// The most blocks one device read of a directory takes.
const DIR_READ_RUN: u32 = 64;

// Changed dentry blocks: what readers see of the cache, and how changes fill and empty it
// (`ns/dentry_cache.rs`).
impl Vol {
    /// Dentry block `fblk` of directory `ino`, stored at `addr`: the held copy if there is
    /// one. For a caller under the write lock; readers go through [`Vol::dir_blocks`].
    pub(crate) fn dentry_block(
        &self,
        ino: u32,
        fblk: u64,
        addr: u32,
    ) -> Result<std::sync::Arc<Block>> {
        match self.dentries.get(ino, fblk) {
            Some(b) => Ok(b),
            None => Ok(std::sync::Arc::new(
                self.read_data_block(addr.into(), "dentry block")?,
            )),
        }
    }

    /// The blocks of `dir` from `start` to `end` that have addresses (holes left out), as a
    /// reader without the write lock must see them: a flush that ran meanwhile is detected by
    /// the cache's generation and the blocks are read again, from the directory's inode as it
    /// is now.
    pub(crate) fn dir_blocks(&self, dir: &Inode, start: u64, end: u64) -> Result<DirBlocks> {
        loop {
            let generation = self.dentries.generation();
            // Fetched after the generation: an inode from before a flush that let blocks go
            // is never paired with the cache as it is after it.
            let dir = self.inode(dir.ino)?;
            let mut addrs = Vec::new();
            self.for_each_addr(&dir, start, end, &mut |fblk, addr| {
                addrs.push((fblk, addr));
                Ok(())
            })?;
            let mut blocks = Vec::with_capacity(addrs.len());
            // (first address, blocks) of each run of neighbours to read.
            let mut runs: Vec<(u32, u32)> = Vec::new();
            let mut nread = 0;
            for (fblk, addr) in addrs {
                if let Some(b) = self.dentries.get(dir.ino, fblk) {
                    blocks.push((fblk, Held::Cached(b)));
                    continue;
                }
                blocks.push((fblk, Held::Read(nread)));
                nread += 1;
                match runs.last_mut() {
                    Some((first, n))
                        if *n < DIR_READ_RUN && first.checked_add(*n) == Some(addr) =>
                    {
                        *n += 1
                    }
                    _ => runs.push((addr, 1)),
                }
            }
            let mut read = vec![0u8; nread * BLOCK_SIZE];
            let mut at = 0;
            for (first, n) in runs {
                let len = n as usize * BLOCK_SIZE;
                if let Some(buf) = read.get_mut(at..at + len) {
                    self.read_data(first.into(), buf, "dentry block")?;
                }
                at += len;
            }
            if self.dentries.generation() == generation {
                return Ok(DirBlocks { dir, blocks, read });
            }
        }
    }
}

impl crate::vol::Fs {
    /// Stores the changed dentry block `fblk` of the directory being edited, whose address
    /// is `old` (the caller looked it up to read the block): held in memory when it replaces
    /// a block on the device, written out of place now when it fills a hole.
    pub(crate) fn put_dentry_block(
        &self,
        ws: &mut WriteState,
        p: &mut Editing,
        fblk: u64,
        old: u32,
        b: std::sync::Arc<Block>,
    ) -> Result<()> {
        if self.vol().options.dentry_cache && on_device(old) {
            self.vol().dentries.put(p.ino, fblk, b);
            return Ok(());
        }
        self.write_data_blocks(ws, p, Log::HotData, &BTreeMap::from([(fblk, *b)]))
    }

    /// Writes every held dentry block out of place (into the running change's batches, which
    /// land before any checkpoint), then lets them go. Under the write lock.
    pub(crate) fn flush_dentry_blocks(&self, ws: &mut WriteState) -> Result<()> {
        let v = self.vol();
        let by_dir = v.dentries.snapshot();
        if by_dir.is_empty() {
            return Ok(());
        }
        for (ino, blocks) in &by_dir {
            let mut p = self.edit(*ino)?;
            if p.inode.file_type != FileType::Directory || p.inode.has_inline_dentry() {
                // Blocks are let go whenever a directory's blocks are freed (`punch`): one
                // held for what is no directory with blocks now is a bug, not the volume's.
                return Err(Error::InvalidArgument(
                    "internal: a held dentry block of an inode that has no dentry blocks",
                ));
            }
            self.write_data_blocks(ws, &mut p, Log::HotData, blocks)?;
            self.commit(p)?;
        }
        // The new addresses are in the nodes (and the blocks in flight, readable): readers
        // that looked at the cache before this go again (`Vol::dir_blocks`).
        v.dentries.written(&by_dir);
        Ok(())
    }
}
