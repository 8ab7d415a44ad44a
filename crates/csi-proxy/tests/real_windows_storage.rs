//! The real-Windows tier, disks: the Disk API's life cycle on VHDX disks
//! made with the Virtual Disk API, through the real binary over its pipes.
//! Each test runs under wine what wine can (the refusals that come before
//! any disk is touched, the answers of a host without `MSFT_*` classes),
//! then needs real Windows; what the proxy did is checked with the test's
//! own I/O controls (`real_windows::disks`), not with the proxy's code.
#![cfg(windows)]

mod pipes;
mod real_windows;

use csi_proxy_api::disk::v1 as dk;
use csi_proxy_client::Group;
use pipes::{assert_code, Proxy};
use real_windows::calls::{eventually, Calls};
use real_windows::disks::{self, Style, BASIC_DATA, MSR};
use real_windows::vhd::{self, Vhd, MIB};
use real_windows::{require, under_wine};
use tonic::Code;

async fn start(tag: &str) -> (Proxy, Calls) {
    let p = Proxy::start_unique(tag, "disk,volume", &[]);
    let c = Calls::new(
        p.channel(Group::Disk, "v1").await,
        p.channel(Group::Volume, "v2alpha1").await,
    );
    (p, c)
}

/// The system disk is never partitioned, under wine as on Windows; an
/// unknown disk is NotFound.
async fn refusals_before_any_disk_is_touched(c: &mut Calls) {
    let (_, system) = c.system_volume().await;
    assert_code(
        c.partition_disk(system).await,
        Code::FailedPrecondition,
        "PartitionDisk of the system disk",
    );
    assert_code(
        c.partition_disk(4000).await,
        Code::NotFound,
        "PartitionDisk 4000",
    );
}

