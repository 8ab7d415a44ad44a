//! A real grpc-go client against the real binary over Unix sockets.
//!
//! Builds `compat/go/csi-proxy-go-check` with Debian's Go (`scripts/go.sh`,
//! not the `go` on PATH) in GOPATH mode against Debian's packaged grpc-go
//! (`scripts/setup.sh` installs `golang-go` and `golang-google-grpc-dev`),
//! then runs it once per `:authority` form real Go clients send. The program
//! dials the way upstream's Go client library does (the endpoint path as the
//! grpc.Dial target, a context dialer, insecure credentials), keeps an idle
//! raw probe connection open, makes hundreds of calls on one connection and
//! checks every answer and the `:authority` of every request it sent.
//!
//! Without Debian's Go (or the packages) the tests fail: they are not
//! skipped.
#![cfg(unix)]

mod common;

use common::Proxy;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Debian's packaged Go libraries (grpc-go 1.33, x/net, protobuf).
const SYSTEM_GOPATH: &str = "/usr/share/gocode";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Builds the Go program once per test binary run and returns its path.
fn go_check() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(build_go_check)
}

fn build_go_check() -> PathBuf {
    // The same places as compat/go/build.sh.
    let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join("go-check");
    let out = work.join("linux/csi-proxy-go-check");
    // Built under a private name, then renamed: a concurrent test run may be
    // executing the previous build.
    let tmp = work.join(format!(
        "linux/csi-proxy-go-check.{}.tmp",
        std::process::id()
    ));
    std::fs::create_dir_all(work.join("linux")).unwrap();
    let gopath = match std::env::var("GOPATH") {
        Ok(extra) if !extra.is_empty() => format!("{SYSTEM_GOPATH}:{extra}"),
        _ => SYSTEM_GOPATH.to_string(),
    };
    let result = Command::new(repo_root().join("scripts/go.sh"))
        .current_dir(repo_root())
        .args(["build", "-o"])
        .arg(&tmp)
        .arg("./compat/go/csi-proxy-go-check")
        .env("GO111MODULE", "off")
        .env("GOPATH", gopath)
        .env("GOCACHE", work.join("cache"))
        .env("GOFLAGS", "")
        .env("CGO_ENABLED", "0")
        .env_remove("GOOS")
        .env_remove("GOARCH")
        .output();
    // Without Debian's Go, scripts/go.sh fails and says what to install.
    let output = result.unwrap_or_else(|e| panic!("cannot run scripts/go.sh: {e}"));
    assert!(
        output.status.success(),
        "go build of compat/go/csi-proxy-go-check failed ({}); are golang-go and \
         golang-google-grpc-dev installed (scripts/setup.sh)?\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    std::fs::rename(&tmp, &out).unwrap();
    out
}

/// The grpc.Dial targets real Go clients use for an endpoint, with the
/// `:authority` grpc-go sends for each.
fn targets(endpoint: &str, socket: &Path) -> Vec<(String, String)> {
    let pipe = format!(r"\\.\pipe\{endpoint}");
    let doubled = format!(r"\\.\\pipe\\{endpoint}");
    let pct = |s: &str| s.replace('\\', "%5C");
    let socket = socket.display().to_string();
    let same = |t: String| (t.clone(), t);
    vec![
        // Upstream's Go client: the pipe path, raw.
        same(pipe.clone()),
        // Doubled separators, as some drivers spell the pipe name.
        same(doubled.clone()),
        // Percent-encoded, as newer grpc-go versions encode the authority.
        same(pct(&pipe)),
        same(pct(&doubled)),
        // A Linux driver dialing the socket path directly.
        same(socket.clone()),
        // The unix: scheme: grpc-go sends "localhost".
        (format!("unix://{socket}"), "localhost".to_string()),
    ]
}

struct Run<'a> {
    version: &'a str,
    target: &'a str,
    authority: &'a str,
    mkdir: PathBuf,
    /// Extra flags of the Go program (`-pause`, `-dials`).
    extra: &'a [&'a str],
}

