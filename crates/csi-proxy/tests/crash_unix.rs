//! The proxy SIGKILLed inside a host-changing call, then restarted: the
//! retry completes and leaves the host as one uninterrupted call would
//! (Linux, root, loop devices, the real binary over its sockets).
//! PartitionDisk is killed while its table's writes are held back by the
//! block layer's throttle; MountVolume and RmdirContents are killed at
//! spread-out moments of the call, over many rounds. (A format killed
//! inside mkfs: `storage_concurrency_unix`.)
#![cfg(target_os = "linux")]

mod common;
mod storage;

use common::{partition_and_format, Proxy};
use csi_proxy_api::{disk::v1 as dk, filesystem::v2alpha1 as fs, volume::v2alpha1 as vl};
use std::path::Path;
use std::time::{Duration, Instant};
use storage::{can_run, can_throttle, is_mount_point, LoopDisk, Throttle, MIB};

/// How many times `target` is mounted (per /proc/self/mountinfo).
fn mounts_at(target: &Path) -> usize {
    let t = target.to_str().unwrap();
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter(|l| l.split(' ').nth(4).map(|m| m.replace("\\040", " ")) == Some(t.to_string()))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_killed_while_its_table_is_written_completes_on_retry() {
    if !can_run() || !can_throttle() {
        return;
    }
    let mut proxy = Proxy::start(&[]);
    let d = LoopDisk::new(proxy.root.path(), 64 * MIB);
    // About 35 KiB of table at 4 KiB/s: the fsync takes seconds.
    let throttle = Throttle::at(&d, 4096);
    let mut disks = proxy.client().connect_disk_v1().await.unwrap();
    let n = d.number;
    let call = tokio::spawn(async move {
        disks
            .partition_disk(dk::PartitionDiskRequest { disk_number: n })
            .await
            .map(drop)
    });
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        !call.is_finished(),
        "the throttled PartitionDisk finished already"
    );
    proxy.kill_and_restart(&[]);
    assert!(call.await.unwrap().is_err(), "killed inside the call");
    drop(throttle);
    let c = proxy.client();
    c.connect_disk_v1()
        .await
        .unwrap()
        .partition_disk(dk::PartitionDiskRequest { disk_number: n })
        .await
        .unwrap();
    let ids = c
        .connect_volume_v2alpha1()
        .await
        .unwrap()
        .list_volumes_on_disk(vl::ListVolumesOnDiskRequest {
            disk_number: n,
            partition_number: 0,
        })
        .await
        .unwrap()
        .into_inner()
        .volume_ids;
    assert_eq!(ids.len(), 1, "one data partition: {ids:?}");
    // And the table is whole: a second retry changes nothing.
    let before = std::fs::read(&d.file).unwrap();
    c.connect_disk_v1()
        .await
        .unwrap()
        .partition_disk(dk::PartitionDiskRequest { disk_number: n })
        .await
        .unwrap();
    assert!(
        std::fs::read(&d.file).unwrap() == before,
        "the retry's retry wrote"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mount_killed_at_any_moment_is_mounted_once_by_the_retry() {
    if !can_run() {
        return;
    }
    let mut proxy = Proxy::start(&[]);
    let d = LoopDisk::new(proxy.root.path(), 64 * MIB);
    let vol = partition_and_format(&proxy.client(), d.number).await;
    for round in 0..12u64 {
        let target = proxy.kubelet.join(format!("pods/p{round}/mnt"));
        let mut v = proxy.client().connect_volume_v2alpha1().await.unwrap();
        let req = vl::MountVolumeRequest {
            volume_id: vol.clone(),
            target_path: target.display().to_string(),
        };
        let call = tokio::spawn(async move { v.mount_volume(req).await.map(drop) });
        // Spread over the call: before it arrives, while it creates the
        // target, around the mount itself.
        tokio::time::sleep(Duration::from_micros(round * 700)).await;
        proxy.kill_and_restart(&[]);
        let _ = call.await.unwrap();
        let mut v = proxy.client().connect_volume_v2alpha1().await.unwrap();
        v.mount_volume(vl::MountVolumeRequest {
            volume_id: vol.clone(),
            target_path: target.display().to_string(),
        })
        .await
        .unwrap_or_else(|e| panic!("round {round}: the retry: {e:?}"));
        assert_eq!(mounts_at(&target), 1, "round {round}: mounted once");
        v.unmount_volume(vl::UnmountVolumeRequest {
            volume_id: vol.clone(),
            target_path: target.display().to_string(),
        })
        .await
        .unwrap_or_else(|e| panic!("round {round}: unmount: {e:?}"));
        assert!(!is_mount_point(&target), "round {round}: unmounted");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmdir_contents_killed_midway_is_completed_by_the_retry() {
    if !can_run() {
        return;
    }
    let mut proxy = Proxy::start(&[]);
    let canary = proxy.outside.join("canary");
    std::fs::write(&canary, b"keep").unwrap();
    for round in 0..4u64 {
        let top = proxy.kubelet.join(format!("pods/r{round}/vol"));
        // 4000 files in 40 directories: long enough to be cut in the middle.
        for i in 0..40 {
            let dir = top.join(format!("d{i}"));
            std::fs::create_dir_all(&dir).unwrap();
            for j in 0..100 {
                std::fs::write(dir.join(format!("f{j}")), b"x").unwrap();
            }
        }
        let mut f = proxy.client().connect_filesystem_v2alpha1().await.unwrap();
        let path = top.display().to_string();
        let req = fs::RmdirContentsRequest { path: path.clone() };
        let started = Instant::now();
        let call = tokio::spawn(async move { f.rmdir_contents(req).await.map(drop) });
        tokio::time::sleep(Duration::from_millis(5 + round * 15)).await;
        proxy.kill_and_restart(&[]);
        let first = call.await.unwrap();
        let left: usize = (0..40)
            .map(|i| std::fs::read_dir(top.join(format!("d{i}"))).map_or(0, |r| r.count()))
            .sum();
        let how = if first.is_ok() {
            "it had finished"
        } else {
            "cut short"
        };
        eprintln!(
            "round {round}: killed after {:?} ({how}; {left} of 4000 files left)",
            started.elapsed()
        );
        let mut f = proxy.client().connect_filesystem_v2alpha1().await.unwrap();
        f.rmdir_contents(fs::RmdirContentsRequest { path: path.clone() })
            .await
            .unwrap_or_else(|e| panic!("round {round}: the retry: {e:?}"));
        assert!(top.is_dir(), "round {round}: the directory itself stays");
        assert_eq!(
            std::fs::read_dir(&top).unwrap().count(),
            0,
            "round {round}: emptied"
        );
        assert_eq!(std::fs::read(&canary).unwrap(), b"keep");
    }
}
