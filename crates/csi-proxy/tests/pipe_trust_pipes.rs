//! Who may serve our pipes (Windows build; CI runs it under wine): a
//! `-pipe-sddl` that lets anyone but SYSTEM, Administrators or the
//! service's own SID create pipe instances or rewrite the DACL stops the
//! start, naming the ACE; and the client checks the process serving a pipe
//! before it sends anything, naming its pid when refused.
#![cfg(windows)]

mod pipes;

use csi_proxy_api::filesystem::v1::{filesystem_client::FilesystemClient, PathExistsRequest};
use csi_proxy_client::{Client, Error, Group, ServerTrust};
use pipes::Proxy;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn unique_prefix(tag: &str) -> String {
    format!(r"\\.\pipe\csi-proxy-{tag}-{}-", std::process::id())
}

/// Runs the proxy with `-pipe-sddl=<sddl>`; it must exit non-zero within
/// 60 s. Returns its stderr.
fn refused_start(tag: &str, sddl: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("stderr.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_csi-proxy"))
        .arg(format!("-kubelet-path={}", dir.path().display()))
        .arg("-api-groups=filesystem-v1")
        .arg(format!("-pipe-prefix={}", unique_prefix(tag)))
        .arg(format!("-pipe-sddl={sddl}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!(
                "started with {sddl}: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let err = std::fs::read_to_string(&log).unwrap();
    assert!(!status.success(), "{sddl}: {err}");
    assert!(!err.contains("csi-proxy ready"), "{sddl}: {err}");
    err
}

#[test]
fn a_dacl_that_lets_others_create_pipe_instances_stops_the_start() {
    for (i, (sddl, want)) in [
        (
            "D:P(A;;GA;;;SY)(A;;GA;;;BA)(A;;GRGW;;;AU)",
            &["ACE #2 (A;;0xc0000000;;;S-1-5-11", "GENERIC_WRITE"][..],
        ),
        (
            "D:P(A;;GA;;;SY)(A;;FW;;;WD)",
            &["ACE #1 (A;;0x120116;;;S-1-1-0", "FILE_CREATE_PIPE_INSTANCE"],
        ),
        (
            "D:P(A;;GA;;;SY)(A;;GA;;;BA)(A;;WDGR;;;BU)",
            &["ACE #2", "S-1-5-32-545", "WRITE_DAC"],
        ),
        ("O:BUD:P(A;;GA;;;SY)", &["owner S-1-5-32-545", "WRITE_DAC"]),
    ]
    .into_iter()
    .enumerate()
    {
        let err = refused_start(&format!("dacl{i}"), sddl);
        for w in want {
            assert!(err.contains(w), "{sddl}: no {w:?} in {err}");
        }
    }
    // A client grant without FILE_CREATE_PIPE_INSTANCE, and the service's
    // own SID (NT SERVICE\csiproxy, the default -service-name) with all
    // rights, start.
    let service = "S-1-5-80-2268328347-2954668164-3454834723-110198566-2814594838";
    for sddl in [
        "O:BAD:P(A;;GA;;;SY)(A;;GA;;;BA)(A;;0x12019b;;;AU)".to_string(),
        format!("O:SYD:P(A;;GA;;;SY)(A;;GA;;;{service})"),
    ] {
        let flag = format!("-pipe-sddl={sddl}");
        let _p = Proxy::start_unique("dacl-ok", "filesystem-v1", &[&flag]);
    }
}

/// Without `O:` the pipe gets the token's default owner (under wine a
/// non-admin group, S-1-5-21-0-0-0-513): the owner checked is the one read
/// back from the first instance, so the start stops, naming it.
#[test]
fn an_applied_default_owner_outside_the_three_stops_the_start() {
    let err = refused_start("owner", "D:P(A;;GA;;;BA)(A;;GA;;;SY)");
    assert!(err.contains("as created with"), "{err}");
    assert!(err.contains("the owner S-1-5-21-"), "{err}");
}

/// The whole error, sources included.
fn chain(e: &Error) -> String {
    let mut s = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(x) = src {
        s.push_str(&format!(" / {x}"));
        src = x.source();
    }
    s
}

#[tokio::test]
async fn the_client_names_the_process_serving_a_pipe_it_does_not_trust() {
    let p = Proxy::start_unique("trust", "filesystem-v1", &[]);
    let client = |trust: ServerTrust| {
        Client::builder()
            .pipe_prefix(&p.pipe_prefix)
            .server_trust(trust)
            .build()
            .unwrap()
    };
    let kubelet = p.kubelet.display().to_string();
    let exists = |ch| {
        let path = kubelet.clone();
        async move {
            let mut fs = FilesystemClient::new(ch);
            let req = PathExistsRequest { path };
            fs.path_exists(req).await.map(|r| r.into_inner().exists)
        }
    };
    // The default trust: the proxy runs as an (elevated) administrator
    // here (as SYSTEM when it is a service): accepted.
    let ch = client(ServerTrust::default())
        .connect_version(Group::Filesystem, "v1")
        .await
        .unwrap_or_else(|e| panic!("{}", chain(&e)));
    assert!(exists(ch).await.unwrap());
    // Trusting SYSTEM alone: the proxy's process is refused, by pid and
    // user SID, before anything was sent.
    let e = client(ServerTrust::default().without_administrators())
        .connect_version(Group::Filesystem, "v1")
        .await
        .unwrap_err();
    let msg = chain(&e);
    let pid = p.child.id();
    assert!(
        msg.contains(&format!("served by process {pid} (user S-1-")),
        "{msg}"
    );
    let sid = msg
        .split("(user ")
        .nth(1)
        .and_then(|r| r.split(')').next())
        .unwrap()
        .to_string();
    // Its SID named as trusted: the process passes, but the pipe itself is
    // owned by Administrators (the default `O:BA`), which this client does
    // not trust: refused, naming the owner (a pid is not bound to a pipe).
    let e = client(
        ServerTrust::default()
            .without_administrators()
            .also_sid(&sid),
    )
    .connect_version(Group::Filesystem, "v1")
    .await
    .unwrap_err();
    let msg = chain(&e);
    assert!(msg.contains("owned by S-1-5-32-544,"), "{msg}");
    // A proxy whose pipes SYSTEM owns: accepted.
    let sy = Proxy::start_unique(
        "trust-sy",
        "filesystem-v1",
        &["-pipe-sddl=O:SYD:P(A;;GA;;;BA)(A;;GA;;;SY)"],
    );
    let ch = Client::builder()
        .pipe_prefix(&sy.pipe_prefix)
        .server_trust(
            ServerTrust::default()
                .without_administrators()
                .also_sid(&sid),
        )
        .build()
        .unwrap()
        .connect_version(Group::Filesystem, "v1")
        .await
        .unwrap_or_else(|e| panic!("{}", chain(&e)));
    let req = PathExistsRequest {
        path: sy.kubelet.display().to_string(),
    };
    let reply = FilesystemClient::new(ch).path_exists(req).await.unwrap();
    assert!(reply.into_inner().exists);
}
