//! The format case: FORMAT_DISKS (16) loop disks formatted by as many
//! clients at once, against the same formats one after the other, through
//! the real binary over its Unix socket. Reported as the ratio of the two
//! wall times (at once / one after the other: 1.0 means the formats queue
//! behind each other), with the disks' writes unthrottled and throttled to
//! THROTTLE_BPS per disk (a slow cloud disk; cgroup v1 blkio, skipped
//! where it is missing). With CSI_PROXY_BASE_BIN (another build, e.g. the
//! commit before a change) both servers run in alternating rounds on the
//! same disks, so before and after come from one run.
//!
//! `ONLY=format cargo bench -p csi-proxy --bench storage` (as root; ROUNDS=n,
//! default 3).

use crate::linux::env;
use csi_proxy_api::{disk::v1 as dk, volume::v2alpha1 as vl};
use csi_proxy_client::Client;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub type VolumeClient = vl::volume_client::VolumeClient<csi_proxy_client::ProxyChannel>;

const THROTTLE: &str = "/sys/fs/cgroup/blkio/blkio.throttle.write_bps_device";

struct Disks {
    devs: Vec<String>,
    keys: Vec<String>,
    throttled: bool,
}

impl Disks {
    fn throttle(&mut self, bps: u64) {
        for k in &self.keys {
            std::fs::write(THROTTLE, format!("{k} {bps}")).unwrap();
        }
        self.throttled = bps != 0;
    }
}

impl Drop for Disks {
    fn drop(&mut self) {
        if self.throttled {
            self.throttle(0);
        }
        for d in &self.devs {
            let _ = Command::new("losetup").args(["-d", d]).status();
        }
    }
}

struct Server {
    child: Child,
    log: PathBuf,
}

impl Server {
    fn start(bin: &str, dir: &Path, kubelet: &Path) -> (Server, PathBuf) {
        let sock = dir.join("sock");
        let _ = std::fs::remove_dir_all(&sock);
        let log = dir.join("format-server.log");
        let child = Command::new(bin)
            .arg(format!("-kubelet-path={}", kubelet.display()))
            .arg(format!("-socket-dir={}", sock.display()))
            .arg("-api-groups=disk-v1,volume-v2alpha1")
            .stderr(std::fs::File::create(&log).unwrap())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let s = Server { child, log };
        let deadline = Instant::now() + Duration::from_secs(20);
        while !s.text().contains("csi-proxy ready") {
            assert!(Instant::now() < deadline, "server not ready: {}", s.text());
            std::thread::sleep(Duration::from_millis(20));
        }
        (s, sock)
    }

