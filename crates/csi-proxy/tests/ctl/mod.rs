//! csi-proxyctl against the real proxy, shared by the Unix-socket and
//! named-pipe tiers: the CLI runs in-process (`csi_proxyctl::run`, the
//! whole program but `main`) with the endpoint options of the proxy under
//! test, and every group is exercised with its exit code and output.
#![allow(dead_code)]

use serde_json::Value;
use std::path::Path;

/// Exit code, stdout and stderr of one csi-proxyctl run.
pub fn ctl(endpoint_args: &[String], args: &[&str]) -> (u8, String, String) {
    let mut argv: Vec<String> = vec!["csi-proxyctl".into()];
    argv.extend(endpoint_args.iter().cloned());
    argv.extend(args.iter().map(|a| a.to_string()));
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = csi_proxyctl::run(argv, &mut out, &mut err);
    (
        code,
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
    )
}

/// Run and expect exit code `want`; returns stdout.
pub fn expect(endpoint_args: &[String], args: &[&str], want: u8) -> String {
    let (code, out, err) = ctl(endpoint_args, args);
    assert_eq!(code, want, "csi-proxyctl {args:?}:\n{out}\n{err}");
    if want != 0 {
        assert!(err.starts_with("csi-proxyctl: "), "{args:?}: {err}");
    }
    out
}

/// Run with `-o json` and expect success; returns the parsed output.
pub fn json(endpoint_args: &[String], args: &[&str]) -> Value {
    let mut a = vec!["-o", "json"];
    a.extend_from_slice(args);
    serde_json::from_str(&expect(endpoint_args, &a, 0)).expect("JSON output")
}

pub const INVALID_ARGUMENT: u8 = 10 + 3;
pub const PERMISSION_DENIED: u8 = 10 + 7;
pub const UNIMPLEMENTED: u8 = 10 + 12;

/// `status` with every endpoint served: all 23 reachable and SERVING.
pub fn status_all_serving(e: &[String]) {
    let v = json(e, &["status"]);
    let rows = v["endpoints"].as_array().unwrap();
    assert_eq!(rows.len(), 23);
    for r in rows {
        assert_eq!(r["state"], "reachable", "{r}");
        assert_eq!(r["health"], "SERVING", "{r}");
    }
    let table = expect(e, &["status"], 0);
    assert!(
        table.contains("GROUP") && table.contains("SERVING"),
        "{table}"
    );
    assert_eq!(table.matches("SERVING").count(), 23, "{table}");
}

/// The filesystem group, end to end, under `kubelet` (`sep` is the path
/// separator of the proxy's OS). `outside` is not an allowed root.
pub fn filesystem(e: &[String], kubelet: &Path, outside: &Path, sep: &str) {
    let k = kubelet.display().to_string();
    let dir = format!("{k}{sep}ctl{sep}a");
    assert_eq!(expect(e, &["fs", "mkdir", &dir], 0), "ok\n");
    assert!(Path::new(&dir).is_dir());
    assert_eq!(json(e, &["fs", "exists", &dir])["exists"], true);
    assert_eq!(
        expect(e, &["fs", "exists", &format!("{k}{sep}nope")], 0),
        "exists: false\n"
    );
    assert_eq!(json(e, &["fs", "is-symlink", &dir])["is_symlink"], false);
    std::fs::write(Path::new(&dir).join("f"), b"x").unwrap();
    expect(e, &["fs", "rmdir-contents", &dir], 0);
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    std::fs::write(Path::new(&dir).join("g"), b"x").unwrap();
    expect(e, &["fs", "rmdir", "--force", &format!("{k}{sep}ctl")], 0);
    assert!(!Path::new(&format!("{k}{sep}ctl")).exists());
    let o = outside.display().to_string();
    expect(e, &["fs", "exists", &o], PERMISSION_DENIED);
    expect(
        e,
        &["fs", "mkdir", &format!("{o}{sep}x")],
        PERMISSION_DENIED,
    );
    assert!(!outside.join("x").exists());
}

/// Invalid volume ids, SMB remote paths, iSCSI names and service names
/// are refused (exit 13) by every group's backend.
pub fn other_groups(e: &[String]) {
    expect(e, &["volume", "stats", "bogus"], INVALID_ARGUMENT);
    expect(e, &["volume", "is-formatted", "bogus"], INVALID_ARGUMENT);
    expect(e, &["smb", "unmap", r"\\?\C:\Windows"], INVALID_ARGUMENT);
    expect(e, &["iscsi", "add-portal", "host;reboot"], INVALID_ARGUMENT);
    expect(
        e,
        &["iscsi", "disks", "10.0.0.1", "not-an-iqn"],
        INVALID_ARGUMENT,
    );
    expect(e, &["system", "service", "a/b"], INVALID_ARGUMENT);
    expect(
        e,
        &["system", "stop-service", "--force", "x;y"],
        INVALID_ARGUMENT,
    );
}
