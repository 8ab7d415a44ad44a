//! Confinement of the real binary against a hostile plugin that plants
//! links and deep trees inside the roots (Linux): no answer depends on
//! what lies outside the roots, no message shows where a link leads, a
//! 100,000-level tree does not kill the proxy; and the storage safety
//! rules: volumes in use outside the roots (in any mount namespace, or as
//! swap) are never mounted inside them, disks in use are never taken
//! offline or partitioned, ambiguous volume ids are refused.
#![cfg(target_os = "linux")]

mod common;
mod storage;

use common::{assert_code, Proxy};
use csi_proxy_api::{disk, filesystem, volume};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use storage::{can_run, is_mount_point, tool, LoopDisk, MIB};
use tonic::Code;

fn s(p: &Path) -> String {
    p.display().to_string()
}

#[tokio::test]
async fn links_to_the_outside_answer_the_same_whether_or_not_their_target_exists() {
    let proxy = Proxy::start(&[]);
    let k = &proxy.kubelet;
    std::os::unix::fs::symlink(&proxy.outside, k.join("to-existing")).unwrap();
    std::os::unix::fs::symlink(proxy.outside.join("no-such"), k.join("to-missing")).unwrap();
    std::fs::create_dir_all(k.join("inside/dir")).unwrap();
    std::os::unix::fs::symlink(k.join("inside/dir"), k.join("to-inside")).unwrap();
    std::os::unix::fs::symlink(k.join("inside/gone"), k.join("to-inside-missing")).unwrap();
    let mut c = filesystem::v1::filesystem_client::FilesystemClient::new(
        proxy.channel("filesystem-v1").await,
    );
    use filesystem::v1::*;
    let outside = s(&proxy.outside);
    let mut answers = Vec::new();
    for link in ["to-existing", "to-missing"] {
        // Through the link: refused, without looking at the target.
        for below in ["sentinel", "no-such-either"] {
            let p = s(&k.join(link).join(below));
            let e = c
                .path_exists(PathExistsRequest { path: p.clone() })
                .await
                .unwrap_err();
            assert_eq!(e.code(), Code::PermissionDenied, "{p}");
            assert!(!e.message().contains(&outside), "{p}: {}", e.message());
            let e2 = c
                .is_symlink(IsSymlinkRequest { path: p.clone() })
                .await
                .unwrap_err();
            assert_eq!(e2.code(), Code::PermissionDenied);
            assert!(!e2.message().contains(&outside), "{}", e2.message());
            answers.push((
                e.message().replace(link, "L"),
                e2.message().replace(link, "L"),
            ));
        }
        // The link itself: exists, and is a link, whatever it points to.
        let p = s(&k.join(link));
        assert!(
            c.path_exists(PathExistsRequest { path: p.clone() })
                .await
                .unwrap()
                .into_inner()
                .exists
        );
        assert!(
            c.is_symlink(IsSymlinkRequest { path: p.clone() })
                .await
                .unwrap()
                .into_inner()
                .is_symlink
        );
        // Mkdir on or below it: refused the same way.
        for p in [p.clone(), format!("{p}/new")] {
            let e = c.mkdir(MkdirRequest { path: p.clone() }).await.unwrap_err();
            assert!(!e.message().contains(&outside), "{}", e.message());
        }
    }
    assert_eq!(answers[0], answers[2], "an existence oracle: {answers:?}");
    assert_eq!(answers[1], answers[3], "an existence oracle: {answers:?}");
    // Links inside the roots keep upstream's meaning: a link whose target
    // is gone is not counted as one.
    assert!(
        c.is_symlink(IsSymlinkRequest {
            path: s(&k.join("to-inside"))
        })
        .await
        .unwrap()
        .into_inner()
        .is_symlink
    );
    assert!(
        !c.is_symlink(IsSymlinkRequest {
            path: s(&k.join("to-inside-missing"))
        })
        .await
        .unwrap()
        .into_inner()
        .is_symlink
    );
    // IsSymlink of nothing is NotFound, as upstream answers an error.
    let e = c
        .is_symlink(IsSymlinkRequest {
            path: s(&k.join("nothing")),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert!(!std::fs::read_dir(&proxy.outside)
        .unwrap()
        .any(|e| e.unwrap().file_name() == "new"));
}

/// `depth` nested directories below `top`, made with *at calls.
fn deep_tree(top: &Path, depth: usize) {
    use nix::fcntl::{openat, OFlag};
    use nix::sys::stat::{mkdirat, Mode};
    std::fs::create_dir_all(top).unwrap();
    let mut fd =
        nix::fcntl::open(top, OFlag::O_RDONLY | OFlag::O_DIRECTORY, Mode::empty()).unwrap();
    for _ in 0..depth {
        mkdirat(&fd, "d", Mode::from_bits_truncate(0o755)).unwrap();
        fd = openat(
            &fd,
            "d",
            OFlag::O_RDONLY | OFlag::O_DIRECTORY,
            Mode::empty(),
        )
        .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_100000_level_tree_is_answered_and_the_proxy_stays_up() {
    let proxy = Proxy::start_on_tmpfs(&[]);
    let a = proxy.kubelet.join("deep-a");
    let b = proxy.kubelet.join("deep-b");
    deep_tree(&a, 100_000);
    deep_tree(&b, 100_000);
    let mut c = filesystem::v2alpha1::filesystem_client::FilesystemClient::new(
        proxy.channel("filesystem-v2alpha1").await,
    );
    use filesystem::v2alpha1::*;
    let r = c
        .rmdir(RmdirRequest {
            path: s(&a),
            force: true,
        })
        .await;
    match &r {
        Ok(_) => assert!(!a.exists()),
        Err(e) => assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}"),
    }
    let r = c.rmdir_contents(RmdirContentsRequest { path: s(&b) }).await;
    match &r {
        Ok(_) => assert_eq!(std::fs::read_dir(&b).unwrap().count(), 0),
        Err(e) => assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}"),
    }
    // Still up and answering.
    assert!(
        c.path_exists(PathExistsRequest {
            path: s(&proxy.kubelet)
        })
        .await
        .unwrap()
        .into_inner()
        .exists
    );
}

/// A partitioned and formatted disk, and its volume id.
async fn formatted(proxy: &Proxy, size: u64) -> (LoopDisk, String) {
    let d = LoopDisk::new(proxy.root.path(), size);
    let c = proxy.client();
    c.connect_disk_v1()
        .await
        .unwrap()
        .partition_disk(disk::v1::PartitionDiskRequest {
            disk_number: d.number,
        })
        .await
        .unwrap();
    let mut v = c.connect_volume_v1().await.unwrap();
    let id = v
        .list_volumes_on_disk(volume::v1::ListVolumesOnDiskRequest {
            disk_number: d.number,
            partition_number: 0,
        })
        .await
        .unwrap()
        .into_inner()
        .volume_ids
        .remove(0);
    v.format_volume(volume::v1::FormatVolumeRequest {
        volume_id: id.clone(),
    })
    .await
    .unwrap();
    (d, id)
}

fn partition_node(d: &LoopDisk) -> PathBuf {
    [format!("/dev/{}p1", d.name), format!("/dev/{}1", d.name)]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .expect("the partition node")
}

/// A process that holds `node` mounted at `at` in a mount namespace of its
/// own (the proxy cannot see that mount in its own mount table).
fn mount_in_another_namespace(node: &Path, at: &Path) -> std::process::Child {
    std::fs::create_dir_all(at).unwrap();
    let want = s(at);
    let (node, at) = (node.to_path_buf(), at.to_path_buf());
    let mut cmd = Command::new(tool("sleep").or_else(|| Some("/bin/sleep".into())).unwrap());
    cmd.arg("120");
    // SAFETY: between fork and exec only system calls are made (unshare,
    // mount); nix passes these short paths through a stack buffer, so
    // nothing is allocated in the child.
    unsafe {
        cmd.pre_exec(move || {
            use nix::mount::{mount, MsFlags};
            if libc::unshare(libc::CLONE_NEWNS) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            mount(
                None::<&str>,
                "/",
                None::<&str>,
                MsFlags::MS_REC | MsFlags::MS_PRIVATE,
                None::<&str>,
            )?;
            mount(
                Some(&node),
                &at,
                Some("ext4"),
                MsFlags::empty(),
                None::<&str>,
            )?;
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    // Wait until the mount exists in the child's namespace.
    for _ in 0..200 {
        let info =
            std::fs::read_to_string(format!("/proc/{}/mountinfo", child.id())).unwrap_or_default();
        if info
            .lines()
            .any(|l| l.split(' ').nth(4) == Some(want.as_str()))
        {
            return child;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("the other namespace never mounted {want}");
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

use std::os::unix::fs::OpenOptionsExt;

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
    drop(clone);
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
