//! Mount tables that name a directory whose name is not UTF-8 (anyone with
//! a user namespace can mount on one), with the real binary on real loop
//! devices (Linux, root): in another mount namespace such a mount of a
//! volume is a use (MountVolume refuses it), in the proxy's own namespace
//! every call that reads the table still answers.
//!
//! The odd mounts live only in namespaces these tests make (private ones),
//! never in the namespace other programs on the machine read theirs in.
#![cfg(target_os = "linux")]

mod common;
mod storage;

use common::Proxy;
use csi_proxy_api::{disk, volume};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use storage::{can_run, is_mount_point, partition_and_format, partition_node, tool, LoopDisk, MIB};
use tonic::Code;

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// `dir/name`, `name` given as bytes.
fn odd(dir: &Path, name: &[u8]) -> PathBuf {
    dir.join(OsStr::from_bytes(name))
}

/// Does the mount table of process `pid` have a mount at `at`? (Read as
/// bytes: `at` has no byte the kernel escapes.)
fn mounted_in(pid: u32, at: &Path) -> bool {
    let info = std::fs::read(format!("/proc/{pid}/mountinfo")).unwrap_or_default();
    info.split(|&b| b == b'\n')
        .any(|l| l.split(|&b| b == b' ').nth(4) == Some(at.as_os_str().as_bytes()))
}

