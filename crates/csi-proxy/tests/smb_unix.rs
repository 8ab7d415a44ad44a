//! The SMB API (v1alpha1, v1beta1, v1beta2, v1) over the real binary's Unix
//! sockets. This machine's kernel has no CIFS client, so a valid mapping
//! must fail with the clear FailedPrecondition and leave nothing behind (no
//! link, no mount directory); hostile inputs are refused before anything
//! is touched; the password never shows up in an answer or the log, at the
//! highest verbosity.
#![cfg(target_os = "linux")]

mod common;

use common::Proxy;
use csi_proxy_api::smb::{v1, v1alpha1, v1beta1, v1beta2};
use tonic::Code;

const PASSWORD: &str = "Smb-Pa55word-Secret";

fn kernel_has_cifs() -> bool {
    std::fs::read_to_string("/proc/filesystems")
        .unwrap_or_default()
        .lines()
        .any(|l| l.trim_end().ends_with("cifs"))
}

/// (remote_path, local_path, username, password) that must be refused.
fn hostile(p: &Proxy) -> Vec<(String, String, String, String)> {
    let k = p.kubelet.display().to_string();
    let o = p.outside.display().to_string();
    let local = format!("{k}/vol");
    let ok = r"\\server\share".to_string();
    let mut v: Vec<(String, String, String, String)> = [
        "",
        "server",
        r"\\server",
        r"\\?\C:\Windows",
        r"\\?\UNC\server\share",
        r"\\.\pipe\csi-proxy-disk-v1",
        r"\\server\share\..\..\x",
        r"\\server\..",
        r"\\server\share\\x",
        r"\\server\sha:re",
        r"\\server\share*",
        "\\\\server\\share\0",
        "\\\\server\\share\nx",
        r"\\server;reboot\share",
        r"\\$(id)\share",
        r"\\[::1]\share",
        r"\\1.2.3.999\share",
        r"\\server:445\share",
        "\\\\server\\share\u{202e}",
        r"C:\share",
    ]
    .iter()
    .map(|r| (r.to_string(), local.clone(), String::new(), String::new()))
    .collect();
    for l in [
        format!("{o}/x"),
        "/etc/cron.d/x".to_string(),
        k.clone(),
        format!("{k}/../outside/x"),
        format!("{k}/escape/x"),
        format!("{k}/a\0b"),
        "relative/x".to_string(),
    ] {
        v.push((ok.clone(), l, String::new(), String::new()));
    }
    for u in ["a:b", "a\\b\\c", "u\nx", "u;x"] {
        v.push((
            ok.clone(),
            local.clone(),
            u.to_string(),
            PASSWORD.to_string(),
        ));
    }
    v.push((
        ok.clone(),
        local.clone(),
        String::new(),
        PASSWORD.to_string(),
    ));
    v.push((
        ok.clone(),
        local.clone(),
        "user".into(),
        format!("{PASSWORD}\n"),
    ));
    v.push((ok, local, "user".into(), "p".repeat(2000)));
    v
}

#[tokio::test]
async fn hostile_requests_are_refused_and_change_nothing() {
    let p = Proxy::start(&["-v=10"]);
    std::os::unix::fs::symlink(&p.outside, p.kubelet.join("escape")).unwrap();
    let before = p.snapshot();
    let cases = hostile(&p);
    assert!(cases.len() >= 30, "{}", cases.len());
    let mut c = v1::smb_client::SmbClient::new(p.channel("smb-v1").await);
    for (remote_path, local_path, username, password) in cases {
        let e = c
            .new_smb_global_mapping(v1::NewSmbGlobalMappingRequest {
                remote_path: remote_path.clone(),
                local_path: local_path.clone(),
                username,
                password,
            })
            .await
            .unwrap_err();
        assert!(
            matches!(e.code(), Code::InvalidArgument | Code::PermissionDenied),
            "{remote_path:?} {local_path:?}: {e:?}"
        );
        assert!(!e.message().contains(PASSWORD), "{}", e.message());
    }
    assert_eq!(p.snapshot(), before, "a refused request changed the tree");
    assert!(!std::path::Path::new("/run/csi-proxy-smb/server").exists());
    assert!(!p.log().contains(PASSWORD));
}

#[tokio::test]
async fn every_version_maps_or_fails_cleanly_without_cifs() {
    if kernel_has_cifs() {
        eprintln!("this kernel has CIFS: the no-CIFS answers are not checked here");
        return;
    }
    let p = Proxy::start(&["-v=10"]);
    let remote = r"\\127.0.0.1\csi-proxy-test-share\pvc-1".to_string();
    let check = |e: tonic::Status| {
        assert!(
            matches!(e.code(), Code::FailedPrecondition | Code::PermissionDenied),
            "{e:?}"
        );
        assert!(!e.message().contains(PASSWORD), "{}", e.message());
        e
    };
    macro_rules! version {
        ($ver:ident, $endpoint:literal) => {{
            let mut c = $ver::smb_client::SmbClient::new(p.channel($endpoint).await);
            let local = p.kubelet.join(concat!("vol-", $endpoint));
            let e = c
                .new_smb_global_mapping($ver::NewSmbGlobalMappingRequest {
                    remote_path: remote.clone(),
                    local_path: local.display().to_string(),
                    username: r"DOMAIN\user".into(),
                    password: PASSWORD.into(),
                })
                .await
                .unwrap_err();
            let e = check(e);
            assert!(
                e.message().contains("CIFS") || e.message().contains("cifs"),
                "{}",
                e.message()
            );
            assert!(
                std::fs::symlink_metadata(&local).is_err(),
                "a link was left at {local:?}"
            );
            // Nothing mapped: removing is success (idempotent).
            c.remove_smb_global_mapping($ver::RemoveSmbGlobalMappingRequest {
                remote_path: remote.clone(),
            })
            .await
            .unwrap();
        }};
    }
    version!(v1alpha1, "smb-v1alpha1");
    version!(v1beta1, "smb-v1beta1");
    version!(v1beta2, "smb-v1beta2");
    version!(v1, "smb-v1");
    assert!(!std::path::Path::new("/run/csi-proxy-smb/127.0.0.1").exists());
    let log = p.log();
    assert!(!log.is_empty());
    assert!(!log.contains(PASSWORD), "the password is in the log");
}
