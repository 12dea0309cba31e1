//! IMAGE may be a block device: a Linux-written fixture attached read-only to a loop device
//! extracts to the tree Linux showed, as the image file does.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

use std::process::Command;
use uf2fs_testkit::{assert_same_view, fixture, root, run, scratch, view};

/// Detaches the loop device even when the test fails.
struct Loop(String);
impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.0]).status();
    }
}

#[test]
fn loop_device_reads_like_the_image_file() {
    let dir = scratch("loopdev");
    let img = fixture("linux-default", &dir);
    let dev = Loop(
        run(Command::new("losetup")
            .args(["-r", "-f", "--show"])
            .arg(&img))
        .trim()
        .to_owned(),
    );
    assert!(dev.0.starts_with("/dev/loop"), "losetup gave {:?}", dev.0);
    let info = run(Command::new(env!("CARGO_BIN_EXE_uf2fs")).args(["info", "--json", &dev.0]));
    let v: serde_json::Value = serde_json::from_str(&info).unwrap();
    assert_eq!(
        v["block_count"].as_u64().unwrap() * 4096,
        std::fs::metadata(&img).unwrap().len()
    );
    let out = dir.join("out");
    run(Command::new(env!("CARGO_BIN_EXE_uf2fs"))
        .args(["extract", &dev.0])
        .arg(&out));
    let want = std::fs::read(root().join("tests/fixtures/linux-default.view.txt")).unwrap();
    let want: Vec<String> = String::from_utf8_lossy(&want)
        .lines()
        .map(str::to_owned)
        .collect();
    assert_same_view(&want, &view(&out, None), "loop device");
    drop(dev);
    let _ = std::fs::remove_dir_all(&dir);
}
