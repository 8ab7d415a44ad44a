//! The disk and volume inventory against the real kernel: the real binary
//! over its Unix sockets (and, for the overflow, the real backend
//! in-process), real loop devices, the kernel's own uevents. Needs root (CI
//! runs as root); other programs may attach loop devices meanwhile, which
//! the comparisons allow for (`lists/mod.rs`).
//!
//! "A fresh full scan" is a backend that follows no events, so that every
//! call of it scans every disk (`LinuxStorage::without_events`).
#![cfg(target_os = "linux")]

mod common;
mod lists;
mod storage;

use common::{assert_code, Proxy};
use csi_proxy_api::{disk::v1 as dk, volume::v2alpha1 as vl};
use csi_proxy_host::disk::{self as hd, DiskApi};
use csi_proxy_host::path::{Flavor, PathPolicy};
use csi_proxy_host::storage::inventory;
use csi_proxy_host::storage::linux::{FsType, LinuxStorage};
use csi_proxy_host::storage::parse::gpt;
use csi_proxy_host::storage::{Storage, VolumeId};
use csi_proxy_host::volume::{self as hv, VolumeApi};
use lists::{
    covered_agrees, reference, whole_host_agrees, Covered, DiskClient, Poller, VolumeClient,
};
use std::collections::BTreeMap;
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};
use storage::{can_run, LoopDisk, MIB};
use tonic::Code;

async fn ids(d: &mut DiskClient) -> BTreeMap<u32, dk::DiskIDs> {
    d.list_disk_i_ds(dk::ListDiskIDsRequest {})
        .await
        .unwrap()
        .into_inner()
        .disk_i_ds
        .into_iter()
        .collect()
}

async fn size(d: &mut DiskClient, n: u32) -> Result<u64, tonic::Status> {
    d.get_disk_stats(dk::GetDiskStatsRequest { disk_number: n })
        .await
        .map(|r| r.into_inner().total_bytes as u64)
}

async fn volumes(v: &mut VolumeClient, n: u32) -> Result<Vec<String>, tonic::Status> {
    v.list_volumes_on_disk(vl::ListVolumesOnDiskRequest {
        disk_number: n,
        partition_number: 0,
    })
    .await
    .map(|r| r.into_inner().volume_ids)
}

async fn disk_of(v: &mut VolumeClient, id: &str) -> Result<u32, tonic::Status> {
    v.get_disk_number_from_volume_id(vl::GetDiskNumberFromVolumeIdRequest {
        volume_id: id.to_string(),
    })
    .await
    .map(|r| r.into_inner().disk_number)
}

