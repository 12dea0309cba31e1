//! `uf2fs completions SHELL` prints a completion script that knows the commands, and
//! `uf2fs manpages DIR` writes manual pages that man(1) renders, naming every command.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

use std::path::PathBuf;
use std::process::Command;
use uf2fs_testkit::{run, scratch};

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_uf2fs"))
}

const COMMANDS: &[&str] = &[
    "mkfs",
    "mount",
    "umount",
    "sync",
    "gc",
    "status",
    "mkdir",
    "put",
    "import",
    "rm",
    "mv",
    "ln",
    "fsck",
    "info",
    "ls",
    "cat",
    "stat",
    "extract",
    "completions",
    "manpages",
];

#[test]
fn bash_completion_script_names_every_command() {
    let script = run(Command::new(bin()).args(["completions", "bash"]));
    assert!(
        script.contains("complete -F _uf2fs"),
        "no `complete` line:\n{script}"
    );
    // What `uf2fs <TAB>` offers: the first opts line, the top level's.
    let offered = script
        .lines()
        .find(|l| l.trim_start().starts_with("opts=\"-"))
        .expect("an opts line");
    for c in COMMANDS {
        assert!(
            script.contains(&format!("uf2fs,{c})")),
            "bash script lacks {c}"
        );
        assert!(
            offered.split(['"', ' ']).any(|w| w == *c),
            "{c} not offered: {offered}"
        );
    }
    // bash itself accepts it.
    let dir = scratch("completions");
    let file = dir.join("uf2fs.bash");
    std::fs::write(&file, &script).unwrap();
    run(Command::new("bash")
        .arg("-c")
        .arg(format!("source {} && complete -p uf2fs", file.display())));
    for shell in ["zsh", "fish"] {
        let s = run(Command::new(bin()).args(["completions", shell]));
        assert!(
            s.contains("mount") && s.contains("extract"),
            "{shell}:\n{s}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn manual_pages_render_and_name_every_command() {
    let dir = scratch("manpages");
    run(Command::new(bin()).arg("manpages").arg(&dir));
    let main = dir.join("uf2fs.1");
    let text = run(Command::new("man")
        .arg("-l")
        .arg(&main)
        .env("MANPAGER", "cat")
        .env("MANWIDTH", "100"));
    assert!(
        text.contains("NAME") && text.contains("SUBCOMMANDS"),
        "{text}"
    );
    for c in COMMANDS {
        assert!(
            text.contains(&format!("uf2fs-{c}(1)")),
            "uf2fs(1) does not name {c}:\n{text}"
        );
        assert!(
            dir.join(format!("uf2fs-{c}.1")).is_file(),
            "no page uf2fs-{c}.1"
        );
    }
    let mount = run(Command::new("man")
        .arg("-l")
        .arg(dir.join("uf2fs-mount.1"))
        .env("MANPAGER", "cat")
        .env("MANWIDTH", "100"));
    for says in ["fuse.uf2fs", "log=auto", "allow_other"] {
        assert!(
            mount.contains(says),
            "uf2fs-mount(1) does not say {says}:\n{mount}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
