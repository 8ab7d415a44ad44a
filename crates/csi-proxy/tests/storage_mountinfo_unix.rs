//! Mount tables that name a directory whose name is not UTF-8 (anyone with
//! a user namespace can mount on one), with the real binary on real loop
//! devices (Linux, root): in another mount namespace such a mount of a
//! volume is a use (MountVolume refuses it), in the proxy's own namespace
//! every call that reads the table still answers.
//!
//! The proxy runs in a private mount namespace of its own: the odd mounts
//! live only in namespaces these tests make, and the proxy's mounts are in
//! no namespace that another program copies meanwhile (a process that
//! makes a mount namespace, such as `systemd --user`, holds a copy of every
//! mount of the one it left: uses of the volume, rightly).
#![cfg(target_os = "linux")]

mod common;
mod storage;

use common::{partition_and_format, Proxy};
use csi_proxy_api::{disk, volume};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use storage::{
    can_run, mount_in_another_namespace, mounted_in, partition_node, private_mount_namespace, tool,
    LoopDisk, MIB,
};
use tonic::Code;

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// `dir/name`, `name` given as bytes.
fn odd(dir: &Path, name: &[u8]) -> PathBuf {
    dir.join(OsStr::from_bytes(name))
}

/// The namespace of `a_mount_table_too_large_to_read_is_a_use` makes every
/// device "possibly in use" for any proxy on the machine while it lives
/// (by the rule under test), so the tests that expect a mount to go ahead
/// do not run beside it: they share this lock, that test holds it alone.
static TOO_LARGE: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// The proxy, in a private mount namespace of its own.
fn start_in_own_namespace() -> Proxy {
    // SAFETY: between fork and exec only system calls are made (unshare,
    // mount of "/", a static string).
    Proxy::start_with(&[], |cmd| unsafe {
        cmd.pre_exec(private_mount_namespace);
    })
}

/// Is `at` a mount point in the proxy's namespace?
fn proxy_mounted(proxy: &Proxy, at: &Path) -> bool {
    mounted_in(proxy.child.as_ref().unwrap().id(), at)
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
    let _beside = TOO_LARGE.read().await;
    let proxy = start_in_own_namespace();
    let d = LoopDisk::new(proxy.root.path(), 64 * MIB);
    let id = partition_and_format(&proxy.client(), d.number).await;
    let node = partition_node(&d);
    let mut v = proxy.client().connect_volume_v1().await.unwrap();
    let first = proxy.kubelet.join("plugins/x/globalmount");
    let second = proxy.kubelet.join("pods/p/volumes/x/mount");
    mount(&mut v, &id, &first).await.unwrap();

    let hidden = odd(&proxy.outside, b"hidden-\xff\xfe");
    let mut other = mount_in_another_namespace(&node, &hidden);
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
    assert!(!proxy_mounted(&proxy, &second));

    // The other namespace is gone with its process: only our mount inside
    // the roots is left, and a second one there is fine.
    mount(&mut v, &id, &second).await.unwrap();
    assert!(proxy_mounted(&proxy, &second));
    for t in [&second, &first] {
        unmount(&mut v, &id, t).await;
        assert!(!proxy_mounted(&proxy, t));
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
    let _beside = TOO_LARGE.read().await;
    let Some(nsenter) = tool("nsenter") else {
        eprintln!("skipping: needs nsenter");
        return;
    };
    let mut proxy = start_in_own_namespace();
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

/// Another namespace whose mount table is larger than the scan reads
/// (10,000 directories with long names bound on themselves: a root and a
/// mount point of about 3,800 bytes each per line, about 75 MiB of table)
/// and mounts
/// the volume after all that: the table is not read to its end, so the
/// volume counts as used there (never as "no mounts"), and MountVolume
/// refuses, saying why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mount_table_too_large_to_read_is_a_use() {
    if !can_run() {
        return;
    }
    let _alone = TOO_LARGE.write().await;
    use std::ffi::CString;
    let proxy = start_in_own_namespace();
    let d = LoopDisk::new(proxy.root.path(), 64 * MIB);
    let id = partition_and_format(&proxy.client(), d.number).await;
    let mut v = proxy.client().connect_volume_v1().await.unwrap();
    let first = proxy.kubelet.join("plugins/x/globalmount");
    let second = proxy.kubelet.join("pods/p/volumes/x/mount");
    mount(&mut v, &id, &first).await.unwrap();

    // A mount point of about 3,900 bytes (PATH_MAX is 4,096).
    let mut deep = proxy.outside.join("flood");
    for i in 0..15 {
        deep.push(format!("{i:02}{}", "d".repeat(248)));
    }
    std::fs::create_dir_all(&deep).unwrap();
    let leaves: Vec<CString> = (0..10_000)
        .map(|i| {
            let name = format!("{i:05}");
            std::fs::create_dir(deep.join(&name)).unwrap();
            CString::new(name).unwrap()
        })
        .collect();
    let hidden = proxy.outside.join("hidden");
    std::fs::create_dir_all(&hidden).unwrap();
    let c = |p: &Path| CString::new(p.as_os_str().as_bytes()).unwrap();
    let (deep_c, hidden_c) = (c(&deep), c(&hidden));
    let node_c = c(&partition_node(&d));
    let ext4 = c(Path::new("ext4"));
    let mut cmd = Command::new(tool("sleep").unwrap());
    cmd.arg("120");
    // SAFETY: between fork and exec only system calls are made, on C
    // strings built before the fork.
    unsafe {
        cmd.pre_exec(move || {
            let check = |r: libc::c_int| {
                if r == 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            };
            let none = std::ptr::null();
            private_mount_namespace()?;
            check(libc::chdir(deep_c.as_ptr()))?;
            for leaf in &leaves {
                check(libc::mount(
                    leaf.as_ptr(),
                    leaf.as_ptr(),
                    none,
                    libc::MS_BIND,
                    std::ptr::null(),
                ))?;
            }
            check(libc::mount(
                node_c.as_ptr(),
                hidden_c.as_ptr(),
                ext4.as_ptr(),
                0,
                std::ptr::null(),
            ))
        });
    }
    // spawn returns once the child has exec'd: every mount is in place.
    let mut flood = cmd.spawn().unwrap();
    let pid = flood.id();
    let e = mount(&mut v, &id, &second).await;
    let _ = flood.kill();
    let _ = flood.wait();
    let e = e.unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    for needle in [
        format!("possibly in use: the mount table of process {pid}"),
        "larger than 64 MiB".to_string(),
    ] {
        assert!(e.message().contains(&needle), "{needle}: {}", e.message());
    }
    assert!(!proxy_mounted(&proxy, &second));

    mount(&mut v, &id, &second).await.unwrap();
    for t in [&second, &first] {
        unmount(&mut v, &id, t).await;
    }
}
