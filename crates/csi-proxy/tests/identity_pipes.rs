//! The caller's pid bound to its process's creation time over the real
//! binary's pipes (Windows build; CI runs it under wine). The test hook
//! `CSI_PROXY_TEST_PID_REUSE=1` makes the proxy find another creation time
//! when it opens the pid again to read the token and image, as if the
//! client had exited and its pid been reused: the caller is then unknown,
//! its audit line says so, and a policy by SID refuses it. Its own test
//! binary: the hook is set in this process's environment, which the proxy
//! inherits.
#![cfg(windows)]

mod audit;
mod pipes;

use audit::{is_call, wait_line};
use csi_proxy_client::Group;
use pipes::Proxy;
use tonic::Code;

const CHANGED: &str = "the process behind the connection's pid is not the one that connected";

#[tokio::test]
async fn a_pid_whose_process_changed_is_an_unknown_caller() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.log");
    let audit_flag = format!("-audit-log={}", log.display());
    // Without the hook: this process, with its SID.
    let p = Proxy::start_unique("ident", "filesystem-v1", &[&audit_flag]);
    let target = p.kubelet.join("known");
    audit::mkdir(p.channel(Group::Filesystem, "v1").await, &target)
        .await
        .unwrap();
    let v = wait_line(&log, |v| is_call(v, "Mkdir", &target));
    let sid = v["caller"]["sid"].as_str().unwrap().to_string();
    assert!(v["caller"].get("incomplete").is_none(), "{v}");
    drop(p);

    std::env::set_var("CSI_PROXY_TEST_PID_REUSE", "1");
    let policy = dir.path().join("policy.json");
    std::fs::write(
        &policy,
        format!(r#"{{"filesystem": [{{"sid": "{sid}"}}]}}"#),
    )
    .unwrap();
    let policy_flag = format!("-caller-policy={}", policy.display());
    let p = Proxy::start_unique("ident-hook", "filesystem-v1", &[&audit_flag, &policy_flag]);
    let target = p.kubelet.join("unknown");
    let e = audit::mkdir(p.channel(Group::Filesystem, "v1").await, &target)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    assert!(!target.exists());
    let v = wait_line(&log, |v| is_call(v, "Mkdir", &target));
    let c = &v["caller"];
    assert_eq!(c["pid"], std::process::id(), "{v}");
    assert!(c.get("sid").is_none() && c.get("exe").is_none(), "{v}");
    assert!(
        c["incomplete"]
            .as_str()
            .is_some_and(|s| s.starts_with(CHANGED)),
        "{v}"
    );
}
