//! The validation layer over the recording fake: bad arguments never reach
//! the backend; good ones arrive normalised.

use super::fake::FakeStorage;
use super::*;
use crate::disk::*;
use crate::path::Flavor;
use crate::volume::*;

const PAGE83: &str = "60022480abcdef0123456789abcdef01";

fn storage() -> (tempfile::TempDir, Storage<FakeStorage>) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("kubelet");
    std::fs::create_dir(&root).unwrap();
    let policy = PathPolicy::new(Flavor::NATIVE, [root.to_str().unwrap()]).unwrap();
    let fake = FakeStorage::new();
    fake.add_disk(7, 1 << 30, PAGE83);
    (dir, Storage::new(policy, fake))
}

fn root(dir: &tempfile::TempDir) -> String {
    dir.path().join("kubelet").to_str().unwrap().to_string()
}

fn volume_of(s: &Storage<FakeStorage>) -> String {
    s.partition_disk(PartitionDiskRequest { disk_number: 7 })
        .unwrap();
    s.list_volumes_on_disk(ListVolumesOnDiskRequest {
        disk_number: 7,
        partition_number: 0,
    })
    .unwrap()
    .volume_ids
    .remove(0)
}

#[test]
fn hostile_volume_ids_never_reach_the_backend() {
    let (_d, s) = storage();
    for id in [
        "",
        "C:\\",
        "/dev/sda1",
        "\\\\.\\PhysicalDrive0",
        "\\\\?\\Volume{x}\\",
        "\\\\?\\GLOBALROOT\\Device\\Harddisk0\\Partition1",
        "\\\\?\\Volume{0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0}\\..\\x",
        "\\\\?\\Volume{0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0}'; DROP",
    ] {
        let v = id.to_string();
        let errs = [
            s.is_volume_formatted(IsVolumeFormattedRequest {
                volume_id: v.clone(),
            })
            .unwrap_err(),
            s.format_volume(FormatVolumeRequest {
                volume_id: v.clone(),
            })
            .unwrap_err(),
            s.get_volume_stats(GetVolumeStatsRequest {
                volume_id: v.clone(),
            })
            .unwrap_err(),
            s.write_volume_cache(WriteVolumeCacheRequest {
                volume_id: v.clone(),
            })
            .unwrap_err(),
            s.resize_volume(ResizeVolumeRequest {
                volume_id: v.clone(),
                size_bytes: 0,
            })
            .unwrap_err(),
            s.get_disk_number_from_volume_id(GetDiskNumberFromVolumeIdRequest {
                volume_id: v.clone(),
            })
            .unwrap_err(),
        ];
        for e in errs {
            assert!(matches!(e, Error::InvalidArgument(_)), "{id:?}: {e}");
        }
    }
    assert!(s.backend().calls().is_empty(), "{:?}", s.backend().calls());
}

#[test]
fn hostile_target_paths_never_reach_the_backend() {
    let (d, s) = storage();
    let v = volume_of(&s);
    let before = s.backend().calls().len();
    let r = root(&d);
    let outside = d.path().join("elsewhere");
    std::fs::create_dir(&outside).unwrap();
    let link = format!("{r}/link-out");
    std::os::unix::fs::symlink(&outside, &link).unwrap();
    for (target, want_denied) in [
        ("relative/path".to_string(), false),
        (format!("{r}/../escape"), false),
        (format!("{r}/a\0b"), false),
        (format!("{r}X/mnt"), true),
        ("/etc".to_string(), true),
        (r.clone(), true),
        (format!("{link}/mnt"), true),
    ] {
        for e in [
            s.mount_volume(MountVolumeRequest {
                volume_id: v.clone(),
                target_path: target.clone(),
            })
            .unwrap_err(),
            s.unmount_volume(UnmountVolumeRequest {
                volume_id: v.clone(),
                target_path: target.clone(),
            })
            .unwrap_err(),
        ] {
            match e {
                Error::PermissionDenied(_) if want_denied => {}
                Error::InvalidArgument(_) if !want_denied => {}
                e => panic!("{target:?}: {e}"),
            }
        }
        if target == r {
            continue; // looking up a root is allowed (it is not a mount point)
        }
        let e = s
            .get_volume_id_from_target_path(GetVolumeIdFromTargetPathRequest {
                target_path: target.clone(),
            })
            .unwrap_err();
        assert!(
            matches!(e, Error::PermissionDenied(_) | Error::InvalidArgument(_)),
            "{e}"
        );
    }
    // Only lookups of the volume's disk (for its budget of calls in
    // flight, `storage::budget`) may have reached the backend.
    let calls = s.backend().calls();
    let acting: Vec<_> = calls[before..]
        .iter()
        .filter(|c| !c.starts_with("volume_disk "))
        .collect();
    assert!(acting.is_empty(), "{acting:?}");
    assert!(s.backend().mounts().is_empty());
}

