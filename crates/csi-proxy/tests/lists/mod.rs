//! The comparisons of `storage_inventory.rs`: the proxy's list answers
//! against a fresh full scan, over the disks a test owns.
//!
//! Other programs (and the other tests of the file, running at the same
//! time) attach and detach loop devices while a test runs. Their changes
//! reach a fresh scan of sysfs and the proxy's event stream at slightly
//! different moments, so an answer that includes them can differ from a
//! scan with no fault of the proxy's. The strict comparisons therefore
//! cover [`Covered`]: the test's own loop devices, by disk number (the
//! kernel's diskseq, never given twice: a detached disk of the test stays
//! covered, and a foreign device attached on its old loop name is not),
//! and the host's other disks as they were when the test started. The
//! whole host, foreign devices included, is checked by [`whole_host_agrees`]:
//! the proxy must agree with a fresh scan once the host is quiet.

use csi_proxy_api::{disk::v1 as dk, volume::v2alpha1 as vl};
use csi_proxy_client::ProxyChannel;
use csi_proxy_host::disk::{self as hd, DiskApi};
use csi_proxy_host::path::{Flavor, PathPolicy};
use csi_proxy_host::storage::linux::{FsType, LinuxStorage};
use csi_proxy_host::storage::Storage;
use csi_proxy_host::volume::{self as hv, VolumeApi};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tonic::Code;

use crate::common::Proxy;

pub type DiskClient = dk::disk_client::DiskClient<ProxyChannel>;
pub type VolumeClient = vl::volume_client::VolumeClient<ProxyChannel>;

/// What the list calls say: ids and locations of the disks compared, and
/// the volumes of the test's own disks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lists {
    pub ids: BTreeMap<u32, (String, String)>,
    pub locations: BTreeMap<u32, [String; 4]>,
    pub volumes: BTreeMap<u32, Result<Vec<String>, Code>>,
}

/// The disks a comparison covers (see the module's text).
#[derive(Clone)]
pub struct Covered {
    /// The host's disks that are not loop devices, at the start.
    host: BTreeSet<u32>,
    /// The disk numbers of the test's loop devices, detached ones included.
    ours: Arc<Mutex<BTreeSet<u32>>>,
}

impl Covered {
    /// The host's disks now (loop devices aside) and none of the test's yet.
    pub fn new(r: &Storage<LinuxStorage>) -> Covered {
        let host = r
            .list_disk_locations(hd::ListDiskLocationsRequest {})
            .unwrap()
            .disk_locations
            .into_iter()
            .filter(|(_, l)| l.adapter != "loop")
            .map(|(n, _)| n)
            .collect();
        Covered {
            host,
            ours: Arc::default(),
        }
    }

    /// Adds a disk of the test's (by its disk number).
    pub fn add(&self, number: u32) {
        self.ours.lock().unwrap().insert(number);
    }

    /// The test's disks now.
    fn ours(&self) -> BTreeSet<u32> {
        self.ours.lock().unwrap().clone()
    }

    fn covers(&self, ours: &BTreeSet<u32>, n: u32) -> bool {
        ours.contains(&n) || self.host.contains(&n)
    }
}

/// A backend that follows no events: every call of it scans every disk.
pub fn reference(root: &Path) -> Storage<LinuxStorage> {
    let policy = PathPolicy::new(Flavor::Unix, [root.to_str().unwrap()]).unwrap();
    Storage::new(policy, LinuxStorage::new(FsType::Ext4).without_events())
}

/// A fresh full scan of the host: the covered disks, or every disk.
pub fn fresh(r: &Storage<LinuxStorage>, covered: Option<&Covered>) -> Lists {
    let ours = covered.map(Covered::ours).unwrap_or_default();
    let keep = |n: u32| covered.is_none_or(|c| c.covers(&ours, n));
    let ids = r
        .list_disk_ids(hd::ListDiskIdsRequest {})
        .unwrap()
        .disk_ids
        .into_iter()
        .filter(|(n, _)| keep(*n))
        .map(|(n, i)| (n, (i.page83, i.serial_number)))
        .collect();
    let locations = r
        .list_disk_locations(hd::ListDiskLocationsRequest {})
        .unwrap()
        .disk_locations
        .into_iter()
        .filter(|(n, _)| keep(*n))
        .map(|(n, l)| (n, [l.adapter, l.bus, l.target, l.lun_id]))
        .collect();
    let mut volumes = BTreeMap::new();
    for n in ours {
        let v = r
            .list_volumes_on_disk(hv::ListVolumesOnDiskRequest {
                disk_number: n,
                partition_number: 0,
            })
            .map(|r| r.volume_ids)
            .map_err(|_| Code::NotFound);
        volumes.insert(n, v);
    }
    Lists {
        ids,
        locations,
        volumes,
    }
}

