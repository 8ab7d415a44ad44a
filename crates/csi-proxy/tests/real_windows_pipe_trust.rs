//! The real-Windows tier, pipes and callers (issue 42): what wine cannot
//! show of the pipe rules. Wine stores a pipe DACL without enforcing it and
//! runs every process with the same administrator-like token, so these are
//! skipped there with the reason. (`pipe_trust_pipes.rs` and
//! `identity_pipes.rs` run natively in this tier as well.)
#![cfg(windows)]

mod pipes;
mod real_windows;

use csi_proxy_client::{Client, Group};
use real_windows::require;
use std::process::Command;
use std::time::{Duration, Instant};

/// On Windows itself (its own SDDL parser, generic rights left unmapped in
/// the ACE): a DACL that grants Authenticated Users GENERIC_WRITE stops the
/// start naming the ACE, and no pipe of that name exists afterwards.
#[test]
fn real_windows_a_writable_pipe_dacl_stops_the_start() {
    let Some(_w) = require("Windows' own SDDL parser and pipe namespace") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let prefix = format!(r"\\.\pipe\csi-proxy-rwdacl-{}-", std::process::id());
    let out = Command::new(env!("CARGO_BIN_EXE_csi-proxy"))
        .arg(format!("-kubelet-path={}", dir.path().display()))
        .arg("-api-groups=filesystem-v1")
        .arg(format!("-pipe-prefix={prefix}"))
        .arg("-pipe-sddl=D:P(A;;GA;;;SY)(A;;GA;;;BA)(A;;GRGW;;;AU)")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("ACE #2 (A;;0xc0000000;;;S-1-5-11") && err.contains("GENERIC_WRITE"),
        "{err}"
    );
    let pipe = format!("{prefix}filesystem-v1");
    assert!(std::fs::metadata(&pipe).is_err(), "{pipe} exists");
}

/// A pipe served by a process that is not an administrator: the proxy
/// itself started by `runas /trustlevel:0x20000` (a "basic user" token:
/// the same user, Administrators deny-only, no privileges), under a pipe
/// prefix of its own. The client refuses it before sending anything, naming
/// that process's pid, which is the restricted csi-proxy.exe. (If this
/// Windows' runas hands out an unrestricted token, the client accepts and
/// the test fails saying so.)
#[tokio::test]
async fn real_windows_a_pipe_served_by_a_non_administrator_is_refused_with_its_pid() {
    let Some(_w) = require("restricted tokens (wine runs every process as the same admin)") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let prefix = format!(r"\\.\pipe\csi-proxy-rwtrust-{}-", std::process::id());
    let line = format!(
        r#""{}" -kubelet-path={} -api-groups=filesystem-v1 -pipe-prefix={prefix}"#,
        env!("CARGO_BIN_EXE_csi-proxy"),
        dir.path().display()
    );
    let out = Command::new("runas")
        .args(["/trustlevel:0x20000", &line])
        .output()
        .unwrap();
    assert!(out.status.success(), "runas: {out:?}");
    let client = Client::builder().pipe_prefix(&prefix).build().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let err = loop {
        match client.connect_version(Group::Filesystem, "v1").await {
            Err(e) if e.is_not_served() && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => break e,
            Ok(_) => panic!("a pipe served by a runas /trustlevel:0x20000 process was accepted (runas gave an unrestricted token?)"),
        }
    };
    let mut msg = err.to_string();
    let mut src = std::error::Error::source(&err);
    while let Some(s) = src {
        msg.push_str(&format!(" / {s}"));
        src = s.source();
    }
    let pid: u32 = msg
        .split("served by process ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no pid in {msg}"));
    let listed = Command::new("tasklist")
        .args(["/FI", &format!("PID eq {pid}"), "/FO", "CSV", "/NH"])
        .output()
        .unwrap();
    let _ = Command::new("taskkill")
        .args(["/PID", &pid.to_string(), "/F"])
        .output();
    let listed = String::from_utf8_lossy(&listed.stdout).to_ascii_lowercase();
    assert!(
        listed.contains("csi-proxy.exe"),
        "pid {pid}: {listed} ({msg})"
    );
}