#[test]
fn life_cycle_over_the_fake() {
    let (d, s) = storage();
    let v = volume_of(&s);
    s.partition_disk(PartitionDiskRequest { disk_number: 7 })
        .unwrap();
    assert_eq!(
        s.backend().disk(7).unwrap().partitions.len(),
        1,
        "partitioning is idempotent"
    );
    assert!(
        !s.is_volume_formatted(IsVolumeFormattedRequest {
            volume_id: v.clone()
        })
        .unwrap()
        .formatted
    );
    s.format_volume(FormatVolumeRequest {
        volume_id: v.clone(),
    })
    .unwrap();
    assert!(
        s.is_volume_formatted(IsVolumeFormattedRequest {
            volume_id: v.clone()
        })
        .unwrap()
        .formatted
    );
    let target = format!("{}/mnt", root(&d));
    // Upper-case hex and no trailing backslash name the same volume.
    let loud = v
        .trim_end_matches('\\')
        .to_uppercase()
        .replace("\\\\?\\VOLUME", "\\\\?\\Volume");
    s.mount_volume(MountVolumeRequest {
        volume_id: loud,
        target_path: target.clone(),
    })
    .unwrap();
    s.mount_volume(MountVolumeRequest {
        volume_id: v.clone(),
        target_path: target.clone(),
    })
    .unwrap();
    let got = s
        .get_volume_id_from_target_path(GetVolumeIdFromTargetPathRequest {
            target_path: target.clone(),
        })
        .unwrap();
    assert_eq!(got.volume_id, v);
    let got = s
        .get_closest_volume_id_from_target_path(GetClosestVolumeIdFromTargetPathRequest {
            target_path: format!("{target}/sub/dir"),
        })
        .unwrap();
    assert_eq!(got.volume_id, v);
    assert_eq!(
        s.get_disk_number_from_volume_id(GetDiskNumberFromVolumeIdRequest {
            volume_id: v.clone()
        })
        .unwrap()
        .disk_number,
        7
    );
    s.backend().set_disk_size(7, 2 << 30);
    s.resize_volume(ResizeVolumeRequest {
        volume_id: v.clone(),
        size_bytes: 0,
    })
    .unwrap();
    let stats = s
        .get_volume_stats(GetVolumeStatsRequest {
            volume_id: v.clone(),
        })
        .unwrap();
    assert_eq!(stats.total_bytes, (2 << 30) - (2 << 20));
    let e = s
        .resize_volume(ResizeVolumeRequest {
            volume_id: v.clone(),
            size_bytes: -1,
        })
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    s.unmount_volume(UnmountVolumeRequest {
        volume_id: v.clone(),
        target_path: target.clone(),
    })
    .unwrap();
    assert!(s.backend().mounts().is_empty());
}

#[test]
fn disk_calls() {
    let (_d, s) = storage();
    let n = s
        .get_disk_number_by_name(GetDiskNumberByNameRequest {
            disk_name: PAGE83.into(),
        })
        .unwrap();
    assert_eq!(n.disk_number, 7);
    let e = s
        .get_disk_number_by_name(GetDiskNumberByNameRequest {
            disk_name: "nope".into(),
        })
        .unwrap_err();
    assert!(matches!(e, Error::NotFound(_)), "{e}");
    for bad in ["", "a\nb", &"x".repeat(2000)] {
        let e = s
            .get_disk_number_by_name(GetDiskNumberByNameRequest {
                disk_name: bad.into(),
            })
            .unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    }
    let e = s
        .get_disk_stats(GetDiskStatsRequest { disk_number: 8 })
        .unwrap_err();
    assert!(matches!(e, Error::NotFound(_)), "{e}");
    assert_eq!(
        s.get_disk_stats(GetDiskStatsRequest { disk_number: 7 })
            .unwrap()
            .total_bytes,
        1 << 30
    );
    s.set_disk_state(SetDiskStateRequest {
        disk_number: 7,
        is_online: false,
    })
    .unwrap();
    assert!(
        !s.get_disk_state(GetDiskStateRequest { disk_number: 7 })
            .unwrap()
            .is_online
    );
    let locs = s.list_disk_locations(ListDiskLocationsRequest {}).unwrap();
    assert_eq!(locs.disk_locations[&7].target, "7");
    let ids = s.list_disk_ids(ListDiskIdsRequest {}).unwrap();
    assert_eq!(ids.disk_ids[&7].page83, PAGE83);
}

