//! Namespace operations: what a change to the tree means (create, write, truncate, unlink,
//! rename, xattrs, fallocate), and the read-side walks of files, directories and xattrs they
//! build on. Each change edits node copies through `Editing` and moves blocks through the
//! space room; none writes a checkpoint itself (the face's `changing` does, when asked).

pub(crate) mod compressed;
pub(crate) mod crypt;
pub(crate) mod delete;
pub(crate) mod dentry_cache;
pub(crate) mod dir;
pub(crate) mod edit;
pub(crate) mod fallocate;
pub(crate) mod file;
pub(crate) mod quota;
pub(crate) mod quota_book;
pub(crate) mod rename;
pub(crate) mod write;
pub(crate) mod xattr;
pub(crate) mod xattr_write;
