//! The real-Windows tier, volumes: Format, Resize, Mount/Unmount,
//! GetVolumeIDFromTargetPath, GetClosestVolumeIDFromTargetPath and
//! WriteVolumeCache on volumes of VHDX disks, through the real binary over
//! its pipes. Under wine each test runs the refusals that come before a
//! volume is touched (host volumes, missing WMI classes); the mount points
//! are then checked with the test's own Win32 calls (`real_windows::links`).
#![cfg(windows)]

mod pipes;
mod real_windows;

use csi_proxy_api::filesystem::v2alpha1 as fs;
use csi_proxy_client::Group;
use pipes::{assert_code, tree, Proxy};
use real_windows::calls::{eventually, same_volume, Calls};
use real_windows::disks::{self, BASIC_DATA};
use real_windows::host_volumes::{self, Place};
use real_windows::links;
use real_windows::vhd::{Vhd, MIB};
use real_windows::{require, under_wine};
use std::path::{Path, PathBuf};
use tonic::Code;

const UNKNOWN_VOLUME: &str = "\\\\?\\Volume{0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0}\\";

async fn start(tag: &str) -> (Proxy, Calls) {
    let p = Proxy::start_unique(tag, "disk,volume", &[]);
    let c = Calls::new(
        p.channel(Group::Disk, "v1").await,
        p.channel(Group::Volume, "v2alpha1").await,
    );
    (p, c)
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// The volume C: is on: the host's, never formatted, never mounted inside
/// the roots (under wine as on Windows), and the target is not created.
async fn host_volume_refusals(p: &Proxy, c: &mut Calls) {
    let (sys, _) = c.system_volume().await;
    assert_code(
        c.format(&sys).await,
        Code::FailedPrecondition,
        "FormatVolume of C:'s volume",
    );
    assert!(c.is_formatted(&sys).await.unwrap());
    let t = p.kubelet.join(r"pods\host\mnt");
    assert_code(
        c.mount(&sys, &s(&t)).await,
        Code::FailedPrecondition,
        "MountVolume of C:'s volume",
    );
    assert!(!t.exists(), "nothing created for a refused mount");
}

/// The data partition's length on `disk`.
fn data_length(disk: u32) -> u64 {
    let l = disks::layout(disk).unwrap();
    l.partitions
        .iter()
        .find(|p| p.gpt_type == Some(BASIC_DATA))
        .unwrap_or_else(|| panic!("no data partition: {l:?}"))
        .length
}

fn is_mount_point_of(dir: &Path, vol: &str) -> bool {
    links::volume_at(dir).is_ok_and(|v| same_volume(&v, vol))
}

#[tokio::test]
async fn format_a_fresh_volume() {
    let (p, mut c) = start("rw-format").await;
    host_volume_refusals(&p, &mut c).await;
    let Some(_w) = require("MSFT_Volume.Format on a VHDX volume") else {
        return;
    };
    let v = Vhd::create(&p.root, "format", 256 * MIB).unwrap();
    let vol = c.partitioned_volume(v.disk()).await;
    assert!(!c.is_formatted(&vol).await.unwrap());
    c.format(&vol).await.unwrap();
    assert!(c.is_formatted(&vol).await.unwrap());
    assert_eq!(disks::filesystem(&vol).unwrap(), "NTFS");
    let (total, used) = c.stats(&vol).await.unwrap();
    let part = data_length(v.disk()) as i64;
    assert!(total > part * 9 / 10 && total <= part, "{total} of {part}");
    assert!(used > 0 && used < total / 2, "{used} of {total}");
    assert_eq!(c.disk_of(&vol).await.unwrap(), v.disk());
}

#[tokio::test]
async fn format_is_refused_while_the_volume_has_an_access_path() {
    let (p, mut c) = start("rw-format-busy").await;
    host_volume_refusals(&p, &mut c).await;
    let Some(_w) = require("a formatted VHDX volume with a mount folder, then a drive letter")
    else {
        return;
    };
    let v = Vhd::create(&p.root, "busy", 128 * MIB).unwrap();
    let vol = c.formatted_volume(v.disk()).await;
    let t = p.kubelet.join(r"pods\busy\mnt");
    c.mount(&vol, &s(&t)).await.unwrap();
    std::fs::write(t.join("data"), b"keep").unwrap();
    // Mounted on a directory, even inside the roots.
    assert_code(
        c.format(&vol).await,
        Code::FailedPrecondition,
        "format while mounted",
    );
    assert_eq!(std::fs::read(t.join("data")).unwrap(), b"keep");
    c.unmount(&vol, &s(&t)).await.unwrap();
    // A drive letter counts too (the host may use it).
    let letter = links::free_drive_letter().expect("a free drive letter");
    links::mount_volume(Path::new(&letter), &vol).unwrap();
    let r = c.format(&vol).await;
    let data = std::fs::read(format!("{letter}data"));
    links::unmount_volume(Path::new(&letter)).unwrap();
    assert_code(r, Code::FailedPrecondition, "format with a drive letter");
    assert_eq!(data.unwrap(), b"keep");
    // No access path left: formatted afresh.
    c.format(&vol).await.unwrap();
    assert!(
        std::fs::metadata(format!("{vol}data")).is_err(),
        "a new filesystem"
    );
}

#[tokio::test]
async fn resize_grow_skip_and_beyond_the_maximum() {
    let (p, mut c) = start("rw-resize").await;
    if under_wine() {
        let (sys, _) = c.system_volume().await;
        // No MSFT_Volume under wine.
        assert_code(
            c.resize(&sys, 0).await,
            Code::NotFound,
            "ResizeVolume under wine",
        );
    }
    assert_code(
        c.resize(UNKNOWN_VOLUME, 0).await,
        Code::NotFound,
        "ResizeVolume unknown",
    );
    let Some(_w) = require("MSFT_Partition.GetSupportedSize/Resize on a VHDX grown while attached")
    else {
        return;
    };
    let mut v = Vhd::create(&p.root, "resize", 256 * MIB).unwrap();
    let vol = c.formatted_volume(v.disk()).await;
    let (total0, _) = c.stats(&vol).await.unwrap();
    let len0 = data_length(v.disk());
    // The disk grows (as a cloud disk is expanded), then the volume.
    let n = v.grow(512 * MIB).unwrap();
    c.rescan().await.unwrap();
    let vol = eventually(30, "the volume back after the disk grew", || {
        let mut v = c.volume.clone();
        async move {
            let r = v
                .list_volumes_on_disk(csi_proxy_api::volume::v2alpha1::ListVolumesOnDiskRequest {
                    disk_number: n,
                    partition_number: 0,
                })
                .await
                .ok()?;
            r.into_inner().volume_ids.into_iter().next()
        }
    })
    .await;
    // Less than 100 MiB more than now: skipped, although there is room.
    c.resize(&vol, (len0 + 50 * MIB) as i64).await.unwrap();
    assert_eq!(data_length(n), len0, "skipped");
    // 0: the maximum.
    c.resize(&vol, 0).await.unwrap();
    let len1 = data_length(n);
    assert!(len1 >= len0 + 200 * MIB, "grown: {len0} -> {len1}");
    let (total1, _) = c.stats(&vol).await.unwrap();
    assert!(
        total1 >= total0 + (200 * MIB) as i64,
        "filesystem grown: {total0} -> {total1}"
    );
    // Already at the maximum: skipped.
    c.resize(&vol, 0).await.unwrap();
    assert_eq!(data_length(n), len1);
    // Beyond the maximum: refused, nothing changed.
    assert_code(
        c.resize(&vol, (4096 * MIB) as i64).await,
        Code::FailedPrecondition,
        "ResizeVolume beyond the maximum",
    );
    assert_eq!(data_length(n), len1);
    assert_eq!(c.stats(&vol).await.unwrap().0, total1);
}

#[tokio::test]
async fn mount_unmount_and_the_volume_at_a_target() {
    let (p, mut c) = start("rw-mount").await;
    host_volume_refusals(&p, &mut c).await;
    let plain = p.kubelet.join(r"pods\plain");
    std::fs::create_dir_all(&plain).unwrap();
    assert_code(
        c.volume_at(&s(&plain)).await,
        Code::NotFound,
        "GetVolumeIDFromTargetPath of a plain directory",
    );
    // Nothing mounted there: already unmounted.
    let (sys, _) = c.system_volume().await;
    c.unmount(&sys, &s(&plain)).await.unwrap();
    c.unmount(&sys, &s(&p.kubelet.join("missing")))
        .await
        .unwrap();
    assert!(plain.is_dir());
    let Some(_w) = require("SetVolumeMountPointW/DeleteVolumeMountPointW on a VHDX volume") else {
        return;
    };
    let v = Vhd::create(&p.root, "mount", 128 * MIB).unwrap();
    let vol = c.formatted_volume(v.disk()).await;
    // Missing parents are created beneath the root.
    let t = p.kubelet.join(r"pods\uid\volumes\pv\mount");
    c.mount(&vol, &s(&t)).await.unwrap();
    assert!(is_mount_point_of(&t, &vol), "the OS sees the mount point");
    assert!(same_volume(&c.volume_at(&s(&t)).await.unwrap(), &vol));
    // A chain of two directory links to the mount point answers the
    // volume, as upstream's getTarget follows links to `Volume{...}` (it
    // used to read as "not mounted": aws-ebs then skipped NodeUnstage).
    let b = p.kubelet.join(r"pods\uid\b");
    let a = p.kubelet.join(r"pods\uid\a");
    std::os::windows::fs::symlink_dir(&t, &b).unwrap();
    std::os::windows::fs::symlink_dir(&b, &a).unwrap();
    for l in [&b, &a] {
        match c.volume_at(&s(l)).await {
            Ok(got) => assert!(same_volume(&got, &vol), "{l:?}: {got}"),
            Err(e) => panic!("{l:?}: {:?} {}", e.code(), e.message()),
        }
    }
    std::fs::remove_dir(&a).unwrap();
    std::fs::remove_dir(&b).unwrap();
    std::fs::write(t.join("through-the-mount"), b"x").unwrap();
    assert_eq!(
        std::fs::read(format!("{vol}through-the-mount")).unwrap(),
        b"x"
    );
    // Below a mount point, the closest volume is the mounted one.
    let below = t.join(r"not\yet");
    assert!(same_volume(
        &c.closest_volume(&s(&below)).await.unwrap(),
        &vol
    ));
    assert!(!same_volume(
        &c.closest_volume(&s(&plain)).await.unwrap(),
        &vol
    ));

    c.unmount(&vol, &s(&t)).await.unwrap();
    assert!(links::volume_at(&t).is_err(), "no mount point left");
    assert!(t.is_dir(), "the directory stays");
    assert_eq!(std::fs::read_dir(&t).unwrap().count(), 0);
    assert_code(c.volume_at(&s(&t)).await, Code::NotFound, "after unmount");
    c.unmount(&vol, &s(&t)).await.unwrap();
    // The volume itself kept the file.
    assert!(std::fs::metadata(format!("{vol}through-the-mount")).is_ok());
}

/// The proxy configured with `-kubelet-path` spelled short takes the root
/// in its long form: the ready line shows it, paths below the long form
/// are inside, the short spelling in a client path stays outside. Wine
/// makes short names too, so this runs there.
async fn short_root_taken_long(p: &Proxy) {
    let (long, short) = (s(&p.kubelet), s(&p.kubelet_flag));
    if long == short {
        println!("no short name for {long} on this volume: the root is configured long");
        return;
    }
    assert!(short.contains('~'), "{short}");
    println!("root configured as {short}, clients name it {long}");
    let log = p.log_text();
    let ready = log
        .lines()
        .find(|l| l.contains("csi-proxy ready"))
        .unwrap_or_else(|| panic!("{log}"));
    // `roots` is a list of Debug strings, quoted once more by the log's
    // value quoting (for these ASCII paths, the same escapes as Debug).
    let in_log = |path: &str| {
        let twice = format!("{:?}", format!("{path:?}"));
        twice[1..twice.len() - 1].to_string()
    };
    assert!(ready.contains(&in_log(&long)), "{ready}");
    assert!(!ready.contains(&in_log(&short)), "{ready}");
    let mut f = fs::filesystem_client::FilesystemClient::new(
        p.channel(Group::Filesystem, "v2alpha1").await,
    );
    let dir = s(&p.kubelet.join("short-root"));
    f.mkdir(fs::MkdirRequest { path: dir.clone() })
        .await
        .unwrap();
    let exists = f
        .path_exists(fs::PathExistsRequest { path: dir })
        .await
        .unwrap();
    assert!(exists.into_inner().exists);
    assert_code(
        f.path_exists(fs::PathExistsRequest {
            path: s(&p.kubelet_flag.join("short-root")),
        })
        .await,
        Code::PermissionDenied,
        "a client path spelled short",
    );
}

/// The root is configured by its short name on purpose: the second mount
/// compares the volume's access path (Windows spells it long) with the
/// root, which must be long too.
#[tokio::test]
async fn mount_the_same_volume_twice() {
    let p = Proxy::start_short_root("rw-mount-twice", "disk,volume,filesystem", &[]);
    let mut c = Calls::new(
        p.channel(Group::Disk, "v1").await,
        p.channel(Group::Volume, "v2alpha1").await,
    );
    short_root_taken_long(&p).await;
    host_volume_refusals(&p, &mut c).await;
    let Some(_w) = require("a VHDX volume mounted twice at one target") else {
        return;
    };
    let v = Vhd::create(&p.root, "twice", 128 * MIB).unwrap();
    let vol = c.formatted_volume(v.disk()).await;
    let t = p.kubelet.join(r"plugins\x\globalmount");
    c.mount(&vol, &s(&t)).await.unwrap();
    c.mount(&vol, &s(&t)).await.unwrap();
    let paths = links::volume_paths(&vol).unwrap();
    assert_eq!(paths.len(), 1, "one mount point: {paths:?}");
    assert!(is_mount_point_of(&t, &vol));
    c.unmount(&vol, &s(&t)).await.unwrap();
    assert!(links::volume_paths(&vol).unwrap().is_empty());
}

#[tokio::test]
async fn mount_another_volume_on_a_mount_point() {
    let (p, mut c) = start("rw-mount-other").await;
    host_volume_refusals(&p, &mut c).await;
    let Some(_w) = require("two VHDX volumes and one target") else {
        return;
    };
    let a = Vhd::create(&p.root, "other-a", 128 * MIB).unwrap();
    let b = Vhd::create(&p.root, "other-b", 128 * MIB).unwrap();
    let va = c.formatted_volume(a.disk()).await;
    let vb = c.formatted_volume(b.disk()).await;
    let t = p.kubelet.join(r"pods\other\mnt");
    c.mount(&va, &s(&t)).await.unwrap();
    assert_code(
        c.mount(&vb, &s(&t)).await,
        Code::AlreadyExists,
        "MountVolume of another volume on a mount point",
    );
    assert!(is_mount_point_of(&t, &va));
    assert!(links::volume_paths(&vb).unwrap().is_empty());
    // Unmounting the wrong volume is refused; the mount stays.
    assert_code(
        c.unmount(&vb, &s(&t)).await,
        Code::FailedPrecondition,
        "UnmountVolume of another volume",
    );
    assert!(is_mount_point_of(&t, &va));
    c.unmount(&va, &s(&t)).await.unwrap();
}

#[tokio::test]
async fn mount_on_a_non_empty_directory_or_a_file_is_refused() {
    let (p, mut c) = start("rw-mount-busy").await;
    host_volume_refusals(&p, &mut c).await;
    let full = p.kubelet.join(r"pods\full");
    std::fs::create_dir_all(&full).unwrap();
    std::fs::write(full.join("a"), b"a").unwrap();
    let file = p.kubelet.join(r"pods\file");
    std::fs::write(&file, b"f").unwrap();
    let Some(_w) = require("a VHDX volume to mount") else {
        return;
    };
    let v = Vhd::create(&p.root, "busy-target", 128 * MIB).unwrap();
    let vol = c.formatted_volume(v.disk()).await;
    // The kubelet dir (the VHDX files beside it are open).
    let before = tree(&p.kubelet);
    assert_code(
        c.mount(&vol, &s(&full)).await,
        Code::FailedPrecondition,
        "MountVolume on a non-empty directory",
    );
    assert_code(
        c.mount(&vol, &s(&file)).await,
        Code::FailedPrecondition,
        "MountVolume on a file",
    );
    assert_eq!(tree(&p.kubelet), before);
    assert!(links::volume_paths(&vol).unwrap().is_empty());
}

#[tokio::test]
async fn write_volume_cache() {
    let (p, mut c) = start("rw-flush").await;
    if under_wine() {
        let (sys, _) = c.system_volume().await;
        // Wine's FlushFileBuffers on a volume: ERROR_INVALID_FUNCTION.
        assert_code(
            c.flush(&sys).await,
            Code::Unimplemented,
            "WriteVolumeCache under wine",
        );
    }
    assert_code(
        c.flush(UNKNOWN_VOLUME).await,
        Code::NotFound,
        "WriteVolumeCache unknown",
    );
    let Some(_w) = require("FlushFileBuffers on a VHDX volume") else {
        return;
    };
    let v = Vhd::create(&p.root, "flush", 128 * MIB).unwrap();
    let vol = c.formatted_volume(v.disk()).await;
    let t = p.kubelet.join(r"pods\flush\mnt");
    c.mount(&vol, &s(&t)).await.unwrap();
    std::fs::write(t.join("dirty"), vec![7u8; 1 << 20]).unwrap();
    c.flush(&vol).await.unwrap();
    c.unmount(&vol, &s(&t)).await.unwrap();
    assert_eq!(std::fs::read(format!("{vol}dirty")).unwrap().len(), 1 << 20);
}

#[tokio::test]
async fn host_volumes_are_never_mounted_inside_the_roots() {
    let (p, mut c) = start("rw-host-volume").await;
    host_volume_refusals(&p, &mut c).await;
    let Some(_w) = require("a VHDX volume reachable outside the roots") else {
        return;
    };
    let v = Vhd::create(&p.root, "host", 128 * MIB).unwrap();
    let vol = c.formatted_volume(v.disk()).await;
    let t = p.kubelet.join(r"pods\steal\mnt");
    let outside: PathBuf = p.outside.join("mnt");
    std::fs::create_dir_all(&outside).unwrap();
    links::mount_volume(&outside, &vol).unwrap();
    let r = c.mount(&vol, &s(&t)).await;
    let f = c.format(&vol).await;
    links::unmount_volume(&outside).unwrap();
    assert_code(
        r,
        Code::FailedPrecondition,
        "MountVolume of a volume mounted outside",
    );
    assert_code(
        f,
        Code::FailedPrecondition,
        "FormatVolume of a volume mounted outside",
    );
    assert!(!t.exists());
    assert!(c.is_formatted(&vol).await.unwrap());
}

/// ListVolumesOnDisk against the test's own reading of every host volume:
/// a volume on one disk (`IOCTL_STORAGE_GET_DEVICE_NUMBER`) is listed on
/// that disk; a volume without a device number (spanned or striped over
/// dynamic disks) is listed on every disk its extents lie on: the
/// inventory's extents fallback. Under wine C: and Z: take the first way;
/// the fallback needs a node that has such a volume, and says so otherwise.
#[tokio::test]
async fn every_host_volume_is_listed_on_its_disks() {
    let (_p, mut c) = start("hostvols").await;
    let (mut on_one, mut spanning) = (0, 0);
    for id in host_volumes::volumes().unwrap() {
        // A volume that cannot be opened (no media, removed meanwhile) or
        // lies on a device other than a disk is not a disk's volume.
        let disks = match host_volumes::place(&id) {
            Ok(Place::Disk(d)) => {
                on_one += 1;
                vec![d]
            }
            Ok(Place::Unnumbered) => match host_volumes::extent_disks(&id) {
                Ok(d) if !d.is_empty() => {
                    spanning += 1;
                    d
                }
                _ => continue,
            },
            Ok(Place::NotDisk) | Err(_) => continue,
        };
        for d in disks {
            let listed = c
                .volumes_on(d)
                .await
                .unwrap_or_else(|e| panic!("ListVolumesOnDisk({d}) for {id}: {e:?}"));
            assert!(
                listed.iter().any(|v| same_volume(v, &id)),
                "{id} (on disk {d}) is not in {listed:?}"
            );
        }
    }
    assert!(on_one > 0, "no volume of this host is on a disk");
    if spanning == 0 {
        let Some(_win) =
            require("the extents fallback of ListVolumesOnDisk (a volume spanning disks)")
        else {
            return;
        };
        println!(
            "SKIPPED (needs a volume spanning disks, e.g. a spanned volume on dynamic disks): none on this node; {on_one} single-disk volumes checked"
        );
    }
}