/// Attach, resize, partition (through the proxy and behind its back),
/// detach and re-attach, each change followed at once by the calls that
/// must see it, while another client polls the lists and compares them
/// with fresh full scans.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_change_is_in_the_next_answer_while_a_client_polls() {
    if !can_run() {
        return;
    }
    let proxy = Proxy::start(&[]);
    let c = proxy.client();
    let mut d = c.connect_disk_v1().await.unwrap();
    let mut v = c.connect_volume_v2alpha1().await.unwrap();
    let outside = reference(&proxy.kubelet);
    let covered = Covered::new(&outside);
    let poller = Poller::start(&proxy, covered.clone());
    let pause = || std::thread::sleep(Duration::from_millis(150));

    // Attach: every disk is in the very next answer.
    let mut disks = Vec::new();
    for _ in 0..6 {
        let disk = LoopDisk::new(proxy.root.path(), 64 * MIB);
        covered.add(disk.number);
        let n = disk.number;
        assert!(
            ids(&mut d).await.contains_key(&n),
            "attached disk {n} missed"
        );
        let locs = d
            .list_disk_locations(dk::ListDiskLocationsRequest {})
            .await
            .unwrap()
            .into_inner()
            .disk_locations;
        assert_eq!(locs[&n].lunid, disk.name.trim_start_matches("loop"));
        assert_eq!(size(&mut d, n).await.unwrap(), 64 * MIB);
        disks.push(disk);
        pause();
    }

    // Resize (same diskseq): the next answer has the new size.
    disks[0].grow_file(128 * MIB);
    disks[0].set_capacity();
    assert_eq!(size(&mut d, disks[0].number).await.unwrap(), 128 * MIB);
    assert!(ids(&mut d).await.contains_key(&disks[0].number));
    pause();

    // Partition through the proxy.
    let n1 = disks[1].number;
    d.partition_disk(dk::PartitionDiskRequest { disk_number: n1 })
        .await
        .unwrap();
    let v1 = volumes(&mut v, n1).await.unwrap();
    assert_eq!(v1.len(), 1, "{v1:?}");
    assert_eq!(disk_of(&mut v, &v1[0]).await.unwrap(), n1);
    pause();

    // Partition behind the proxy's back (another process, BLKPG): the
    // kernel announces the partition, the next answer has the volume.
    let n2 = disks[2].number;
    outside
        .partition_disk(hd::PartitionDiskRequest { disk_number: n2 })
        .unwrap();
    let want = outside
        .list_volumes_on_disk(hv::ListVolumesOnDiskRequest {
            disk_number: n2,
            partition_number: 0,
        })
        .unwrap()
        .volume_ids;
    assert_eq!(want.len(), 1);
    assert_eq!(volumes(&mut v, n2).await.unwrap(), want);
    assert_eq!(disk_of(&mut v, &want[0]).await.unwrap(), n2);
    pause();

    // Detach: gone from the next answer, and so is its volume.
    disks[1].detach();
    disks[1].wait_detached();
    assert!(!ids(&mut d).await.contains_key(&n1));
    assert_code(size(&mut d, n1).await, &[Code::NotFound], "detached disk");
    assert_code(volumes(&mut v, n1).await, &[Code::NotFound], "its volumes");
    assert_code(
        disk_of(&mut v, &v1[0]).await,
        &[Code::NotFound],
        "its volume",
    );
    pause();

    // Re-attach the same file: a new diskseq, the old number stays gone,
    // and once its partitions are registered the volume is on the new one.
    let same_device = disks[1].reattach();
    let n1b = disks[1].number;
    covered.add(n1b);
    assert_ne!(n1b, n1);
    let listed = ids(&mut d).await;
    assert!(listed.contains_key(&n1b) && !listed.contains_key(&n1));
    let kernel_view = outside
        .list_volumes_on_disk(hv::ListVolumesOnDiskRequest {
            disk_number: n1b,
            partition_number: 0,
        })
        .unwrap()
        .volume_ids;
    assert_eq!(volumes(&mut v, n1b).await.unwrap(), kernel_view);
    d.partition_disk(dk::PartitionDiskRequest { disk_number: n1b })
        .await
        .unwrap();
    assert_eq!(volumes(&mut v, n1b).await.unwrap(), v1);
    assert_eq!(disk_of(&mut v, &v1[0]).await.unwrap(), n1b);
    pause();

    // Detach two at once and attach another: all in the next answer.
    disks[3].detach();
    disks[4].detach();
    disks[3].wait_detached();
    disks[4].wait_detached();
    let extra = LoopDisk::new(proxy.root.path(), 32 * MIB);
    covered.add(extra.number);
    let listed = ids(&mut d).await;
    assert!(!listed.contains_key(&disks[3].number));
    assert!(!listed.contains_key(&disks[4].number));
    assert!(listed.contains_key(&extra.number));
    pause();

    let (checked, skipped) = poller.finish();
    eprintln!(
        "poller: {checked} answers compared with a fresh scan, {skipped} taken while disks changed (same device on re-attach: {same_device})"
    );
    assert!(
        checked >= 3,
        "too few quiet samples: {checked} ({skipped} skipped)"
    );
    // Still consistent now that everything settled, and so is the rest of
    // the host.
    covered_agrees(&mut d, &mut v, &outside, &covered).await;
    whole_host_agrees(&mut d, &mut v, &outside).await;
}

/// A receive queue too small for the events (as after a burst while no
/// call drained it): the events are lost, the kernel says so (ENOBUFS),
/// and the next call scans every disk and answers like a fresh scan.
#[test]
fn a_lost_event_stream_recovers_by_scanning_everything() {
    if !can_run() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let policy = PathPolicy::new(Flavor::Unix, [dir.path().to_str().unwrap()]).unwrap();
    // The smallest buffer the kernel allows: room for about one event.
    let st = Storage::new(policy, LinuxStorage::new(FsType::Ext4).with_event_buffer(1));
    assert!(st.backend().follows_events());
    let outside = reference(dir.path());
    st.list_disk_ids(hd::ListDiskIdsRequest {}).unwrap();
    let before = inventory::counters();
    let disks: Vec<LoopDisk> = (0..6)
        .map(|_| LoopDisk::new(dir.path(), 16 * MIB))
        .collect();
    for attempt in 0.. {
        let want = outside.list_disk_ids(hd::ListDiskIdsRequest {}).unwrap();
        let got = st.list_disk_ids(hd::ListDiskIdsRequest {}).unwrap();
        let again = outside.list_disk_ids(hd::ListDiskIdsRequest {}).unwrap();
        for disk in &disks {
            assert!(
                got.disk_ids.contains_key(&disk.number),
                "disk {} missed",
                disk.number
            );
        }
        if want == again {
            assert_eq!(got, want);
            break;
        }
        assert!(attempt < 20, "the host never settled");
    }
    let after = inventory::counters();
    assert!(
        after.lost > before.lost,
        "no loss seen: {before:?} -> {after:?}"
    );
    assert!(after.full_scans > before.full_scans);
}

