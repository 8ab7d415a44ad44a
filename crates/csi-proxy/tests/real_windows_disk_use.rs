//! The real-Windows tier, disks named by number and disks in use:
//!
//! - PartitionDisk while two VHDX disks are detached and attached again
//!   and again (disk numbers are reused): the disk that was not asked for
//!   keeps its first and last MiB, whatever number it had meanwhile;
//! - a raw disk gets a fresh GPT disk GUID, written through the held handle;
//! - SetDiskState(offline) of a disk whose volume is mounted inside the
//!   roots, or held open, is refused naming the use, and allowed after;
//! - DisconnectTarget of an iSCSI target (the iSCSI Target Server on this
//!   host) whose disk holds a mounted volume is refused naming the mount,
//!   and allowed after the unmount.
//!
//! Under wine (no Virtual Disk API, no iSCSI initiator) only the skips are
//! reported.
#![cfg(windows)]

mod pipes;
mod real_windows;
// Only the iSCSI client here.
#[allow(unused_macros, unused_imports)]
mod versions;

use csi_proxy_client::Group;
use csi_proxy_host::win::wmi::WmiWorker;
use pipes::{assert_code, Proxy};
use real_windows::calls::Calls;
use real_windows::disks;
use real_windows::iscsi_target::{self, Target};
use real_windows::require;
use real_windows::vhd::{Vhd, MIB};
use std::os::windows::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use tonic::Code;
use versions::iscsi::{Iscsi, Login, Portal};

fn s(p: &Path) -> String {
    p.display().to_string()
}

async fn start(tag: &str, groups: &str) -> (Proxy, Calls) {
    let p = Proxy::start_unique(tag, groups, &[]);
    let c = Calls::new(
        p.channel(Group::Disk, "v1").await,
        p.channel(Group::Volume, "v2alpha1").await,
    );
    (p, c)
}

/// A pattern no content check identifies as zeros: every byte non-zero.
fn marker(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8 + 1).collect()
}

fn read_disk(disk: u32, offset: u64, len: usize) -> Vec<u8> {
    let f = disks::open_disk(disk, false).unwrap();
    let mut b = vec![0u8; len];
    f.seek_read(&mut b, offset).unwrap();
    b
}

fn write_disk(disk: u32, offset: u64, bytes: &[u8]) {
    let f = disks::open_disk(disk, true).unwrap();
    f.seek_write(bytes, offset).unwrap();
    f.sync_all().unwrap();
}

#[tokio::test]
async fn partition_disk_never_writes_a_disk_that_took_the_number() {
    let (p, mut c) = start("rw-disk-reuse", "disk,volume").await;
    let Some(_w) = require("two VHDX disks detached and attached during PartitionDisk") else {
        return;
    };
    const SIZE: u64 = 64 * MIB;
    let mut a = Vhd::create(&p.root, "reuse-a", SIZE).unwrap();
    let mut b = Vhd::create(&p.root, "reuse-b", SIZE).unwrap();
    let mib = marker(MIB as usize);
    write_disk(b.disk(), 0, &mib);
    write_disk(b.disk(), SIZE - MIB, &mib);
    // Detached and attached in turn: each takes the lowest free number,
    // often the one the other just left. A's number is published after
    // each attach, and its table wiped, so that every PartitionDisk below
    // initialises afresh whatever disk has that number by then.
    let a_number = Arc::new(AtomicU32::new(a.disk()));
    let stop = Arc::new(AtomicBool::new(false));
    let churn = {
        let (stop, a_number) = (stop.clone(), a_number.clone());
        std::thread::spawn(move || {
            let zeros = vec![0u8; MIB as usize];
            let mut rounds = 0u32;
            while !stop.load(Ordering::Relaxed) {
                a.detach().unwrap();
                b.detach().unwrap();
                b.attach().unwrap();
                a.attach().unwrap();
                write_disk(a.disk(), 0, &zeros);
                write_disk(a.disk(), SIZE - MIB, &zeros);
                a_number.store(a.disk(), Ordering::Relaxed);
                a.detach().unwrap();
                a.attach().unwrap();
                a_number.store(a.disk(), Ordering::Relaxed);
                rounds += 1;
            }
            (a, b, rounds)
        })
    };
    let mut answers = Vec::new();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::time::Instant::now() < until {
        // Only numbers the test's own disk had: never another disk of
        // this machine.
        let n = a_number.load(Ordering::Relaxed);
        answers.push(c.partition_disk(n).await.map_err(|e| e.code()));
    }
    stop.store(true, Ordering::Relaxed);
    let (a, b, rounds) = churn.join().unwrap();
    assert!(rounds > 0, "the disks never moved");
    assert!(
        answers.iter().any(Result::is_ok),
        "no PartitionDisk went through: {answers:?}"
    );
    println!(
        "{rounds} rounds of detach/attach, {} PartitionDisk calls: {answers:?}",
        answers.len()
    );
    assert_eq!(
        read_disk(b.disk(), 0, MIB as usize),
        mib,
        "B's first MiB was written"
    );
    assert_eq!(
        read_disk(b.disk(), SIZE - MIB, MIB as usize),
        mib,
        "B's last MiB was written"
    );
    drop(a);
}

