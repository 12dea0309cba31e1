//! `uf2fs-bench pipe-echo`, the other process of fuse-rt's `2 processes` floor: every byte
//! it reads comes back in order, and it ends when its input does.

use std::io::{Read, Write};
use std::process::{Command, Stdio};

#[test]
fn pipe_echo_sends_back_each_byte_and_ends_at_eof() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_uf2fs-bench"))
        .args(["pipe-echo", "--pin", "0"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start pipe-echo");
    let mut to = child.stdin.take().expect("stdin");
    let mut from = child.stdout.take().expect("stdout");
    for i in 0..=255u8 {
        to.write_all(&[i]).expect("write");
        let mut b = [0u8; 1];
        from.read_exact(&mut b).expect("read");
        assert_eq!(b[0], i, "byte {i} came back as {}", b[0]);
    }
    drop(to);
    let status = child.wait().expect("wait");
    assert!(status.success(), "pipe-echo ended with {status}");
    let mut rest = Vec::new();
    from.read_to_end(&mut rest).expect("read the rest");
    assert!(
        rest.is_empty(),
        "pipe-echo wrote {} bytes nobody sent",
        rest.len()
    );
}