/// Writes a new GPT (one partition, new GUIDs, same geometry) onto a disk
/// through its device node, without telling the kernel: no event.
fn rewrite_table(disk: &LoopDisk, size: u64) -> String {
    let mut b = [0u8; 16];
    let mut p = [0u8; 16];
    // SAFETY: getrandom writes 16 bytes into each live buffer.
    unsafe {
        libc::getrandom(b.as_mut_ptr().cast(), 16, 0);
        libc::getrandom(p.as_mut_ptr().cast(), 16, 0);
    }
    let part = gpt::Guid::from_random_bytes(p);
    let writes = gpt::create_single_partition(
        512,
        size / 512,
        gpt::Guid::from_random_bytes(b),
        part,
        gpt::Guid::BASIC_DATA,
        "rewritten",
    )
    .unwrap();
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&disk.dev)
        .unwrap();
    for w in &writes {
        f.write_all_at(&w.bytes, w.offset).unwrap();
    }
    f.sync_all().unwrap();
    VolumeId::from_guid(part).as_str().to_string()
}

/// A partition table rewritten in place announces nothing: a changing
/// operation on the old id re-reads the table and refuses it, and an id
/// nobody announced is found by the fallback scan.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_rewritten_behind_the_kernels_back_is_found_by_rescanning() {
    if !can_run() {
        return;
    }
    let proxy = Proxy::start(&[]);
    let c = proxy.client();
    let mut d = c.connect_disk_v1().await.unwrap();
    let mut v = c.connect_volume_v2alpha1().await.unwrap();
    let disk = LoopDisk::new(proxy.root.path(), 64 * MIB);
    let n = disk.number;
    d.partition_disk(dk::PartitionDiskRequest { disk_number: n })
        .await
        .unwrap();
    let old = volumes(&mut v, n).await.unwrap().remove(0);

    let new = rewrite_table(&disk, 64 * MIB);
    // Format the old id: the proxy re-reads the table, finds it gone.
    assert_code(
        v.format_volume(vl::FormatVolumeRequest {
            volume_id: old.clone(),
        })
        .await,
        &[Code::NotFound],
        "format of a volume id the table no longer has",
    );
    let same = |a: &str, b: &str| a.eq_ignore_ascii_case(b);
    let listed = volumes(&mut v, n).await.unwrap();
    assert!(
        listed.len() == 1 && same(&listed[0], &new),
        "{listed:?} vs {new}"
    );
    let formatted = v
        .is_volume_formatted(vl::IsVolumeFormattedRequest { volume_id: new })
        .await
        .unwrap()
        .into_inner()
        .formatted;
    assert!(!formatted, "nothing was formatted");

    // Again, and this time only look the new id up: unknown, so the proxy
    // scans everything (once a full scan is due) and finds it.
    let newer = rewrite_table(&disk, 64 * MIB);
    std::thread::sleep(inventory::FALLBACK_INTERVAL + Duration::from_millis(100));
    let start = Instant::now();
    assert_eq!(disk_of(&mut v, &newer).await.unwrap(), n);
    eprintln!("fallback scan answered in {:?}", start.elapsed());
    let listed = volumes(&mut v, n).await.unwrap();
    assert!(listed.len() == 1 && same(&listed[0], &newer), "{listed:?}");
}

