//! Library mode is exactly as strict as the pipe: the same request bytes,
//! sent to the real binary (its Unix socket on Linux, its named pipe under
//! wine) and through csi_proxy's C ABI over the same roots, get the same
//! code, the same message and, when they succeed, the same response bytes.

#[cfg(unix)]
mod common;
#[path = "../../csi-proxy-ffi/tests/ffi/mod.rs"]
mod ffi;
#[cfg(windows)]
mod pipes;

use csi_proxy_api::filesystem::v2alpha1 as fs;
use csi_proxy_api::system::v1alpha1 as sys;
use csi_proxy_api::volume::v2alpha1 as vol;
use csi_proxy_http2::client::{RawClient, Shape};
use prost::Message;
use std::io::{Read, Write};
use std::path::Path;

/// (endpoint, method, request bytes)
type Case = (&'static str, &'static str, Vec<u8>);

fn cases(kubelet: &Path, outside: &Path) -> Vec<Case> {
    let k = kubelet.display().to_string();
    let o = outside.display().to_string();
    let sep = std::path::MAIN_SEPARATOR;
    let paths = [
        String::new(),
        "relative".into(),
        k.clone(),
        format!("{k}{sep}pods"),
        format!("{k}{sep}..{sep}outside{sep}sentinel"),
        format!("{k}{sep}a{sep}..{sep}..{sep}outside"),
        format!("{k}X{sep}x"),
        format!("{o}{sep}sentinel"),
        format!("{k}{sep}a\0b"),
        format!("{k}{sep}{sep}double"),
        format!("{k}{sep}{}", "a".repeat(300)),
    ];
    let mut out: Vec<Case> = Vec::new();
    for p in &paths {
        let path = p.clone();
        out.push((
            "filesystem-v2alpha1",
            "PathExists",
            fs::PathExistsRequest { path: path.clone() }.encode_to_vec(),
        ));
        out.push((
            "filesystem-v2alpha1",
            "IsSymlink",
            fs::IsSymlinkRequest { path: path.clone() }.encode_to_vec(),
        ));
        out.push((
            "filesystem-v2alpha1",
            "RmdirContents",
            fs::RmdirContentsRequest { path: path.clone() }.encode_to_vec(),
        ));
        out.push((
            "filesystem-v2alpha1",
            "Rmdir",
            fs::RmdirRequest {
                path: path.clone(),
                force: true,
            }
            .encode_to_vec(),
        ));
        out.push((
            "filesystem-v2alpha1",
            "CreateSymlink",
            fs::CreateSymlinkRequest {
                source_path: o.clone(),
                target_path: path,
            }
            .encode_to_vec(),
        ));
    }
    // Undecodable bytes, an unknown method.
    out.push(("filesystem-v2alpha1", "Mkdir", b"\x0a\x05/k".to_vec()));
    out.push(("filesystem-v2alpha1", "Mkdir", b"\x0f".to_vec()));
    out.push(("filesystem-v2alpha1", "NoSuchMethod", Vec::new()));
    for name in [
        "",
        "a\\b",
        "a/b",
        "no-such-service-csi-proxy",
        &"s".repeat(300),
    ] {
        out.push((
            "system-v1alpha1",
            "GetService",
            sys::GetServiceRequest { name: name.into() }.encode_to_vec(),
        ));
        out.push((
            "system-v1alpha1",
            "StopService",
            sys::StopServiceRequest {
                name: name.into(),
                force: true,
            }
            .encode_to_vec(),
        ));
    }
    for id in [
        "",
        "C:\\",
        "\\\\.\\PhysicalDrive0",
        "\\\\?\\Volume{' OR 1=1 --}\\",
        "/dev/sda",
    ] {
        out.push((
            "volume-v2alpha1",
            "IsVolumeFormatted",
            vol::IsVolumeFormattedRequest {
                volume_id: id.into(),
            }
            .encode_to_vec(),
        ));
        out.push((
            "volume-v2alpha1",
            "GetVolumeStats",
            vol::GetVolumeStatsRequest {
                volume_id: id.into(),
            }
            .encode_to_vec(),
        ));
    }
    out.push((
        "volume-v2alpha1",
        "GetClosestVolumeIDFromTargetPath",
        vol::GetClosestVolumeIdFromTargetPathRequest {
            target_path: format!("{o}{sep}sentinel"),
        }
        .encode_to_vec(),
    ));
    out
}

/// Call every case over `open(endpoint)` and through `lib`; compare.
fn compare<S: Read + Write>(lib: &ffi::Lib, cases: &[Case], mut open: impl FnMut(&str) -> S) {
    let mut checked = 0;
    for (endpoint, method, req) in cases {
        let (group, version) = endpoint.split_once('-').unwrap();
        let mut c = RawClient::new(open(endpoint), Shape::default()).unwrap();
        let r = c
            .call(
                &format!("/{version}.{}/{method}", service(group)),
                None,
                req,
            )
            .unwrap();
        let code = r.grpc_status.expect("a grpc-status");
        let (lib_code, lib_body) = lib.call(&format!("{group}/{version}"), method, req);
        let what = format!("{endpoint} {method} {:?}", String::from_utf8_lossy(req));
        assert_eq!(lib_code, code, "{what}: pipe {code} {}", r.grpc_message);
        if code == 0 {
            assert_eq!(lib_body, r.message.unwrap_or_default(), "{what}");
        } else {
            assert_eq!(
                String::from_utf8(lib_body).unwrap(),
                r.grpc_message,
                "{what}"
            );
        }
        checked += 1;
    }
    assert_eq!(checked, cases.len());
}

fn service(group: &str) -> &'static str {
    csi_proxy_api::Group::parse(group).unwrap().service_name()
}

#[cfg(unix)]
#[test]
fn the_library_answers_as_the_socket() {
    let proxy = common::Proxy::start(&[]);
    plant(&proxy.kubelet);
    let mut o = options(&proxy.kubelet);
    o.working_dirs = vec![proxy.work.display().to_string()];
    let lib = ffi::Lib::open(&o).unwrap();
    let cases = cases(&proxy.kubelet, &proxy.outside);
    compare(&lib, &cases, |endpoint| {
        std::os::unix::net::UnixStream::connect(proxy.socket(endpoint)).unwrap()
    });
}

#[cfg(windows)]
#[test]
fn the_library_answers_as_the_pipe() {
    let proxy = pipes::Proxy::start_unique("library-parity", "filesystem,system,volume", &[]);
    plant(&proxy.kubelet);
    let lib = ffi::Lib::open(&options(&proxy.kubelet)).unwrap();
    let cases = cases(&proxy.kubelet, &proxy.outside);
    compare(&lib, &cases, |endpoint| {
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

/// The library's options for the binary's flags: the kubelet path, and the
/// binary's default -service-name (protected, and read by Start/StopService).
fn options(kubelet: &Path) -> ffi::Owned {
    let mut o = ffi::options(&kubelet.display().to_string());
    o.service_name = "csiproxy".into();
    o
}

/// A directory for the cases that succeed.
fn plant(kubelet: &Path) {
    std::fs::create_dir_all(kubelet.join("pods")).unwrap();
}
