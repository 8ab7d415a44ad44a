//! The filesystem tools the Linux backend runs (`mkfs.*`, `resize2fs`,
//! `e2fsck`, `xfs_growfs`): absolute paths found in fixed system
//! directories, fixed argv (the only request-derived argument is a device
//! path or mount point the backend built itself), an empty environment, no
//! shell. Every spawn is counted, so tests and benchmarks can prove that the
//! read-only calls spawn nothing.

use crate::{Error, Result};
use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};

static SPAWNED: AtomicU64 = AtomicU64::new(0);

/// How many child processes this process's storage backend has started.
pub fn spawned() -> u64 {
    SPAWNED.load(Ordering::Relaxed)
}

const DIRS: [&str; 4] = ["/usr/sbin", "/sbin", "/usr/bin", "/bin"];

/// The absolute path of a tool, from the fixed system directories only.
pub fn find(tool: &str) -> Option<PathBuf> {
    DIRS.iter()
        .map(|d| PathBuf::from(d).join(tool))
        .find(|p| p.is_file())
}

/// Runs `tool` (found in the fixed directories) with `args`, an empty
/// environment but a fixed PATH and `LC_ALL=C`, no stdin, no shell;
/// counted in [`spawned`].
fn spawn<A: AsRef<OsStr> + std::fmt::Debug>(
    tool: &str,
    args: &[A],
) -> Result<std::process::Output> {
    let path = find(tool).ok_or_else(|| {
        Error::FailedPrecondition(format!(
            "{tool} is not installed (looked in {})",
            DIRS.join(", ")
        ))
    })?;
    SPAWNED.fetch_add(1, Ordering::Relaxed);
    tracing::debug!(tool, ?args, "running");
    Command::new(&path)
        .args(args)
        .env_clear()
        .env("PATH", "/usr/sbin:/sbin:/usr/bin:/bin")
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| Error::io("spawn", path.display().to_string(), e))
}

/// Runs `tool args...`; a non-zero exit is an error carrying its stderr.
/// `ok_codes` lists other exit codes that mean success (e2fsck: 1 =
/// errors corrected). An argument need not be UTF-8 (a mount point).
pub fn run<A: AsRef<OsStr> + std::fmt::Debug>(
    tool: &str,
    args: &[A],
    ok_codes: &[i32],
) -> Result<()> {
    let out = spawn(tool, args)?;
    let code = out.status.code().unwrap_or(-1);
    if out.status.success() || ok_codes.contains(&code) {
        return Ok(());
    }
    let mut msg = String::from_utf8_lossy(&out.stderr).trim().to_string();
    if msg.is_empty() {
        msg = String::from_utf8_lossy(&out.stdout).trim().to_string();
    }
    msg.truncate(1000);
    Err(Error::Internal(format!(
        "{tool} {} failed with exit code {code}: {msg}",
        args.iter()
            .map(|a| a.as_ref().to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ")
    )))
}

/// Runs `tool args...` and returns its exit code, stdout and stderr
/// (whatever the exit code), for tools whose codes carry meaning
/// (`iscsiadm`). Same rules as [`run`]: fixed directories, empty
/// environment, no shell, counted.
pub fn capture(tool: &str, args: &[&str]) -> Result<(i32, String, String)> {
    let out = spawn(tool, args)?;
    Ok((
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_fixed_argv_and_counts() {
        let before = spawned();
        run::<&str>("true", &[], &[]).unwrap();
        let e = run("false", &["x"], &[]).unwrap_err();
        assert!(
            e.to_string().contains("false x failed with exit code 1"),
            "{e}"
        );
        run::<&str>("false", &[], &[1]).unwrap();
        assert!(spawned() >= before + 3);
        let e = run::<&str>("no-such-tool-here", &[], &[]).unwrap_err();
        assert!(matches!(e, Error::FailedPrecondition(_)), "{e}");
    }
}