/// A cloned disk carries the same partition GUID: the inventory keeps both
/// places, and every call on that id is refused naming both disks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_volume_id_on_two_disks_is_refused_naming_both() {
    if !can_run() {
        return;
    }
    let proxy = Proxy::start(&[]);
    let c = proxy.client();
    let mut d = c.connect_disk_v1().await.unwrap();
    let mut v = c.connect_volume_v2alpha1().await.unwrap();
    let a = LoopDisk::new(proxy.root.path(), 64 * MIB);
    d.partition_disk(dk::PartitionDiskRequest {
        disk_number: a.number,
    })
    .await
    .unwrap();
    let id = volumes(&mut v, a.number).await.unwrap().remove(0);
    let copy = proxy.root.path().join("clone.img");
    std::fs::copy(&a.file, &copy).unwrap();
    let mut b = LoopDisk::from_file(copy);
    // Registers the clone's partition with the kernel (no parser here).
    d.partition_disk(dk::PartitionDiskRequest {
        disk_number: b.number,
    })
    .await
    .unwrap();
    assert_eq!(
        volumes(&mut v, b.number).await.unwrap(),
        std::slice::from_ref(&id)
    );
    let refused = |r: Result<u32, tonic::Status>| {
        let e = r.expect_err("an ambiguous id must be refused");
        assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
        for n in [a.number, b.number] {
            assert!(
                e.message().contains(&format!("disk {n} ")),
                "{n} not named: {}",
                e.message()
            );
        }
    };
    refused(disk_of(&mut v, &id).await);
    let e = v
        .format_volume(vl::FormatVolumeRequest {
            volume_id: id.clone(),
        })
        .await
        .expect_err("format of an ambiguous id");
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    // One of them goes: the id is unique again.
    b.detach();
    b.wait_detached();
    assert_eq!(disk_of(&mut v, &id).await.unwrap(), a.number);
}

/// Partition, format and mount on six disks at once, one client per disk,
/// while another client polls the lists: every answer taken while nothing
/// changed matches a fresh scan, and so does the end state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_to_many_disks_at_once_keep_the_inventory_true() {
    if !can_run() {
        return;
    }
    let proxy = Proxy::start(&[]);
    let disks: Vec<LoopDisk> = (0..6)
        .map(|_| LoopDisk::new(proxy.root.path(), 64 * MIB))
        .collect();
    let outside = reference(&proxy.kubelet);
    let covered = Covered::new(&outside);
    for disk in &disks {
        covered.add(disk.number);
    }
    let poller = Poller::start(&proxy, covered.clone());
    let mut all = tokio::task::JoinSet::new();
    for (i, disk) in disks.iter().enumerate() {
        let c = proxy.client();
        let (n, target) = (
            disk.number,
            proxy
                .kubelet
                .join(format!("pods/p{i}/mnt"))
                .display()
                .to_string(),
        );
        all.spawn(async move {
            let mut d = c.connect_disk_v1().await.unwrap();
            let mut v = c.connect_volume_v2alpha1().await.unwrap();
            d.partition_disk(dk::PartitionDiskRequest { disk_number: n })
                .await
                .unwrap();
            let vols = volumes(&mut v, n).await.unwrap();
            assert_eq!(vols.len(), 1, "disk {n}: {vols:?}");
            v.format_volume(vl::FormatVolumeRequest {
                volume_id: vols[0].clone(),
            })
            .await
            .unwrap();
            v.mount_volume(vl::MountVolumeRequest {
                volume_id: vols[0].clone(),
                target_path: target.clone(),
            })
            .await
            .unwrap();
            assert_eq!(disk_of(&mut v, &vols[0]).await.unwrap(), n);
            let at = v
                .get_volume_id_from_target_path(vl::GetVolumeIdFromTargetPathRequest {
                    target_path: target,
                })
                .await
                .unwrap()
                .into_inner()
                .volume_id;
            assert_eq!(at, vols[0]);
        });
    }
    while let Some(r) = all.join_next().await {
        r.unwrap();
    }
    // The changes take well under a second: the poller may find no moment
    // when nothing changed; whatever it compared matched.
    let (checked, skipped) = poller.finish();
    eprintln!("poller: {checked} answers compared, {skipped} taken while the host changed");
    let c = proxy.client();
    let mut d = c.connect_disk_v1().await.unwrap();
    let mut v = c.connect_volume_v2alpha1().await.unwrap();
    let got = covered_agrees(&mut d, &mut v, &outside, &covered).await;
    for disk in &disks {
        let n = disk.number;
        assert_eq!(got.volumes[&n].as_ref().map(Vec::len), Ok(1), "disk {n}");
    }
    whole_host_agrees(&mut d, &mut v, &outside).await;
}
