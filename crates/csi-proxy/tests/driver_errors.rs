//! Drivers that read csi-proxy's error text take the same branch with us
//! as with upstream (docs/compatibility.md, "Error texts drivers match").
//!
//! Every driver expression of the catalog (`csi_proxy_host::compat`: each
//! copied from the driver's source, with its file and commit) runs against
//! the message GetVolumeIDFromTargetPath answers for the condition it
//! tests, on every version that carries the call (v1beta1 and v1beta2 name
//! it GetVolumeIDFromMount), sent to the real binary (its Unix socket on
//! Linux, its named pipe under wine) and through csi_proxy's C ABI: the
//! code is NotFound and the expression matches.

#[cfg(unix)]
mod common;
#[path = "../../csi-proxy-ffi/tests/ffi/mod.rs"]
mod ffi;
#[cfg(windows)]
mod pipes;

use csi_proxy_api::volume::v1 as vol;
use csi_proxy_host::compat::{self, Condition};
use csi_proxy_http2::client::{RawClient, Shape};
use prost::Message;
use std::io::{Read, Write};
use std::path::Path;

/// Every (endpoint, method) that carries GetVolumeIDFromTargetPath. Their
/// requests are one `string` field 1 (`mount` in v1beta1/v1beta2,
/// `target_path` since), so one encoding serves all.
const CALLS: [(&str, &str); 5] = [
    ("volume-v1beta1", "GetVolumeIDFromMount"),
    ("volume-v1beta2", "GetVolumeIDFromMount"),
    ("volume-v1beta3", "GetVolumeIDFromTargetPath"),
    ("volume-v1", "GetVolumeIDFromTargetPath"),
    ("volume-v2alpha1", "GetVolumeIDFromTargetPath"),
];

/// The targets of each condition, below `kubelet`, as a driver names them:
/// a staging dir the kubelet created (a plain directory), one not created
/// yet, one whose parent is missing too.
fn targets(kubelet: &Path) -> Vec<(String, Condition)> {
    let sep = std::path::MAIN_SEPARATOR;
    let plugin = kubelet.join("plugins").join("kubernetes.io").join("csi");
    let staged = plugin
        .join("ebs.csi.aws.com")
        .join("0123abcd")
        .join("globalmount");
    std::fs::create_dir_all(&staged).unwrap();
    let k = plugin.display().to_string();
    vec![
        (staged.display().to_string(), Condition::NotAMountPoint),
        (
            format!("{k}{sep}ebs.csi.aws.com{sep}0123abcd{sep}missing"),
            Condition::TargetMissing,
        ),
        (
            format!("{k}{sep}ebs.csi.aws.com{sep}4567ef{sep}globalmount"),
            Condition::TargetMissing,
        ),
    ]
}

/// Asserts the catalog's expressions for `condition` match `message`.
fn assert_drivers_match(message: &str, condition: Condition, what: &str) {
    let mut ran = 0;
    for (m, conditions) in compat::catalog() {
        if !conditions.contains(&condition) {
            continue;
        }
        let re = match m.kind {
            compat::MatchKind::GoRegexp => regex::Regex::new(m.expression).unwrap(),
        };
        assert!(
            re.is_match(message),
            "{what}: {} ({}) expects {:?} to match {message:?}, so it takes \
             the failure branch instead of \"{}\"",
            m.driver,
            m.file,
            m.expression,
            m.on_match
        );
        ran += 1;
    }
    assert!(ran > 0, "no driver expression for {condition:?}");
}

fn check<S: Read + Write>(lib: &ffi::Lib, kubelet: &Path, mut open: impl FnMut(&str) -> S) {
    let mut checked = 0;
    for (target, condition) in targets(kubelet) {
        let req = vol::GetVolumeIdFromTargetPathRequest {
            target_path: target.clone(),
        }
        .encode_to_vec();
        for (endpoint, method) in CALLS {
            let (group, version) = endpoint.split_once('-').unwrap();
            let what = format!("{endpoint} {method} {target} ({condition:?})");
            let mut c = RawClient::new(open(endpoint), Shape::default()).unwrap();
            let r = c
                .call(&format!("/{version}.Volume/{method}"), None, &req)
                .unwrap();
            assert_eq!(r.grpc_status, Some(5), "{what}: {}", r.grpc_message);
            assert_drivers_match(&r.grpc_message, condition, &format!("pipe {what}"));
            let (code, body) = lib.call(&format!("{group}/{version}"), method, &req);
            let message = String::from_utf8(body).unwrap();
            assert_eq!(code, 5, "{what}: {message}");
            assert_drivers_match(&message, condition, &format!("library {what}"));
            checked += 1;
        }
    }
    assert_eq!(checked, 15);
    path_exists_of_missing_paths_is_false(lib, kubelet, open);
}

