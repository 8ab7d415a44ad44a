//! A real grpc-go client against the real `.exe` over named pipes (Windows
//! build; CI runs it under wine).
//!
//! The client is `compat/go/csi-proxy-go-check` cross-built for Windows,
//! which `go` cannot do from inside wine: `compat/go/build.sh windows`
//! builds it first (scripts/test.sh does so before the Windows tier). It
//! dials the way upstream's Go client library does (the pipe path as the
//! grpc.Dial target, so as HTTP/2 `:authority`), keeps an idle raw probe
//! connection open, makes hundreds of calls on one connection, and checks
//! every answer and the `:authority` of every request it sent.
//!
//! One proxy serves the whole file, because pipe names are machine-global.
#![cfg(windows)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::SystemTime;

mod pipes;
use pipes::Proxy;

const BUILD: &str = "compat/go/build.sh windows";

/// The Go client built by `compat/go/build.sh windows`, checked to be newer
/// than its sources.
fn go_check() -> PathBuf {
    let exe = match std::env::var_os("CSI_PROXY_GO_CHECK_EXE") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("go-check")
            .join("windows")
            .join("csi-proxy-go-check.exe"),
    };
    let built = std::fs::metadata(&exe)
        .and_then(|m| m.modified())
        .unwrap_or_else(|e| {
            panic!(
                "the Windows build of the Go client is missing ({}: {e}): run `{BUILD}` \
                 on the Linux host first (scripts/test.sh does)",
                exe.display()
            )
        });
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../compat/go/csi-proxy-go-check");
    let newest = std::fs::read_dir(&src)
        .unwrap_or_else(|e| panic!("{}: {e}", src.display()))
        .map(|e| e.unwrap().metadata().unwrap().modified().unwrap())
        .max()
        .unwrap_or(SystemTime::UNIX_EPOCH);
    assert!(
        built >= newest,
        "{} is older than compat/go/csi-proxy-go-check: rerun `{BUILD}`",
        exe.display()
    );
    exe
}

/// Runs the Go client with the grpc.Dial `target` against `version`'s pipe
/// and asserts that it passed and left exactly the expected effects.
fn run(exe: &Path, p: &mut Proxy, version: &str, target: &str, mkdir: &Path) {
    let pipe = format!(r"\\.\pipe\csi-proxy-filesystem-{version}");
    let existing = p.kubelet.join("pods\\uid\\volumes");
    let missing = p.kubelet.join("pods\\uid\\missing");
    let output = Command::new(exe)
        .arg(format!("-endpoint={pipe}"))
        .arg(format!("-target={target}"))
        .arg(format!("-version={version}"))
        .arg(format!("-exists={}", existing.display()))
        .arg(format!("-missing={}", missing.display()))
        .arg(format!("-mkdir={}", mkdir.display()))
        .arg(format!("-outside={}", p.outside.display()))
        .stdin(Stdio::null())
        .output()
        .expect("run csi-proxy-go-check.exe");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("--- {version} target {target}\n{stdout}{stderr}");
    assert!(
        output.status.success() && stdout.replace("\r\n", "\n").ends_with("PASS\n"),
        "grpc-go client failed ({}) with target {target:?} on {version}:\n{stdout}{stderr}\nproxy log:\n{}",
        output.status,
        p.log_text()
    );
    assert!(mkdir.is_dir(), "Mkdir did not create {}", mkdir.display());
    assert!(
        !mkdir.join("sub").exists(),
        "Rmdir did not remove {}\\sub",
        mkdir.display()
    );
    assert!(!missing.exists());
    assert!(
        !p.outside.join("go-check-made-this").exists(),
        "a refused Mkdir created a directory outside the kubelet dir"
    );
    assert_eq!(std::fs::read(p.outside.join("sentinel")).unwrap(), b"keep");
    if let Some(s) = p.child.try_wait().unwrap() {
        panic!("csi-proxy.exe exited with {s}: {}", p.log_text());
    }
}

#[test]
fn go_client_over_named_pipes() {
    let exe = go_check();
    let mut p = Proxy::start("go-pipes", "filesystem");
    std::fs::create_dir_all(p.kubelet.join("pods\\uid\\volumes")).unwrap();
    let endpoint = "csi-proxy-filesystem-v1";
    let pipe = format!(r"\\.\pipe\{endpoint}");
    let doubled = format!(r"\\.\\pipe\\{endpoint}");
    let pct = |s: &str| s.replace('\\', "%5C");
    // Upstream's client (the pipe path, raw), doubled separators, and both
    // percent-encoded as newer grpc-go versions send them.
    let targets = [pipe.clone(), doubled.clone(), pct(&pipe), pct(&doubled)];
    for (i, target) in targets.iter().enumerate() {
        let mkdir = p.kubelet.join(format!("pods\\uid\\volumes\\go-check-{i}"));
        run(&exe, &mut p, "v1", target, &mkdir);
    }
    for version in ["v1beta2", "v2alpha1"] {
        let target = format!(r"\\.\pipe\csi-proxy-filesystem-{version}");
        let mkdir = p
            .kubelet
            .join(format!("pods\\uid\\volumes\\go-check-{version}"));
        run(&exe, &mut p, version, &target, &mkdir);
    }
}

/// aws-ebs-csi-driver's GetDeviceNameFromMount sequence (its code copied
/// into compat/go/csi-proxy-go-check/awsebs.go, source cited there), run
/// by grpc-go over the Volume pipe of every version carrying the call, on
/// a plain staging directory and a missing one: NodeStageVolume and
/// NodeUnstageVolume take the driver's "not mounted" branch.
#[test]
fn aws_ebs_staging_takes_the_not_mounted_branch_over_pipes() {
    let exe = go_check();
    let mut p = Proxy::start_unique("aws-ebs", "volume", &[]);
    let plugin = p.kubelet.join(r"plugins\kubernetes.io\csi\ebs.csi.aws.com");
    let staged = plugin.join(r"0123abcd\globalmount");
    std::fs::create_dir_all(&staged).unwrap();
    let unstaged = plugin.join(r"4567ef\globalmount");
    for version in ["v1beta1", "v1beta2", "v1beta3", "v1", "v2alpha1"] {
        let pipe = format!("{}volume-{version}", p.pipe_prefix);
        let output = Command::new(&exe)
            .arg("-aws-ebs")
            .arg(format!("-volume-version={version}"))
            .arg(format!("-endpoint={pipe}"))
            .arg(format!("-staged={}", staged.display()))
            .arg(format!("-unstaged={}", unstaged.display()))
            .stdin(Stdio::null())
            .output()
            .expect("run csi-proxy-go-check.exe");
        let stdout = String::from_utf8_lossy(&output.stdout).replace("\r\n", "\n");
        println!("--- {version}\n{stdout}");
        assert!(
            output.status.success() && stdout.ends_with("PASS\n"),
            "aws-ebs sequence on volume {version}:\n{stdout}{}\nproxy log:\n{}",
            String::from_utf8_lossy(&output.stderr),
            p.log_text()
        );
    }
    if let Some(s) = p.child.try_wait().unwrap() {
        panic!("csi-proxy.exe exited with {s}: {}", p.log_text());
    }
}
