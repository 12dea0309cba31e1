//! An Android sparse image (img2simg's format) from arbitrary bytes: the header and chunk
//! table are checked at the door; an accepted image reads every block it claims (raw, fill
//! and don't-care chunks) without a panic, and reads past its end fail.
#![no_main]

use libfuzzer_sys::fuzz_target;
use uf2fs_device::{BlockDevice, IoCause, SparseDevice};
use uf2fs_fuzz::sink;

fuzz_target!(|data: &[u8]| {
    let Ok(dev) = SparseDevice::from_bytes(data.to_vec()) else {
        return;
    };
    let blocks = dev.block_count();
    let mut buf = vec![0u8; 4096];
    // At most the first 4096 blocks and the last: an image may claim terabytes.
    for b in (0..blocks.min(4096)).chain(blocks.checked_sub(1)) {
        match dev.read_blocks(b, &mut buf, IoCause::Meta) {
            Ok(()) => sink(buf[0]),
            Err(e) => sink(e.to_string()),
        }
    }
    assert!(dev.read_blocks(blocks, &mut buf, IoCause::Meta).is_err());
});
