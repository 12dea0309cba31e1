//! Compressed files (see `uf2fs_format::compress` for the cluster layout): reading them
//! (`read`), writing them as Linux 6.1 writes them (`write`), and the controls Linux offers
//! on them: releasing and reserving saved blocks, compressing on request, a file's own
//! options (`control`).

mod control;
mod read;
mod write;

/// Where `i_compr_blocks` sits in the inode block (the extra area's fourth field).
const COMPR_BLOCKS_AT: usize = uf2fs_format::inode::I_ADDR_OFFSET + 24;

const BS: u64 = uf2fs_format::BLOCK_SIZE as u64;