/// The same lists, asked of the proxy.
pub async fn served(d: &mut DiskClient, v: &mut VolumeClient, covered: Option<&Covered>) -> Lists {
    let ours = covered.map(Covered::ours).unwrap_or_default();
    let keep = |n: u32| covered.is_none_or(|c| c.covers(&ours, n));
    let ids = d
        .list_disk_i_ds(dk::ListDiskIDsRequest {})
        .await
        .unwrap()
        .into_inner()
        .disk_i_ds
        .into_iter()
        .filter(|(n, _)| keep(*n))
        .map(|(n, i)| (n, (i.page83, i.serial_number)))
        .collect();
    let locations = d
        .list_disk_locations(dk::ListDiskLocationsRequest {})
        .await
        .unwrap()
        .into_inner()
        .disk_locations
        .into_iter()
        .filter(|(n, _)| keep(*n))
        .map(|(n, l)| (n, [l.adapter, l.bus, l.target, l.lunid]))
        .collect();
    let mut volumes = BTreeMap::new();
    for n in ours {
        let r = v
            .list_volumes_on_disk(vl::ListVolumesOnDiskRequest {
                disk_number: n,
                partition_number: 0,
            })
            .await
            .map(|r| r.into_inner().volume_ids)
            .map_err(|s| s.code());
        volumes.insert(n, r);
    }
    Lists {
        ids,
        locations,
        volumes,
    }
}

/// The covered disks now: the proxy's answer equals a fresh scan. The
/// test's own disks are settled when it asks (it made its changes and
/// waited for them), and nobody else changes the covered ones.
pub async fn covered_agrees(
    d: &mut DiskClient,
    v: &mut VolumeClient,
    r: &Storage<LinuxStorage>,
    covered: &Covered,
) -> Lists {
    let want = fresh(r, Some(covered));
    let got = served(d, v, Some(covered)).await;
    assert_eq!(got, want, "the proxy's answer differs from a fresh scan");
    got
}

/// The whole host, other programs' loop devices included: within a few
/// tries, an answer of the proxy's equals the fresh scans taken just
/// before and just after it (a try where foreign devices changed in
/// between proves nothing either way). A disk the proxy kept after it went,
/// or never saw, makes every try differ.
pub async fn whole_host_agrees(
    d: &mut DiskClient,
    v: &mut VolumeClient,
    r: &Storage<LinuxStorage>,
) {
    let mut last = None;
    for attempt in 1..=50 {
        let before = fresh(r, None);
        let got = served(d, v, None).await;
        let after = fresh(r, None);
        if got == before && before == after {
            eprintln!("whole host: agreed at try {attempt}");
            return;
        }
        last = Some((before, got, after));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (before, got, after) = last.unwrap();
    panic!("the proxy never agreed with a fresh scan:\nbefore {before:?}\nproxy {got:?}\nafter {after:?}");
}

/// A client that keeps polling the lists and checks every answer taken
/// while nothing covered changed (the fresh scans just before and just
/// after the call agree) against that fresh scan.
pub struct Poller {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<(usize, usize)>,
}

impl Poller {
    pub fn start(proxy: &Proxy, covered: Covered) -> Poller {
        let stop = Arc::new(AtomicBool::new(false));
        let client = proxy.client();
        let root = proxy.kubelet.clone();
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let (mut d, mut v) = rt.block_on(async {
                (
                    client.connect_disk_v1().await.unwrap(),
                    client.connect_volume_v2alpha1().await.unwrap(),
                )
            });
            let r = reference(&root);
            let (mut checked, mut skipped) = (0, 0);
            while !flag.load(Ordering::SeqCst) {
                // One set of disks for the three: a disk the test adds
                // meanwhile waits for the next round.
                let now = Covered {
                    host: covered.host.clone(),
                    ours: Arc::new(Mutex::new(covered.ours())),
                };
                let before = fresh(&r, Some(&now));
                let got = rt.block_on(served(&mut d, &mut v, Some(&now)));
                let after = fresh(&r, Some(&now));
                if before == after {
                    assert_eq!(got, before, "an answer differs from a fresh scan");
                    checked += 1;
                } else {
                    skipped += 1;
                }
            }
            (checked, skipped)
        });
        Poller { stop, thread }
    }

    pub fn finish(self) -> (usize, usize) {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.join().expect("the poller failed")
    }
}
