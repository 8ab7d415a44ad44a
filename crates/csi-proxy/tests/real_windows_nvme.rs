//! The real-Windows tier, NVMe: every NVMe disk of the host is listed by
//! ListDiskLocations at its SCSI address as stornvme reports it, with LUN =
//! `Lun` − 1 (Azure's convention; `Lun` 0 gets none), and by ListDiskIDs
//! with identifiers, and the calls
//! that change or measure a disk answer for it; everything checked with the
//! test's own I/O controls (`real_windows::{disks, nvme}`). Hosts without
//! an NVMe disk (most CI runners) say so and skip.
#![cfg(windows)]

mod pipes;
mod real_windows;

use csi_proxy_api::disk::v1 as dk;
use csi_proxy_client::Group;
use pipes::Proxy;
use real_windows::calls::Calls;
use real_windows::{disks, nvme, require, under_wine};

#[tokio::test]
async fn nvme_disks_are_listed_with_their_location_and_ids() {
    let p = Proxy::start_unique("rw-nvme", "disk,volume", &[]);
    let mut c = Calls::new(
        p.channel(Group::Disk, "v1").await,
        p.channel(Group::Volume, "v2alpha1").await,
    );
    let ids = c.disk_ids().await.unwrap();
    let locations = c
        .disk
        .list_disk_locations(dk::ListDiskLocationsRequest {})
        .await
        .unwrap()
        .into_inner()
        .disk_locations;
    let nvme: Vec<u32> = ids
        .keys()
        .copied()
        .filter(|&n| nvme::bus_type(n).ok() == Some(nvme::BUS_TYPE_NVME))
        .collect();
    if under_wine() {
        assert!(nvme.is_empty(), "wine's disks are not NVMe: {nvme:?}");
    }
    let Some(_w) = require("an NVMe disk (stornvme) on the host") else {
        return;
    };
    if nvme.is_empty() {
        println!("SKIPPED (this host has no NVMe disk): NVMe location and ids");
        eprintln!("SKIPPED (this host has no NVMe disk): NVMe location and ids");
        return;
    }
    let addresses: Vec<(u32, [u8; 4])> = nvme
        .iter()
        .filter_map(|&n| disks::scsi_address(n).ok().map(|a| (n, a)))
        .collect();
    for &n in &nvme {
        let got = &ids[&n];
        println!(
            "NVMe disk {n}: ids {got:?}, location {:?}",
            locations.get(&n)
        );
        // The location: the address stornvme gives with LUN = Lun − 1,
        // unless another disk has the same one or Lun is 0 (then the proxy
        // keeps WMI's, without a LUN).
        if let Some((_, [port, path, target, lun])) = addresses.iter().find(|(d, _)| *d == n) {
            let shared = addresses
                .iter()
                .filter(|(_, a)| *a == [*port, *path, *target, *lun])
                .count()
                > 1;
            let l = locations.get(&n);
            println!("disk {n}: SCSI address {port}:{path}:{target}:{lun}, listed at {l:?}");
            match lun.checked_sub(1) {
                Some(want) if !shared => {
                    let l = l.expect("an NVMe disk with an address is listed");
                    assert_eq!(
                        (
                            l.adapter.as_str(),
                            l.bus.as_str(),
                            l.target.as_str(),
                            l.lunid.as_str()
                        ),
                        (
                            port.to_string().as_str(),
                            path.to_string().as_str(),
                            target.to_string().as_str(),
                            want.to_string().as_str()
                        ),
                        "disk {n}"
                    );
                }
                _ => assert!(
                    l.is_none_or(|l| l.lunid.is_empty()),
                    "disk {n}: Lun 0 or a shared address is given no LUN: {l:?}"
                ),
            }
            // The ids: page 83 where the disk answers it, else the NGUID
            // or EUI-64 of namespace LUN + 1, read here directly.
            let ns = nvme::identify(n, Some(u32::from(*lun) + 1));
            println!(
                "disk {n}: identify namespace {}: {:?}",
                u32::from(*lun) + 1,
                ns.as_ref().map(|d| nvme::namespace_ids(d))
            );
            if nvme::page83_identifiers(n).unwrap() == 0 {
                let (nguid, eui) = nvme::namespace_ids(&ns.unwrap());
                assert_eq!(
                    Some(&got.page83),
                    nguid.as_ref().or(eui.as_ref()),
                    "disk {n}"
                );
            }
        }
        assert!(!got.page83.is_empty(), "disk {n}: no identifier");
        match nvme::identify(n, None) {
            Ok(ctrl) => {
                let sn = nvme::controller_serial(&ctrl);
                println!("disk {n}: controller serial {sn:?}");
                assert!(!got.serial_number.is_empty() || sn.is_empty(), "disk {n}");
            }
            Err(e) => println!("disk {n}: identify controller not answered: {e}"),
        }
        // Measured like any disk.
        assert!(c.disk_size(n).await.unwrap() > 0, "disk {n}");
        c.online(n).await.unwrap();
    }
}
