//! Library mode in the same run, same paths: the Go package `go/csiproxy`
//! calling csi_proxy.dll in-process (its test binary's `TestBench` mode,
//! built with the DLL beside it by `RELEASE=1 go/test-windows.sh`), beside
//! the pipe's figures, with the pipe/in-process ratio of each call; and,
//! when `go/upstreamcheck/check.sh <upstream checkout>` has built it,
//! upstream's own library (`TestBenchUpstream`: its `pkg/filesystem` front
//! end over its default host API, in-process), with the ratio
//! ours-in-process/upstream-in-process. Upstream's library confines
//! nothing: the path outside the roots is answered there, not refused.

use crate::server::Server;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Runs the Go test binary `exe`'s measuring mode `test` on the bench's
/// paths; its standard output.
fn measure(exe: &Path, test: &str, server: &Server, calls: usize) -> String {
    let kubelet = server
        .kubelet_arg
        .strip_prefix("-kubelet-path=")
        .unwrap_or(&server.kubelet_arg);
    let out = Command::new(exe)
        .args(["-test.run", &format!("^{test}$"), "-test.v"])
        .env("CSI_PROXY_BENCH", calls.to_string())
        .env("CSI_PROXY_BENCH_KUBELET", kubelet)
        .env("CSI_PROXY_BENCH_EXISTS", &server.target)
        .env("CSI_PROXY_BENCH_OUTSIDE", r"C:\Windows\win.ini")
        .env("CSI_PROXY_BENCH_MKDIR", &server.target)
        .env_remove("CSI_PROXY_DLL")
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", exe.display()));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// Prints the library's p50/p99 and their ratio to `pipe` (kind -> (p50,
/// p99) over the pipe, same run), upstream's library's beside them, or
/// why either was not measured.
pub fn compare(server: &Server, calls: usize, pipe: &BTreeMap<String, (f64, f64)>) {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("go-library");
    let library = dir.join("csiproxy.test.exe");
    if !library.exists() {
        println!(
            "library mode not measured: {} is missing (run RELEASE=1 go/test-windows.sh)",
            library.display()
        );
        return;
    }
    let lib = crate::client::parse(&measure(&library, "TestBench", server, calls)).latency;
    let upstream_exe = dir.join("upstreamcheck.test.exe");
    let upstream = if upstream_exe.exists() {
        let text = measure(&upstream_exe, "TestBenchUpstream", server, calls);
        let mut figures = crate::client::parse(&text).latency;
        // The same call: refused by ours, answered by upstream's library.
        if let Some(outside) = figures.remove("pathexists-outside") {
            figures.insert("pathexists-refused".to_string(), outside);
        }
        let notes: Vec<String> = text
            .lines()
            .filter(|l| l.starts_with("note "))
            .map(str::to_string)
            .collect();
        Some((figures, notes))
    } else {
        println!(
            "upstream's library not measured: {} is missing (run go/upstreamcheck/check.sh <upstream checkout>)",
            upstream_exe.display()
        );
        None
    };
    println!("go/csiproxy in-process through csi_proxy.dll, {calls} sequential calls each");
    if upstream.is_some() {
        println!("upstream: kubernetes-csi/csi-proxy's library (pkg/filesystem, default host API), in-process, same calls");
    }
    println!(
        "{:<24} {:>10} {:>10} {:>14} {:>14} {:>14} {:>14}",
        "", "p50 (us)", "p99 (us)", "pipe/in-proc", "upstream p50", "upstream p99", "ours/upstream"
    );
    for (name, (p50, p99)) in &lib {
        let ratio = pipe.get(name).map_or(f64::NAN, |(p, _)| p / p50);
        let theirs = match &upstream {
            None => String::new(),
            Some((figures, _)) => match figures.get(name) {
                Some((u50, u99)) => format!("{u50:>14.1} {u99:>14.1} {:>14.3}", p50 / u50),
                None => format!("{:>44}", "does not answer under wine"),
            },
        };
        println!("{name:<24} {p50:>10.1} {p99:>10.1} {ratio:>14.1} {theirs}");
    }
    if let Some((_, notes)) = &upstream {
        for note in notes {
            println!("upstream {note}");
        }
    }
}