#[test]
fn resize_rule() {
    const M: u64 = 1 << 20;
    use ResizePlan::*;
    use ResizeTarget::*;
    assert_eq!(plan_resize(1000 * M, 1000 * M, Maximum).unwrap(), Skip);
    assert_eq!(plan_resize(1000 * M, 1099 * M, Maximum).unwrap(), Skip);
    assert_eq!(
        plan_resize(1000 * M, 1100 * M, Maximum).unwrap(),
        Grow(1100 * M)
    );
    assert_eq!(
        plan_resize(1000 * M, 2000 * M, Bytes(1500 * M)).unwrap(),
        Grow(1500 * M)
    );
    assert_eq!(
        plan_resize(1000 * M, 2000 * M, Bytes(500 * M)).unwrap(),
        Shrink(500 * M)
    );
    assert!(matches!(
        plan_resize(1000 * M, 2000 * M, Bytes(3000 * M)),
        Err(Error::FailedPrecondition(_))
    ));
}

#[test]
fn volume_ids_normalise_and_reject_with_invalid_argument() {
    const G: &str = "0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0";
    let want = format!("\\\\?\\Volume{{{G}}}\\");
    for ok in [
        want.clone(),
        format!("\\\\?\\Volume{{{G}}}"),
        format!("\\\\?\\Volume{{{}}}\\", G.to_uppercase()),
    ] {
        let v = volume_id(&ok).unwrap();
        assert_eq!(v.as_str(), want);
        assert_eq!(v.device_path(), &want[..want.len() - 1]);
    }
    for bad in [
        "",
        "\\\\.\\Volume{0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0}\\",
        "\\\\?\\Volume{0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0}\\\\",
        "\\\\?\\Volume{0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f}\\",
        "\\\\?\\Volume{0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0}\0",
        "/dev/sda1",
    ] {
        let e = volume_id(bad).unwrap_err();
        assert!(
            matches!(&e, Error::InvalidArgument(m) if m.contains("volume id")),
            "{bad:?}: {e}"
        );
    }
}

#[test]
fn nvme_disks_are_listed_and_served_like_scsi_ones() {
    use super::parse::nvme::{NamespaceIds, ScsiAddress};
    let (_d, s) = storage();
    let nguid = [
        0xe6, 0xd8, 0x66, 0x42, 0x50, 0xd8, 0x47, 0xbd, 0x91, 0x6e, 0xaf, 0x1b, 0, 0x11, 0x22, 0x33,
    ];
    let at = |lun| ScsiAddress {
        port: 1,
        path: 0,
        target: 0,
        lun,
    };
    // Namespace 2 with an NGUID; namespace 3 with only an EUI-64; the
    // OS disk (Lun 0) with no LUN to give.
    s.backend().add_nvme_disk(
        6,
        1 << 30,
        at(0),
        NamespaceIds {
            nguid: [1; 16],
            eui64: [0; 8],
        },
        "8f0a1b2c3d4e",
    );
    s.backend().add_nvme_disk(
        8,
        4 << 30,
        at(1),
        NamespaceIds {
            nguid,
            eui64: [0; 8],
        },
        "8f0a1b2c3d4e",
    );
    s.backend().add_nvme_disk(
        9,
        2 << 30,
        at(2),
        NamespaceIds {
            nguid: [0; 16],
            eui64: [0, 0x25, 0x38, 0xb5, 0x71, 0xb0, 0x1a, 0x2b],
        },
        "8f0a1b2c3d4e",
    );
    let locs = s.list_disk_locations(ListDiskLocationsRequest {}).unwrap();
    let l = &locs.disk_locations[&8];
    assert_eq!(
        (
            l.adapter.as_str(),
            l.bus.as_str(),
            l.target.as_str(),
            l.lun_id.as_str()
        ),
        ("1", "0", "0", "0")
    );
    assert_eq!(locs.disk_locations[&9].lun_id, "1");
    assert!(!locs.disk_locations.contains_key(&6));
    let ids = s.list_disk_ids(ListDiskIdsRequest {}).unwrap();
    assert_eq!(ids.disk_ids[&8].page83, "e6d8664250d847bd916eaf1b00112233");
    assert_eq!(ids.disk_ids[&9].page83, "002538b571b01a2b");
    assert_eq!(ids.disk_ids[&9].serial_number, "8f0a1b2c3d4e");
    let n = s
        .get_disk_number_by_name(GetDiskNumberByNameRequest {
            disk_name: "002538b571b01a2b".into(),
        })
        .unwrap();
    assert_eq!(n.disk_number, 9);
    assert_eq!(
        s.get_disk_stats(GetDiskStatsRequest { disk_number: 8 })
            .unwrap()
            .total_bytes,
        4 << 30
    );
    s.partition_disk(PartitionDiskRequest { disk_number: 8 })
        .unwrap();
    s.partition_disk(PartitionDiskRequest { disk_number: 8 })
        .unwrap();
    let vols = s
        .list_volumes_on_disk(ListVolumesOnDiskRequest {
            disk_number: 8,
            partition_number: 0,
        })
        .unwrap();
    assert_eq!(vols.volume_ids.len(), 1);
    for online in [false, true] {
        s.set_disk_state(SetDiskStateRequest {
            disk_number: 9,
            is_online: online,
        })
        .unwrap();
        assert_eq!(
            s.get_disk_state(GetDiskStateRequest { disk_number: 9 })
                .unwrap()
                .is_online,
            online
        );
    }
    s.rescan(RescanRequest {}).unwrap();
    let calls = s.backend().calls();
    for want in ["partition_disk 8", "set_disk_online 9 false", "rescan"] {
        assert!(
            calls.iter().any(|c| c.starts_with(want)),
            "{want} not in {calls:?}"
        );
    }
}

