//! Latency of every read-only Disk and Volume call with 16 loop disks
//! attached (each partitioned, formatted and mounted), on the Linux backend
//! directly (in-process library) and through gRPC (the real binary over its
//! Unix sockets), plus proof that no read-only call spawns a process:
//! the backend's spawn counter, in this process (direct) and in the server
//! (it logs its count on shutdown).
//!
//! Then the format case (`format.rs`): 16 disks formatted by 16 clients at
//! once against one after the other; the stuck neighbour (`stuck.rs`):
//! a format while another disk's reads hang, against the format alone;
//! and the cost of FormatVolume's zero check (`check.rs`).
//!
//! Run as root: `cargo bench -p csi-proxy --bench storage`
//! (CALLS=n calls per method, default 2000; DISKS=n, default 16;
//! ONLY=reads, ONLY=format, ONLY=stuck or ONLY=check for one part).

#[cfg(target_os = "linux")]
mod check;
#[cfg(target_os = "linux")]
mod format;
#[cfg(target_os = "linux")]
#[path = "../../tests/storage/mod.rs"]
mod storage;
#[cfg(target_os = "linux")]
mod stuck;

#[cfg(target_os = "linux")]
fn main() {
    linux::main();
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("the storage benchmark needs Linux loop devices");
}

#[cfg(target_os = "linux")]
mod linux {
    use crate::storage::{attach, sparse_file, Server};
    use csi_proxy_api::{disk::v1 as dk, volume::v2alpha1 as vl};
    use csi_proxy_client::Client;
    use csi_proxy_host::disk::{self, DiskApi};
    use csi_proxy_host::path::{Flavor, PathPolicy};
    use csi_proxy_host::storage::linux::{spawned_processes, FsType, LinuxStorage};
    use csi_proxy_host::storage::Storage;
    use csi_proxy_host::volume::{self, VolumeApi};
    use std::path::PathBuf;
    use std::process::Command;
    use std::time::{Duration, Instant};

    pub(crate) fn env(name: &str, default: usize) -> usize {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    }

    struct Disks {
        devs: Vec<String>,
        mounts: Vec<PathBuf>,
    }

    impl Drop for Disks {
        fn drop(&mut self) {
            for m in &self.mounts {
                let _ = nix::mount::umount2(m, nix::mount::MntFlags::MNT_DETACH);
            }
            for d in &self.devs {
                let _ = Command::new("losetup").args(["-d", d]).status();
            }
        }
    }

    /// p50 of the direct calls, by method: the baseline of the gRPC figures
    /// (the same operation without the transport, measured in this run).
    static DIRECT: std::sync::Mutex<Vec<(String, f64)>> = std::sync::Mutex::new(Vec::new());

    fn stats(name: &str, via: &str, mut lat: Vec<Duration>) {
        lat.sort();
        let p =
            |q: f64| lat[((lat.len() as f64 * q) as usize).min(lat.len() - 1)].as_secs_f64() * 1e6;
        let mut direct = DIRECT.lock().unwrap();
        if via == "direct" {
            direct.push((name.to_string(), p(0.50)));
            println!("{name:<36} {via:<7} {:>9.1} {:>9.1}", p(0.50), p(0.99));
        } else {
            let base = direct
                .iter()
                .find(|(n, _)| n == name)
                .map_or(f64::NAN, |d| d.1);
            println!(
                "{name:<36} {via:<7} {:>9.1} {:>9.1}   x{:.2} of direct p50",
                p(0.50),
                p(0.99),
                p(0.50) / base
            );
        }
    }

    fn time<F: FnMut(usize)>(calls: usize, mut f: F) -> Vec<Duration> {
        (0..calls)
            .map(|i| {
                let t = Instant::now();
                f(i);
                t.elapsed()
            })
            .collect()
    }

