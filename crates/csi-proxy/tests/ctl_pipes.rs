//! csi-proxyctl against the real `csi-proxy.exe` over named pipes (Windows
//! build; CI runs it under wine): status, every group, exit codes (see
//! tests/ctl/). The pipes get a prefix of their own, so other test runs
//! in the same wine prefix cannot collide with them.
#![cfg(windows)]

mod ctl;
mod pipes;

use ctl::{expect, json};
use pipes::Proxy;

#[test]
fn every_group_through_csi_proxyctl() {
    let prefix = format!(r"\\.\pipe\csi-proxy-ctl-{}-", std::process::id());
    let p = Proxy::start_with(
        "ctl",
        "disk,filesystem,iscsi,smb,system,volume",
        &[&format!("-pipe-prefix={prefix}")],
    );
    let e = vec![format!("--pipe-prefix={prefix}")];
    ctl::status_all_serving(&e);
    ctl::filesystem(&e, &p.kubelet, &p.outside, "\\");
    ctl::other_groups(&e);
    // Wine serves the size of \\.\PhysicalDrive0 (see docs/windows-storage.md).
    let stats = json(&e, &["disk", "stats", "0"]);
    assert!(stats["total_bytes"].as_i64().unwrap() > 0, "{stats}");
    let table = expect(&e, &["disk", "stats", "0"], 0);
    assert!(table.starts_with("total_bytes: "), "{table}");
    // The default prefix names other pipes: nothing there for this test.
    let (code, _, _) = ctl::ctl(
        &[format!(
            r"--pipe-prefix=\\.\pipe\csi-proxy-none-{}-",
            std::process::id()
        )],
        &["status"],
    );
    assert_eq!(code, 3);
}
