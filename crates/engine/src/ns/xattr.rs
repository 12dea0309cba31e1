//! Extended attributes of an inode: the inline xattr area followed by the xattr node's data,
//! parsed as one buffer by the format layer.

use crate::error::Result;
use crate::node::Expect;
use crate::vol::Vol;
use uf2fs_format::inode::Inode;
use uf2fs_format::node::XATTR_NODE_OFFSET;
use uf2fs_format::xattr::{parse, Xattr, XATTR_NODE_DATA};

impl Vol {
    pub(crate) fn xattrs(&self, inode: &Inode) -> Result<Vec<Xattr>> {
        let mut buf = inode.inline_xattr_area().to_vec();
        if inode.xattr_nid != 0 {
            let expect = Expect {
                ino: inode.ino,
                ofs: u64::from(XATTR_NODE_OFFSET),
            };
            let node = self
                .nodes
                .read(&*self.dev, &self.nat, inode.xattr_nid, expect)?;
            buf.extend_from_slice(node.get(..XATTR_NODE_DATA).unwrap_or(&[]));
        }
        Ok(parse(&buf, inode.ino)?)
    }
}
