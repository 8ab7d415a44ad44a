//! Counting (reads per call, `strace -c -f`) and the tables.

use crate::calls::{grpc, Call, Clients, ALL};
use crate::fixture::Fixture;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub fn pct(lat: &mut [Duration], q: f64) -> f64 {
    lat.sort();
    lat[((lat.len() as f64 * q) as usize).min(lat.len() - 1)].as_secs_f64() * 1e6
}

/// p50 and p99 in µs.
pub type Figures = (f64, f64);

/// Per call: what the backend read in-process, per call.
#[derive(Clone, Copy, Default)]
pub struct Reads {
    pub sysfs: f64,
    pub opens: f64,
    pub spawns: u64,
}

/// The system calls the server made per call: (total, by name).
pub type Syscalls = (f64, BTreeMap<String, f64>);

/// Attaches `strace -c -f` to the server, runs `calls` calls, detaches.
pub fn strace(
    rt: &tokio::runtime::Runtime,
    pid: u32,
    out: &Path,
    calls: usize,
    (c, fx, call): (&mut Clients, &Fixture, Call),
) -> Option<Syscalls> {
    let mut tracer = Command::new("strace")
        .args(["-c", "-f", "-qq", "-o"])
        .arg(out)
        .args(["-p", &pid.to_string()])
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    // Wait until strace traces every thread of the server.
    let traced = |tracer: u32| {
        std::fs::read_dir(format!("/proc/{pid}/task"))
            .map(|tasks| {
                tasks.flatten().all(|t| {
                    std::fs::read_to_string(t.path().join("status"))
                        .unwrap_or_default()
                        .lines()
                        .any(|l| l.split_whitespace().eq(["TracerPid:", &tracer.to_string()]))
                })
            })
            .unwrap_or(false)
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while !traced(tracer.id()) {
        if Instant::now() > deadline {
            let _ = tracer.kill();
            let _ = tracer.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(50));
    rt.block_on(async {
        for i in 0..calls {
            grpc(c, fx, call, i).await;
        }
    });
    // SAFETY: kill(2) on our own child with a valid signal.
    unsafe { libc::kill(tracer.id() as i32, libc::SIGINT) };
    tracer.wait().ok()?;
    let text = std::fs::read_to_string(out).ok()?;
    let mut by = BTreeMap::new();
    let mut total = 0.0;
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 5 || f[0].starts_with('-') || f[0] == "%" {
            continue;
        }
        let name = *f.last().unwrap();
        let Ok(n) = f[3].parse::<f64>() else { continue };
        if name == "total" {
            total = n / calls as f64;
        } else {
            by.insert(name.to_string(), n / calls as f64);
        }
    }
    Some((total, by))
}

pub struct Scale {
    pub label: String,
    pub raw: BTreeMap<Call, Figures>,
    pub grpc: BTreeMap<Call, Figures>,
    pub reads: BTreeMap<Call, Reads>,
    pub syscalls: BTreeMap<Call, Syscalls>,
    pub full_scan: Figures,
}

pub fn report(results: &[Scale]) {
    let Some(first) = results.first() else { return };
    type Pick = fn(&Scale) -> &BTreeMap<Call, Figures>;
    let clients: [(&str, Pick); 2] = [("raw", |s| &s.raw), ("tonic", |s| &s.grpc)];
    for (client, fig) in clients {
        println!(
            "\n== Summary, {client} client: p50 / PathExists p50 of the same scale (and p50 / p50 at {})",
            first.label
        );
        print!("{:<34}", "call");
        for s in results {
            print!(" {:>14}", s.label);
        }
        println!();
        for call in ALL {
            print!("{:<34}", call.name());
            for s in results {
                let r = fig(s)[&call].0 / fig(s)[&Call::PathExists].0;
                let g = fig(s)[&call].0 / fig(first)[&call].0;
                print!(" {:>6.2} ({:>4.2})", r, g);
            }
            println!();
        }
    }
    println!("\nTargets for the list calls (ListDiskLocations, ListDiskIDs, GetDiskNumberByName, ListVolumesOnDisk):");
    let find = |label: &str| results.iter().find(|s| s.label == label);
    for (client, fig) in clients {
        if let (Some(s16), Some(s256)) = (find("16"), find("256")) {
            for call in ALL.into_iter().filter(|c| c.is_list()) {
                let ratio = fig(s256)[&call].0 / fig(s256)[&Call::PathExists].0;
                let growth = fig(s256)[&call].0 / fig(s16)[&call].0;
                let pe = fig(s256)[&Call::PathExists].0 / fig(s16)[&Call::PathExists].0;
                println!(
                    "  {client:<5} {:<26} 256 disks: {:.2}x PathExists (<= 2: {}); 16->256: {:.2}x (<= 1.5: {}), {:.2}x after PathExists's own {:.2}x",
                    call.name(),
                    ratio,
                    if ratio <= 2.0 { "met" } else { "NOT MET" },
                    growth,
                    if growth <= 1.5 { "met" } else { "NOT MET" },
                    growth / pe,
                    pe,
                );
            }
        }
        if let (Some(s16), Some(sd)) = (
            find("16"),
            results.iter().find(|s| s.label.starts_with("16+")),
        ) {
            for call in ALL.into_iter().filter(|c| c.is_list()) {
                println!(
                    "  {client:<5} {:<26} {}: {:.2}x of 16 disks alone (PathExists {:.2}x); sysfs reads per direct call {:.2} (16 alone: {:.2})",
                    call.name(),
                    sd.label,
                    fig(sd)[&call].0 / fig(s16)[&call].0,
                    fig(sd)[&Call::PathExists].0 / fig(s16)[&Call::PathExists].0,
                    sd.reads.get(&call).map_or(0.0, |r| r.sysfs),
                    s16.reads.get(&call).map_or(0.0, |r| r.sysfs),
                );
            }
        }
    }
    println!("\nServer system calls per call (strace -c -f), by scale:");
    for call in ALL {
        print!("{:<34}", call.name());
        for s in results {
            match s.syscalls.get(&call) {
                Some((t, _)) => print!(" {:>10.1}", t),
                None => print!(" {:>10}", "-"),
            }
        }
        println!();
    }
    for last in results {
        println!("\nBy system call at {} (per call):", last.label);
        for call in ALL {
            if let Some((_, by)) = last.syscalls.get(&call) {
                let mut v: Vec<(&String, &f64)> = by.iter().filter(|(_, n)| **n >= 0.05).collect();
                v.sort_by(|a, b| b.1.partial_cmp(a.1).unwrap());
                let list: Vec<String> = v.iter().map(|(k, n)| format!("{k} {n:.2}")).collect();
                println!("  {:<32} {}", call.name(), list.join(", "));
            }
        }
    }
    println!("\nOne full scan (in-process, no events) by scale:");
    for s in results {
        println!(
            "  {:<10} p50 {:>9.1} us  p99 {:>9.1} us",
            s.label, s.full_scan.0, s.full_scan.1
        );
    }
}
