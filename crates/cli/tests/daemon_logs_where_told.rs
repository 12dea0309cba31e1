//! Where a mount daemon logs once its mount is live (`-o log=`), and that `uf2fs status` says
//! so: the file beside the control socket, syslog (a listener of the test's own, through
//! `UF2FS_SYSLOG_SOCKET`), journald (a listener on journald's fixed socket when no journald
//! runs here; the real one otherwise), `auto` picking the first that answers, standard error
//! with `-f`; a destination named but unreachable fails the mount before it starts.
//!
//! One test, in steps: a listener on journald's socket changes what `auto` picks.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

use serde_json::Value;
use std::io::Read;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use uf2fs_testkit::{run, scratch, try_run};

const JOURNALD: &str = "/run/systemd/journal/socket";

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_uf2fs"))
}

/// Mounts with the options and the syslog socket; returns `uf2fs status --json`.
fn mount(img: &Path, mnt: &Path, opts: &str, syslog: &Path) -> Value {
    run(Command::new(bin())
        .arg("mount")
        .arg(img)
        .arg(mnt)
        .args(["-o", opts])
        .env("UF2FS_SYSLOG_SOCKET", syslog));
    status(mnt)
}

fn status(mnt: &Path) -> Value {
    uf2fs_testkit::status_json(&bin(), mnt)
}

fn umount(mnt: &Path) {
    run(Command::new(bin()).arg("umount").arg(mnt));
}

/// Datagrams until one contains `needle` (5 s at most); its bytes.
fn expect_datagram(sock: &UnixDatagram, needle: &str) -> Vec<u8> {
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut seen = Vec::new();
    let mut buf = vec![0u8; 65536];
    loop {
        match sock.recv(&mut buf) {
            Ok(n) => {
                let d = String::from_utf8_lossy(&buf[..n]).into_owned();
                if d.contains(needle) {
                    return buf[..n].to_vec();
                }
                seen.push(d);
            }
            Err(e) => panic!("no datagram with {needle:?} ({e}); got {seen:?}"),
        }
    }
}

/// The fields of one entry in journald's native protocol: `KEY=VALUE\n`, or `KEY\n`, the
/// value's length (64-bit little-endian), the value and `\n`.
fn journal_fields(mut d: &[u8]) -> std::collections::HashMap<String, String> {
    let mut fields = std::collections::HashMap::new();
    while let Some(nl) = d.iter().position(|&b| b == b'\n') {
        let head = String::from_utf8_lossy(&d[..nl]).into_owned();
        if let Some((k, v)) = head.split_once('=') {
            fields.insert(k.to_string(), v.to_string());
            d = &d[nl + 1..];
        } else {
            let len = u64::from_le_bytes(d[nl + 1..nl + 9].try_into().unwrap()) as usize;
            let value = &d[nl + 9..nl + 9 + len];
            fields.insert(head, String::from_utf8_lossy(value).into_owned());
            d = &d[nl + 9 + len + 1..];
        }
    }
    fields
}

/// Whether a journald answers on its socket (the probe tracing-journald makes).
fn journald_answers() -> bool {
    UnixDatagram::unbound()
        .and_then(|s| s.send_to(&[], JOURNALD))
        .is_ok()
}

/// A listener on journald's socket, where no journald runs; dropping it (also when the test
/// fails) removes the socket and the directories it made.
struct FakeJournald {
    sock: UnixDatagram,
    made: Vec<&'static str>,
}

impl FakeJournald {
    fn bind() -> FakeJournald {
        let mut made = Vec::new();
        for d in ["/run/systemd", "/run/systemd/journal"] {
            if !Path::new(d).exists() {
                std::fs::create_dir(d).unwrap();
                made.push(d);
            }
        }
        let _ = std::fs::remove_file(JOURNALD); // a socket nobody listens on
        FakeJournald {
            sock: UnixDatagram::bind(JOURNALD).unwrap(),
            made,
        }
    }
}

impl Drop for FakeJournald {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(JOURNALD);
        for d in self.made.iter().rev() {
            let _ = std::fs::remove_dir(d);
        }
    }
}

