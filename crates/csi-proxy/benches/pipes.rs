//! Under wine (or on Windows): the real `csi-proxy.exe` over its named
//! pipe, driven by the repository's grpc-go client (`compat/go`, with its
//! `-bench` mode) as every Go CSI driver calls it: PathExists of an
//! existing path inside the kubelet dir, PathExists refused by the lexical
//! check (outside the roots: nothing on disk is touched), and Mkdir+Rmdir
//! inside the kubelet dir. Prints p50/p99 and the ratios to the refused
//! call, measured in the same run, and the floor of those ratios: the same
//! file-system work done by the bench process itself (std::fs, no RPC, no
//! confinement) plus one refused call per RPC.
//!
//! Beside them, in the same run, the same calls in-process from Go through
//! csi_proxy.dll (library mode, `go/csiproxy`), and the pipe/in-process
//! ratio of each.
//!
//! Run: `compat/go/build.sh windows && RELEASE=1 go/test-windows.sh &&
//! cargo bench -p csi-proxy --bench pipes --target x86_64-pc-windows-gnu`
//! (CALLS=n, default 2000;
//! CSI_PROXY_BIN=<path to another csi-proxy.exe> to measure another build
//! with the same client).

#[cfg(windows)]
fn main() {
    use std::path::PathBuf;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    let calls: usize = std::env::var("CALLS")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(2000);
    let go = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("go-check")
        .join("windows")
        .join("csi-proxy-go-check.exe");
    assert!(
        go.exists(),
        "{} is missing: run compat/go/build.sh windows",
        go.display()
    );
    let bin = std::env::var_os("CSI_PROXY_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_csi-proxy")));
    let root = std::env::temp_dir().join(format!("csi-proxy-bench-{}", std::process::id()));
    let kubelet = root.join("kubelet");
    let target = kubelet.join(r"pods\uid\volumes\kubernetes.io~csi\pvc\mount");
    std::fs::create_dir_all(&target).unwrap();
    let log = root.join("stderr.log");
    // Pipe names of this run only (tests may run beside it).
    let prefix = format!(r"\\.\pipe\csi-proxy-bench-{}-", std::process::id());
    struct KillOnDrop(std::process::Child, PathBuf);
    impl Drop for KillOnDrop {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
            let _ = std::fs::remove_dir_all(&self.1);
        }
    }
    let mut child = KillOnDrop(
        Command::new(&bin)
            .arg(format!("-kubelet-path={}", kubelet.display()))
            .arg("-api-groups=filesystem-v1")
            .args(
                std::env::var_os("CSI_PROXY_BIN")
                    .is_none()
                    .then(|| format!("-pipe-prefix={prefix}")),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start csi-proxy.exe"),
        root.clone(),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("csi-proxy ready")
    {
        if let Some(s) = child.0.try_wait().unwrap() {
            panic!("csi-proxy.exe exited with {s}");
        }
        assert!(Instant::now() < deadline, "csi-proxy.exe not ready");
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = Command::new(&go)
        .arg(format!(
            "-endpoint={}filesystem-v1",
            if std::env::var_os("CSI_PROXY_BIN").is_none() {
                prefix.as_str()
            } else {
                r"\\.\pipe\csi-proxy-"
            }
        ))
        .arg(format!("-exists={}", target.display()))
        .arg(format!("-missing={}", target.join("missing").display()))
        .arg(format!("-mkdir={}", target.join("bench-dir").display()))
        .arg(r"-outside=C:\Windows\win.ini")
        .arg(format!("-bench={calls}"))
        .arg("-timeout=600s")
        .output()
        .expect("run csi-proxy-go-check.exe");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // `bench <name> p50 <us> p99 <us>` lines, as the Go programs print them.
    let bench_lines = |text: &str| {
        let mut figures = std::collections::BTreeMap::new();
        for line in text.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            if let ["bench", name, "p50", p50, "p99", p99] = f[..] {
                figures.insert(
                    name.to_string(),
                    (p50.parse::<f64>().unwrap(), p99.parse::<f64>().unwrap()),
                );
            }
        }
        figures
    };
    let figures = bench_lines(&text);
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
    // Library mode, same run, same paths: the Go package go/csiproxy
    // calling csi_proxy.dll in-process (its test binary's TestBench mode,
    // built with the DLL beside it by `RELEASE=1 go/test-windows.sh`).
    let library = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("go-library")
        .join("csiproxy.test.exe");
    if library.exists() {
        let out = Command::new(&library)
            .args(["-test.run", "^TestBench$", "-test.v"])
            .env("CSI_PROXY_BENCH", calls.to_string())
            .env("CSI_PROXY_BENCH_KUBELET", &kubelet)
            .env("CSI_PROXY_BENCH_EXISTS", &target)
            .env("CSI_PROXY_BENCH_OUTSIDE", r"C:\Windows\win.ini")
            .env("CSI_PROXY_BENCH_MKDIR", &target)
            .env_remove("CSI_PROXY_DLL")
            .output()
            .expect("run the library's Go test binary");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let lib = bench_lines(&text);
        println!("go/csiproxy in-process through csi_proxy.dll, {calls} sequential calls each");
        println!(
            "{:<24} {:>10} {:>10} {:>14}",
            "", "p50 (us)", "p99 (us)", "pipe/in-proc"
        );
        for (name, (p50, p99)) in &lib {
            println!(
                "{name:<24} {p50:>10.1} {p99:>10.1} {:>14.1}",
                figures[name].0 / p50
            );
        }
    } else {
        println!(
            "library mode not measured: {} is missing (run RELEASE=1 go/test-windows.sh)",
            library.display()
        );
    }
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
    let existing = target.clone();
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
    let dir = target.join("bench-floor");
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
