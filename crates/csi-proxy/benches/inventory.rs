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
    use csi_proxy_api::disk::{v1 as dk, v1alpha1 as dk1};
    use csi_proxy_api::filesystem::v1 as fsv;
    use csi_proxy_api::volume::v2alpha1 as vl;
    use csi_proxy_client::Client;
    use csi_proxy_host::disk::{self, DiskApi};
    use csi_proxy_host::path::{Flavor, PathPolicy};
    use csi_proxy_host::storage::linux::{
        device_opens, spawned_processes, sysfs_reads, FsType, LinuxStorage,
    };
    use csi_proxy_host::storage::Storage;
    use csi_proxy_host::volume::{self, VolumeApi};
    use csi_proxy_server::http2::client::{RawClient, Shape};
    use prost::Message;
    use std::collections::BTreeMap;
    use std::os::unix::net::UnixStream;
    use std::path::{Path, PathBuf};
    use std::process::{Child, Command, Stdio};
    use std::time::{Duration, Instant};

    fn env(name: &str, default: usize) -> usize {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    }

    /// Every call measured; PathExists is the baseline.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
    enum Call {
        PathExists,
        ListDiskLocations,
        ListDiskIDs,
        GetDiskNumberByName,
        GetDiskStats,
        GetDiskState,
        ListVolumesOnDisk,
        GetDiskNumberFromVolumeID,
        IsVolumeFormatted,
        GetVolumeStats,
        GetVolumeIDFromTargetPath,
        GetClosestVolumeIDFromTargetPath,
    }

    const ALL: [Call; 12] = [
        Call::PathExists,
        Call::ListDiskLocations,
        Call::ListDiskIDs,
        Call::GetDiskNumberByName,
        Call::GetDiskStats,
        Call::GetDiskState,
        Call::ListVolumesOnDisk,
        Call::GetDiskNumberFromVolumeID,
        Call::IsVolumeFormatted,
        Call::GetVolumeStats,
        Call::GetVolumeIDFromTargetPath,
        Call::GetClosestVolumeIDFromTargetPath,
    ];

    impl Call {
        fn name(self) -> String {
            format!("{self:?}")
        }
        /// The calls the targets are about: lists over every disk.
        fn is_list(self) -> bool {
            matches!(
                self,
                Call::ListDiskLocations
                    | Call::ListDiskIDs
                    | Call::GetDiskNumberByName
                    | Call::ListVolumesOnDisk
            )
        }
    }

    /// The disks of the run.
    struct Fixture {
        dir: tempfile::TempDir,
        kubelet: PathBuf,
        devs: Vec<String>,
        numbers: Vec<u32>,
        vols: Vec<String>,
        /// Mount points of the first 16 disks' volumes.
        targets: Vec<String>,
        mounts: Vec<PathBuf>,
        /// The loop devices that existed before the run.
        before: Vec<String>,
    }

    /// The loop devices in `/sys/block`.
    fn loop_devices() -> Vec<String> {
        std::fs::read_dir("/sys/block")
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| n.starts_with("loop"))
            .collect()
    }

    impl Drop for Fixture {
        fn drop(&mut self) {
            for m in &self.mounts {
                let _ = nix::mount::umount2(m, nix::mount::MntFlags::MNT_DETACH);
            }
            for d in &self.devs {
                let _ = Command::new("losetup").args(["-d", d]).status();
            }
            // Remove the loop devices this run created (`losetup -f` adds
            // one when none is free), so that later runs (and the "16 disks"
            // scale) do not find hundreds of detached ones. The kernel
            // refuses (EBUSY) any device that is attached or open, such as
            // one another program has just taken.
            const LOOP_CTL_REMOVE: libc::c_ulong = 0x4c81;
            let Ok(ctl) = std::fs::File::open("/dev/loop-control") else {
                return;
            };
            let mut removed = 0;
            for name in loop_devices() {
                let size = std::fs::read_to_string(format!("/sys/block/{name}/size"));
                let Ok(index) = name.trim_start_matches("loop").parse::<libc::c_ulong>() else {
                    continue;
                };
                if self.before.contains(&name) || size.map_or(true, |s| s.trim() != "0") {
                    continue;
                }
                // SAFETY: LOOP_CTL_REMOVE takes the device index by value.
                if unsafe {
                    libc::ioctl(
                        std::os::fd::AsRawFd::as_raw_fd(&ctl),
                        LOOP_CTL_REMOVE,
                        index,
                    )
                } == 0
                {
                    removed += 1;
                }
            }
            println!("removed the {removed} loop devices this run created");
        }
    }

    impl Fixture {
        /// Attaches loop disks until there are `n`, each partitioned (the
        /// first 16 also formatted and mounted).
        fn grow_to(&mut self, n: usize, st: &Storage<LinuxStorage>) {
            while self.devs.len() < n {
                let i = self.devs.len();
                let img = self.dir.path().join(format!("d{i}.img"));
                std::fs::File::create(&img)
                    .unwrap()
                    .set_len(128 << 20)
                    .unwrap();
                let out = Command::new("losetup")
                    .args(["-f", "--show", "-P"])
                    .arg(&img)
                    .output()
                    .unwrap();
                assert!(
                    out.status.success(),
                    "{}",
                    String::from_utf8_lossy(&out.stderr)
                );
                let dev = String::from_utf8(out.stdout).unwrap().trim().to_string();
                let name = dev.trim_start_matches("/dev/").to_string();
                self.devs.push(dev);
                let number: u32 = std::fs::read_to_string(format!("/sys/block/{name}/diskseq"))
                    .unwrap()
                    .trim()
                    .parse()
                    .unwrap();
                self.numbers.push(number);
                st.partition_disk(disk::PartitionDiskRequest {
                    disk_number: number,
                })
                .unwrap();
                let v = st
                    .list_volumes_on_disk(volume::ListVolumesOnDiskRequest {
                        disk_number: number,
                        partition_number: 0,
                    })
                    .unwrap()
                    .volume_ids
                    .remove(0);
                if i < 16 {
                    st.format_volume(volume::FormatVolumeRequest {
                        volume_id: v.clone(),
                    })
                    .unwrap();
                    let t = self.kubelet.join(format!("mnt{i}"));
                    st.mount_volume(volume::MountVolumeRequest {
                        volume_id: v.clone(),
                        target_path: t.display().to_string(),
                    })
                    .unwrap();
                    self.mounts.push(t.clone());
                    std::fs::create_dir_all(t.join("pod/sub")).unwrap();
                    self.targets.push(t.display().to_string());
                }
                self.vols.push(v);
            }
        }

        /// Detaches every disk after the first `keep` (they stay in
        /// `/sys/block` as size-0 loop devices).
        fn detach_after(&mut self, keep: usize) {
            for d in self.devs.drain(keep..) {
                let st = Command::new("losetup").args(["-d", &d]).status().unwrap();
                assert!(st.success(), "losetup -d {d}");
            }
            self.numbers.truncate(keep);
            self.vols.truncate(keep);
        }
    }

    /// `/sys/block` entries, and how many of them have size 0.
    fn block_entries() -> (usize, usize) {
        let mut all = 0;
        let mut empty = 0;
        for e in std::fs::read_dir("/sys/block").unwrap().flatten() {
            all += 1;
            let size = std::fs::read_to_string(e.path().join("size")).unwrap_or_default();
            if size.trim() == "0" {
                empty += 1;
            }
        }
        (all, empty)
    }

    struct Server(Child);
    impl Drop for Server {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    fn pct(lat: &mut [Duration], q: f64) -> f64 {
        lat.sort();
        lat[((lat.len() as f64 * q) as usize).min(lat.len() - 1)].as_secs_f64() * 1e6
    }

    /// p50 and p99 in µs.
    type Figures = (f64, f64);

    /// One direct call.
    fn direct(st: &Storage<LinuxStorage>, fx: &Fixture, call: Call, i: usize) {
        let k = fx.numbers.len();
        let m = fx.targets.len();
        match call {
            Call::PathExists => {}
            Call::ListDiskLocations => {
                let r = st
                    .list_disk_locations(disk::ListDiskLocationsRequest {})
                    .unwrap();
                assert!(r.disk_locations.len() >= k);
            }
            Call::ListDiskIDs => {
                let r = st.list_disk_ids(disk::ListDiskIdsRequest {}).unwrap();
                assert!(r.disk_ids.len() >= k);
            }
            Call::GetDiskNumberByName => {
                let r = st.get_disk_number_by_name(disk::GetDiskNumberByNameRequest {
                    disk_name: "no-such-page83-id".into(),
                });
                assert!(r.is_err());
            }
            Call::GetDiskStats => {
                st.get_disk_stats(disk::GetDiskStatsRequest {
                    disk_number: fx.numbers[i % k],
                })
                .unwrap();
            }
            Call::GetDiskState => {
                st.get_disk_state(disk::GetDiskStateRequest {
                    disk_number: fx.numbers[i % k],
                })
                .unwrap();
            }
            Call::ListVolumesOnDisk => {
                let r = st
                    .list_volumes_on_disk(volume::ListVolumesOnDiskRequest {
                        disk_number: fx.numbers[i % k],
                        partition_number: 0,
                    })
                    .unwrap();
                assert_eq!(r.volume_ids, [fx.vols[i % k].clone()]);
            }
            Call::GetDiskNumberFromVolumeID => {
                let r = st
                    .get_disk_number_from_volume_id(volume::GetDiskNumberFromVolumeIdRequest {
                        volume_id: fx.vols[i % k].clone(),
                    })
                    .unwrap();
                assert_eq!(r.disk_number, fx.numbers[i % k]);
            }
            Call::IsVolumeFormatted => {
                st.is_volume_formatted(volume::IsVolumeFormattedRequest {
                    volume_id: fx.vols[i % m].clone(),
                })
                .unwrap();
            }
            Call::GetVolumeStats => {
                st.get_volume_stats(volume::GetVolumeStatsRequest {
                    volume_id: fx.vols[i % m].clone(),
                })
                .unwrap();
            }
            Call::GetVolumeIDFromTargetPath => {
                let r = st
                    .get_volume_id_from_target_path(volume::GetVolumeIdFromTargetPathRequest {
                        target_path: fx.targets[i % m].clone(),
                    })
                    .unwrap();
                assert_eq!(r.volume_id, fx.vols[i % m]);
            }
            Call::GetClosestVolumeIDFromTargetPath => {
                st.get_closest_volume_id_from_target_path(
                    volume::GetClosestVolumeIdFromTargetPathRequest {
                        target_path: format!("{}/pod/sub", fx.targets[i % m]),
                    },
                )
                .unwrap();
            }
        }
    }

    struct Clients {
        fs: csi_proxy_api::filesystem::v1::filesystem_client::FilesystemClient<
            csi_proxy_client::ProxyChannel,
        >,
        d: dk::disk_client::DiskClient<csi_proxy_client::ProxyChannel>,
        d1: dk1::disk_client::DiskClient<csi_proxy_client::ProxyChannel>,
        v: vl::volume_client::VolumeClient<csi_proxy_client::ProxyChannel>,
        root: String,
    }

    /// One call through gRPC.
    async fn grpc(c: &mut Clients, fx: &Fixture, call: Call, i: usize) {
        let k = fx.numbers.len();
        let m = fx.targets.len();
        match call {
            Call::PathExists => {
                let r =
                    c.fs.path_exists(fsv::PathExistsRequest {
                        path: c.root.clone(),
                    })
                    .await
                    .unwrap();
                assert!(r.into_inner().exists);
            }
            Call::ListDiskLocations => {
                let r =
                    c.d.list_disk_locations(dk::ListDiskLocationsRequest {})
                        .await
                        .unwrap();
                assert!(r.into_inner().disk_locations.len() >= k);
            }
            Call::ListDiskIDs => {
                let r = c.d.list_disk_i_ds(dk::ListDiskIDsRequest {}).await.unwrap();
                assert!(r.into_inner().disk_i_ds.len() >= k);
            }
            Call::GetDiskNumberByName => {
                let r =
                    c.d1.get_disk_number_by_name(dk1::GetDiskNumberByNameRequest {
                        disk_name: "no-such-page83-id".into(),
                    })
                    .await;
                assert_eq!(r.unwrap_err().code(), tonic::Code::NotFound);
            }
            Call::GetDiskStats => {
                c.d.get_disk_stats(dk::GetDiskStatsRequest {
                    disk_number: fx.numbers[i % k],
                })
                .await
                .unwrap();
            }
            Call::GetDiskState => {
                c.d.get_disk_state(dk::GetDiskStateRequest {
                    disk_number: fx.numbers[i % k],
                })
                .await
                .unwrap();
            }
            Call::ListVolumesOnDisk => {
                let r =
                    c.v.list_volumes_on_disk(vl::ListVolumesOnDiskRequest {
                        disk_number: fx.numbers[i % k],
                        partition_number: 0,
                    })
                    .await
                    .unwrap();
                assert_eq!(r.into_inner().volume_ids, [fx.vols[i % k].clone()]);
            }
            Call::GetDiskNumberFromVolumeID => {
                let r =
                    c.v.get_disk_number_from_volume_id(vl::GetDiskNumberFromVolumeIdRequest {
                        volume_id: fx.vols[i % k].clone(),
                    })
                    .await
                    .unwrap();
                assert_eq!(r.into_inner().disk_number, fx.numbers[i % k]);
            }
            Call::IsVolumeFormatted => {
                c.v.is_volume_formatted(vl::IsVolumeFormattedRequest {
                    volume_id: fx.vols[i % m].clone(),
                })
                .await
                .unwrap();
            }
            Call::GetVolumeStats => {
                c.v.get_volume_stats(vl::GetVolumeStatsRequest {
                    volume_id: fx.vols[i % m].clone(),
                })
                .await
                .unwrap();
            }
            Call::GetVolumeIDFromTargetPath => {
                let r =
                    c.v.get_volume_id_from_target_path(vl::GetVolumeIdFromTargetPathRequest {
                        target_path: fx.targets[i % m].clone(),
                    })
                    .await
                    .unwrap();
                assert_eq!(r.into_inner().volume_id, fx.vols[i % m]);
            }
            Call::GetClosestVolumeIDFromTargetPath => {
                c.v.get_closest_volume_id_from_target_path(
                    vl::GetClosestVolumeIdFromTargetPathRequest {
                        target_path: format!("{}/pod/sub", fx.targets[i % m]),
                    },
                )
                .await
                .unwrap();
            }
        }
    }

    /// One raw connection per endpoint.
    struct Raw {
        fs: RawClient<UnixStream>,
        d: RawClient<UnixStream>,
        d1: RawClient<UnixStream>,
        v: RawClient<UnixStream>,
        root: String,
    }

    impl Raw {
        fn connect(sock: &Path, root: &str) -> Raw {
            let c = |ep: &str| {
                let s = UnixStream::connect(sock.join(format!("csi-proxy-{ep}.sock"))).unwrap();
                RawClient::new(s, Shape::default()).unwrap()
            };
            Raw {
                fs: c("filesystem-v1"),
                d: c("disk-v1"),
                d1: c("disk-v1alpha1"),
                v: c("volume-v2alpha1"),
                root: root.to_string(),
            }
        }
    }

    /// One call through the raw client: the status is checked, the message
    /// is not decoded. Returns the answer's size.
    fn raw(r: &mut Raw, fx: &Fixture, call: Call, i: usize) -> usize {
        let k = fx.numbers.len();
        let m = fx.targets.len();
        let disk = fx.numbers[i % k];
        let vol = fx.vols[i % k].clone();
        let mounted = fx.vols[i % m].clone();
        let target = fx.targets[i % m].clone();
        let (conn, path, msg, want) = match call {
            Call::PathExists => {
                let path = r.root.clone();
                let m = fsv::PathExistsRequest { path }.encode_to_vec();
                (&mut r.fs, "/v1.Filesystem/PathExists", m, 0)
            }
            Call::ListDiskLocations => {
                let m = dk::ListDiskLocationsRequest {}.encode_to_vec();
                (&mut r.d, "/v1.Disk/ListDiskLocations", m, 0)
            }
            Call::ListDiskIDs => {
                let m = dk::ListDiskIDsRequest {}.encode_to_vec();
                (&mut r.d, "/v1.Disk/ListDiskIDs", m, 0)
            }
            Call::GetDiskNumberByName => {
                let disk_name = "no-such-page83-id".to_string();
                let m = dk1::GetDiskNumberByNameRequest { disk_name }.encode_to_vec();
                // NotFound.
                (&mut r.d1, "/v1alpha1.Disk/GetDiskNumberByName", m, 5)
            }
            Call::GetDiskStats => {
                let m = dk::GetDiskStatsRequest { disk_number: disk }.encode_to_vec();
                (&mut r.d, "/v1.Disk/GetDiskStats", m, 0)
            }
            Call::GetDiskState => {
                let m = dk::GetDiskStateRequest { disk_number: disk }.encode_to_vec();
                (&mut r.d, "/v1.Disk/GetDiskState", m, 0)
            }
            Call::ListVolumesOnDisk => {
                let m = vl::ListVolumesOnDiskRequest {
                    disk_number: disk,
                    partition_number: 0,
                }
                .encode_to_vec();
                (&mut r.v, "/v2alpha1.Volume/ListVolumesOnDisk", m, 0)
            }
            Call::GetDiskNumberFromVolumeID => {
                let m = vl::GetDiskNumberFromVolumeIdRequest { volume_id: vol }.encode_to_vec();
                (&mut r.v, "/v2alpha1.Volume/GetDiskNumberFromVolumeID", m, 0)
            }
            Call::IsVolumeFormatted => {
                let m = vl::IsVolumeFormattedRequest { volume_id: mounted }.encode_to_vec();
                (&mut r.v, "/v2alpha1.Volume/IsVolumeFormatted", m, 0)
            }
            Call::GetVolumeStats => {
                let m = vl::GetVolumeStatsRequest { volume_id: mounted }.encode_to_vec();
                (&mut r.v, "/v2alpha1.Volume/GetVolumeStats", m, 0)
            }
            Call::GetVolumeIDFromTargetPath => {
                let m = vl::GetVolumeIdFromTargetPathRequest {
                    target_path: target,
                }
                .encode_to_vec();
                (&mut r.v, "/v2alpha1.Volume/GetVolumeIDFromTargetPath", m, 0)
            }
            Call::GetClosestVolumeIDFromTargetPath => {
                let m = vl::GetClosestVolumeIdFromTargetPathRequest {
                    target_path: format!("{target}/pod/sub"),
                }
                .encode_to_vec();
                let p = "/v2alpha1.Volume/GetClosestVolumeIDFromTargetPath";
                (&mut r.v, p, m, 0)
            }
        };
        let resp = conn.call(path, None, &msg).unwrap();
        assert_eq!(resp.grpc_status, Some(want), "{call:?}: {resp:?}");
        resp.message.map_or(0, |b| b.len())
    }

    /// Per call: what the backend read in-process, per call.
    #[derive(Clone, Copy, Default)]
    struct Reads {
        sysfs: f64,
        opens: f64,
        spawns: u64,
    }

    /// The system calls the server made per call: (total, by name).
    type Syscalls = (f64, BTreeMap<String, f64>);

    /// Attaches `strace -c -f` to the server, runs `calls` calls, detaches.
    fn strace(
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

    struct Scale {
        label: String,
        raw: BTreeMap<Call, Figures>,
        grpc: BTreeMap<Call, Figures>,
        reads: BTreeMap<Call, Reads>,
        syscalls: BTreeMap<Call, Syscalls>,
        full_scan: Figures,
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
        let server = Server(
            Command::new(env!("CARGO_BIN_EXE_csi-proxy"))
                .arg(format!("-kubelet-path={}", kubelet.display()))
                .arg(format!("-socket-dir={}", sock.display()))
                .arg("-api-groups=disk-v1,disk-v1alpha1,volume-v2alpha1,filesystem-v1")
                .stderr(std::fs::File::create(&log).unwrap())
                .stdout(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let deadline = Instant::now() + Duration::from_secs(20);
        while !std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("csi-proxy ready")
        {
            assert!(Instant::now() < deadline, "server not ready");
            std::thread::sleep(Duration::from_millis(20));
        }
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

    fn report(results: &[Scale]) {
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
                    let mut v: Vec<(&String, &f64)> =
                        by.iter().filter(|(_, n)| **n >= 0.05).collect();
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
}