/// A raw disk is initialised through the handle held since the check,
/// with a GPT disk GUID chosen afresh each time: the proof `MSFT_Disk` n is
/// checked against before `CreatePartition`. Unlike `Initialize-Disk`, no
/// Microsoft reserved partition: one basic data partition, 1 MiB aligned.
#[tokio::test]
async fn a_raw_disk_gets_a_fresh_gpt_guid_through_the_held_handle() {
    let (p, mut c) = start("rw-disk-guid", "disk,volume").await;
    let Some(_w) = require("two raw VHDX disks to partition") else {
        return;
    };
    let a = Vhd::create(&p.root, "guid-a", 64 * MIB).unwrap();
    let b = Vhd::create(&p.root, "guid-b", 64 * MIB).unwrap();
    let mut ids = Vec::new();
    for v in [&a, &b] {
        let n = v.disk();
        c.partition_disk(n).await.unwrap();
        let l = disks::layout(n).unwrap();
        assert_eq!(l.style, disks::Style::Gpt, "{l:?}");
        assert_eq!(l.partitions.len(), 1, "one partition, no MSR: {l:?}");
        assert_eq!(l.partitions[0].gpt_type, Some(disks::BASIC_DATA), "{l:?}");
        assert_eq!(l.partitions[0].offset % MIB, 0, "{l:?}");
        let id = disks::gpt_disk_id(n).unwrap().expect("a GPT disk GUID");
        assert_ne!(id, 0, "disk {n}");
        ids.push(id);
    }
    assert_ne!(ids[0], ids[1], "two disks, one GUID");
}

#[tokio::test]
async fn a_disk_with_a_mounted_or_open_volume_is_not_taken_offline() {
    let (p, mut c) = start("rw-disk-inuse", "disk,volume").await;
    let Some(_w) = require("a VHDX volume mounted inside the roots, then held open") else {
        return;
    };
    let v = Vhd::create(&p.root, "inuse", 128 * MIB).unwrap();
    let n = v.disk();
    let vol = c.formatted_volume(n).await;
    let t = p.kubelet.join(r"pods\inuse\mnt");
    c.mount(&vol, &s(&t)).await.unwrap();
    let r = c.set_online(n, false).await;
    let m = r.as_ref().err().map(|e| e.message().to_string());
    assert_code(
        r,
        Code::FailedPrecondition,
        "offline while mounted in the roots",
    );
    let m = m.unwrap();
    assert!(
        m.contains("is mounted at") && m.to_ascii_lowercase().contains(r"pods\inuse\mnt"),
        "{m}"
    );
    assert!(!disks::is_offline(n).unwrap());
    c.unmount(&vol, &s(&t)).await.unwrap();

    // No access path, but a handle open on the volume.
    let held = std::fs::File::open(vol.trim_end_matches('\\')).unwrap();
    let r = c.set_online(n, false).await;
    let m = r.as_ref().err().map(|e| e.message().to_string());
    assert_code(r, Code::FailedPrecondition, "offline while held open");
    assert!(m.unwrap().contains("open handles"));
    drop(held);

    c.set_online(n, false).await.unwrap();
    assert!(disks::is_offline(n).unwrap());
    c.set_online(n, true).await.unwrap();
}

#[tokio::test]
async fn an_iscsi_target_with_a_mounted_volume_is_not_disconnected() {
    iscsi_in_use::<versions::iscsi::V1alpha2>().await;
}

async fn iscsi_in_use<I: Iscsi>() {
    let (p, mut c) = start("rw-iscsi-inuse", "disk,volume,iscsi").await;
    let mut i = I::new(p.channel(Group::Iscsi, "v1alpha2").await);
    let Some(_w) = require("an iSCSI target of this host's Target Server, its volume mounted")
    else {
        return;
    };
    if let Err(why) = iscsi_target::available(&WmiWorker::new(iscsi_target::NAMESPACE)) {
        println!("SKIPPED (needs the iSCSI Target Server feature): {why}");
        return;
    }
    iscsi_target::start_initiator().unwrap();
    let t = Target::create("inuse", None).unwrap();
    let portal = Portal::new("127.0.0.1", 3260);
    i.add_target_portal(&portal).await.unwrap();
    i.connect_target(&Login::new(&portal, &t.iqn, 0, "", ""))
        .await
        .unwrap();
    let disks = i.get_target_disks(&portal, &t.iqn).await.unwrap();
    let n: u32 = disks[0].parse().unwrap();
    let vol = c.formatted_volume(n).await;
    let mnt = p.kubelet.join(r"pods\iscsi\mnt");
    c.mount(&vol, &s(&mnt)).await.unwrap();
    let r = i.disconnect_target(&portal, &t.iqn).await;
    let m = r.as_ref().err().map(|e| e.message().to_string());
    assert_code(
        r,
        Code::FailedPrecondition,
        "DisconnectTarget while mounted",
    );
    let m = m.unwrap();
    assert!(
        m.contains("is mounted at") && m.to_ascii_lowercase().contains(r"pods\iscsi\mnt"),
        "{m}"
    );
    assert_eq!(
        i.get_target_disks(&portal, &t.iqn).await.unwrap(),
        disks,
        "still connected"
    );
    c.unmount(&vol, &s(&mnt)).await.unwrap();
    i.disconnect_target(&portal, &t.iqn).await.unwrap();
    i.remove_target_portal(&portal).await.unwrap();
}
