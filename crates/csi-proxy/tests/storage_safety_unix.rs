//! Storage safety of the real binary on real loop devices (Linux, root):
//! volumes in use outside the roots (in any mount namespace, or as swap)
//! are never mounted inside them, disks in use are never taken offline or
//! partitioned, ambiguous volume ids are refused naming both disks.
#![cfg(target_os = "linux")]

mod common;
mod storage;

use common::{assert_code, partition_and_format, Proxy};
use csi_proxy_api::{disk, volume};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::process::Command;
use storage::{
    can_run, is_mount_point, mount_in_another_namespace, partition_node, tool, LoopDisk, MIB,
};
use tonic::Code;

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// A partitioned and formatted disk, and its volume id.
async fn formatted(proxy: &Proxy, size: u64) -> (LoopDisk, String) {
    let d = LoopDisk::new(proxy.root.path(), size);
    let id = partition_and_format(&proxy.client(), d.number).await;
    (d, id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volumes_in_use_outside_the_roots_are_never_mounted_inside() {
    if !can_run() {
        return;
    }
    let proxy = Proxy::start(&[]);
    let (d, id) = formatted(&proxy, 64 * MIB).await;
    let node = partition_node(&d);
    let c = proxy.client();
    let mut v = c.connect_volume_v1().await.unwrap();
    let mut dk = c.connect_disk_v1().await.unwrap();
    let target = proxy.kubelet.join("pods/p/volumes/x/mount");
    let mount = |v: &mut volume::v1::volume_client::VolumeClient<_>, t: &Path| {
        let mut v = v.clone();
        let (id, t) = (id.clone(), s(t));
        async move {
            v.mount_volume(volume::v1::MountVolumeRequest {
                volume_id: id,
                target_path: t,
            })
            .await
        }
    };

    // 1. Mounted outside the roots in this namespace (a stand-in for a
    //    system partition): refused, and the message says where.
    let sys = proxy.outside.join("system");
    std::fs::create_dir_all(&sys).unwrap();
    nix::mount::mount(
        Some(&node),
        &sys,
        Some("ext4"),
        nix::mount::MsFlags::empty(),
        None::<&str>,
    )
    .unwrap();
    let e = mount(&mut v, &target).await.unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    assert!(
        e.message().contains("outside the allowed roots"),
        "{}",
        e.message()
    );
    assert!(!target.exists() || !is_mount_point(&target));
    let e = dk
        .set_disk_state(disk::v1::SetDiskStateRequest {
            disk_number: d.number,
            is_online: false,
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    assert!(e.message().contains(&s(&sys)), "{}", e.message());
    let e = v
        .format_volume(volume::v1::FormatVolumeRequest {
            volume_id: id.clone(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    nix::mount::umount(&sys).unwrap();

    // 2. Mounted only in another mount namespace: the proxy's own mount
    //    table does not show it; the kernel's exclusive claim does.
    let mut other = mount_in_another_namespace(&node, &proxy.outside.join("hidden"));
    let e = mount(&mut v, &target).await.unwrap_err();
    let e2 = dk
        .set_disk_state(disk::v1::SetDiskStateRequest {
            disk_number: d.number,
            is_online: false,
        })
        .await
        .unwrap_err();
    let _ = other.kill();
    let _ = other.wait();
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    assert!(
        e.message().contains("mount namespace of process"),
        "{}",
        e.message()
    );
    assert_eq!(e2.code(), Code::FailedPrecondition, "{e2:?}");

    // 3. Free again: mounted inside, and a second mount of the same volume
    //    inside the roots is fine; offline is refused while it is mounted.
    mount(&mut v, &target).await.unwrap();
    assert!(is_mount_point(&target));
    let second = proxy.kubelet.join("plugins/x/globalmount");
    mount(&mut v, &second).await.unwrap();
    let e = dk
        .set_disk_state(disk::v1::SetDiskStateRequest {
            disk_number: d.number,
            is_online: false,
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    for t in [&target, &second] {
        v.unmount_volume(volume::v1::UnmountVolumeRequest {
            volume_id: id.clone(),
            target_path: s(t),
        })
        .await
        .unwrap();
        assert!(!is_mount_point(t));
    }
    dk.set_disk_state(disk::v1::SetDiskStateRequest {
        disk_number: d.number,
        is_online: false,
    })
    .await
    .unwrap();
    dk.set_disk_state(disk::v1::SetDiskStateRequest {
        disk_number: d.number,
        is_online: true,
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn swap_and_the_root_disk_are_never_changed() {
    if !can_run() {
        return;
    }
    let proxy = Proxy::start(&[]);
    let c = proxy.client();
    let mut dk = c.connect_disk_v1().await.unwrap();
    let mut v = c.connect_volume_v1().await.unwrap();

    // Swap on a partition of a loop disk.
    let (d, id) = formatted(&proxy, 64 * MIB).await;
    let node = partition_node(&d);
    let mkswap = Command::new(tool("mkswap").unwrap())
        .arg(&node)
        .output()
        .unwrap();
    assert!(mkswap.status.success(), "{mkswap:?}");
    let swapon = Command::new(tool("swapon").unwrap())
        .arg(&node)
        .output()
        .unwrap();
    if swapon.status.success() {
        let e = dk
            .set_disk_state(disk::v1::SetDiskStateRequest {
                disk_number: d.number,
                is_online: false,
            })
            .await
            .unwrap_err();
        let e2 = v
            .format_volume(volume::v1::FormatVolumeRequest {
                volume_id: id.clone(),
            })
            .await
            .unwrap_err();
        let off = Command::new(tool("swapoff").unwrap())
            .arg(&node)
            .status()
            .unwrap();
        assert!(off.success());
        assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
        assert!(e.message().contains("swap"), "{}", e.message());
        assert_eq!(e2.code(), Code::FailedPrecondition, "{e2:?}");
        assert!(e2.message().contains("swap"), "{}", e2.message());
    } else {
        eprintln!(
            "skipping the swap case: swapon refused here: {}",
            String::from_utf8_lossy(&swapon.stderr)
        );
    }

    // The disk that holds "/". First make sure, independently, that the
    // kernel reports it in use (so the proxy's own check must refuse and the
    // host's root disk cannot be touched even if that check were wrong).
    let root_dev = std::fs::metadata("/").map(|m| {
        use std::os::unix::fs::MetadataExt;
        (libc::major(m.dev()), libc::minor(m.dev()))
    });
    let Ok((ma, mi)) = root_dev else { return };
    let Some(name) = block_name(ma, mi) else {
        eprintln!("skipping the root disk case: / is not on a block device here");
        return;
    };
    let disk_name = whole_disk(&name);
    let Ok(seq) = std::fs::read_to_string(format!("/sys/block/{disk_name}/diskseq")) else {
        eprintln!("skipping the root disk case: no diskseq for {disk_name}");
        return;
    };
    let number: u32 = seq.trim().parse().unwrap();
    let node = format!("/dev/{disk_name}");
    let busy = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_EXCL)
        .open(&node)
        .map(drop)
        .map_err(|e| e.raw_os_error());
    if busy != Err(Some(libc::EBUSY)) {
        eprintln!("skipping the root disk case: {node} is not reported busy ({busy:?})");
        return;
    }
    assert_code(
        dk.set_disk_state(disk::v1::SetDiskStateRequest {
            disk_number: number,
            is_online: false,
        })
        .await,
        &[Code::FailedPrecondition],
        "offline of the root disk",
    );
    assert_code(
        dk.partition_disk(disk::v1::PartitionDiskRequest {
            disk_number: number,
        })
        .await,
        &[Code::FailedPrecondition],
        "partition of the root disk",
    );
    assert!(
        !std::fs::read_to_string(format!("/sys/block/{disk_name}/ro"))
            .unwrap()
            .trim()
            .eq("1")
    );
}

/// The sysfs name of block device `major:minor`.
fn block_name(major: u32, minor: u32) -> Option<String> {
    let link = std::fs::read_link(format!("/sys/dev/block/{major}:{minor}")).ok()?;
    Some(link.file_name()?.to_string_lossy().into_owned())
}

/// The whole disk a (partition) name belongs to.
fn whole_disk(name: &str) -> String {
    if Path::new(&format!("/sys/block/{name}")).exists() {
        return name.to_string();
    }
    std::fs::read_dir("/sys/block")
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|d| Path::new(&format!("/sys/block/{d}/{name}")).exists())
        .unwrap_or_else(|| name.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_volume_id_on_two_disks_is_refused_naming_both() {
    if !can_run() {
        return;
    }
    let proxy = Proxy::start(&[]);
    let (original, id) = formatted(&proxy, 64 * MIB).await;
    // A clone: the same bytes (the same GPT partition GUID) on a second disk.
    let copy = proxy.root.path().join("clone.img");
    std::fs::copy(&original.file, &copy).unwrap();
    let clone = LoopDisk::from_file(copy.clone());
    let c = proxy.client();
    // Rescan registers the clone's partition (this kernel parses no tables).
    c.connect_disk_v1()
        .await
        .unwrap()
        .rescan(disk::v1::RescanRequest {})
        .await
        .unwrap();
    let mut v = c.connect_volume_v1().await.unwrap();
    let listed = v
        .list_volumes_on_disk(volume::v1::ListVolumesOnDiskRequest {
            disk_number: clone.number,
            partition_number: 0,
        })
        .await
        .unwrap()
        .into_inner()
        .volume_ids;
    assert_eq!(
        listed,
        std::slice::from_ref(&id),
        "the clone carries the same id"
    );
    let target = s(&proxy.kubelet.join("t"));
    let both = |e: tonic::Status| {
        assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
        let m = e.message();
        assert!(m.contains("ambiguous"), "{m}");
        assert!(m.contains(&format!("disk {}", original.number)), "{m}");
        assert!(m.contains(&format!("disk {}", clone.number)), "{m}");
    };
    both(
        v.mount_volume(volume::v1::MountVolumeRequest {
            volume_id: id.clone(),
            target_path: target.clone(),
        })
        .await
        .unwrap_err(),
    );
    both(
        v.format_volume(volume::v1::FormatVolumeRequest {
            volume_id: id.clone(),
        })
        .await
        .unwrap_err(),
    );
    both(
        v.resize_volume(volume::v1::ResizeVolumeRequest {
            volume_id: id.clone(),
            size_bytes: 0,
        })
        .await
        .unwrap_err(),
    );
    both(
        v.get_volume_stats(volume::v1::GetVolumeStatsRequest {
            volume_id: id.clone(),
        })
        .await
        .unwrap_err(),
    );
    both(
        v.get_disk_number_from_volume_id(volume::v1::GetDiskNumberFromVolumeIdRequest {
            volume_id: id.clone(),
        })
        .await
        .unwrap_err(),
    );
    both(
        v.is_volume_formatted(volume::v1::IsVolumeFormattedRequest {
            volume_id: id.clone(),
        })
        .await
        .unwrap_err(),
    );
    both(
        v.write_volume_cache(volume::v1::WriteVolumeCacheRequest {
            volume_id: id.clone(),
        })
        .await
        .unwrap_err(),
    );
    assert!(!is_mount_point(Path::new(&target)));
    let clone_name = clone.name.clone();
    drop(clone);
    // The kernel detaches a loop device that is still open somewhere when
    // its last user closes it, and only then removes its partitions (and
    // sends their remove events): wait for that, as a CSI driver would
    // wait for a detach to finish.
    let start = std::time::Instant::now();
    while Path::new(&format!("/sys/class/block/{clone_name}p1")).exists() {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(10),
            "{clone_name}p1 still present 10 s after losetup -d"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // With the clone gone, the id is unique again.
    v.mount_volume(volume::v1::MountVolumeRequest {
        volume_id: id.clone(),
        target_path: target.clone(),
    })
    .await
    .unwrap();
    v.unmount_volume(volume::v1::UnmountVolumeRequest {
        volume_id: id,
        target_path: target,
    })
    .await
    .unwrap();
}
