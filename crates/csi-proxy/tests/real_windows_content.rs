//! The real-Windows tier, content the proxy does not own: a VHDX whose
//! bytes carry an ext4 superblock and an LVM2 label, written raw. Windows
//! reports such a disk RAW and such a volume unformatted; the proxy reads
//! the bytes itself, so PartitionDisk refuses the disk, IsVolumeFormatted
//! is true for the volume and FormatVolume refuses it, and data 5 MiB into
//! a volume is inside FormatVolume's zero check. Under wine (no
//! Virtual Disk API) only the skip is reported.
#![cfg(windows)]

mod pipes;
mod real_windows;

use csi_proxy_client::Group;
use pipes::{assert_code, Proxy};
use real_windows::calls::Calls;
use real_windows::disks::{self, Style, BASIC_DATA};
use real_windows::require;
use real_windows::vhd::{Vhd, MIB};
use std::os::windows::fs::FileExt;
use tonic::Code;

async fn start(tag: &str) -> (Proxy, Calls) {
    let p = Proxy::start_unique(tag, "disk,volume", &[]);
    let c = Calls::new(
        p.channel(Group::Disk, "v1").await,
        p.channel(Group::Volume, "v2alpha1").await,
    );
    (p, c)
}

/// 4 KiB holding an LVM2 label in its second sector and an ext4 superblock
/// at 1 KiB (magic, block size, an ext4-only incompat feature).
fn foreign_head() -> Vec<u8> {
    let mut b = vec![0u8; 4096];
    b[512..520].copy_from_slice(b"LABELONE");
    b[536..544].copy_from_slice(b"LVM2 001");
    b[1024 + 0x38..1024 + 0x3a].copy_from_slice(&0xEF53u16.to_le_bytes());
    b[1024 + 0x18..1024 + 0x1c].copy_from_slice(&2u32.to_le_bytes());
    b[1024 + 0x60..1024 + 0x64].copy_from_slice(&(0x2u32 | 0x40).to_le_bytes());
    b
}

fn write_disk(disk: u32, offset: u64, bytes: &[u8]) {
    let f = disks::open_disk(disk, true).unwrap();
    f.seek_write(bytes, offset).unwrap();
    f.sync_all().unwrap();
}

fn read_disk(disk: u32, offset: u64, len: usize) -> Vec<u8> {
    let f = disks::open_disk(disk, true).unwrap();
    let mut b = vec![0u8; len];
    f.seek_read(&mut b, offset).unwrap();
    b
}

#[tokio::test]
async fn a_raw_disk_holding_ext4_and_lvm_is_not_partitioned() {
    let (p, mut c) = start("rw-content-disk").await;
    let Some(_w) = require("a VHDX disk with foreign content written raw") else {
        return;
    };
    let v = Vhd::create(&p.root, "foreign", 256 * MIB).unwrap();
    let n = v.disk();
    write_disk(n, 0, &foreign_head());
    c.rescan().await.unwrap();
    assert_eq!(disks::layout(n).unwrap().style, Style::Raw);
    let r = c.partition_disk(n).await;
    let msg = r.as_ref().err().map(|e| e.message().to_string());
    assert_code(
        r,
        Code::FailedPrecondition,
        "PartitionDisk over ext4 and LVM2",
    );
    let msg = msg.unwrap();
    assert!(msg.contains("LVM2_member") && msg.contains("ext4"), "{msg}");
    assert_eq!(disks::layout(n).unwrap().style, Style::Raw, "initialised");
    assert_eq!(read_disk(n, 0, 4096), foreign_head(), "written over");
}

#[tokio::test]
async fn a_volume_holding_ext4_and_lvm_is_formatted_and_never_formatted_over() {
    let (p, mut c) = start("rw-content-volume").await;
    let Some(_w) = require("a VHDX volume with foreign content written raw") else {
        return;
    };
    let v = Vhd::create(&p.root, "foreign-vol", 256 * MIB).unwrap();
    let n = v.disk();
    let vol = c.partitioned_volume(n).await;
    assert!(!c.is_formatted(&vol).await.unwrap(), "a new partition");
    let data = disks::layout(n)
        .unwrap()
        .partitions
        .into_iter()
        .find(|p| p.gpt_type == Some(BASIC_DATA))
        .unwrap();
    write_disk(n, data.offset, &foreign_head());
    assert!(
        c.is_formatted(&vol).await.unwrap(),
        "ext4 and LVM2 are content, though Windows reports the volume RAW"
    );
    let r = c.format(&vol).await;
    let msg = r.as_ref().err().map(|e| e.message().to_string());
    assert_code(
        r,
        Code::FailedPrecondition,
        "FormatVolume over an LVM2 member",
    );
    assert!(msg.unwrap().contains("LVM2_member"));
    assert_eq!(
        read_disk(n, data.offset, 4096),
        foreign_head(),
        "written over"
    );
    let r = c.stats(&vol).await;
    let msg = r.as_ref().err().map(|e| e.message().to_string());
    assert_code(
        r,
        Code::FailedPrecondition,
        "GetVolumeStats of a RAW volume",
    );
    assert!(msg.unwrap().contains("LVM2_member"));
}

/// Data deeper than the probes read (at 5 MiB of the volume, its first and
/// last MiB zero) is inside FormatVolume's zero check (the first 64 MiB
/// whole; `parse::content::zero_check_spans`, the same as on Linux): the
/// volume is not formatted over. On real Windows only: the check reads
/// through the volume device, which the storage service owns.
#[tokio::test]
async fn data_in_the_middle_of_a_volume_is_never_formatted_over() {
    let (p, mut c) = start("rw-content-middle").await;
    let Some(_w) = require("a VHDX volume with data 5 MiB in, written raw") else {
        return;
    };
    let v = Vhd::create(&p.root, "middle-vol", 256 * MIB).unwrap();
    let n = v.disk();
    let vol = c.partitioned_volume(n).await;
    let data = disks::layout(n)
        .unwrap()
        .partitions
        .into_iter()
        .find(|p| p.gpt_type == Some(BASIC_DATA))
        .unwrap();
    let bytes: Vec<u8> = (0..4096u32).map(|i| (i * 7 + 1) as u8).collect();
    write_disk(n, data.offset + 5 * MIB, &bytes);
    assert!(!c.is_formatted(&vol).await.unwrap(), "no known format");
    let r = c.format(&vol).await;
    let msg = r.as_ref().err().map(|e| e.message().to_string());
    assert_code(
        r,
        Code::FailedPrecondition,
        "FormatVolume over data at 5 MiB",
    );
    assert!(msg.unwrap().contains("-overwrite-unidentified-content"));
    assert_eq!(
        read_disk(n, data.offset + 5 * MIB, 4096),
        bytes,
        "written over"
    );
}