/// The outcome (not a text) azuredisk, azurefile, smb, GCE PD, Trident and
/// aws-ebs rely on: their IsLikelyNotMountPoint asks PathExists and returns
/// `os.ErrNotExist` itself when it answers false, which their node servers
/// test with `os.IsNotExist`. A missing path (or parent) must be `false`
/// with OK, never an error.
fn path_exists_of_missing_paths_is_false<S: Read + Write>(
    lib: &ffi::Lib,
    kubelet: &Path,
    mut open: impl FnMut(&str) -> S,
) {
    use csi_proxy_api::filesystem::v1 as fs;
    for (target, condition) in targets(kubelet) {
        if condition != Condition::TargetMissing {
            continue;
        }
        // PathExists{path = 1} -> {exists = 1} in v1beta2, v1 and v2alpha1.
        let req = fs::PathExistsRequest {
            path: target.clone(),
        }
        .encode_to_vec();
        for version in ["v1beta2", "v1", "v2alpha1"] {
            let what = format!("filesystem {version} PathExists {target}");
            let mut c =
                RawClient::new(open(&format!("filesystem-{version}")), Shape::default()).unwrap();
            let r = c
                .call(&format!("/{version}.Filesystem/PathExists"), None, &req)
                .unwrap();
            assert_eq!(r.grpc_status, Some(0), "pipe {what}: {}", r.grpc_message);
            let resp = fs::PathExistsResponse::decode(&r.message.unwrap_or_default()[..]).unwrap();
            assert!(!resp.exists, "pipe {what}");
            let (code, body) = lib.call(&format!("filesystem/{version}"), "PathExists", &req);
            assert_eq!(
                code,
                0,
                "library {what}: {}",
                String::from_utf8_lossy(&body)
            );
            assert!(
                !fs::PathExistsResponse::decode(&body[..]).unwrap().exists,
                "library {what}"
            );
        }
    }
}

#[cfg(unix)]
#[test]
fn driver_expressions_match_over_the_socket_and_the_library() {
    let proxy = common::Proxy::start(&[]);
    let lib = ffi::Lib::open(&ffi::options(&proxy.kubelet.display().to_string())).unwrap();
    check(&lib, &proxy.kubelet, |endpoint| {
        std::os::unix::net::UnixStream::connect(proxy.socket(endpoint)).unwrap()
    });
}

#[cfg(windows)]
#[test]
fn driver_expressions_match_over_the_pipe_and_the_library() {
    let proxy = pipes::Proxy::start_unique("driver-errors", "filesystem,volume", &[]);
    let lib = ffi::Lib::open(&ffi::options(&proxy.kubelet.display().to_string())).unwrap();
    check(&lib, &proxy.kubelet, |endpoint| {
        let pipe = format!("{}{endpoint}", proxy.pipe_prefix);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            match std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&pipe)
            {
                Ok(f) => return f,
                // ERROR_PIPE_BUSY: every instance is taken for a moment.
                Err(e) if e.raw_os_error() == Some(231) && std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(10))
                }
                Err(e) => panic!("open {pipe}: {e}"),
            }
        }
    });
}

/// `compat::message` fits its messages to the transport's cut of
/// grpc-message, so the phrase (last) is never cut off and socket and
/// library mode carry the same text (red team 43b, finding 2).
#[test]
fn the_message_cap_is_the_transports() {
    assert_eq!(
        compat::MAX_MESSAGE_BYTES,
        csi_proxy_http2::hpack::MAX_MESSAGE
    );
}