#[test]
fn virtual_disk_api_attaches_and_detaches() {
    let status = vhd::api_status();
    if under_wine() {
        let why = status
            .clone()
            .expect_err("wine has no working Virtual Disk API");
        assert!(why.contains("stub"), "{why}");
    }
    let Some(_w) = require("the Virtual Disk API (CreateVirtualDisk, AttachVirtualDisk)") else {
        return;
    };
    status.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut v = Vhd::create(dir.path(), "attach", 64 * MIB).unwrap();
    let n = v.disk();
    let file = v.file().to_path_buf();
    assert!(file.is_file());
    assert_eq!(disks::layout(n).unwrap().style, Style::Raw);
    v.detach().unwrap();
    let gone = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while disks::open_disk(n, false).is_ok() {
        assert!(std::time::Instant::now() < gone, "disk {n} still there");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    v.attach().unwrap();
    drop(v);
    assert!(!file.exists(), "{file:?} left behind");
}

#[tokio::test]
async fn partition_a_raw_disk_as_gpt() {
    let (p, mut c) = start("rw-part-raw").await;
    refusals_before_any_disk_is_touched(&mut c).await;
    let Some(_w) = require("a raw VHDX disk to partition") else {
        return;
    };
    let v = Vhd::create(&p.root, "raw", 256 * MIB).unwrap();
    let n = v.disk();
    assert_eq!(disks::layout(n).unwrap().style, Style::Raw);
    let vol = c.partitioned_volume(n).await;
    let l = disks::layout(n).unwrap();
    assert_eq!(l.style, Style::Gpt, "{l:?}");
    let data: Vec<_> = l
        .partitions
        .iter()
        .filter(|p| p.gpt_type == Some(BASIC_DATA))
        .collect();
    assert_eq!(data.len(), 1, "{l:?}");
    assert!(
        l.partitions
            .iter()
            .all(|p| p.gpt_type == Some(BASIC_DATA) || p.gpt_type == Some(MSR)),
        "only the data partition and an MSR: {l:?}"
    );
    assert!(data[0].length >= 200 * MIB, "{l:?}");
    assert!(data[0].offset + data[0].length <= v.size(), "{l:?}");
    // Idempotent: the second call changes nothing.
    c.partition_disk(n).await.unwrap();
    assert_eq!(disks::layout(n).unwrap(), l);
    // The new volume: unformatted (a raw volume), on this disk (through
    // its disk extents).
    assert!(!c.is_formatted(&vol).await.unwrap(), "{vol}");
    assert_eq!(c.disk_of(&vol).await.unwrap(), n);
}

#[tokio::test]
async fn partition_a_gpt_disk_with_only_an_msr() {
    let (p, mut c) = start("rw-part-msr").await;
    refusals_before_any_disk_is_touched(&mut c).await;
    let Some(_w) = require("a GPT VHDX disk holding only a Microsoft reserved partition") else {
        return;
    };
    let v = Vhd::create(&p.root, "msr", 256 * MIB).unwrap();
    let n = v.disk();
    disks::init_gpt_msr_only(n).unwrap();
    // Changed behind the storage provider's back: refresh its cache, as an
    // operator would.
    c.rescan().await.unwrap();
    let before = disks::layout(n).unwrap();
    assert_eq!(before.partitions.len(), 1, "{before:?}");
    assert_eq!(before.partitions[0].gpt_type, Some(MSR));
    c.partitioned_volume(n).await;
    let after = disks::layout(n).unwrap();
    assert_eq!(after.style, Style::Gpt);
    assert_eq!(after.partitions.len(), 2, "{after:?}");
    let msr = after.partitions.iter().find(|p| p.gpt_type == Some(MSR));
    assert_eq!(
        msr.map(|m| (m.offset, m.length)),
        Some((before.partitions[0].offset, before.partitions[0].length)),
        "the MSR is kept: {after:?}"
    );
    assert!(
        after
            .partitions
            .iter()
            .any(|p| p.gpt_type == Some(BASIC_DATA) && p.length >= 200 * MIB),
        "{after:?}"
    );
}

#[tokio::test]
async fn partition_an_mbr_disk_keeps_mbr() {
    let (p, mut c) = start("rw-part-mbr").await;
    refusals_before_any_disk_is_touched(&mut c).await;
    let Some(_w) = require("an MBR VHDX disk without partitions") else {
        return;
    };
    let v = Vhd::create(&p.root, "mbr", 256 * MIB).unwrap();
    let n = v.disk();
    disks::init_mbr(n).unwrap();
    c.rescan().await.unwrap();
    assert_eq!(disks::layout(n).unwrap().style, Style::Mbr);
    c.partitioned_volume(n).await;
    let l = disks::layout(n).unwrap();
    assert_eq!(l.style, Style::Mbr, "never converted: {l:?}");
    assert_eq!(l.partitions.len(), 1, "{l:?}");
    assert_eq!(l.partitions[0].mbr_type, Some(7), "IFS: {l:?}");
    assert!(l.partitions[0].length >= 200 * MIB, "{l:?}");
}

#[tokio::test]
async fn partition_an_offline_disk_is_refused() {
    let (p, mut c) = start("rw-part-offline").await;
    refusals_before_any_disk_is_touched(&mut c).await;
    let Some(_w) = require("a VHDX disk taken offline") else {
        return;
    };
    let v = Vhd::create(&p.root, "offline", 128 * MIB).unwrap();
    let n = v.disk();
    c.set_online(n, false).await.unwrap();
    assert!(disks::is_offline(n).unwrap());
    assert_code(
        c.partition_disk(n).await,
        Code::FailedPrecondition,
        "PartitionDisk of an offline disk",
    );
    assert_eq!(disks::layout(n).unwrap().style, Style::Raw, "untouched");
    c.set_online(n, true).await.unwrap();
    assert!(!disks::is_offline(n).unwrap());
    c.partitioned_volume(n).await;
    assert_eq!(disks::layout(n).unwrap().style, Style::Gpt);
}

#[tokio::test]
async fn disk_state_round_trip() {
    let (p, mut c) = start("rw-disk-state").await;
    let (_, system) = c.system_volume().await;
    // Taking the system disk offline is refused before anything is asked
    // of the disk.
    assert_code(
        c.set_online(system, false).await,
        Code::FailedPrecondition,
        "SetDiskState offline of the system disk",
    );
    if under_wine() {
        // Wine has no disk attributes.
        assert_code(
            c.online(system).await,
            Code::Unimplemented,
            "GetDiskState under wine",
        );
    }
    assert_code(c.online(4000).await, Code::NotFound, "GetDiskState 4000");
    let Some(_w) = require("IOCTL_DISK_GET/SET_DISK_ATTRIBUTES on a VHDX disk") else {
        return;
    };
    assert!(c.online(system).await.unwrap());
    let v = Vhd::create(&p.root, "state", 128 * MIB).unwrap();
    let n = v.disk();
    let vol = c.formatted_volume(n).await;
    let file = format!("{vol}state.txt");
    std::fs::write(&file, b"still here").unwrap();
    assert!(c.online(n).await.unwrap());

    c.set_online(n, false).await.unwrap();
    assert!(!c.online(n).await.unwrap());
    assert!(disks::is_offline(n).unwrap(), "the disk itself is offline");
    assert!(
        std::fs::read(&file).is_err(),
        "the volume of an offline disk is not reachable"
    );
    // Already offline: nothing to do.
    c.set_online(n, false).await.unwrap();

    c.set_online(n, true).await.unwrap();
    assert!(c.online(n).await.unwrap());
    assert!(!disks::is_offline(n).unwrap());
    let back = eventually(30, "the volume back online", || {
        let f = file.clone();
        async move { std::fs::read(&f).ok() }
    })
    .await;
    assert_eq!(back, b"still here");
}

#[tokio::test]
async fn disk_ids_and_locations_are_real() {
    let (p, mut c) = start("rw-disk-ids").await;
    // Whatever the host: every disk listed exists, and every location is
    // of a listed disk.
    let ids = c.disk_ids().await.unwrap();
    assert!(!ids.is_empty());
    for &n in ids.keys() {
        assert!(c.disk_size(n).await.unwrap() > 0, "disk {n}");
    }
    let locations = c
        .disk
        .list_disk_locations(dk::ListDiskLocationsRequest {})
        .await
        .unwrap()
        .into_inner()
        .disk_locations;
    for n in locations.keys() {
        assert!(ids.contains_key(n), "location of unlisted disk {n}");
    }
    if under_wine() {
        assert!(locations.is_empty(), "wine has no MSFT_Disk: {locations:?}");
    }
    let Some(_w) = require("disks with real page 0x83 identifiers and SCSI locations") else {
        return;
    };
    // Where the disk answers IOCTL_SCSI_GET_ADDRESS, its Location's target
    // and LUN are those of the address.
    for (n, l) in &locations {
        if let Ok([_, _, target, lun]) = disks::scsi_address(*n) {
            assert_eq!(l.target, target.to_string(), "disk {n}: {l:?}");
            assert_eq!(l.lunid, lun.to_string(), "disk {n}: {l:?}");
        }
    }
    let a = Vhd::create(&p.root, "ids-a", 64 * MIB).unwrap();
    let b = Vhd::create(&p.root, "ids-b", 64 * MIB).unwrap();
    let ids = eventually(10, "both virtual disks listed", || {
        let mut c2 = Calls {
            disk: c.disk.clone(),
            volume: c.volume.clone(),
        };
        let (na, nb) = (a.disk(), b.disk());
        async move {
            let ids = c2.disk_ids().await.ok()?;
            (ids.contains_key(&na) && ids.contains_key(&nb)).then_some(ids)
        }
    })
    .await;
    let (ia, ib) = (&ids[&a.disk()], &ids[&b.disk()]);
    assert!(!ia.page83.is_empty(), "{ia:?}");
    assert_ne!(ia.page83, ib.page83, "two disks, two identifiers");
    // Stable: read once per disk, the same on every call.
    assert_eq!(c.disk_ids().await.unwrap()[&a.disk()], *ia);
}

#[tokio::test]
async fn a_disk_attached_while_running_is_listed_without_rescan() {
    let (p, mut c) = start("rw-disk-arrival").await;
    let first = c.disk_ids().await.unwrap();
    assert_eq!(
        c.disk_ids().await.unwrap(),
        first,
        "stable while nothing changes"
    );
    let Some(_w) = require("a VHDX attached while the proxy runs (device notifications)") else {
        return;
    };
    let mut v = Vhd::create(&p.root, "arrival", 96 * MIB).unwrap();
    let n = v.disk();
    assert!(!first.contains_key(&n), "disk {n} was there before");
    // No Rescan: the device notification alone refreshes the inventory.
    eventually(10, "the new disk listed", || {
        let mut d = c.disk.clone();
        async move {
            let ids = d.list_disk_i_ds(dk::ListDiskIDsRequest {}).await.ok()?;
            ids.into_inner().disk_i_ds.contains_key(&n).then_some(())
        }
    })
    .await;
    assert_eq!(c.disk_size(n).await.unwrap(), v.size() as i64);
    assert_eq!(c.volumes_on(n).await.unwrap(), Vec::<String>::new());
    v.detach().unwrap();
    eventually(10, "the detached disk gone", || {
        let mut d = c.disk.clone();
        async move {
            let ids = d.list_disk_i_ds(dk::ListDiskIDsRequest {}).await.ok()?;
            (!ids.into_inner().disk_i_ds.contains_key(&n)).then_some(())
        }
    })
    .await;
}

#[tokio::test]
async fn rescan_updates_the_storage_cache() {
    let (p, mut c) = start("rw-rescan").await;
    if under_wine() {
        // No MSFT_StorageSetting under wine.
        assert_code(c.rescan().await, Code::NotFound, "Rescan under wine");
    }
    let Some(_w) = require("MSFT_StorageSetting.UpdateHostStorageCache") else {
        return;
    };
    let before = c.disk_ids().await.unwrap();
    c.rescan().await.unwrap();
    assert_eq!(c.disk_ids().await.unwrap(), before, "no disk lost");
    // A disk grown behind the storage provider's back: after Rescan the
    // partition of a new volume can use the new size.
    let mut v = Vhd::create(&p.root, "rescan", 128 * MIB).unwrap();
    let n = v.grow(256 * MIB).unwrap();
    c.rescan().await.unwrap();
    assert_eq!(c.disk_size(n).await.unwrap(), (256 * MIB) as i64);
    c.partitioned_volume(n).await;
    let l = disks::layout(n).unwrap();
    assert!(
        l.partitions.iter().any(|p| p.length >= 200 * MIB),
        "the partition spans the grown disk: {l:?}"
    );
}
