//! csi-proxyctl against the real binary over its Unix sockets: status,
//! every group, exit codes (see tests/ctl/).
#![cfg(unix)]

mod common;
mod ctl;

use common::Proxy;
use ctl::{expect, json};

fn endpoint_args(p: &Proxy) -> Vec<String> {
    vec![format!("--socket-dir={}", p.socket_dir.display())]
}

#[test]
fn every_group_through_csi_proxyctl() {
    let p = Proxy::start(&[]);
    let e = endpoint_args(&p);
    ctl::status_all_serving(&e);
    ctl::filesystem(&e, &p.kubelet, &p.outside, "/");
    ctl::other_groups(&e);
    // Disk and volume read the host's real block devices (sysfs).
    let disks = json(&e, &["disk", "list"]);
    assert!(disks["disk_locations"].is_object(), "{disks}");
    let ids = json(&e, &["disk", "ids"]);
    assert!(ids["diskIDs"].is_object(), "{ids}");
    expect(&e, &["disk", "stats", "4000000000"], 10 + 5); // NotFound
    expect(&e, &["volume", "list", "4000000000"], 10 + 5);
}

#[test]
fn status_of_a_partial_proxy_is_exit_4() {
    let p = Proxy::start(&["-api-groups=filesystem-v1"]);
    let e = endpoint_args(&p);
    let (code, out, _) = ctl::ctl(&e, &["-o", "json", "status"]);
    assert_eq!(code, 4, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let rows = v["endpoints"].as_array().unwrap();
    let served: Vec<&serde_json::Value> =
        rows.iter().filter(|r| r["state"] == "reachable").collect();
    assert_eq!(served.len(), 1);
    assert_eq!(served[0]["service"], "v1.Filesystem");
    assert_eq!(served[0]["health"], "SERVING");
    assert!(rows.iter().filter(|r| r["state"] == "not served").count() == 22);
    // A group whose newest version is not served: exit 3.
    expect(&e, &["fs", "exists", "/x"], 3);
}