/// Runs the Go program against `p` and asserts it passed and left exactly
/// the expected effects on disk.
fn run(p: &mut Proxy, r: Run) {
    let endpoint = p.socket(&format!("filesystem-{}", r.version));
    let existing = p.kubelet.join("pods/uid/volumes");
    std::fs::create_dir_all(&existing).unwrap();
    let missing = p.kubelet.join("pods/uid/missing");
    let output = Command::new(go_check())
        .arg(format!("-endpoint={}", endpoint.display()))
        .arg(format!("-target={}", r.target))
        .arg(format!("-expect-authority={}", r.authority))
        .arg(format!("-version={}", r.version))
        .arg(format!("-exists={}", existing.display()))
        .arg(format!("-missing={}", missing.display()))
        .arg(format!("-mkdir={}", r.mkdir.display()))
        .arg(format!("-outside={}", p.outside.display()))
        .args(r.extra)
        .output()
        .expect("run csi-proxy-go-check");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("--- {} target {}\n{stdout}{stderr}", r.version, r.target);
    assert!(
        output.status.success() && stdout.ends_with("PASS\n"),
        "grpc-go client failed ({}) with target {:?} on {}:\n{stdout}{stderr}\nproxy log:\n{}",
        output.status,
        r.target,
        r.version,
        p.log()
    );
    // Its effects, seen directly on disk.
    assert!(
        r.mkdir.is_dir(),
        "Mkdir did not create {}",
        r.mkdir.display()
    );
    assert!(
        !r.mkdir.join("sub").exists(),
        "Rmdir did not remove {}/sub",
        r.mkdir.display()
    );
    assert!(!missing.exists());
    assert!(
        !p.outside.join("go-check-made-this").exists(),
        "a refused Mkdir created a directory outside the kubelet dir"
    );
    assert_eq!(
        std::fs::read(p.outside.join("sentinel")).unwrap(),
        b"keep me"
    );
    if let Some(status) = p.child.as_mut().unwrap().try_wait().unwrap() {
        panic!("csi-proxy exited with {status}: {}", p.log());
    }
}

#[test]
fn go_client_every_authority_form() {
    go_check();
    let mut p = Proxy::start(&[]);
    let socket = p.socket("filesystem-v1");
    for (i, (target, authority)) in targets("csi-proxy-filesystem-v1", &socket)
        .iter()
        .enumerate()
    {
        let mkdir = p.kubelet.join(format!("pods/uid/volumes/go-check-{i}"));
        run(
            &mut p,
            Run {
                version: "v1",
                target,
                authority,
                mkdir,
                extra: &[],
            },
        );
    }
    // Every connection (the gRPC ones and the idle probes) is gone: the
    // proxy drains and exits cleanly.
    let status = p.terminate();
    assert!(status.success(), "csi-proxy exit: {status}: {}", p.log());
}

#[test]
fn go_client_other_filesystem_versions() {
    go_check();
    let mut p = Proxy::start(&[]);
    for version in ["v1beta2", "v2alpha1"] {
        let target = format!(r"\\.\pipe\csi-proxy-filesystem-{version}");
        let mkdir = p
            .kubelet
            .join(format!("pods/uid/volumes/go-check-{version}"));
        run(
            &mut p,
            Run {
                version,
                target: &target,
                authority: &target,
                mkdir,
                extra: &[],
            },
        );
    }
    let status = p.terminate();
    assert!(status.success(), "csi-proxy exit: {status}: {}", p.log());
}

/// The connection defaults must never disturb grpc-go: a client idle past
/// the idle timeout gets GOAWAY and redials transparently on its next call;
/// a client idle under keepalive answers every PING and keeps its one
/// connection.
#[test]
fn go_client_after_idle_timeout_and_under_keepalive() {
    go_check();
    let target = r"\\.\pipe\csi-proxy-filesystem-v1";
    for (flags, extra) in [
        (
            &["-idle-timeout=1s"][..],
            &["-pause=2500ms", "-dials=2"][..],
        ),
        (
            &[
                "-idle-timeout=0",
                "-keepalive-time=200ms",
                "-keepalive-timeout=1s",
            ][..],
            &["-pause=2500ms", "-dials=1"][..],
        ),
    ] {
        let mut p = Proxy::start(flags);
        let mkdir = p.kubelet.join("pods/uid/volumes/go-check-idle");
        run(
            &mut p,
            Run {
                version: "v1",
                target,
                authority: target,
                mkdir,
                extra,
            },
        );
        let status = p.terminate();
        assert!(status.success(), "csi-proxy exit: {status}: {}", p.log());
    }
}

/// aws-ebs-csi-driver's GetDeviceNameFromMount sequence (its code copied
/// into compat/go/csi-proxy-go-check/awsebs.go, source cited there), run
/// by grpc-go over the Volume socket of every version carrying the call,
/// on a plain staging directory and a missing one: NodeStageVolume and
/// NodeUnstageVolume take the driver's "not mounted" branch.
#[test]
fn aws_ebs_staging_takes_the_not_mounted_branch() {
    go_check();
    let p = Proxy::start(&[]);
    let plugin = p.kubelet.join("plugins/kubernetes.io/csi/ebs.csi.aws.com");
    let staged = plugin.join("0123abcd/globalmount");
    std::fs::create_dir_all(&staged).unwrap();
    let unstaged = plugin.join("4567ef/globalmount");
    for version in ["v1beta1", "v1beta2", "v1beta3", "v1", "v2alpha1"] {
        let socket = p.socket(&format!("volume-{version}"));
        let output = Command::new(go_check())
            .arg("-aws-ebs")
            .arg(format!("-volume-version={version}"))
            .arg(format!("-endpoint={}", socket.display()))
            .arg(format!("-staged={}", staged.display()))
            .arg(format!("-unstaged={}", unstaged.display()))
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        println!("--- {version}\n{stdout}");
        assert!(
            output.status.success() && stdout.ends_with("PASS\n"),
            "aws-ebs sequence on volume {version}:\n{stdout}{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}
