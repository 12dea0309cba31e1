//! The xattr decoders: xattr::parse of the input as a logical xattr buffer, and for every
//! entry its user-visible name and value (ACLs converted); acl_to_xattr on the raw input.
//!
//! Input: the buffer. The inode number used in errors is 3.
#![no_main]

use libfuzzer_sys::fuzz_target;
use uf2fs_format::xattr::{acl_to_xattr, index, parse, XATTR_HEADER_SIZE};
use uf2fs_fuzz::sink;

const INO: u32 = 3;

fuzz_target!(|data: &[u8]| {
    match parse(data, INO) {
        Ok(list) => {
            let mut used = XATTR_HEADER_SIZE;
            for x in &list {
                used += (4 + x.name.len() + x.value.len() + 3) & !3;
                match x.full_name() {
                    Some(n) => sink(n),
                    None => sink(x.index),
                }
                match x.user_value(INO) {
                    Ok(v) => {
                        if !matches!(x.index, index::POSIX_ACL_ACCESS | index::POSIX_ACL_DEFAULT) {
                            assert_eq!(v, x.value);
                        }
                    }
                    Err(e) => sink(e.to_string()),
                }
            }
            assert!(
                list.is_empty() || used <= data.len(),
                "entries run past the buffer"
            );
        }
        Err(e) => sink(e.to_string()),
    }
    match acl_to_xattr(data, INO) {
        Ok(v) => {
            assert!(v.len() >= 4);
            assert_eq!((v.len() - 4) % 8, 0);
        }
        Err(e) => sink(e.to_string()),
    }
});