    pub fn main() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("storage bench: needs root (loop devices, mount); skipped");
            return;
        }
        let only = std::env::var("ONLY").unwrap_or_default();
        if only.is_empty() || only == "reads" {
            reads();
        }
        if only.is_empty() || only == "format" {
            let dir = tempfile::tempdir().unwrap();
            crate::format::run(dir.path());
        }
        if only.is_empty() || only == "stuck" {
            let dir = tempfile::tempdir().unwrap();
            crate::stuck::run(dir.path());
        }
        if only.is_empty() || only == "check" {
            let dir = tempfile::tempdir().unwrap();
            crate::check::run(dir.path());
        }
    }

    fn reads() {
        let calls = env("CALLS", 2000);
        let n_disks = env("DISKS", 16);
        let dir = tempfile::tempdir().unwrap();
        let kubelet = dir.path().join("kubelet");
        std::fs::create_dir(&kubelet).unwrap();
        let mut disks = Disks {
            devs: Vec::new(),
            mounts: Vec::new(),
        };
        let mut numbers = Vec::new();
        for i in 0..n_disks {
            let img = dir.path().join(format!("d{i}.img"));
            sparse_file(&img, 128 << 20);
            let (dev, number) = attach(&img, false);
            disks.devs.push(dev);
            numbers.push(number);
        }
        let policy = PathPolicy::new(Flavor::Unix, [kubelet.to_str().unwrap()]).unwrap();
        let st = Storage::new(policy, LinuxStorage::new(FsType::Ext4));
        let mut vols = Vec::new();
        let mut targets = Vec::new();
        for (i, &n) in numbers.iter().enumerate() {
            st.partition_disk(disk::PartitionDiskRequest { disk_number: n })
                .unwrap();
            let v = st
                .list_volumes_on_disk(volume::ListVolumesOnDiskRequest {
                    disk_number: n,
                    partition_number: 0,
                })
                .unwrap()
                .volume_ids
                .remove(0);
            st.format_volume(volume::FormatVolumeRequest {
                volume_id: v.clone(),
            })
            .unwrap();
            let t = kubelet.join(format!("mnt{i}"));
            st.mount_volume(volume::MountVolumeRequest {
                volume_id: v.clone(),
                target_path: t.display().to_string(),
            })
            .unwrap();
            disks.mounts.push(t.clone());
            std::fs::create_dir_all(t.join("pod/sub")).unwrap();
            vols.push(v);
            targets.push(t.display().to_string());
        }
        let k = numbers.len();
        println!(
            "{} loop disks attached, partitioned, formatted and mounted; {calls} calls per method",
            k
        );
        println!(
            "{:<36} {:<7} {:>9} {:>9}",
            "call", "via", "p50 (us)", "p99 (us)"
        );

        // Directly, in-process.
        let before = spawned_processes();
        stats(
            "ListDiskLocations",
            "direct",
            time(calls, |_| {
                st.list_disk_locations(disk::ListDiskLocationsRequest {})
                    .unwrap();
            }),
        );
        stats(
            "ListDiskIDs",
            "direct",
            time(calls, |_| {
                st.list_disk_ids(disk::ListDiskIdsRequest {}).unwrap();
            }),
        );
        stats(
            "GetDiskStats",
            "direct",
            time(calls, |i| {
                st.get_disk_stats(disk::GetDiskStatsRequest {
                    disk_number: numbers[i % k],
                })
                .unwrap();
            }),
        );
        stats(
            "GetDiskState",
            "direct",
            time(calls, |i| {
                st.get_disk_state(disk::GetDiskStateRequest {
                    disk_number: numbers[i % k],
                })
                .unwrap();
            }),
        );
        stats(
            "ListVolumesOnDisk",
            "direct",
            time(calls, |i| {
                st.list_volumes_on_disk(volume::ListVolumesOnDiskRequest {
                    disk_number: numbers[i % k],
                    partition_number: 0,
                })
                .unwrap();
            }),
        );
        stats(
            "IsVolumeFormatted",
            "direct",
            time(calls, |i| {
                st.is_volume_formatted(volume::IsVolumeFormattedRequest {
                    volume_id: vols[i % k].clone(),
                })
                .unwrap();
            }),
        );
        stats(
            "GetVolumeStats",
            "direct",
            time(calls, |i| {
                st.get_volume_stats(volume::GetVolumeStatsRequest {
                    volume_id: vols[i % k].clone(),
                })
                .unwrap();
            }),
        );
        stats(
            "GetDiskNumberFromVolumeID",
            "direct",
            time(calls, |i| {
                st.get_disk_number_from_volume_id(volume::GetDiskNumberFromVolumeIdRequest {
                    volume_id: vols[i % k].clone(),
                })
                .unwrap();
            }),
        );
        stats(
            "GetVolumeIDFromTargetPath",
            "direct",
            time(calls, |i| {
                st.get_volume_id_from_target_path(volume::GetVolumeIdFromTargetPathRequest {
                    target_path: targets[i % k].clone(),
                })
                .unwrap();
            }),
        );
        stats(
            "GetClosestVolumeIDFromTargetPath",
            "direct",
            time(calls, |i| {
                st.get_closest_volume_id_from_target_path(
                    volume::GetClosestVolumeIdFromTargetPathRequest {
                        target_path: format!("{}/pod/sub", targets[i % k]),
                    },
                )
                .unwrap();
            }),
        );
        let direct_spawns = spawned_processes() - before;

        // Through gRPC.
        let sock = dir.path().join("sock");
        let log = dir.path().join("server.log");
        let server = Server::start(
            env!("CARGO_BIN_EXE_csi-proxy"),
            &[
                format!("-kubelet-path={}", kubelet.display()),
                format!("-socket-dir={}", sock.display()),
                "-api-groups=disk-v1,volume-v2alpha1".to_string(),
            ],
            &log,
        );
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let c = Client::builder().socket_dir(&sock).build().unwrap();
            let mut d = c.connect_disk_v1().await.unwrap();
            let mut v = c.connect_volume_v2alpha1().await.unwrap();
            macro_rules! grpc {
                ($name:expr, |$i:ident| $call:expr) => {{
                    let mut lat = Vec::with_capacity(calls);
                    for $i in 0..calls {
                        let t = Instant::now();
                        $call.await.unwrap();
                        lat.push(t.elapsed());
                    }
                    stats($name, "gRPC", lat);
                }};
            }
            grpc!("ListDiskLocations", |_i| d
                .list_disk_locations(dk::ListDiskLocationsRequest {}));
            grpc!("ListDiskIDs", |_i| d
                .list_disk_i_ds(dk::ListDiskIDsRequest {}));
            grpc!("GetDiskStats", |i| d.get_disk_stats(
                dk::GetDiskStatsRequest {
                    disk_number: numbers[i % k]
                }
            ));
            grpc!("GetDiskState", |i| d.get_disk_state(
                dk::GetDiskStateRequest {
                    disk_number: numbers[i % k]
                }
            ));
            grpc!("ListVolumesOnDisk", |i| v.list_volumes_on_disk(
                vl::ListVolumesOnDiskRequest {
                    disk_number: numbers[i % k],
                    partition_number: 0
                }
            ));
            grpc!("IsVolumeFormatted", |i| v.is_volume_formatted(
                vl::IsVolumeFormattedRequest {
                    volume_id: vols[i % k].clone()
                }
            ));
            grpc!("GetVolumeStats", |i| v.get_volume_stats(
                vl::GetVolumeStatsRequest {
                    volume_id: vols[i % k].clone()
                }
            ));
            grpc!("GetDiskNumberFromVolumeID", |i| v
                .get_disk_number_from_volume_id(
                    vl::GetDiskNumberFromVolumeIdRequest {
                        volume_id: vols[i % k].clone()
                    }
                ));
            grpc!("GetVolumeIDFromTargetPath", |i| v
                .get_volume_id_from_target_path(
                    vl::GetVolumeIdFromTargetPathRequest {
                        target_path: targets[i % k].clone()
                    }
                ));
            grpc!("GetClosestVolumeIDFromTargetPath", |i| v
                .get_closest_volume_id_from_target_path(
                    vl::GetClosestVolumeIdFromTargetPathRequest {
                        target_path: format!("{}/pod/sub", targets[i % k])
                    }
                ));
        });
        // SAFETY: kill(2) on our own child with a valid signal.
        unsafe { libc::kill(server.0.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(20);
        let server_spawns = loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if let Some(line) = text.lines().find(|l| l.contains("child_processes=")) {
                let n: u64 = line
                    .split("child_processes=")
                    .nth(1)
                    .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
                    .and_then(|d| d.parse().ok())
                    .expect("count");
                break n;
            }
            assert!(
                Instant::now() < deadline,
                "server did not log its spawn count:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        println!("child processes spawned by the read-only calls: direct {direct_spawns}, server {server_spawns}");
        assert_eq!(
            direct_spawns, 0,
            "a read-only call spawned a process (direct)"
        );
        assert_eq!(
            server_spawns, 0,
            "a read-only call spawned a process (server)"
        );
    }
}
