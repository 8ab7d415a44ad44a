//! The disk and volume inventory at node scale: every list and lookup call
//! of the Disk and Volume APIs with 16, 64 and 256 loop disks attached, and
//! with 16 disks beside 240 detached loop devices, through gRPC (the real
//! binary over its Unix sockets, one server for the whole run, following
//! the disks as they come and go) next to PathExists measured by the same
//! client in the same rounds. Two clients:
//!
//! * "raw": our minimal blocking HTTP/2 client (`http2::client`), which
//!   checks each answer's status and length but does not decode the
//!   protobuf message, so the figures are the server's and the transport's;
//! * "tonic": the tonic client of `csi-proxy-client`, which also decodes
//!   every answer into maps of strings (at 256 disks that alone is ~60 µs
//!   for ListDiskLocations), as a Go or Python client would.
//!
//! Per scale it also reports:
//!
//! * the same calls in-process ("direct"), with what each call read:
//!   sysfs files, block-device opens and child processes, from the
//!   backend's own counters (`storage::linux::{sysfs_reads, device_opens,
//!   spawned_processes}`);
//! * the system calls the server makes per call, counted by `strace -c -f`
//!   attached to the server while a separate, untimed batch of each call
//!   runs (set STRACE_CALLS=0 to skip);
//! * what one full scan costs (the in-process backend without events,
//!   where every call scans every disk).
//!
//! Run as root: `cargo bench -p csi-proxy --bench inventory`. Environment:
//! CALLS (per call and scale, default 2000), SCALES (default "16,64,256"),
//! DETACHED (default 240), STRACE_CALLS (default 200).
//!
//! `calls.rs` holds the calls (in-process, raw client, tonic client),
//! `fixture.rs` the loop disks, `report.rs` the counting (reads, `strace`)
//! and the tables.

#[cfg(target_os = "linux")]
mod calls;
#[cfg(target_os = "linux")]
mod fixture;
#[cfg(target_os = "linux")]
mod report;
#[cfg(target_os = "linux")]
#[path = "../../tests/storage/mod.rs"]
mod storage;

#[cfg(target_os = "linux")]
fn main() {
    linux::main();
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("the inventory benchmark needs Linux loop devices");
}

#[cfg(target_os = "linux")]
mod linux {
    use crate::calls::{direct, grpc, raw, Call, Clients, Raw, ALL};
    use crate::fixture::{block_entries, loop_devices, Fixture, Server};
    use crate::report::{pct, report, strace, Figures, Reads, Scale};
    use csi_proxy_api::disk::v1 as dk;
    use csi_proxy_client::Client;
    use csi_proxy_host::disk::{self, DiskApi};
    use csi_proxy_host::path::{Flavor, PathPolicy};
    use csi_proxy_host::storage::linux::{
        device_opens, spawned_processes, sysfs_reads, FsType, LinuxStorage,
    };
    use csi_proxy_host::storage::Storage;
    use prost::Message;
    use std::collections::BTreeMap;
    use std::time::{Duration, Instant};

    fn env(name: &str, default: usize) -> usize {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    }

