//! The csi-proxyctl binary's exit codes and messages when there is no proxy
//! and when the command line is wrong (the calls themselves are tested
//! against the real proxy in crates/csi-proxy/tests/ctl_*.rs).

use std::process::Command;

fn ctl(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_csi-proxyctl"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().expect("exited"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn no_proxy_is_exit_3() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let (code, out, err) = ctl(&[
        "--socket-dir",
        d,
        "--pipe-prefix",
        r"\\.\pipe\csi-proxy-none-",
        "status",
    ]);
    assert_eq!(code, 3, "{out}{err}");
    assert!(
        err.contains("no csi-proxy endpoint accepts connections"),
        "{err}"
    );
    let (code, _, err) = ctl(&[
        "--socket-dir",
        d,
        "--pipe-prefix",
        r"\\.\pipe\csi-proxy-none-",
        "fs",
        "exists",
        "x",
    ]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("filesystem/v2alpha1 is not served"), "{err}");
}

#[test]
fn usage_errors_are_exit_2_and_help_is_0() {
    for args in [
        &["fs"][..],
        &["bogus"],
        &["disk", "stats", "x"],
        &["--timeout", "0", "status"],
        &["-o", "yaml", "status"],
    ] {
        let (code, out, err) = ctl(args);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
    }
    let (code, out, _) = ctl(&["--help"]);
    assert_eq!(code, 0);
    for group in ["status", "disk", "fs", "volume", "smb", "iscsi", "system"] {
        assert!(out.contains(group), "{group}: {out}");
    }
    assert!(out.contains("Exit codes"));
    let (code, out, _) = ctl(&["--version"]);
    assert_eq!(
        (code, out.trim()),
        (0, concat!("csi-proxyctl ", env!("CARGO_PKG_VERSION")))
    );
}
