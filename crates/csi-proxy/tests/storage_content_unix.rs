//! Content the proxy does not own is never written over (Linux, root, real
//! loop devices, the real binary over its sockets): PartitionDisk refuses a
//! disk without a partition table that holds anything identified or any
//! non-zero byte no probe explains (unless `-overwrite-unidentified-content`),
//! IsVolumeFormatted is true for any identified content, FormatVolume
//! refuses what is not a filesystem, and a fresh table of ours cut short by
//! a kill is completed by the retry.
#![cfg(target_os = "linux")]

mod common;
mod storage;

use common::{assert_code, only_volume, partition, Proxy};
use csi_proxy_api::volume;
use csi_proxy_host::storage::parse::gpt;
use std::io::{Read, Seek, SeekFrom};
use storage::{can_run, write_dev, LoopDisk, MIB};
use tonic::Code;

const SIZE: u64 = 64 * MIB;

/// A digest of the whole device (FNV-1a over its bytes).
fn digest(dev: &str) -> u64 {
    let mut f = std::fs::File::open(dev).unwrap();
    f.seek(SeekFrom::Start(0)).unwrap();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut buf = vec![0u8; MIB as usize];
    loop {
        let n = f.read(&mut buf).unwrap();
        if n == 0 {
            return h;
        }
        for &b in &buf[..n] {
            h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
    }
}

fn random(n: usize) -> Vec<u8> {
    let mut b = vec![0u8; n];
    std::fs::File::open("/dev/urandom")
        .unwrap()
        .read_exact(&mut b)
        .unwrap();
    b
}

fn lvm_label() -> Vec<u8> {
    let mut b = vec![0u8; 32];
    b[..8].copy_from_slice(b"LABELONE");
    b[24..32].copy_from_slice(b"LVM2 001");
    b
}

/// The partition node of a loop disk.
fn part1(d: &LoopDisk) -> String {
    let p = format!("/dev/{}p1", d.name);
    for _ in 0..500 {
        if std::path::Path::new(&p).exists() {
            return p;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("{p} did not appear");
}

#[tokio::test(flavor = "multi_thread")]
async fn foreign_content_on_a_disk_without_a_table_is_never_partitioned() {
    if !can_run() {
        return;
    }
    let proxy = Proxy::start(&[]);
    // (what is written, where, what the refusal names)
    // An md 1.0 superblock: magic, major version 1, and its own sector
    // (super_offset, 144 bytes in), 8 KiB before the end.
    let md_at = SIZE - 8192;
    let md_1_0 = {
        let mut b = vec![0u8; 512];
        b[..4].copy_from_slice(&0xa92b_4efcu32.to_le_bytes());
        b[4..8].copy_from_slice(&1u32.to_le_bytes());
        b[144..152].copy_from_slice(&(md_at / 512).to_le_bytes());
        b
    };
    let cases: Vec<(&str, u64, Vec<u8>, &str)> = vec![
        ("an LVM2 label", 512, lvm_label(), "LVM2_member"),
        (
            "an md 1.0 superblock at the end",
            md_at,
            md_1_0,
            "linux_raid_member",
        ),
        (
            "random bytes",
            0,
            random(4096),
            "-overwrite-unidentified-content",
        ),
        (
            "random bytes in the last MiB",
            SIZE - 4096,
            random(4096),
            "-overwrite-unidentified-content",
        ),
    ];
    for (what, off, bytes, named) in cases {
        let d = LoopDisk::new(proxy.root.path(), SIZE);
        write_dev(&d.dev, off, &bytes);
        let before = digest(&d.dev);
        let r = partition(&proxy, d.number).await;
        let err = r.expect_err(what);
        assert_eq!(err.code(), Code::FailedPrecondition, "{what}: {err:?}");
        assert!(err.message().contains(named), "{what}: {}", err.message());
        assert_eq!(digest(&d.dev), before, "{what}: the disk changed");
    }
}

/// Formats libblkid (util-linux 2.38) identifies that the probes lacked:
/// never partitioned over, nor formatted over unless a filesystem, even
/// with `-overwrite-unidentified-content`; IsVolumeFormatted is true.
#[tokio::test(flavor = "multi_thread")]
async fn formats_libblkid_knows_are_never_written_over() {
    if !can_run() {
        return;
    }
    let proxy = Proxy::start(&["-overwrite-unidentified-content"]);
    let ultrix = [0x0003_2957u32.to_le_bytes(), 1u32.to_le_bytes()].concat();
    // (blkid's name, where, what, a filesystem)
    let cases: Vec<(&str, u64, Vec<u8>, bool)> = vec![
        ("aix", 0, b"\xC9\xC2\xD4\xC1".to_vec(), false),
        ("ultrix", 16312, ultrix, false),
        ("drbdproxy_datalog", 0, b"DRBDdlh*".to_vec(), false),
        ("xenix", 2048, b"\x2b\x55\x44".to_vec(), true),
        ("sysv", 1016, 0xFD18_7E20u32.to_le_bytes().to_vec(), true),
        (
            "sysv",
            18 * 1024 + 1016,
            0xFD18_7E20u32.to_be_bytes().to_vec(),
            true,
        ),
    ];
    for (name, off, bytes, _) in &cases {
        let d = LoopDisk::new(proxy.root.path(), SIZE);
        write_dev(&d.dev, *off, bytes);
        let before = digest(&d.dev);
        let err = partition(&proxy, d.number).await.expect_err(name);
        assert_eq!(err.code(), Code::FailedPrecondition, "{name}: {err:?}");
        assert!(err.message().contains(name), "{name}: {}", err.message());
        assert_eq!(digest(&d.dev), before, "{name}: the disk changed");
    }
    let d = LoopDisk::new(proxy.root.path(), SIZE);
    partition(&proxy, d.number).await.unwrap();
    let id = only_volume(&proxy, d.number).await;
    let node = part1(&d);
    let mut v = proxy.client().connect_volume_v1().await.unwrap();
    for (name, off, bytes, filesystem) in cases {
        if name == "aix" || name == "ultrix" {
            continue;
        }
        write_dev(&node, 0, &vec![0u8; 32 * 1024]);
        write_dev(&node, off, &bytes);
        let formatted = v
            .is_volume_formatted(volume::v1::IsVolumeFormattedRequest {
                volume_id: id.clone(),
            })
            .await
            .unwrap()
            .into_inner()
            .formatted;
        assert!(formatted, "{name}: IsVolumeFormatted");
        if !filesystem {
            let before = digest(&node);
            let err = v
                .format_volume(volume::v1::FormatVolumeRequest {
                    volume_id: id.clone(),
                })
                .await
                .expect_err(name);
            assert_eq!(err.code(), Code::FailedPrecondition, "{name}: {err:?}");
            assert!(err.message().contains(name), "{name}: {}", err.message());
            assert_eq!(digest(&node), before, "{name}: written over");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lone_backup_gpt_keeps_its_partitions() {
    if !can_run() {
        return;
    }
    let proxy = Proxy::start(&[]);
    // Another tool's table (a Linux partition named "data"): the primary copy is lost (the
    // first MiB zeroed), the backup at the end still describes them.
    let mut d = LoopDisk::new(proxy.root.path(), SIZE);
    let sectors = SIZE / 512;
    let writes = gpt::create_single_partition(
        512,
        sectors,
        gpt::Guid::from_windows_bytes([0x22; 16]),
        gpt::Guid::from_random_bytes([0x33; 16]),
        gpt::Guid::LINUX_FILESYSTEM,
        "data",
    )
    .unwrap();
    for w in &writes {
        write_dev(&d.dev, w.offset, &w.bytes);
    }
    write_dev(&d.dev, 0, &vec![0u8; MIB as usize]);
    d.detach();
    d.wait_detached();
    d.reattach();
    let before = digest(&d.dev);
    let err = partition(&proxy, d.number).await.unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    assert!(err.message().contains("gpt"), "{}", err.message());
    assert_eq!(digest(&d.dev), before, "the backup table was written over");

    // A table of ours that lost its primary copy is the table a retry
    // completes: restored as it was, the filesystem inside kept.
    let mut d = LoopDisk::new(proxy.root.path(), SIZE);
    let id = common::partition_and_format(&proxy.client(), d.number).await;
    write_dev(&d.dev, 0, &vec![0u8; MIB as usize]);
    d.detach();
    d.wait_detached();
    d.reattach();
    partition(&proxy, d.number).await.unwrap();
    assert_eq!(
        only_volume(&proxy, d.number).await,
        id,
        "the same partition"
    );
    let formatted = proxy
        .client()
        .connect_volume_v1()
        .await
        .unwrap()
        .is_volume_formatted(volume::v1::IsVolumeFormattedRequest { volume_id: id })
        .await
        .unwrap()
        .into_inner()
        .formatted;
    assert!(formatted, "the filesystem inside was kept");
}

#[tokio::test(flavor = "multi_thread")]
async fn unidentified_bytes_are_overwritten_only_when_the_operator_allows() {
    if !can_run() {
        return;
    }
    let proxy = Proxy::start(&["-overwrite-unidentified-content"]);
    let d = LoopDisk::new(proxy.root.path(), SIZE);
    write_dev(&d.dev, 0, &random(MIB as usize));
    partition(&proxy, d.number).await.unwrap();
    let id = only_volume(&proxy, d.number).await;
    assert!(!id.is_empty());
    // Identified content stays refused with the flag.
    let d = LoopDisk::new(proxy.root.path(), SIZE);
    write_dev(&d.dev, 512, &lvm_label());
    let err = partition(&proxy, d.number).await.unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert!(err.message().contains("LVM2_member"), "{}", err.message());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_volume_holding_a_member_is_formatted_never() {
    if !can_run() {
        return;
    }
    let proxy = Proxy::start(&[]);
    let d = LoopDisk::new(proxy.root.path(), SIZE);
    partition(&proxy, d.number).await.unwrap();
    let id = only_volume(&proxy, d.number).await;
    let node = part1(&d);
    let mut v = proxy.client().connect_volume_v1().await.unwrap();
    let formatted = |v: &mut volume::v1::volume_client::VolumeClient<_>, id: String| {
        let mut v = v.clone();
        async move {
            v.is_volume_formatted(volume::v1::IsVolumeFormattedRequest { volume_id: id })
                .await
                .unwrap()
                .into_inner()
                .formatted
        }
    };
    assert!(!formatted(&mut v, id.clone()).await, "a new partition");

    write_dev(&node, 512, &lvm_label());
    assert!(
        formatted(&mut v, id.clone()).await,
        "an LVM2 physical volume"
    );
    let before = digest(&node);
    let r = v
        .format_volume(volume::v1::FormatVolumeRequest {
            volume_id: id.clone(),
        })
        .await;
    assert_code(
        r.as_ref().map(|_| ()).map_err(Clone::clone),
        &[Code::FailedPrecondition],
        "format an LVM2 member",
    );
    assert!(r.unwrap_err().message().contains("LVM2_member"));
    assert_eq!(digest(&node), before, "the member was written over");
    let err = v
        .get_volume_stats(volume::v1::GetVolumeStatsRequest {
            volume_id: id.clone(),
        })
        .await
        .unwrap_err();
    assert!(err.message().contains("LVM2_member"), "{}", err.message());

    // Bytes no probe explains: not formatted, and not formatted over.
    write_dev(&node, 0, &random(4096));
    assert!(!formatted(&mut v, id.clone()).await);
    let err = v
        .format_volume(volume::v1::FormatVolumeRequest {
            volume_id: id.clone(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert!(
        err.message().contains("-overwrite-unidentified-content"),
        "{}",
        err.message()
    );

    // Zeros: formatted, then a filesystem may be replaced.
    write_dev(&node, 0, &vec![0u8; 4096]);
    for _ in 0..2 {
        v.format_volume(volume::v1::FormatVolumeRequest {
            volume_id: id.clone(),
        })
        .await
        .unwrap();
        assert!(formatted(&mut v, id.clone()).await);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_table_of_ours_cut_short_is_completed_by_the_retry() {
    if !can_run() {
        return;
    }
    let proxy = Proxy::start(&[]);
    let sectors = SIZE / 512;
    let disk_guid = gpt::Guid::from_windows_bytes([0x11; 16]);
    let part_guid = gpt::Guid::from_random_bytes([0x5a; 16]);
    let writes = gpt::create_single_partition(
        512,
        sectors,
        disk_guid,
        part_guid,
        gpt::Guid::BASIC_DATA,
        "Basic data partition",
    )
    .unwrap();
    // Every cut before the last write (the primary header).
    for cut in 1..writes.len() {
        let d = LoopDisk::new(proxy.root.path(), SIZE);
        for w in &writes[..cut] {
            write_dev(&d.dev, w.offset, &w.bytes);
        }
        partition(&proxy, d.number)
            .await
            .unwrap_or_else(|e| panic!("cut after {cut} writes: {e:?}"));
        let id = only_volume(&proxy, d.number).await;
        assert!(
            id.to_lowercase()
                .contains(&part_guid.to_string().to_lowercase()),
            "cut {cut}: {id} is not the partition the first attempt wrote"
        );
    }
}

/// Data deeper than the probes read: 6 MiB of random bytes 2 MiB into a
/// 63 MiB volume whose first and last MiB are zero is not formatted over
/// (the zero check covers the volume's first 64 MiB whole); and a
/// partition added to an existing table has its region checked the same
/// way before the table is written.
#[tokio::test(flavor = "multi_thread")]
async fn data_in_the_middle_of_a_region_is_never_written_over() {
    if !can_run() {
        return;
    }
    let proxy = Proxy::start(&[]);
    let d = LoopDisk::new(proxy.root.path(), SIZE);
    partition(&proxy, d.number).await.unwrap();
    let id = only_volume(&proxy, d.number).await;
    let node = part1(&d);
    write_dev(&node, 2 * MIB, &random(6 * MIB as usize));
    let before = digest(&node);
    let mut v = proxy.client().connect_volume_v1().await.unwrap();
    let err = v
        .format_volume(volume::v1::FormatVolumeRequest {
            volume_id: id.clone(),
        })
        .await
        .expect_err("data at 2 MiB");
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    assert!(
        err.message().contains("-overwrite-unidentified-content"),
        "{}",
        err.message()
    );
    assert_eq!(digest(&node), before, "the data was written over");

    // A disk with a table but no partition, old data where the new
    // partition will be: random bytes 10 MiB in, or a LUKS header where
    // the partition starts (refused with the flag too).
    let luks = {
        let mut b = vec![0u8; 8];
        b[..6].copy_from_slice(b"LUKS\xba\xbe");
        b[6..8].copy_from_slice(&2u16.to_be_bytes());
        b
    };
    // (what, where, the bytes, the proxy's flags, what the refusal names)
    type Case<'a> = (&'a str, u64, Vec<u8>, &'a [&'a str], &'a str);
    let cases: Vec<Case> = vec![
        (
            "random bytes",
            10 * MIB,
            random(4096),
            &[],
            "-overwrite-unidentified-content",
        ),
        (
            "a LUKS header",
            MIB,
            luks,
            &["-overwrite-unidentified-content"],
            "crypto_LUKS",
        ),
    ];
    for (what, off, bytes, args, named) in cases {
        let proxy = Proxy::start(args);
        let d = LoopDisk::new(proxy.root.path(), SIZE);
        for w in
            gpt::create_empty(512, SIZE / 512, gpt::Guid::from_windows_bytes([0x44; 16])).unwrap()
        {
            write_dev(&d.dev, w.offset, &w.bytes);
        }
        write_dev(&d.dev, off, &bytes);
        let before = digest(&d.dev);
        let err = partition(&proxy, d.number).await.expect_err(what);
        assert_eq!(err.code(), Code::FailedPrecondition, "{what}: {err:?}");
        assert!(err.message().contains(named), "{what}: {}", err.message());
        assert!(
            err.message().contains("new partition"),
            "{what}: {}",
            err.message()
        );
        assert_eq!(digest(&d.dev), before, "{what}: the disk changed");
    }
}
