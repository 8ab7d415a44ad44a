//! The stuck neighbour case: FormatVolume on one loop disk while another
//! loop disk's reads hang (its backing file is served by the FUSE helper
//! of the tests, `tests/storage/hangfs.py`, whose reads wait while a
//! marker exists) and a client asks for unknown volume ids (each makes
//! the inventory scan every disk, the hung one included). Reported as the
//! ratio of the median format time with the neighbour hung to the median
//! format time alone, measured in the same run.
//!
//! `ONLY=stuck cargo bench -p csi-proxy --bench storage` (as root, with
//! /dev/fuse and python3-fusepy; FORMATS=n per case, default 8).

use crate::linux::env;
use crate::storage::{attach, Server};
use csi_proxy_api::{disk::v1 as dk, volume::v2alpha1 as vl};
use csi_proxy_client::Client;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Cleanup {
    devs: Vec<String>,
    marker: std::path::PathBuf,
    mnt: std::path::PathBuf,
    fuse: Option<Child>,
    server: Option<Server>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.marker);
        drop(self.server.take());
        for d in &self.devs {
            let _ = Command::new("losetup").args(["-d", d]).status();
        }
        let _ = Command::new("fusermount").arg("-u").arg(&self.mnt).status();
        if let Some(mut f) = self.fuse.take() {
            let _ = f.kill();
            let _ = f.wait();
        }
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

pub fn run(dir: &Path) {
    let fusepy = Command::new("/usr/bin/python3")
        .args(["-c", "import fusepy"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !Path::new("/dev/fuse").exists() || !fusepy {
        println!("stuck neighbour: needs /dev/fuse and python3-fusepy; skipped");
        return;
    }
    let formats = env("FORMATS", 8);
    let bin = std::env::var("CSI_PROXY_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_csi-proxy").to_string());
    let back = dir.join("stuck-back.img");
    std::fs::File::create(&back)
        .unwrap()
        .set_len(64 << 20)
        .unwrap();
    let mnt = dir.join("stuck-fuse");
    std::fs::create_dir_all(&mnt).unwrap();
    let marker = dir.join("stuck-hang");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/storage/hangfs.py");
    let mut c = Cleanup {
        devs: Vec::new(),
        marker: marker.clone(),
        mnt: mnt.clone(),
        fuse: None,
        server: None,
    };
    c.fuse = Some(
        Command::new("/usr/bin/python3")
            .arg(script)
            .args([&back, &marker, &mnt])
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while !mnt.join("disk.img").exists() {
        assert!(Instant::now() < deadline, "the FUSE helper did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    let healthy_img = dir.join("stuck-healthy.img");
    std::fs::File::create(&healthy_img)
        .unwrap()
        .set_len(128 << 20)
        .unwrap();
    let (hdev, healthy) = attach(&healthy_img, false);
    c.devs.push(hdev);
    let (sdev, stuck) = attach(&mnt.join("disk.img"), true);
    c.devs.push(sdev.clone());

    let kubelet = dir.join("stuck-kubelet");
    std::fs::create_dir_all(&kubelet).unwrap();
    let sock = dir.join("stuck-sock");
    let log = dir.join("stuck-server.log");
    c.server = Some(Server::start(
        &bin,
        &[
            format!("-kubelet-path={}", kubelet.display()),
            format!("-socket-dir={}", sock.display()),
            format!("-state-dir={}", dir.join("stuck-state").display()),
            "-api-groups=disk-v1,volume-v2alpha1".to_string(),
        ],
        &log,
    ));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let cl = Client::builder().socket_dir(&sock).build().unwrap();
        let d = cl.connect_disk_v1().await.unwrap();
        let mut v = cl.connect_volume_v2alpha1().await.unwrap();
        let vol = |n: u32| {
            let mut d = d.clone();
            let mut v = v.clone();
            async move {
                d.partition_disk(dk::PartitionDiskRequest { disk_number: n })
                    .await
                    .unwrap();
                v.list_volumes_on_disk(vl::ListVolumesOnDiskRequest {
                    disk_number: n,
                    partition_number: 0,
                })
                .await
                .unwrap()
                .into_inner()
                .volume_ids
                .remove(0)
            }
        };
        let id = vol(healthy).await;
        vol(stuck).await;
        let time_formats = |v: &mut crate::format::VolumeClient| {
            let (mut v, id) = (v.clone(), id.clone());
            async move {
                let mut t = Vec::new();
                for _ in 0..formats {
                    let s = Instant::now();
                    v.format_volume(vl::FormatVolumeRequest {
                        volume_id: id.clone(),
                    })
                    .await
                    .unwrap();
                    t.push(s.elapsed().as_secs_f64());
                }
                t
            }
        };
        let alone = median(time_formats(&mut v).await);
        // Hang the neighbour (nothing of it cached), and keep asking for
        // unknown ids meanwhile.
        let _ = Command::new("blockdev")
            .args(["--flushbufs", &sdev])
            .status();
        std::fs::write(&marker, b"").unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let prober = {
            let (mut v, stop) = (v.clone(), stop.clone());
            tokio::spawn(async move {
                let (mut i, mut unavailable, mut slowest) = (0u32, 0u32, Duration::ZERO);
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    i += 1;
                    let t = Instant::now();
                    let r = v
                        .get_disk_number_from_volume_id(vl::GetDiskNumberFromVolumeIdRequest {
                            volume_id: format!(
                                "\\\\?\\Volume{{{i:08x}-dead-4bee-8f00-000000000000}}\\"
                            ),
                        })
                        .await;
                    slowest = slowest.max(t.elapsed());
                    if r.is_err_and(|s| s.code() == tonic::Code::Unavailable) {
                        unavailable += 1;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                (i, unavailable, slowest)
            })
        };
        // Timed once the hung disk is found out (an unknown id answers
        // Unavailable), then while the prober goes on scanning.
        let marked = Instant::now();
        loop {
            let r = v
                .get_disk_number_from_volume_id(vl::GetDiskNumberFromVolumeIdRequest {
                    volume_id: "\\\\?\\Volume{0badf00d-dead-4bee-8f00-000000000001}\\".into(),
                })
                .await;
            if r.is_err_and(|s| s.code() == tonic::Code::Unavailable) {
                break;
            }
            if marked.elapsed() > Duration::from_secs(20) {
                println!("stuck neighbour: the hung disk was never reported Unavailable");
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let hung = median(time_formats(&mut v).await);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let _ = std::fs::remove_file(&marker);
        let (probes, unavailable, slowest) = prober.await.unwrap();
        println!(
            "unknown-id probes while hung: {probes}, {unavailable} answered Unavailable, slowest {:.2} s",
            slowest.as_secs_f64()
        );
        println!("stuck neighbour: FormatVolume of one 128 MiB loop disk (ext4), median of {formats}, in s");
        println!(
            "{:<28} {:>10}\n{:<28} {:>10.3}\n{:<28} {:>10.3}\n{:<28} {:>9.2}x",
            "case", "s", "alone", alone, "neighbour hung", hung, "ratio (hung / alone)", hung / alone
        );
    });
}
