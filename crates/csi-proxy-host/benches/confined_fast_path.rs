//! What the Windows fast path of the confined filesystem costs, and what
//! it saves: one open of an entry five levels below a root, taken
//!
//! * `fast+proof`: one `OBJ_DONT_REPARSE` open of the whole path, then the
//!   final-path proof (`GetFinalPathNameByHandleW` compared with the path
//!   expected), as PathExists does first;
//! * `fast`: the same open without the proof (what the fast path would
//!   cost if `OBJ_DONT_REPARSE` alone were trusted);
//! * `walk`: each parent opened relative to the one before, checked and
//!   held, then the entry (the way every path goes without the fast path);
//! * `exists`: the whole `Confined::exists` (PathExists without gRPC).
//!
//! Interleaved rounds, `ROUNDS` (default 2000) each; p50 and p90 in µs and
//! the ratio of each p50 to `fast`'s.
//!
//! `cargo bench -p csi-proxy-host --features bench-internals --bench
//! confined_fast_path --target x86_64-pc-windows-gnu` (under wine here).

#[cfg(windows)]
fn main() {
    use csi_proxy_host::confined::{BenchWay, Confined};
    use csi_proxy_host::path::{Flavor, PathPolicy};
    use std::time::Instant;

    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("kubelet");
    let deep = root.join(r"pods\uid\volumes\kubernetes.io~csi\pv");
    std::fs::create_dir_all(&deep).unwrap();
    std::fs::write(deep.join("vol_data.json"), b"{}").unwrap();
    let policy = PathPolicy::new(Flavor::Windows, [root.to_str().unwrap()]).unwrap();
    let fs = Confined::new(policy);
    let p = fs
        .locate(deep.join("vol_data.json").to_str().unwrap())
        .unwrap();

    let ways = [
        ("fast+proof", Some(BenchWay::FastProven)),
        ("fast", Some(BenchWay::FastUnproven)),
        ("walk", Some(BenchWay::Walk)),
        ("exists", None),
    ];
    let mut times: Vec<Vec<f64>> = vec![Vec::with_capacity(rounds); ways.len()];
    for round in 0..rounds + 50 {
        for (i, (name, way)) in ways.iter().enumerate() {
            let t = Instant::now();
            let found = match way {
                Some(w) => fs.bench_open(&p, *w).unwrap(),
                None => fs.exists(&p).unwrap(),
            };
            let us = t.elapsed().as_secs_f64() * 1e6;
            // `fast+proof` may be unproven (a system that ignores the
            // flag answers the same path anyway): then it is false.
            assert!(found || *name == "fast+proof", "{name} did not find it");
            if round >= 50 {
                times[i].push(us);
            }
        }
    }
    let pct = |v: &mut Vec<f64>, q: f64| {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v[((v.len() - 1) as f64 * q) as usize]
    };
    let base = pct(&mut times[1].clone(), 0.5);
    println!("way          p50 µs   p90 µs   p50 / fast");
    for ((name, _), t) in ways.iter().zip(times.iter_mut()) {
        let (p50, p90) = (pct(t, 0.5), pct(t, 0.9));
        println!("{name:<12} {p50:>7.1}  {p90:>7.1}   {:>6.2}", p50 / base);
    }
    println!(
        "proven by the fast path: {}",
        fs.bench_open(&p, BenchWay::FastProven).unwrap()
    );
}

#[cfg(not(windows))]
fn main() {
    println!("confined_fast_path measures the Windows fast path: run it for a Windows target");
}
