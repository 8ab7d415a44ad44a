//! Library mode in the same run, same paths: the Go package `go/csiproxy`
//! calling csi_proxy.dll in-process (its test binary's `TestBench` mode,
//! built with the DLL beside it by `RELEASE=1 go/test-windows.sh`), beside
//! the pipe's figures, with the pipe/in-process ratio of each call.

use crate::server::Server;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

/// Prints the library's p50/p99 and their ratio to `pipe` (kind -> (p50,
/// p99) over the pipe, same run), or why it was not measured.
pub fn compare(server: &Server, calls: usize, pipe: &BTreeMap<String, (f64, f64)>) {
    let library = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("go-library")
        .join("csiproxy.test.exe");
    if !library.exists() {
        println!(
            "library mode not measured: {} is missing (run RELEASE=1 go/test-windows.sh)",
            library.display()
        );
        return;
    }
    let kubelet = server
        .kubelet_arg
        .strip_prefix("-kubelet-path=")
        .unwrap_or(&server.kubelet_arg);
    let out = Command::new(&library)
        .args(["-test.run", "^TestBench$", "-test.v"])
        .env("CSI_PROXY_BENCH", calls.to_string())
        .env("CSI_PROXY_BENCH_KUBELET", kubelet)
        .env("CSI_PROXY_BENCH_EXISTS", &server.target)
        .env("CSI_PROXY_BENCH_OUTSIDE", r"C:\Windows\win.ini")
        .env("CSI_PROXY_BENCH_MKDIR", &server.target)
        .env_remove("CSI_PROXY_DLL")
        .output()
        .expect("run the library's Go test binary");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lib = crate::client::parse(&text).latency;
    println!("go/csiproxy in-process through csi_proxy.dll, {calls} sequential calls each");
    println!(
        "{:<24} {:>10} {:>10} {:>14}",
        "", "p50 (us)", "p99 (us)", "pipe/in-proc"
    );
    for (name, (p50, p99)) in &lib {
        let ratio = pipe.get(name).map_or(f64::NAN, |(p, _)| p / p50);
        println!("{name:<24} {p50:>10.1} {p99:>10.1} {ratio:>14.1}");
    }
}