    fn text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Stops the server; the tools it ran (logged on shutdown).
    fn stop(mut self) -> u64 {
        // SAFETY: kill(2) on our own child with a valid signal.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
        let text = self.text();
        text.lines()
            .find_map(|l| l.split("child_processes=").nth(1))
            .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|d| d.parse().ok())
            .unwrap_or_else(|| panic!("no child_processes count:\n{text}"))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn format(sock: &Path, volume_id: String) {
    let c = Client::builder().socket_dir(sock).build().unwrap();
    let mut v = c.connect_volume_v2alpha1().await.unwrap();
    v.format_volume(vl::FormatVolumeRequest { volume_id })
        .await
        .unwrap();
}

/// Wall times of the formats one after the other and all at once.
async fn round(sock: &Path, vols: &[String]) -> (Duration, Duration) {
    let t = Instant::now();
    for v in vols {
        format(sock, v.clone()).await;
    }
    let one_by_one = t.elapsed();
    let t = Instant::now();
    let mut all = tokio::task::JoinSet::new();
    for v in vols {
        let (sock, v) = (sock.to_path_buf(), v.clone());
        all.spawn(async move { format(&sock, v).await });
    }
    while let Some(r) = all.join_next().await {
        r.unwrap();
    }
    (one_by_one, t.elapsed())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

pub fn run(dir: &Path) {
    let n = env("FORMAT_DISKS", 16);
    let rounds = env("ROUNDS", 3);
    let bps = env("THROTTLE_BPS", 8 << 20) as u64;
    let head = std::env::var("CSI_PROXY_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_csi-proxy").to_string());
    let mut servers = vec![("head", head)];
    if let Ok(base) = std::env::var("CSI_PROXY_BASE_BIN") {
        servers.push(("base", base));
    }
    let kubelet = dir.join("format-kubelet");
    std::fs::create_dir_all(&kubelet).unwrap();
    let mut disks = Disks {
        devs: Vec::new(),
        keys: Vec::new(),
        throttled: false,
    };
    let mut numbers = Vec::new();
    for i in 0..n {
        let img = dir.join(format!("f{i}.img"));
        crate::storage::sparse_file(&img, 128 << 20);
        let (dev, _) = crate::storage::attach(&img, false);
        let name = dev.trim_start_matches("/dev/").to_string();
        disks.devs.push(dev);
        let sys = |f: &str| {
            std::fs::read_to_string(format!("/sys/block/{name}/{f}"))
                .unwrap()
                .trim()
                .to_string()
        };
        disks.keys.push(sys("dev"));
        numbers.push(sys("diskseq").parse::<u32>().unwrap());
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    // Partitioned once, by the first server.
    let vols: Vec<String> = {
        let (s, sock) = Server::start(&servers[0].1, dir, &kubelet);
        let vols = rt.block_on(async {
            let c = Client::builder().socket_dir(&sock).build().unwrap();
            let mut d = c.connect_disk_v1().await.unwrap();
            let mut v = c.connect_volume_v2alpha1().await.unwrap();
            let mut vols = Vec::new();
            for &disk_number in &numbers {
                d.partition_disk(dk::PartitionDiskRequest { disk_number })
                    .await
                    .unwrap();
                vols.push(
                    v.list_volumes_on_disk(vl::ListVolumesOnDiskRequest {
                        disk_number,
                        partition_number: 0,
                    })
                    .await
                    .unwrap()
                    .into_inner()
                    .volume_ids
                    .remove(0),
                );
            }
            vols
        });
        s.stop();
        vols
    };
    let mut cases = vec![0u64];
    if bps > 0 && Path::new(THROTTLE).exists() {
        cases.push(bps);
    } else {
        println!("format: no cgroup v1 blkio throttle here; unthrottled only");
    }
    println!(
        "format: {n} loop disks of 128 MiB, ext4; {rounds} alternating rounds; wall times in s"
    );
    println!(
        "{:<8} {:<22} {:>12} {:>10} {:>10}",
        "server", "writes per disk", "one by one", "at once", "ratio"
    );
    for &limit in &cases {
        disks.throttle(limit);
        let mut results: Vec<(Vec<f64>, Vec<f64>, Vec<f64>)> =
            vec![Default::default(); servers.len()];
        for _ in 0..rounds {
            for (i, (_, bin)) in servers.iter().enumerate() {
                let (s, sock) = Server::start(bin, dir, &kubelet);
                let (seq, conc) = rt.block_on(round(&sock, &vols));
                let tools = s.stop();
                assert_eq!(tools, 2 * n as u64, "one mkfs per format");
                results[i].0.push(seq.as_secs_f64());
                results[i].1.push(conc.as_secs_f64());
                results[i].2.push(conc.as_secs_f64() / seq.as_secs_f64());
            }
        }
        let shown = if limit == 0 {
            "unthrottled".to_string()
        } else {
            format!("{} MiB/s", limit >> 20)
        };
        for ((name, _), (seq, conc, ratio)) in servers.iter().zip(&results) {
            let all: Vec<String> = ratio.iter().map(|r| format!("{r:.2}")).collect();
            println!(
                "{name:<8} {shown:<22} {:>12.2} {:>10.2} {:>9.2}x   (rounds: {})",
                median(seq.clone()),
                median(conc.clone()),
                median(ratio.clone()),
                all.join(" ")
            );
        }
    }
}
