//! Running shell commands for the benchmarks that drive the host's tools (fio, tar, mount):
//! a command's output or its failure, a path quoted for `sh`, the host's caches dropped.

use std::path::Path;
use std::process::Command;

type Res<T> = Result<T, String>;

/// Runs `cmd` under `sh -c` (no standard input); its standard output, or an error with the
/// status and everything it printed.
pub(crate) fn sh(cmd: &str) -> Res<String> {
    let out = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("{cmd}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd}: {}\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `p` quoted for `sh`.
pub(crate) fn q(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', "'\\''"))
}

pub(crate) fn drop_caches() -> Res<()> {
    sh("sync; echo 3 > /proc/sys/vm/drop_caches").map(|_| ())
}
