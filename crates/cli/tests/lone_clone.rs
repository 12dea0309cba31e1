//! The repository stands alone: a clone in an empty folder, with nothing beside it, runs the
//! README's demo command (`bash scripts/demo.sh`: setup, mkfs, mount, a workload, status,
//! unmount, fsck.f2fs, a remount compared with what was written), and nothing in it names
//! a folder beside the checkout.
//!
//! The clone is of the committed HEAD. The demo runs the binary this test run built
//! (`UF2FS_BIN`) instead of building a release one again; the build itself needs nothing
//! beside the checkout (cargo reads only the workspace).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

use std::process::Command;
use uf2fs_testkit::{root, run, scratch, try_run};

#[test]
fn the_readme_demo_runs_in_a_clone_with_nothing_beside_it() {
    let top = scratch("lone-clone");
    let clone = top.join("uf2fs");
    run(Command::new("git")
        .args(["clone", "-q"])
        .arg(root())
        .arg(&clone));
    let beside: Vec<_> = std::fs::read_dir(&top)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(beside, ["uf2fs"], "the clone is alone in its folder");

    // Nothing in the repository names a folder beside the checkout (the pattern is built
    // so that this file does not match it).
    let pattern = concat!("shared", "/");
    let (found, out, _) = try_run(
        Command::new("git")
            .current_dir(&clone)
            .args(["grep", "-n", "-F", pattern]),
    );
    assert!(!found, "the repository reaches beside the checkout:\n{out}");

    let (ok, out, err) = try_run(
        Command::new("bash")
            .arg("scripts/demo.sh")
            .current_dir(&clone)
            .env("UF2FS_BIN", env!("CARGO_BIN_EXE_uf2fs")),
    );
    assert!(ok, "the demo failed in a lone clone:\n{out}\n{err}");
    for step in [
        "== uf2fs mkfs",
        "== uf2fs status (live mount)",
        "clean",
        "diff -r: identical",
    ] {
        assert!(
            out.contains(step) || err.contains(step),
            "the demo did not show {step:?}:\n{out}\n{err}"
        );
    }
    let _ = std::fs::remove_dir_all(&top);
}