/// The calls that change or measure a disk never ask what bus it is on or
/// where it hangs: the bus type and the SCSI address are read for the
/// identifiers and the locations only (a guard over the sources).
#[test]
fn only_ids_and_locations_read_the_bus_type_or_scsi_address() {
    let sources = [
        ("windows/disk.rs", include_str!("windows/disk.rs")),
        ("windows/inventory.rs", include_str!("windows/inventory.rs")),
        ("windows/mod.rs", include_str!("windows/mod.rs")),
        ("windows/stor.rs", include_str!("windows/stor.rs")),
        ("windows/volume.rs", include_str!("windows/volume.rs")),
        ("windows/content.rs", include_str!("windows/content.rs")),
        ("linux/mod.rs", include_str!("linux/mod.rs")),
        ("linux/layout.rs", include_str!("linux/layout.rs")),
        ("linux/rescan.rs", include_str!("linux/rescan.rs")),
    ];
    // Each marker, and the functions whose bodies may hold it.
    let allowed: &[(&str, &[&str])] = &[
        ("BUS_TYPE_NVME", &["disk_ids", "nvme_address"]),
        (
            "scsi_address(",
            &["nvme_ids", "nvme_address", "scsi_address"],
        ),
        (
            "nvme_address(",
            &["nvme_address", "inventory_disk_locations"],
        ),
        ("nvme_ids(", &["disk_ids", "nvme_ids"]),
        ("BusType", &[]),
    ];
    for (file, text) in sources {
        let mut current = "";
        for line in text.lines() {
            let t = line.trim_start();
            // Items and methods (indented at most once), not inner helpers.
            let item = line.len() - t.len() <= 4;
            if let Some(rest) = item.then_some(t).and_then(|t| {
                t.strip_prefix("pub fn ")
                    .or_else(|| t.strip_prefix("fn "))
                    .or_else(|| t.strip_prefix("pub(super) fn "))
                    .or_else(|| t.strip_prefix("pub(crate) fn "))
            }) {
                current = rest.split(['(', '<']).next().unwrap_or("");
            }
            if t.starts_with("//") {
                continue;
            }
            for (marker, fns) in allowed {
                if line.contains(marker) {
                    assert!(
                        fns.contains(&current),
                        "{file}: {marker} used in {current}: {line}"
                    );
                }
            }
        }
    }
}

/// GetVolumeIDFromTargetPath of a plain directory and of missing paths is
/// NotFound, and its message satisfies every driver expression of the
/// compatibility table (aws-ebs: "not mounted").
#[test]
fn not_mounted_targets_carry_the_phrases_drivers_match() {
    let (d, s) = storage();
    let sep = std::path::MAIN_SEPARATOR;
    let plain = format!("{}{sep}plain", root(&d));
    std::fs::create_dir(&plain).unwrap();
    let cases = [
        (plain.clone(), compat::Condition::NotAMountPoint),
        (
            format!("{}{sep}missing", root(&d)),
            compat::Condition::TargetMissing,
        ),
        (
            format!("{}{sep}missing{sep}deeper", root(&d)),
            compat::Condition::TargetMissing,
        ),
    ];
    for (target, condition) in cases {
        let err = s
            .get_volume_id_from_target_path(GetVolumeIdFromTargetPathRequest {
                target_path: target.clone(),
            })
            .unwrap_err();
        let Error::NotFound(m) = &err else {
            panic!("{target}: {err:?}")
        };
        let p = compat::PHRASES
            .iter()
            .find(|p| p.condition == condition)
            .unwrap();
        assert!(m.contains(&p.text.replace("{path}", &target)), "{m}");
        for (dm, _) in compat::catalog() {
            let re = regex::Regex::new(dm.expression).unwrap();
            assert!(re.is_match(m), "{} {}: {m}", dm.driver, dm.file);
        }
    }
}
