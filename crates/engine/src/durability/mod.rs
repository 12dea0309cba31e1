//! Durability: checkpoints (prepared under the write lock, written without it, settled after),
//! fsync by node chain, and roll-forward recovery at mount.

pub(crate) mod checkpoint;
pub(crate) mod fsync;
pub(crate) mod recovery;
pub(crate) mod state;
