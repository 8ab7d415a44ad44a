//! The Disk and Volume APIs of every version over the real binary's Unix
//! sockets, on real loop-device disks (needs root; CI runs as root).
//!
//! Each test attaches its own sparse-file loop disk; the fixture unmounts and
//! detaches it on drop, also when the test fails.
#![cfg(target_os = "linux")]

mod common;
mod storage;

use common::{assert_code, Proxy};
use csi_proxy_api::{disk, volume};
use std::path::Path;
use storage::{can_run, fs_total, is_mount_point, LoopDisk, MIB};
use tonic::Code;

fn s(p: &Path) -> String {
    p.display().to_string()
}

const SIZE: u64 = 256 * MIB;
const GROWN: u64 = 512 * MIB;

/// The whole life cycle on disk v1 + volume v2alpha1 (and volume v1 for the
/// calls both have).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn life_cycle_v1_and_v2alpha1() {
    if !can_run() {
        return;
    }
    let proxy = Proxy::start(&[]);
    let mut loopd = LoopDisk::new(proxy.root.path(), SIZE);
    let n = loopd.number;
    let c = proxy.client();
    let mut d = c.connect_disk_v1().await.unwrap();
    let mut v = c.connect_volume_v2alpha1().await.unwrap();
    let mut v1 = c.connect_volume_v1().await.unwrap();

    // Locations and ids: the loop disk is listed.
    let locs = d
        .list_disk_locations(disk::v1::ListDiskLocationsRequest {})
        .await
        .unwrap()
        .into_inner();
    let loc = &locs.disk_locations[&n];
    assert_eq!(
        (loc.adapter.as_str(), loc.lunid.as_str()),
        ("loop", loopd.name.trim_start_matches("loop"))
    );
    let ids = d
        .list_disk_i_ds(disk::v1::ListDiskIDsRequest {})
        .await
        .unwrap()
        .into_inner();
    assert!(ids.disk_i_ds.contains_key(&n), "{ids:?}");
    let st = d
        .get_disk_stats(disk::v1::GetDiskStatsRequest { disk_number: n })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(st.total_bytes as u64, SIZE);

    // Partition, twice.
    for _ in 0..2 {
        d.partition_disk(disk::v1::PartitionDiskRequest { disk_number: n })
            .await
            .unwrap();
    }
    let vols = v
        .list_volumes_on_disk(volume::v2alpha1::ListVolumesOnDiskRequest {
            disk_number: n,
            partition_number: 0,
        })
        .await
        .unwrap()
        .into_inner()
        .volume_ids;
    assert_eq!(vols.len(), 1, "{vols:?}");
    let id = vols[0].clone();
    assert!(
        id.starts_with("\\\\?\\Volume{") && id.ends_with("}\\"),
        "{id}"
    );
    let one = v
        .list_volumes_on_disk(volume::v2alpha1::ListVolumesOnDiskRequest {
            disk_number: n,
            partition_number: 1,
        })
        .await
        .unwrap()
        .into_inner()
        .volume_ids;
    assert_eq!(one, vols);
    assert_code(
        v.list_volumes_on_disk(volume::v2alpha1::ListVolumesOnDiskRequest {
            disk_number: n,
            partition_number: 9,
        })
        .await,
        &[Code::NotFound],
        "no partition 9",
    );
    let dn = v
        .get_disk_number_from_volume_id(volume::v2alpha1::GetDiskNumberFromVolumeIdRequest {
            volume_id: id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(dn.disk_number, n);

    // Format.
    let formatted = |r: volume::v2alpha1::IsVolumeFormattedResponse| r.formatted;
    let f = v
        .is_volume_formatted(volume::v2alpha1::IsVolumeFormattedRequest {
            volume_id: id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!formatted(f));
    v.format_volume(volume::v2alpha1::FormatVolumeRequest {
        volume_id: id.clone(),
    })
    .await
    .unwrap();
    let f = v1
        .is_volume_formatted(volume::v1::IsVolumeFormattedRequest {
            volume_id: id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(f.formatted);

    // Mount (twice: idempotent) under the kubelet dir.
    let target = proxy.kubelet.join("plugins/disk/globalmount");
    std::fs::create_dir_all(target.parent().unwrap()).unwrap();
    for _ in 0..2 {
        v.mount_volume(volume::v2alpha1::MountVolumeRequest {
            volume_id: id.clone(),
            target_path: s(&target),
        })
        .await
        .unwrap();
    }
    assert!(is_mount_point(&target));
    let got = v
        .get_volume_id_from_target_path(volume::v2alpha1::GetVolumeIdFromTargetPathRequest {
            target_path: s(&target),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got.volume_id, id);
    let sub = target.join("pod/data");
    std::fs::create_dir_all(&sub).unwrap();
    let got = v
        .get_closest_volume_id_from_target_path(
            volume::v2alpha1::GetClosestVolumeIdFromTargetPathRequest {
                target_path: s(&sub),
            },
        )
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got.volume_id, id);
    // The kubelet dir itself is not on the volume.
    assert_code(
        v.get_closest_volume_id_from_target_path(
            volume::v2alpha1::GetClosestVolumeIdFromTargetPathRequest {
                target_path: s(&proxy.kubelet),
            },
        )
        .await,
        &[Code::NotFound],
        "kubelet dir is not on a volume",
    );
    std::fs::write(sub.join("file"), vec![7u8; 4 * MIB as usize]).unwrap();

    // Stats and write cache.
    let stats = v
        .get_volume_stats(volume::v2alpha1::GetVolumeStatsRequest {
            volume_id: id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(
        stats.total_bytes > 200 * MIB as i64 && stats.total_bytes <= SIZE as i64,
        "{stats:?}"
    );
    assert!(
        stats.used_bytes >= 4 * MIB as i64 && stats.used_bytes < stats.total_bytes,
        "{stats:?}"
    );
    v.write_volume_cache(volume::v2alpha1::WriteVolumeCacheRequest {
        volume_id: id.clone(),
    })
    .await
    .unwrap();

    // Grow the backing file, rescan, resize to the maximum.
    loopd.grow_file(GROWN);
    d.rescan(disk::v1::RescanRequest {}).await.unwrap();
    let st = d
        .get_disk_stats(disk::v1::GetDiskStatsRequest { disk_number: n })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(st.total_bytes as u64, GROWN);
    let r = v
        .resize_volume(volume::v2alpha1::ResizeVolumeRequest {
            volume_id: id.clone(),
            size_bytes: 0,
        })
        .await;
    if !csi_proxy_host::storage::linux::can_grow_mounted_ext() {
        // This sandbox withholds CAP_SYS_RESOURCE, which the kernel wants
        // for growing a mounted ext4: a clear error, then the offline way.
        assert_code(
            r,
            &[Code::PermissionDenied],
            "online ext4 resize without CAP_SYS_RESOURCE",
        );
        v.unmount_volume(volume::v2alpha1::UnmountVolumeRequest {
            volume_id: id.clone(),
            target_path: s(&target),
        })
        .await
        .unwrap();
        v.resize_volume(volume::v2alpha1::ResizeVolumeRequest {
            volume_id: id.clone(),
            size_bytes: 0,
        })
        .await
        .unwrap();
        v.mount_volume(volume::v2alpha1::MountVolumeRequest {
            volume_id: id.clone(),
            target_path: s(&target),
        })
        .await
        .unwrap();
    } else {
        r.unwrap();
    }
    let grown = v
        .get_volume_stats(volume::v2alpha1::GetVolumeStatsRequest {
            volume_id: id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(
        grown.total_bytes > stats.total_bytes + 200 * MIB as i64,
        "{stats:?} → {grown:?}"
    );
    assert_eq!(fs_total(&target) as i64, grown.total_bytes);
    // Again: nothing left to grow; a size beyond the disk is refused.
    v.resize_volume(volume::v2alpha1::ResizeVolumeRequest {
        volume_id: id.clone(),
        size_bytes: 0,
    })
    .await
    .unwrap();
    assert_code(
        v.resize_volume(volume::v2alpha1::ResizeVolumeRequest {
            volume_id: id.clone(),
            size_bytes: 1 << 40,
        })
        .await,
        &[Code::FailedPrecondition],
        "resize beyond the disk",
    );
    assert_code(
        v.resize_volume(volume::v2alpha1::ResizeVolumeRequest {
            volume_id: id.clone(),
            size_bytes: -5,
        })
        .await,
        &[Code::InvalidArgument],
        "negative size",
    );
    // Offline is refused while mounted; formatting a mounted volume too.
    assert_code(
        d.set_disk_state(disk::v1::SetDiskStateRequest {
            disk_number: n,
            is_online: false,
        })
        .await,
        &[Code::FailedPrecondition],
        "offline while mounted",
    );
    assert_code(
        v.format_volume(volume::v2alpha1::FormatVolumeRequest {
            volume_id: id.clone(),
        })
        .await,
        &[Code::FailedPrecondition],
        "format while mounted",
    );

    // Unmount (twice: idempotent); the data survives a remount.
    for _ in 0..2 {
        v.unmount_volume(volume::v2alpha1::UnmountVolumeRequest {
            volume_id: id.clone(),
            target_path: s(&target),
        })
        .await
        .unwrap();
    }
    assert!(!is_mount_point(&target));
    assert!(target.is_dir(), "the mount point directory stays");
    let unmounted = v
        .get_volume_stats(volume::v2alpha1::GetVolumeStatsRequest {
            volume_id: id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(
        unmounted.total_bytes >= grown.total_bytes,
        "{unmounted:?} vs {grown:?}"
    );

    // Offline / online.
    d.set_disk_state(disk::v1::SetDiskStateRequest {
        disk_number: n,
        is_online: false,
    })
    .await
    .unwrap();
    let state = d
        .get_disk_state(disk::v1::GetDiskStateRequest { disk_number: n })
        .await
        .unwrap()
        .into_inner();
    assert!(!state.is_online);
    assert_code(
        v.mount_volume(volume::v2alpha1::MountVolumeRequest {
            volume_id: id.clone(),
            target_path: s(&target),
        })
        .await,
        &[Code::FailedPrecondition],
        "mount on an offline disk",
    );
    d.set_disk_state(disk::v1::SetDiskStateRequest {
        disk_number: n,
        is_online: true,
    })
    .await
    .unwrap();
    let state = d
        .get_disk_state(disk::v1::GetDiskStateRequest { disk_number: n })
        .await
        .unwrap()
        .into_inner();
    assert!(state.is_online);
    v.mount_volume(volume::v2alpha1::MountVolumeRequest {
        volume_id: id.clone(),
        target_path: s(&target),
    })
    .await
    .unwrap();
    assert_eq!(
        std::fs::read(target.join("pod/data/file")).unwrap().len(),
        4 * MIB as usize
    );
    v.unmount_volume(volume::v2alpha1::UnmountVolumeRequest {
        volume_id: id.clone(),
        target_path: s(&target),
    })
    .await
    .unwrap();

    // The disk vanishes: clear NotFound errors.
    loopd.detach();
    assert_code(
        d.get_disk_stats(disk::v1::GetDiskStatsRequest { disk_number: n })
            .await,
        &[Code::NotFound],
        "gone disk",
    );
    assert_code(
        v.get_volume_stats(volume::v2alpha1::GetVolumeStatsRequest {
            volume_id: id.clone(),
        })
        .await,
        &[Code::NotFound],
        "gone volume",
    );
}

/// Bad arguments of every string and number field: clear errors, nothing
/// on the host changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_inputs_touch_nothing() {
    if !can_run() {
        return;
    }
    let proxy = Proxy::start(&[]);
    let loopd = LoopDisk::new(proxy.root.path(), SIZE);
    let n = loopd.number;
    let c = proxy.client();
    let mut d = c.connect_disk_v1().await.unwrap();
    let mut v = c.connect_volume_v2alpha1().await.unwrap();
    d.partition_disk(disk::v1::PartitionDiskRequest { disk_number: n })
        .await
        .unwrap();
    let id = v
        .list_volumes_on_disk(volume::v2alpha1::ListVolumesOnDiskRequest {
            disk_number: n,
            partition_number: 0,
        })
        .await
        .unwrap()
        .into_inner()
        .volume_ids
        .remove(0);
    v.format_volume(volume::v2alpha1::FormatVolumeRequest {
        volume_id: id.clone(),
    })
    .await
    .unwrap();
    std::os::unix::fs::symlink(&proxy.outside, proxy.kubelet.join("escape")).unwrap();
    let before = proxy.snapshot();
    // Other tests mount in parallel: count only mounts of this test's tree
    // and of this disk.
    let ours = |root: &Path, dev: &str| -> usize {
        let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        let root = s(root);
        let devs =
            std::fs::read_to_string(format!("/sys/block/{dev}/{dev}p1/dev")).unwrap_or_default();
        info.lines()
            .filter(|l| l.contains(&root) || l.split(' ').nth(2) == Some(devs.trim()))
            .count()
    };
    let mounts_before = ours(proxy.root.path(), &loopd.name);
    assert_eq!(mounts_before, 0);

    let k = s(&proxy.kubelet);
    let o = s(&proxy.outside);
    let bad_ids = [
        String::new(),
        "C:\\".into(),
        format!("/dev/{}p1", loopd.name),
        loopd.dev.clone(),
        "\\\\.\\PhysicalDrive0".into(),
        "\\\\?\\Volume{not-a-guid}\\".into(),
        format!("{id}..\\x"),
        "\\\\?\\GLOBALROOT\\Device\\Harddisk0\\Partition1".into(),
        format!("{}\0", id.trim_end_matches('\\')),
    ];
    for bad in &bad_ids {
        let b = bad.clone();
        assert_code(
            v.format_volume(volume::v2alpha1::FormatVolumeRequest {
                volume_id: b.clone(),
            })
            .await,
            &[Code::InvalidArgument],
            "format bad id",
        );
        assert_code(
            v.is_volume_formatted(volume::v2alpha1::IsVolumeFormattedRequest {
                volume_id: b.clone(),
            })
            .await,
            &[Code::InvalidArgument],
            "formatted bad id",
        );
        assert_code(
            v.resize_volume(volume::v2alpha1::ResizeVolumeRequest {
                volume_id: b.clone(),
                size_bytes: 0,
            })
            .await,
            &[Code::InvalidArgument],
            "resize bad id",
        );
        assert_code(
            v.get_volume_stats(volume::v2alpha1::GetVolumeStatsRequest {
                volume_id: b.clone(),
            })
            .await,
            &[Code::InvalidArgument],
            "stats bad id",
        );
        assert_code(
            v.write_volume_cache(volume::v2alpha1::WriteVolumeCacheRequest {
                volume_id: b.clone(),
            })
            .await,
            &[Code::InvalidArgument],
            "flush bad id",
        );
        assert_code(
            v.get_disk_number_from_volume_id(volume::v2alpha1::GetDiskNumberFromVolumeIdRequest {
                volume_id: b.clone(),
            })
            .await,
            &[Code::InvalidArgument],
            "disk of bad id",
        );
        assert_code(
            v.mount_volume(volume::v2alpha1::MountVolumeRequest {
                volume_id: b.clone(),
                target_path: format!("{k}/m"),
            })
            .await,
            &[Code::InvalidArgument],
            "mount bad id",
        );
        assert_code(
            v.unmount_volume(volume::v2alpha1::UnmountVolumeRequest {
                volume_id: b,
                target_path: format!("{k}/m"),
            })
            .await,
            &[Code::InvalidArgument],
            "unmount bad id",
        );
    }
    // A well-formed id of no volume.
    let ghost = "\\\\?\\Volume{01234567-89ab-4cde-8f01-23456789abcd}\\".to_string();
    assert_code(
        v.format_volume(volume::v2alpha1::FormatVolumeRequest {
            volume_id: ghost.clone(),
        })
        .await,
        &[Code::NotFound],
        "format ghost",
    );
    assert_code(
        v.mount_volume(volume::v2alpha1::MountVolumeRequest {
            volume_id: ghost.clone(),
            target_path: format!("{k}/m"),
        })
        .await,
        &[Code::NotFound],
        "mount ghost",
    );
    // Target paths outside the roots, through links, device paths, the root itself.
    for (target, codes) in [
        (format!("{o}/m"), &[Code::PermissionDenied][..]),
        ("/mnt".to_string(), &[Code::PermissionDenied]),
        (format!("{k}X/m"), &[Code::PermissionDenied]),
        (format!("{k}/escape/m"), &[Code::PermissionDenied]),
        (format!("{k}/../outside/m"), &[Code::InvalidArgument]),
        ("relative".to_string(), &[Code::InvalidArgument]),
        (format!("/dev/{}", loopd.name), &[Code::PermissionDenied]),
        (k.clone(), &[Code::PermissionDenied]),
        (format!("{k}/a\nb"), &[Code::InvalidArgument]),
    ] {
        assert_code(
            v.mount_volume(volume::v2alpha1::MountVolumeRequest {
                volume_id: id.clone(),
                target_path: target.clone(),
            })
            .await,
            codes,
            &format!("mount at {target:?}"),
        );
        assert_code(
            v.unmount_volume(volume::v2alpha1::UnmountVolumeRequest {
                volume_id: id.clone(),
                target_path: target.clone(),
            })
            .await,
            codes,
            &format!("unmount at {target:?}"),
        );
        if target != k {
            assert_code(
                v.get_volume_id_from_target_path(
                    volume::v2alpha1::GetVolumeIdFromTargetPathRequest {
                        target_path: target.clone(),
                    },
                )
                .await,
                &[codes[0], Code::NotFound],
                &format!("volume at {target:?}"),
            );
        }
    }
    // Mount on a non-empty directory or a file: refused.
    std::fs::create_dir(proxy.kubelet.join("full")).unwrap();
    std::fs::write(proxy.kubelet.join("full/x"), b"x").unwrap();
    std::fs::write(proxy.kubelet.join("file"), b"x").unwrap();
    let before2 = proxy.snapshot();
    for t in ["full", "file"] {
        assert_code(
            v.mount_volume(volume::v2alpha1::MountVolumeRequest {
                volume_id: id.clone(),
                target_path: format!("{k}/{t}"),
            })
            .await,
            &[Code::FailedPrecondition],
            t,
        );
    }
    assert_eq!(proxy.snapshot(), before2);
    std::fs::remove_dir_all(proxy.kubelet.join("full")).unwrap();
    std::fs::remove_file(proxy.kubelet.join("file")).unwrap();

    // Unknown disk numbers, and string ids of the old versions.
    for bad in [0u32, 999_999, u32::MAX] {
        assert_code(
            d.get_disk_stats(disk::v1::GetDiskStatsRequest { disk_number: bad })
                .await,
            &[Code::NotFound],
            "stats",
        );
        assert_code(
            d.partition_disk(disk::v1::PartitionDiskRequest { disk_number: bad })
                .await,
            &[Code::NotFound],
            "partition",
        );
        assert_code(
            d.set_disk_state(disk::v1::SetDiskStateRequest {
                disk_number: bad,
                is_online: false,
            })
            .await,
            &[Code::NotFound],
            "state",
        );
        assert_code(
            v.list_volumes_on_disk(volume::v2alpha1::ListVolumesOnDiskRequest {
                disk_number: bad,
                partition_number: 0,
            })
            .await,
            &[Code::NotFound],
            "volumes",
        );
    }
    let mut d1 = c.connect_disk_v1beta1().await.unwrap();
    for bad in ["", "-1", "1.5", "0x10", "99999999999", "abc", " 1"] {
        assert_code(
            d1.partition_disk(disk::v1beta1::PartitionDiskRequest {
                disk_id: bad.into(),
            })
            .await,
            &[Code::InvalidArgument],
            &format!("disk id {bad:?}"),
        );
    }
    let mut v1 = c.connect_volume_v1beta1().await.unwrap();
    let mut d2 = c.connect_disk_v1beta2().await.unwrap();
    for bad in ["", "-1", "1e3", "4294967296", "x", "7 "] {
        assert_code(
            v1.list_volumes_on_disk(volume::v1beta1::ListVolumesOnDiskRequest {
                disk_id: bad.into(),
            })
            .await,
            &[Code::InvalidArgument],
            &format!("volume disk id {bad:?}"),
        );
        assert_code(
            d2.set_attach_state(disk::v1beta2::SetAttachStateRequest {
                disk_id: bad.into(),
                is_online: false,
            })
            .await,
            &[Code::InvalidArgument],
            &format!("attach state disk id {bad:?}"),
        );
    }
    // Sizes of the old versions: negative is refused there too.
    assert_code(
        v1.resize_volume(volume::v1beta1::ResizeVolumeRequest {
            volume_id: id.clone(),
            size: -1,
        })
        .await,
        &[Code::InvalidArgument],
        "negative size (v1beta1)",
    );
    let mut d0 = c.connect_disk_v1alpha1().await.unwrap();
    assert_code(
        d0.get_disk_number_by_name(disk::v1alpha1::GetDiskNumberByNameRequest {
            disk_name: "no-such-disk".into(),
        })
        .await,
        &[Code::NotFound],
        "unknown disk name",
    );
    assert_code(
        d0.get_disk_number_by_name(disk::v1alpha1::GetDiskNumberByNameRequest {
            disk_name: "a\0b".into(),
        })
        .await,
        &[Code::InvalidArgument],
        "bad disk name",
    );

    assert_eq!(
        proxy.snapshot(),
        before,
        "hostile requests changed the tree"
    );
    assert_eq!(
        ours(proxy.root.path(), &loopd.name),
        mounts_before,
        "a mount was left"
    );
    let f = v
        .is_volume_formatted(volume::v2alpha1::IsVolumeFormattedRequest {
            volume_id: id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(f.formatted, "the volume kept its filesystem");
}

/// The life cycle on the versions whose messages match v1's
/// (disk v1beta3/v1, volume v1beta3/v1).
macro_rules! modern_life_cycle {
    ($name:ident, $dv:ident, $vv:ident, $connect_d:ident, $connect_v:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            if !can_run() {
                return;
            }
            use disk::$dv as dk;
            use volume::$vv as vl;
            let proxy = Proxy::start(&[]);
            let loopd = LoopDisk::new(proxy.root.path(), SIZE);
            let n = loopd.number;
            let c = proxy.client();
            let mut d = c.$connect_d().await.unwrap();
            let mut v = c.$connect_v().await.unwrap();
            let locs = d
                .list_disk_locations(dk::ListDiskLocationsRequest {})
                .await
                .unwrap()
                .into_inner();
            assert!(locs.disk_locations.contains_key(&n));
            let ids = d
                .list_disk_i_ds(dk::ListDiskIDsRequest {})
                .await
                .unwrap()
                .into_inner();
            assert!(ids.disk_i_ds.contains_key(&n));
            for _ in 0..2 {
                d.partition_disk(dk::PartitionDiskRequest { disk_number: n })
                    .await
                    .unwrap();
            }
            let id = v
                .list_volumes_on_disk(vl::ListVolumesOnDiskRequest {
                    disk_number: n,
                    partition_number: 0,
                })
                .await
                .unwrap()
                .into_inner()
                .volume_ids
                .remove(0);
            let fmt = |r: vl::IsVolumeFormattedResponse| r.formatted;
            assert!(!fmt(v
                .is_volume_formatted(vl::IsVolumeFormattedRequest {
                    volume_id: id.clone()
                })
                .await
                .unwrap()
                .into_inner()));
            v.format_volume(vl::FormatVolumeRequest {
                volume_id: id.clone(),
            })
            .await
            .unwrap();
            assert!(fmt(v
                .is_volume_formatted(vl::IsVolumeFormattedRequest {
                    volume_id: id.clone()
                })
                .await
                .unwrap()
                .into_inner()));
            let target = proxy.kubelet.join("mnt");
            v.mount_volume(vl::MountVolumeRequest {
                volume_id: id.clone(),
                target_path: s(&target),
            })
            .await
            .unwrap();
            let got = v
                .get_volume_id_from_target_path(vl::GetVolumeIdFromTargetPathRequest {
                    target_path: s(&target),
                })
                .await
                .unwrap()
                .into_inner();
            assert_eq!(got.volume_id, id);
            let dn = v
                .get_disk_number_from_volume_id(vl::GetDiskNumberFromVolumeIdRequest {
                    volume_id: id.clone(),
                })
                .await
                .unwrap()
                .into_inner();
            assert_eq!(dn.disk_number, n);
            let before = v
                .get_volume_stats(vl::GetVolumeStatsRequest {
                    volume_id: id.clone(),
                })
                .await
                .unwrap()
                .into_inner();
            v.write_volume_cache(vl::WriteVolumeCacheRequest {
                volume_id: id.clone(),
            })
            .await
            .unwrap();
            // Resize offline here (ext4 online growth needs CAP_SYS_RESOURCE,
            // see life_cycle_v1_and_v2alpha1 and life_cycle_xfs_online).
            v.unmount_volume(vl::UnmountVolumeRequest {
                volume_id: id.clone(),
                target_path: s(&target),
            })
            .await
            .unwrap();
            loopd.grow_file(GROWN);
            d.rescan(dk::RescanRequest {}).await.unwrap();
            let st = d
                .get_disk_stats(dk::GetDiskStatsRequest { disk_number: n })
                .await
                .unwrap()
                .into_inner();
            assert_eq!(st.total_bytes as u64, GROWN);
            v.resize_volume(vl::ResizeVolumeRequest {
                volume_id: id.clone(),
                size_bytes: 0,
            })
            .await
            .unwrap();
            v.mount_volume(vl::MountVolumeRequest {
                volume_id: id.clone(),
                target_path: s(&target),
            })
            .await
            .unwrap();
            let after = v
                .get_volume_stats(vl::GetVolumeStatsRequest {
                    volume_id: id.clone(),
                })
                .await
                .unwrap()
                .into_inner();
            assert!(
                after.total_bytes > before.total_bytes + 200 * MIB as i64,
                "{before:?} → {after:?}"
            );
            v.unmount_volume(vl::UnmountVolumeRequest {
                volume_id: id.clone(),
                target_path: s(&target),
            })
            .await
            .unwrap();
            assert!(!is_mount_point(&target));
            d.set_disk_state(dk::SetDiskStateRequest {
                disk_number: n,
                is_online: false,
            })
            .await
            .unwrap();
            assert!(
                !d.get_disk_state(dk::GetDiskStateRequest { disk_number: n })
                    .await
                    .unwrap()
                    .into_inner()
                    .is_online
            );
            d.set_disk_state(dk::SetDiskStateRequest {
                disk_number: n,
                is_online: true,
            })
            .await
            .unwrap();
            assert!(
                d.get_disk_state(dk::GetDiskStateRequest { disk_number: n })
                    .await
                    .unwrap()
                    .into_inner()
                    .is_online
            );
        }
    };
}

modern_life_cycle!(
    life_cycle_v1beta3,
    v1beta3,
    v1beta3,
    connect_disk_v1beta3,
    connect_volume_v1beta3
);
modern_life_cycle!(life_cycle_v1, v1, v1, connect_disk_v1, connect_volume_v1);

/// disk v1beta1/v1beta2 and volume v1beta1/v1beta2: string disk ids,
/// DiskStats, Set/GetAttachState (v1beta2), VolumeStats,
/// GetVolumeDiskNumber, GetVolumeIDFromMount, DismountVolume, `path`/`size`.
macro_rules! beta_life_cycle {
    ($name:ident, $dv:ident, $vv:ident, $connect_d:ident, $connect_v:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            if !can_run() {
                return;
            }
            use disk::$dv as dk;
            use volume::$vv as vl;
            let proxy = Proxy::start(&[]);
            let loopd = LoopDisk::new(proxy.root.path(), SIZE);
            let n = loopd.number.to_string();
            let c = proxy.client();
            let mut d = c.$connect_d().await.unwrap();
            let mut v = c.$connect_v().await.unwrap();
            let locs = d.list_disk_locations(dk::ListDiskLocationsRequest {}).await.unwrap().into_inner();
            assert!(locs.disk_locations.contains_key(&n), "{locs:?}");
            let ids = d.list_disk_i_ds(dk::ListDiskIDsRequest {}).await.unwrap().into_inner();
            let mine = &ids.disk_i_ds[&n];
            assert!(mine.identifiers.contains_key("page83") && mine.identifiers.contains_key("serialNumber"));
            for _ in 0..2 {
                d.partition_disk(dk::PartitionDiskRequest { disk_id: n.clone() }).await.unwrap();
            }
            let id = v
                .list_volumes_on_disk(vl::ListVolumesOnDiskRequest { disk_id: n.clone() })
                .await
                .unwrap()
                .into_inner()
                .volume_ids
                .remove(0);
            assert!(!v.is_volume_formatted(vl::IsVolumeFormattedRequest { volume_id: id.clone() }).await.unwrap().into_inner().formatted);
            v.format_volume(vl::FormatVolumeRequest { volume_id: id.clone() }).await.unwrap();
            assert!(v.is_volume_formatted(vl::IsVolumeFormattedRequest { volume_id: id.clone() }).await.unwrap().into_inner().formatted);
            let target = proxy.kubelet.join("mnt");
            v.mount_volume(vl::MountVolumeRequest { volume_id: id.clone(), path: s(&target) }).await.unwrap();
            let got = v
                .get_volume_id_from_mount(vl::VolumeIdFromMountRequest { mount: s(&target) })
                .await
                .unwrap()
                .into_inner();
            assert_eq!(got.volume_id, id);
            let dn = v
                .get_volume_disk_number(vl::VolumeDiskNumberRequest { volume_id: id.clone() })
                .await
                .unwrap()
                .into_inner();
            assert_eq!(dn.disk_number, i64::from(loopd.number));
            let before = v.volume_stats(vl::VolumeStatsRequest { volume_id: id.clone() }).await.unwrap().into_inner();
            assert!(before.volume_size > 0 && before.volume_used_size > 0);
            v.dismount_volume(vl::DismountVolumeRequest { volume_id: id.clone(), path: s(&target) }).await.unwrap();
            loopd.grow_file(GROWN);
            d.rescan(dk::RescanRequest {}).await.unwrap();
            let st = d.disk_stats(dk::DiskStatsRequest { disk_id: n.clone() }).await.unwrap().into_inner();
            assert_eq!(st.disk_size as u64, GROWN);
            v.resize_volume(vl::ResizeVolumeRequest { volume_id: id.clone(), size: 0 }).await.unwrap();
            v.mount_volume(vl::MountVolumeRequest { volume_id: id.clone(), path: s(&target) }).await.unwrap();
            let after = v.volume_stats(vl::VolumeStatsRequest { volume_id: id.clone() }).await.unwrap().into_inner();
            assert!(after.volume_size > before.volume_size + 200 * MIB as i64, "{before:?} → {after:?}");
            v.dismount_volume(vl::DismountVolumeRequest { volume_id: id.clone(), path: s(&target) }).await.unwrap();
            assert!(!is_mount_point(&target));
            beta_life_cycle!(@state $dv, d, n);
        }
    };
    (@state v1beta1, $d:ident, $n:ident) => {};
    (@state v1beta2, $d:ident, $n:ident) => {{
        use disk::v1beta2 as dk2;
        $d.set_attach_state(dk2::SetAttachStateRequest { disk_id: $n.clone(), is_online: false }).await.unwrap();
        assert!(!$d.get_attach_state(dk2::GetAttachStateRequest { disk_id: $n.clone() }).await.unwrap().into_inner().is_online);
        $d.set_attach_state(dk2::SetAttachStateRequest { disk_id: $n.clone(), is_online: true }).await.unwrap();
        assert!($d.get_attach_state(dk2::GetAttachStateRequest { disk_id: $n.clone() }).await.unwrap().into_inner().is_online);
    }};
}

beta_life_cycle!(
    life_cycle_v1beta1,
    v1beta1,
    v1beta1,
    connect_disk_v1beta1,
    connect_volume_v1beta1
);
beta_life_cycle!(
    life_cycle_v1beta2,
    v1beta2,
    v1beta2,
    connect_disk_v1beta2,
    connect_volume_v1beta2
);

/// disk v1alpha1 and volume v1alpha1: the oldest forms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn life_cycle_v1alpha1() {
    if !can_run() {
        return;
    }
    use disk::v1alpha1 as dk;
    use volume::v1alpha1 as vl;
    let proxy = Proxy::start(&[]);
    let loopd = LoopDisk::new(proxy.root.path(), SIZE);
    let n = loopd.number.to_string();
    let c = proxy.client();
    let mut d = c.connect_disk_v1alpha1().await.unwrap();
    let mut v = c.connect_volume_v1alpha1().await.unwrap();
    let locs = d
        .list_disk_locations(dk::ListDiskLocationsRequest {})
        .await
        .unwrap()
        .into_inner();
    assert!(locs.disk_locations.contains_key(&n), "{locs:?}");
    for _ in 0..2 {
        d.partition_disk(dk::PartitionDiskRequest { disk_id: n.clone() })
            .await
            .unwrap();
    }
    let id = v
        .list_volumes_on_disk(vl::ListVolumesOnDiskRequest { disk_id: n.clone() })
        .await
        .unwrap()
        .into_inner()
        .volume_ids
        .remove(0);
    assert!(
        !v.is_volume_formatted(vl::IsVolumeFormattedRequest {
            volume_id: id.clone()
        })
        .await
        .unwrap()
        .into_inner()
        .formatted
    );
    v.format_volume(vl::FormatVolumeRequest {
        volume_id: id.clone(),
    })
    .await
    .unwrap();
    assert!(
        v.is_volume_formatted(vl::IsVolumeFormattedRequest {
            volume_id: id.clone()
        })
        .await
        .unwrap()
        .into_inner()
        .formatted
    );
    let target = proxy.kubelet.join("mnt");
    v.mount_volume(vl::MountVolumeRequest {
        volume_id: id.clone(),
        path: s(&target),
    })
    .await
    .unwrap();
    assert!(is_mount_point(&target));
    let before = fs_total(&target);
    v.dismount_volume(vl::DismountVolumeRequest {
        volume_id: id.clone(),
        path: s(&target),
    })
    .await
    .unwrap();
    loopd.grow_file(GROWN);
    d.rescan(dk::RescanRequest {}).await.unwrap();
    v.resize_volume(vl::ResizeVolumeRequest {
        volume_id: id.clone(),
        size: 0,
    })
    .await
    .unwrap();
    v.mount_volume(vl::MountVolumeRequest {
        volume_id: id.clone(),
        path: s(&target),
    })
    .await
    .unwrap();
    assert!(
        fs_total(&target) > before + 200 * MIB,
        "{before} → {}",
        fs_total(&target)
    );
    v.dismount_volume(vl::DismountVolumeRequest {
        volume_id: id.clone(),
        path: s(&target),
    })
    .await
    .unwrap();
    assert!(!is_mount_point(&target));
    // GetDiskNumberByName answers with the decimal disk number of the
    // disk whose page-0x83 id is given (loop disks have none: NotFound).
    let e = d
        .get_disk_number_by_name(dk::GetDiskNumberByNameRequest {
            disk_name: "naa.60000000000000000000000000000001".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{e:?}");
}

/// xfs (`-volume-fs-type=xfs`): format, mount, and grow while mounted
/// (`xfs_growfs` needs only CAP_SYS_ADMIN), then stats show the growth.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn life_cycle_xfs_online() {
    if !can_run() || storage::tool("mkfs.xfs").is_none() {
        eprintln!("skipping: needs mkfs.xfs");
        return;
    }
    use disk::v1 as dk;
    use volume::v1 as vl;
    // mkfs.xfs wants at least 300 MiB.
    let proxy = Proxy::start(&["-volume-fs-type=xfs"]);
    let loopd = LoopDisk::new(proxy.root.path(), 512 * MIB);
    let n = loopd.number;
    let c = proxy.client();
    let mut d = c.connect_disk_v1().await.unwrap();
    let mut v = c.connect_volume_v1().await.unwrap();
    d.partition_disk(dk::PartitionDiskRequest { disk_number: n })
        .await
        .unwrap();
    let id = v
        .list_volumes_on_disk(vl::ListVolumesOnDiskRequest {
            disk_number: n,
            partition_number: 0,
        })
        .await
        .unwrap()
        .into_inner()
        .volume_ids
        .remove(0);
    v.format_volume(vl::FormatVolumeRequest {
        volume_id: id.clone(),
    })
    .await
    .unwrap();
    let target = proxy.kubelet.join("xfs");
    v.mount_volume(vl::MountVolumeRequest {
        volume_id: id.clone(),
        target_path: s(&target),
    })
    .await
    .unwrap();
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(
        info.lines()
            .any(|l| l.contains(&s(&target)) && l.contains(" - xfs ")),
        "not an xfs mount"
    );
    let before = v
        .get_volume_stats(vl::GetVolumeStatsRequest {
            volume_id: id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    loopd.grow_file(1024 * MIB);
    d.rescan(dk::RescanRequest {}).await.unwrap();
    v.resize_volume(vl::ResizeVolumeRequest {
        volume_id: id.clone(),
        size_bytes: 0,
    })
    .await
    .unwrap();
    let after = v
        .get_volume_stats(vl::GetVolumeStatsRequest {
            volume_id: id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(
        after.total_bytes > before.total_bytes + 400 * MIB as i64,
        "{before:?} → {after:?}"
    );
    assert_eq!(fs_total(&target) as i64, after.total_bytes);
    v.unmount_volume(vl::UnmountVolumeRequest {
        volume_id: id.clone(),
        target_path: s(&target),
    })
    .await
    .unwrap();
    assert!(!is_mount_point(&target));
}
