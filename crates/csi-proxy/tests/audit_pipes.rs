//! The audit log and caller policy over the real binary's named pipes
//! (Windows build; CI runs it under wine): a pipe call's audit line names
//! this process (pid from GetNamedPipeClientProcessId, its token's user
//! SID, image path, session id), and a caller policy by SID allows this
//! process and refuses it when it names another SID.
#![cfg(windows)]

mod audit;
mod pipes;

use audit::{is_call, wait_line};
use csi_proxy_api::filesystem::v1::{filesystem_client::FilesystemClient, MkdirRequest};
use csi_proxy_client::Group;
use pipes::Proxy;
use std::path::Path;
use tonic::Code;

async fn mkdir(p: &Proxy, path: &Path) -> Result<(), tonic::Status> {
    let mut c = FilesystemClient::new(p.channel(Group::Filesystem, "v1").await);
    c.mkdir(MkdirRequest {
        path: path.display().to_string(),
    })
    .await
    .map(|_| ())
}

fn file_name(p: &str) -> String {
    p.rsplit(['\\', '/'])
        .next()
        .unwrap_or(p)
        .to_ascii_lowercase()
}

#[tokio::test]
async fn a_pipe_call_names_its_process_and_sid_and_a_policy_by_sid_decides() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.log");
    let audit_flag = format!("-audit-log={}", log.display());
    let p = Proxy::start_unique("audit", "filesystem-v1", &[&audit_flag]);
    let target = p.kubelet.join("audited");
    mkdir(&p, &target).await.unwrap();
    let v = wait_line(&log, |v| is_call(v, "Mkdir", &target));
    assert_eq!(v["code"], "OK");
    let c = &v["caller"];
    assert_eq!(c["pid"], std::process::id(), "{v}");
    let sid = c["sid"]
        .as_str()
        .unwrap_or_else(|| panic!("no sid: {v}"))
        .to_string();
    assert!(sid.starts_with("S-1-5-"), "{v}");
    let exe = c["exe"].as_str().unwrap_or_else(|| panic!("no exe: {v}"));
    let me = std::env::current_exe().unwrap();
    assert_eq!(file_name(exe), file_name(&me.display().to_string()), "{v}");
    assert!(c["session_id"].is_u64(), "{v}");
    // Wine does not answer IsProcessInJob: in_job is absent there.
    assert!(c.get("in_job").is_none_or(|j| j.is_boolean()), "{v}");
    // Pipes carry no uid/gid.
    assert!(c.get("uid").is_none(), "{v}");
    drop(p);

    // A policy naming this SID allows the call; one naming another refuses it.
    for (allowed_sid, want) in [
        (sid.as_str(), Code::Ok),
        ("S-1-5-18-9", Code::PermissionDenied),
    ] {
        let policy = dir.path().join("policy.json");
        std::fs::write(
            &policy,
            format!(r#"{{"filesystem": [{{"sid": "{allowed_sid}"}}]}}"#),
        )
        .unwrap();
        let policy_flag = format!("-caller-policy={}", policy.display());
        let p = Proxy::start_unique(
            "audit-policy",
            "filesystem-v1",
            &[&audit_flag, &policy_flag],
        );
        let target = p.kubelet.join(format!("policy-{}", want as i32));
        let got = match mkdir(&p, &target).await {
            Ok(()) => Code::Ok,
            Err(e) => e.code(),
        };
        assert_eq!(got, want, "policy {allowed_sid}");
        assert_eq!(target.exists(), want == Code::Ok);
        let v = wait_line(&log, |v| is_call(v, "Mkdir", &target));
        assert_eq!(v["caller"]["sid"], sid.as_str());
    }
}
