//! Ours against upstream's `csi-proxy.exe`: alternating rounds, the same
//! client, one table.

use crate::client::{self, Figures};
use crate::server::{Flavor, Server};
use crate::usage;
use std::path::{Path, PathBuf};

const KINDS: &str = "pathexists-existing,pathexists-refused,mkdir-rmdir";
const CLIENTS: [usize; 3] = [1, 4, 16];

/// One flavor's figures in one round.
struct Round {
    figures: Figures,
    /// Server CPU (user + kernel) per existing-path PathExists, in µs.
    cpu_per_call: f64,
    /// 16 clients' calls/s of PathExists refused by the path check: the
    /// server's ceiling without file-system work.
    refused_16: f64,
    peak_rss: u64,
    threads: usize,
}

pub fn run(upstream: &Path, calls: usize) {
    let go = client::go_check();
    let ours = std::env::var_os("CSI_PROXY_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_csi-proxy")));
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(3);
    let mut results: [Vec<Round>; 2] = [Vec::new(), Vec::new()];
    for round in 0..rounds {
        // Who goes first alternates too: a warm cache or a busy neighbour
        // favours neither.
        let order = if round % 2 == 0 {
            [Flavor::Ours, Flavor::Upstream]
        } else {
            [Flavor::Upstream, Flavor::Ours]
        };
        for flavor in order {
            let exe = match flavor {
                Flavor::Ours => &ours,
                Flavor::Upstream => upstream,
            };
            eprintln!("round {}/{rounds}: {}", round + 1, flavor.name());
            results[flavor as usize].push(measure(exe, flavor, round, &go, calls));
        }
    }
    println!("ours:     {}", ours.display());
    println!("upstream: {}", upstream.display());
    println!(
        "grpc-go client (compat/go) over named pipes; {rounds} alternating rounds, \
         {calls} calls per case; each value: median of the rounds [every round]; \
         ratio = ours / upstream (calls/s: higher is better; the rest: lower)"
    );
    print_table(&results[0], &results[1]);
}

fn measure(exe: &Path, flavor: Flavor, round: usize, go: &Path, calls: usize) -> Round {
    let server = Server::start(exe, flavor, &format!("r{round}"), &[]);
    // CPU across a run of existing-path calls only: the client makes
    // calls + calls/10 (the first tenth warms up, unmeasured), plus one
    // connection set-up.
    let before = usage::of(&server);
    client::run(go, &server, calls, "pathexists-existing", "");
    let after = usage::of(&server);
    let made = (calls + calls / 10) as f64;
    let cpu_per_call = (after.cpu - before.cpu).as_secs_f64() * 1e6 / made;
    let clients = CLIENTS.map(|c| c.to_string()).join(",");
    let figures = client::run(go, &server, calls, KINDS, &clients);
    let refused = client::run_with(go, &server, calls, "", "16", &["-throughput-refused"]);
    let end = usage::of(&server);
    Round {
        figures,
        cpu_per_call,
        refused_16: refused.throughput[&16],
        peak_rss: end.peak_rss,
        threads: end.threads,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn print_table(ours: &[Round], upstream: &[Round]) {
    type Pick = Box<dyn Fn(&Round) -> f64>;
    let mut rows: Vec<(String, Pick)> = Vec::new();
    for (kind, label) in [
        ("pathexists-existing", "PathExists existing"),
        ("pathexists-refused", "PathExists refused"),
        ("mkdir-rmdir", "Mkdir+Rmdir"),
    ] {
        rows.push((
            format!("{label} p50 (us)"),
            Box::new(move |r: &Round| r.figures.latency[kind].0),
        ));
        rows.push((
            format!("{label} p99 (us)"),
            Box::new(move |r: &Round| r.figures.latency[kind].1),
        ));
    }
    for c in CLIENTS {
        rows.push((
            format!("{c} client(s), PathExists calls/s"),
            Box::new(move |r: &Round| r.figures.throughput[&c]),
        ));
    }
    rows.push((
        "16 clients, refused PathExists calls/s".into(),
        Box::new(|r: &Round| r.refused_16),
    ));
    rows.push((
        "server CPU per existing-path call (us)".into(),
        Box::new(|r: &Round| r.cpu_per_call),
    ));
    rows.push((
        "peak working set (MB)".into(),
        Box::new(|r: &Round| r.peak_rss as f64 / 1e6),
    ));
    rows.push((
        "threads after the 16-client run".into(),
        Box::new(|r: &Round| r.threads as f64),
    ));
    println!(
        "| {:<38} | {:>10} | {:>10} | {:>6} | {:<24} | {:<24} |",
        "case", "ours", "upstream", "ratio", "ours, rounds", "upstream, rounds"
    );
    println!(
        "|{:-<40}|{:->12}|{:->12}|{:->8}|{:-<26}|{:-<26}|",
        "", "", "", "", "", ""
    );
    for (label, pick) in rows {
        let o: Vec<f64> = ours.iter().map(&pick).collect();
        let u: Vec<f64> = upstream.iter().map(&pick).collect();
        let (mo, mu) = (median(o.clone()), median(u.clone()));
        let ratio = if mu > 0.0 {
            format!("{:.2}", mo / mu)
        } else {
            "-".into()
        };
        let all = |v: &[f64]| {
            v.iter()
                .map(|x| format!("{x:.1}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        println!(
            "| {label:<38} | {mo:>10.1} | {mu:>10.1} | {ratio:>6} | {:<24} | {:<24} |",
            all(&o),
            all(&u)
        );
    }
}