    pub fn main() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("inventory bench: needs root (loop devices, mount); skipped");
            return;
        }
        let calls = env("CALLS", 2000);
        let detached = env("DETACHED", 240);
        let strace_calls = env("STRACE_CALLS", 200);
        let scales: Vec<usize> = std::env::var("SCALES")
            .unwrap_or_else(|_| "16,64,256".into())
            .split(',')
            .filter_map(|s| s.trim().parse().ok())
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let kubelet = dir.path().join("kubelet");
        std::fs::create_dir(&kubelet).unwrap();
        let policy = PathPolicy::new(Flavor::Unix, [kubelet.to_str().unwrap()]).unwrap();
        let st = Storage::new(policy.clone(), LinuxStorage::new(FsType::Ext4));
        assert!(st.backend().follows_events(), "no uevents here");
        let scan_every_call =
            Storage::new(policy, LinuxStorage::new(FsType::Ext4).without_events());
        let mut fx = Fixture {
            kubelet: kubelet.clone(),
            dir,
            devs: Vec::new(),
            numbers: Vec::new(),
            vols: Vec::new(),
            targets: Vec::new(),
            mounts: Vec::new(),
            before: loop_devices(),
        };

        let sock = fx.dir.path().join("sock");
        let log = fx.dir.path().join("server.log");
        let server = Server::start(
            env!("CARGO_BIN_EXE_csi-proxy"),
            &[
                format!("-kubelet-path={}", kubelet.display()),
                format!("-socket-dir={}", sock.display()),
                "-api-groups=disk-v1,disk-v1alpha1,volume-v2alpha1,filesystem-v1".to_string(),
            ],
            &log,
        );
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let mut c = rt.block_on(async {
            let c = Client::builder().socket_dir(&sock).build().unwrap();
            Clients {
                fs: c.connect_filesystem_v1().await.unwrap(),
                d: c.connect_disk_v1().await.unwrap(),
                d1: c.connect_disk_v1alpha1().await.unwrap(),
                v: c.connect_volume_v2alpha1().await.unwrap(),
                root: kubelet.display().to_string(),
            }
        });
        let mut raw_client = Raw::connect(&sock, &kubelet.display().to_string());

        let mut runs: Vec<(usize, bool)> = scales.iter().map(|&n| (n, false)).collect();
        if detached > 0 {
            runs.push((16, true));
        }
        let mut results = Vec::new();
        for (n, detach) in runs {
            if detach {
                let before = fx.devs.len();
                fx.grow_to(16 + detached, &st);
                fx.detach_after(16);
                println!(
                    "\ndetached {} loop disks (attached {} first)",
                    16 + detached - 16,
                    16 + detached - before
                );
            } else {
                fx.grow_to(n, &st);
            }
            let (entries, empty) = block_entries();
            let label = if detach {
                format!("16+{detached}det")
            } else {
                n.to_string()
            };
            println!(
                "\n== {label}: {} loop disks attached by this bench; /sys/block has {entries} entries, {empty} of size 0",
                fx.devs.len()
            );
            results.push(measure(
                &rt,
                &mut c,
                &mut raw_client,
                &st,
                &scan_every_call,
                &fx,
                &server,
                calls,
                strace_calls,
                label,
            ));
        }

        report(&results);

        // SAFETY: kill(2) on our own child with a valid signal.
        unsafe { libc::kill(server.0.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(20);
        let text = loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if text.contains("child_processes=") && text.contains("full_scans=") {
                break text;
            }
            assert!(
                Instant::now() < deadline,
                "server did not log its counters:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        let field = |key: &str| -> u64 {
            text.lines()
                .find_map(|l| l.split(&format!("{key}=")).nth(1))
                .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
                .and_then(|d| d.parse().ok())
                .unwrap_or_else(|| panic!("no {key} in the server log"))
        };
        println!(
            "\nserver totals over the whole run: child processes {}, inventory full scans {}, single-disk scans {}, event losses {}, calls answered {}",
            field("child_processes"),
            field("full_scans"),
            field("disk_scans"),
            field("events_lost"),
            field("calls")
        );
        assert_eq!(
            field("child_processes"),
            0,
            "a read-only call spawned a process"
        );
    }

    #[allow(clippy::too_many_arguments)]
    fn measure(
        rt: &tokio::runtime::Runtime,
        c: &mut Clients,
        r: &mut Raw,
        st: &Storage<LinuxStorage>,
        scan_every_call: &Storage<LinuxStorage>,
        fx: &Fixture,
        server: &Server,
        calls: usize,
        strace_calls: usize,
        label: String,
    ) -> Scale {
        // Warm up (the server applies the attach events of this scale).
        rt.block_on(async {
            for call in ALL {
                for i in 0..50 {
                    grpc(c, fx, call, i).await;
                }
            }
        });
        for call in ALL {
            for i in 0..50 {
                direct(st, fx, call, i);
                raw(r, fx, call, i);
            }
        }
        // Rounds: every call gets a slice of each round, so drift on this
        // shared machine affects them alike.
        const ROUNDS: usize = 10;
        let per = calls.div_ceil(ROUNDS);
        let mut grpc_lat: BTreeMap<Call, Vec<Duration>> = BTreeMap::new();
        let mut raw_lat: BTreeMap<Call, Vec<Duration>> = BTreeMap::new();
        let mut direct_lat: BTreeMap<Call, Vec<Duration>> = BTreeMap::new();
        let mut reads: BTreeMap<Call, Reads> = BTreeMap::new();
        for round in 0..ROUNDS {
            for call in ALL {
                let lat = raw_lat.entry(call).or_default();
                for j in 0..per {
                    let i = round * per + j;
                    let t = Instant::now();
                    raw(r, fx, call, i);
                    lat.push(t.elapsed());
                }
                let lat = grpc_lat.entry(call).or_default();
                rt.block_on(async {
                    for j in 0..per {
                        let i = round * per + j;
                        let t = Instant::now();
                        grpc(c, fx, call, i).await;
                        lat.push(t.elapsed());
                    }
                });
                if call == Call::PathExists {
                    continue;
                }
                let lat = direct_lat.entry(call).or_default();
                let (s0, o0, p0) = (sysfs_reads(), device_opens(), spawned_processes());
                for j in 0..per {
                    let i = round * per + j;
                    let t = Instant::now();
                    direct(st, fx, call, i);
                    lat.push(t.elapsed());
                }
                let r = reads.entry(call).or_default();
                r.sysfs += (sysfs_reads() - s0) as f64;
                r.opens += (device_opens() - o0) as f64;
                r.spawns += spawned_processes() - p0;
            }
        }
        for r in reads.values_mut() {
            r.sysfs /= (per * ROUNDS) as f64;
            r.opens /= (per * ROUNDS) as f64;
        }
        let raw_fig: BTreeMap<Call, Figures> = raw_lat
            .into_iter()
            .map(|(k, mut v)| (k, (pct(&mut v, 0.5), pct(&mut v, 0.99))))
            .collect();
        let grpc: BTreeMap<Call, Figures> = grpc_lat
            .into_iter()
            .map(|(k, mut v)| (k, (pct(&mut v, 0.5), pct(&mut v, 0.99))))
            .collect();
        let direct_fig: BTreeMap<Call, Figures> = direct_lat
            .into_iter()
            .map(|(k, mut v)| (k, (pct(&mut v, 0.5), pct(&mut v, 0.99))))
            .collect();
        // One full scan: ListDiskIDs without events scans every disk.
        let mut scans: Vec<Duration> = (0..20)
            .map(|_| {
                let t = Instant::now();
                scan_every_call
                    .list_disk_ids(disk::ListDiskIdsRequest {})
                    .unwrap();
                t.elapsed()
            })
            .collect();
        let full_scan = (pct(&mut scans, 0.5), pct(&mut scans, 0.99));
        // What a decoding client adds: the answers decoded in-process.
        let mut decode = |path: &str, f: fn(&[u8])| {
            let m = dk::ListDiskLocationsRequest {}.encode_to_vec();
            let bytes = r.d.call(path, None, &m).unwrap().message.unwrap();
            let mut lat: Vec<Duration> = (0..200)
                .map(|_| {
                    let t = Instant::now();
                    f(&bytes);
                    t.elapsed()
                })
                .collect();
            (bytes.len(), pct(&mut lat, 0.5))
        };
        let (len, locs) = decode("/v1.Disk/ListDiskLocations", |b| {
            std::hint::black_box(dk::ListDiskLocationsResponse::decode(b).unwrap());
        });
        let (len2, ids) = decode("/v1.Disk/ListDiskIDs", |b| {
            std::hint::black_box(dk::ListDiskIDsResponse::decode(b).unwrap());
        });
        println!(
            "decoding an answer (prost, in-process, p50): ListDiskLocations {len} bytes {locs:.1} us, ListDiskIDs {len2} bytes {ids:.1} us"
        );

        let mut syscalls = BTreeMap::new();
        if strace_calls > 0 {
            let out = fx.dir.path().join("strace.txt");
            for call in ALL {
                let got = strace(rt, server.0.id(), &out, strace_calls, (&mut *c, fx, call));
                match got {
                    Some(s) => {
                        syscalls.insert(call, s);
                    }
                    None => println!("{call:?}: strace did not attach; system calls not counted"),
                }
            }
        }

        let base = grpc[&Call::PathExists].0;
        let raw_base = raw_fig[&Call::PathExists].0;
        println!(
            "{:<34} {:>8} {:>8} {:>6}  {:>8} {:>8} {:>6}  {:>8} {:>8}  {:>7} {:>6} {:>5}  {:>8}",
            "call (p50/p99 in us)",
            "raw p50",
            "p99",
            "xPE",
            "tonic50",
            "p99",
            "xPE",
            "direct50",
            "p99",
            "sysfs/c",
            "open/c",
            "spawn",
            "sys/call"
        );
        for call in ALL {
            let (r50, r99) = raw_fig[&call];
            let (p50, p99) = grpc[&call];
            let (d50, d99) = direct_fig
                .get(&call)
                .copied()
                .unwrap_or((f64::NAN, f64::NAN));
            let r = reads.get(&call).copied().unwrap_or_default();
            let sc = syscalls.get(&call).map_or(f64::NAN, |s| s.0);
            println!(
                "{:<34} {:>8.1} {:>8.1} {:>6.2}  {:>8.1} {:>8.1} {:>6.2}  {:>8.1} {:>8.1}  {:>7.2} {:>6.2} {:>5}  {:>8.1}",
                call.name(),
                r50,
                r99,
                r50 / raw_base,
                p50,
                p99,
                p50 / base,
                d50,
                d99,
                r.sysfs,
                r.opens,
                r.spawns,
                sc
            );
        }
        println!(
            "one full scan (no events, in-process ListDiskIDs): p50 {:.1} us, p99 {:.1} us",
            full_scan.0, full_scan.1
        );
        for r in reads.values() {
            assert_eq!(r.spawns, 0, "a read-only call spawned a process");
        }
        Scale {
            label,
            raw: raw_fig,
            grpc,
            reads,
            syscalls,
            full_scan,
        }
    }
}