/// A process that holds `node` mounted at `at` in a mount namespace of its
/// own: a private copy of ours, where the copies of `drop` are unmounted
/// first (so that `at` is the only mount of the device there).
fn mount_elsewhere(node: &Path, at: &Path, drop: &[&Path]) -> std::process::Child {
    std::fs::create_dir_all(at).unwrap();
    let (node_c, at_c) = (node.to_path_buf(), at.to_path_buf());
    let drop: Vec<PathBuf> = drop.iter().map(|p| p.to_path_buf()).collect();
    let mut cmd = Command::new(tool("sleep").unwrap());
    cmd.arg("120");
    // SAFETY: between fork and exec only system calls are made (unshare,
    // mount, umount2); nix passes these short paths through a stack
    // buffer, so nothing is allocated in the child.
    unsafe {
        cmd.pre_exec(move || {
            use nix::mount::{mount, umount2, MntFlags, MsFlags};
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
            for d in &drop {
                umount2(d, MntFlags::MNT_DETACH)?;
            }
            mount(
                Some(&node_c),
                &at_c,
                Some("ext4"),
                MsFlags::empty(),
                None::<&str>,
            )?;
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    for _ in 0..200 {
        if mounted_in(child.id(), at) {
            return child;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("the other namespace never mounted {at:?}");
}

async fn mount(
    v: &mut volume::v1::volume_client::VolumeClient<csi_proxy_client::ProxyChannel>,
    id: &str,
    target: &Path,
) -> Result<(), tonic::Status> {
    v.mount_volume(volume::v1::MountVolumeRequest {
        volume_id: id.to_string(),
        target_path: s(target),
    })
    .await
    .map(|_| ())
}

async fn unmount(
    v: &mut volume::v1::volume_client::VolumeClient<csi_proxy_client::ProxyChannel>,
    id: &str,
    target: &Path,
) {
    v.unmount_volume(volume::v1::UnmountVolumeRequest {
        volume_id: id.to_string(),
        target_path: s(target),
    })
    .await
    .unwrap();
}

/// The volume is mounted inside the roots here, and in another namespace
/// at a path that is not UTF-8: a second mount inside the roots is
/// refused, naming that namespace; once it is gone, it is allowed. (A
/// proxy that dropped the other table because it was not UTF-8 counted
/// the volume as used only inside the roots and mounted it.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mount_at_a_non_utf8_path_in_another_namespace_is_a_use() {
    if !can_run() {
        return;
    }
    let proxy = Proxy::start(&[]);
    let d = LoopDisk::new(proxy.root.path(), 64 * MIB);
    let id = partition_and_format(&proxy.client(), d.number).await;
    let node = partition_node(&d);
    let mut v = proxy.client().connect_volume_v1().await.unwrap();
    let first = proxy.kubelet.join("plugins/x/globalmount");
    let second = proxy.kubelet.join("pods/p/volumes/x/mount");
    mount(&mut v, &id, &first).await.unwrap();

    let hidden = odd(&proxy.outside, b"hidden-\xff\xfe");
    let mut other = mount_elsewhere(&node, &hidden, &[&first]);
    let e = mount(&mut v, &id, &second).await;
    let pid = other.id();
    let _ = other.kill();
    let _ = other.wait();
    let e = e.unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    for needle in [
        format!("mount namespace of process {pid}"),
        "hidden-\\xFF\\xFE".to_string(),
    ] {
        assert!(e.message().contains(&needle), "{needle}: {}", e.message());
    }
    assert!(!second.exists() || !is_mount_point(&second));

    // The other namespace is gone with its process: only our mount inside
    // the roots is left, and a second one there is fine.
    mount(&mut v, &id, &second).await.unwrap();
    assert!(is_mount_point(&second));
    for t in [&second, &first] {
        unmount(&mut v, &id, t).await;
        assert!(!is_mount_point(t));
    }
}

/// The proxy runs in a mount namespace of its own where a tmpfs and the
/// volume are mounted on directories whose names are not UTF-8: the calls
/// that read its mount table answer, and the uses found name the mount.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_utf8_mount_point_in_the_proxys_namespace_is_read() {
    if !can_run() {
        return;
    }
    let Some(nsenter) = tool("nsenter") else {
        eprintln!("skipping: needs nsenter");
        return;
    };
    // SAFETY: between fork and exec only system calls are made (unshare,
    // mount of "/", a static string).
    let mut proxy = Proxy::start_with(&[], |cmd| unsafe {
        cmd.pre_exec(|| {
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
            Ok(())
        });
    });
    let d = LoopDisk::new(proxy.root.path(), 64 * MIB);
    let id = partition_and_format(&proxy.client(), d.number).await;
    let pid = proxy.child.as_ref().unwrap().id();

    // Mounted in the proxy's namespace (entered with nsenter).
    let tmp_at = odd(&proxy.outside, b"tmp-\xfe \\x");
    let vol_at = odd(&proxy.outside, b"vol-\xff");
    let enter = |args: &[&OsStr]| {
        let st = Command::new(&nsenter)
            .args(["-t", &pid.to_string(), "-m", "--"])
            .args(args)
            .status()
            .unwrap();
        assert!(st.success(), "nsenter {args:?}: {st}");
    };
    for at in [&tmp_at, &vol_at] {
        std::fs::create_dir(at).unwrap();
    }
    let mount_tool = tool("mount").unwrap();
    enter(&[
        mount_tool.as_os_str(),
        "-t".as_ref(),
        "tmpfs".as_ref(),
        "none".as_ref(),
        tmp_at.as_os_str(),
    ]);
    enter(&[
        mount_tool.as_os_str(),
        partition_node(&d).as_os_str(),
        vol_at.as_os_str(),
    ]);
    assert!(
        !mounted_in(std::process::id(), &vol_at),
        "the mount leaked into this namespace"
    );
    // Seen from here through the proxy's root: a file in the volume, and
    // what statvfs says of it.
    let via = PathBuf::from(format!("/proc/{pid}/root")).join(vol_at.strip_prefix("/").unwrap());
    std::fs::write(via.join("file"), vec![7u8; 4 * MIB as usize]).unwrap();
    let st = nix::sys::statvfs::statvfs(&via).unwrap();
    let total = st.blocks() as i64 * st.fragment_size() as i64;

    let c = proxy.client();
    let mut v = c.connect_volume_v1().await.unwrap();
    let ids = v
        .list_volumes_on_disk(volume::v1::ListVolumesOnDiskRequest {
            disk_number: d.number,
            partition_number: 0,
        })
        .await
        .unwrap()
        .into_inner()
        .volume_ids;
    assert_eq!(ids, std::slice::from_ref(&id));
    let formatted = v
        .is_volume_formatted(volume::v1::IsVolumeFormattedRequest {
            volume_id: id.clone(),
        })
        .await
        .unwrap()
        .into_inner()
        .formatted;
    assert!(formatted);
    let stats = v
        .get_volume_stats(volume::v1::GetVolumeStatsRequest {
            volume_id: id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(stats.total_bytes, total, "{stats:?}");
    assert!(stats.used_bytes >= 4 * MIB as i64, "{stats:?}");
    v.write_volume_cache(volume::v1::WriteVolumeCacheRequest {
        volume_id: id.clone(),
    })
    .await
    .unwrap();
    let mut dk = c.connect_disk_v1().await.unwrap();
    let disks = dk
        .list_disk_locations(disk::v1::ListDiskLocationsRequest {})
        .await
        .unwrap()
        .into_inner()
        .disk_locations;
    assert!(disks.contains_key(&d.number), "{disks:?}");

    // The uses name the mount point, escaped.
    let e = v
        .format_volume(volume::v1::FormatVolumeRequest {
            volume_id: id.clone(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    assert!(e.message().contains("vol-\\xFF"), "{}", e.message());
    let target = proxy.kubelet.join("pods/p/volumes/x/mount");
    let e = mount(&mut v, &id, &target).await.unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    assert!(
        e.message().contains("vol-\\xFF") && e.message().contains("outside the allowed roots"),
        "{}",
        e.message()
    );
    // The namespace, and its mounts, end with the proxy.
    proxy.terminate();
}