#[test]
fn daemon_logs_where_told_and_status_says_where() {
    let dir = scratch("daemon-logs");
    let img = dir.join("img");
    let mnt = dir.join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    run(Command::new(bin())
        .arg("mkfs")
        .arg(&img)
        .args(["--size", "64M"]));
    let syslog_path = dir.join("syslog.sock");
    let syslog = UnixDatagram::bind(&syslog_path).unwrap();

    // 1. The file beside the control socket.
    let st = mount(&img, &mnt, "log=file", &syslog_path);
    assert_eq!(st["log"]["to"], "file", "{st}");
    let file = PathBuf::from(st["log"]["path"].as_str().unwrap());
    let text = run(Command::new(bin()).arg("status").arg(&mnt));
    assert!(
        text.contains(&format!("log:          {}", file.display())),
        "{text}"
    );
    umount(&mnt);
    let logged = std::fs::read_to_string(&file).unwrap();
    let mnt_name = mnt.canonicalize().unwrap().display().to_string();
    assert!(
        logged.contains(&format!("on {mnt_name} (read-write)"))
            && logged.contains(&format!("{mnt_name} unmounted, final checkpoint written")),
        "{}:\n{logged}",
        file.display()
    );

    // 2. syslog: RFC 3164 lines, facility daemon, severity info: <30>.
    let st = mount(&img, &mnt, "log=syslog", &syslog_path);
    assert_eq!(st["log"]["to"], "syslog", "{st}");
    assert_eq!(st["log"]["socket"], syslog_path.display().to_string());
    let line = String::from_utf8(expect_datagram(&syslog, "serving")).unwrap();
    assert!(
        line.starts_with("<30>") && line.contains(&format!("uf2fs[{}]: ", st["pid"])),
        "{line}"
    );
    let text = run(Command::new(bin()).arg("status").arg(&mnt));
    assert!(text.contains("log:          syslog ("), "{text}");
    umount(&mnt);
    expect_datagram(&syslog, "final checkpoint written");

    // 3. auto: journald when one answers, else syslog.
    let real_journald = journald_answers();
    let st = mount(&img, &mnt, "rw", &syslog_path);
    if real_journald {
        assert_eq!(st["log"]["to"], "journald", "{st}");
    } else {
        assert_eq!(st["log"]["to"], "syslog", "{st}");
        expect_datagram(&syslog, "serving");
    }
    umount(&mnt);

    // 4. journald's native protocol (a listener of ours where none runs).
    let fake = (!real_journald).then(FakeJournald::bind);
    let st = mount(&img, &mnt, "log=journald", &syslog_path);
    assert_eq!(st["log"]["to"], "journald", "{st}");
    let text = run(Command::new(bin()).arg("status").arg(&mnt));
    assert!(text.contains("log:          journald ("), "{text}");
    if let Some(j) = &fake {
        let entry = journal_fields(&expect_datagram(&j.sock, "serving"));
        assert_eq!(entry["SYSLOG_IDENTIFIER"], "uf2fs", "{entry:?}");
        assert_eq!(entry["PRIORITY"], "5", "{entry:?}"); // tracing-journald's info: notice
        assert!(entry["MESSAGE"].starts_with("serving "), "{entry:?}");
    }
    // With journald answering, auto picks it over syslog.
    umount(&mnt);
    if let Some(j) = &fake {
        expect_datagram(&j.sock, "final checkpoint written");
        let st = mount(&img, &mnt, "rw", &syslog_path);
        assert_eq!(st["log"]["to"], "journald", "{st}");
        umount(&mnt);
    }
    drop(fake);

    // 5. A destination named and unreachable: the mount fails before it starts.
    let (ok, _, err) = try_run(
        Command::new(bin())
            .arg("mount")
            .arg(&img)
            .arg(&mnt)
            .args(["-o", "log=syslog"])
            .env("UF2FS_SYSLOG_SOCKET", dir.join("nobody.sock")),
    );
    assert!(!ok && err.contains("log=syslog"), "{err}");
    assert!(
        !try_run(Command::new(bin()).arg("status").arg(&mnt)).0,
        "mounted anyway"
    );

    // 6. -f: standard error, to the end.
    let mut fg = Command::new(bin())
        .args(["mount", "-f"])
        .arg(&img)
        .arg(&mnt)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut st = None;
    for _ in 0..500 {
        let (ok, out, _) = try_run(Command::new(bin()).args(["status", "--json"]).arg(&mnt));
        if ok {
            st = Some(serde_json::from_str::<Value>(&out).unwrap());
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let st = st.expect("uf2fs mount -f did not come up");
    assert_eq!(st["log"]["to"], "stderr", "{st}");
    umount(&mnt);
    let mut err = String::new();
    fg.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(fg.wait().unwrap().success());
    assert!(err.contains("unmounted, final checkpoint written"), "{err}");

    let _ = std::fs::remove_dir_all(&dir);
}
