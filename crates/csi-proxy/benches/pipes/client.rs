//! The client of every measurement: the repository's grpc-go program
//! (`compat/go/csi-proxy-go-check`, its `-bench` mode), as Go CSI drivers
//! call the proxy, over the server's Filesystem v1 pipe.

use crate::server::Server;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The Windows build of the Go client: `CSI_PROXY_GO_CHECK_EXE`, else where
/// `compat/go/build.sh windows` puts it.
pub fn go_check() -> PathBuf {
    let exe = std::env::var_os("CSI_PROXY_GO_CHECK_EXE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
                .join("go-check")
                .join("windows")
                .join("csi-proxy-go-check.exe")
        });
    assert!(
        exe.exists(),
        "{} is missing: run compat/go/build.sh windows (or set CSI_PROXY_GO_CHECK_EXE)",
        exe.display()
    );
    exe
}

/// What one run of the client measured.
#[derive(Default, Debug)]
pub struct Figures {
    /// kind -> (p50, p99) in microseconds.
    pub latency: BTreeMap<String, (f64, f64)>,
    /// clients -> calls per second.
    pub throughput: BTreeMap<usize, f64>,
}

/// Runs the client against `server`: `calls` sequential calls of each of
/// `kinds` (comma-separated, may be empty), then `calls` PathExists calls
/// spread over each client count of `clients` (comma-separated, may be
/// empty).
pub fn run(go: &Path, server: &Server, calls: usize, kinds: &str, clients: &str) -> Figures {
    run_with(go, server, calls, kinds, clients, &[])
}

/// [`run`] with `extra` flags for the client (`-throughput-refused`: the
/// throughput calls are PathExists refused by the server's path check).
pub fn run_with(
    go: &Path,
    server: &Server,
    calls: usize,
    kinds: &str,
    clients: &str,
    extra: &[&str],
) -> Figures {
    let target = &server.target;
    let out = Command::new(go)
        .arg(format!("-endpoint={}", server.endpoint))
        .arg(format!("-exists={}", target.display()))
        .arg(format!("-missing={}", target.join("missing").display()))
        .arg(format!("-mkdir={}", target.join("bench-dir").display()))
        .arg(r"-outside=C:\Windows\win.ini")
        .arg(format!("-bench={calls}"))
        .arg(format!("-kinds={kinds}"))
        .arg(format!("-clients={clients}"))
        .arg("-timeout=1200s")
        .args(extra)
        .output()
        .expect("run csi-proxy-go-check.exe");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    parse(&text)
}

pub fn parse(text: &str) -> Figures {
    let mut figures = Figures::default();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        match f[..] {
            ["bench", name, "p50", p50, "p99", p99] => {
                figures.latency.insert(
                    name.to_string(),
                    (p50.parse().unwrap(), p99.parse().unwrap()),
                );
            }
            ["throughput", "clients", n, "calls", _, "seconds", _, "per-second", rate] => {
                figures
                    .throughput
                    .insert(n.parse().unwrap(), rate.parse().unwrap());
            }
            _ => {}
        }
    }
    figures
}
