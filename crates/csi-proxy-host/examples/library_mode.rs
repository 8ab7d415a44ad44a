//! Library mode (KEP-3636): the Disk and Volume life cycle in-process, with
//! no gRPC and no server, on a loop-device disk.
//!
//! Run as root: `cargo run -p csi-proxy-host --example library_mode`.
//! Without root (or loop devices) it says so and exits 0. It cleans up what
//! it created (mount, loop device, files), also when a step fails.

#[cfg(target_os = "linux")]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    use csi_proxy_host::disk::*;
    use csi_proxy_host::path::{Flavor, PathPolicy};
    use csi_proxy_host::storage::linux::{FsType, LinuxStorage};
    use csi_proxy_host::storage::Storage;
    use csi_proxy_host::volume::*;
    use std::process::Command;

    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 || !std::path::Path::new("/dev/loop-control").exists() {
        println!("library_mode: needs root and loop devices; skipped");
        return Ok(());
    }
    let dir = tempfile::tempdir()?;
    let kubelet = dir.path().join("kubelet");
    std::fs::create_dir(&kubelet)?;
    let image = dir.path().join("disk.img");
    std::fs::File::create(&image)?.set_len(256 << 20)?;
    let out = Command::new("losetup")
        .args(["--find", "--show", "--partscan"])
        .arg(&image)
        .output()?;
    if !out.status.success() {
        return Err(format!("losetup: {}", String::from_utf8_lossy(&out.stderr)).into());
    }
    let dev = String::from_utf8(out.stdout)?.trim().to_string();
    // Detach the loop device (and unmount) whatever happens below.
    struct Cleanup(String, std::path::PathBuf);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            let _ = nix::mount::umount2(&self.1, nix::mount::MntFlags::MNT_DETACH);
            let _ = Command::new("losetup").args(["-d", &self.0]).status();
        }
    }
    let target = kubelet.join("globalmount");
    let _cleanup = Cleanup(dev.clone(), target.clone());
    let name = dev.trim_start_matches("/dev/");
    let disk_number: u32 = std::fs::read_to_string(format!("/sys/block/{name}/diskseq"))?
        .trim()
        .parse()?;

    // The library: a path policy and the Linux backend. Nothing else.
    let policy = PathPolicy::new(Flavor::Unix, [kubelet.to_str().unwrap()])?;
    let storage = Storage::new(policy, LinuxStorage::new(FsType::Ext4));

    let locations = storage.list_disk_locations(ListDiskLocationsRequest {})?;
    println!(
        "disk {disk_number} ({dev}) at {:?}",
        locations.disk_locations.get(&disk_number)
    );
    storage.partition_disk(PartitionDiskRequest { disk_number })?;
    storage.partition_disk(PartitionDiskRequest { disk_number })?;
    let volume_id = storage
        .list_volumes_on_disk(ListVolumesOnDiskRequest {
            disk_number,
            partition_number: 0,
        })?
        .volume_ids
        .remove(0);
    println!("volume {volume_id}");
    assert!(
        !storage
            .is_volume_formatted(IsVolumeFormattedRequest {
                volume_id: volume_id.clone()
            })?
            .formatted
    );
    storage.format_volume(FormatVolumeRequest {
        volume_id: volume_id.clone(),
    })?;
    assert!(
        storage
            .is_volume_formatted(IsVolumeFormattedRequest {
                volume_id: volume_id.clone()
            })?
            .formatted
    );
    let target_path = target.to_str().unwrap().to_string();
    storage.mount_volume(MountVolumeRequest {
        volume_id: volume_id.clone(),
        target_path: target_path.clone(),
    })?;
    let found = storage.get_volume_id_from_target_path(GetVolumeIdFromTargetPathRequest {
        target_path: target_path.clone(),
    })?;
    assert_eq!(found.volume_id, volume_id);
    std::fs::create_dir(target.join("data"))?;
    let closest = storage.get_closest_volume_id_from_target_path(
        GetClosestVolumeIdFromTargetPathRequest {
            target_path: format!("{target_path}/data"),
        },
    )?;
    assert_eq!(closest.volume_id, volume_id);
    let stats = storage.get_volume_stats(GetVolumeStatsRequest {
        volume_id: volume_id.clone(),
    })?;
    println!(
        "mounted at {target_path}: {} of {} bytes used",
        stats.used_bytes, stats.total_bytes
    );
    storage.write_volume_cache(WriteVolumeCacheRequest {
        volume_id: volume_id.clone(),
    })?;

    std::fs::OpenOptions::new()
        .write(true)
        .open(&image)?
        .set_len(512 << 20)?;
    storage.rescan(RescanRequest {})?;
    let resize = ResizeVolumeRequest {
        volume_id: volume_id.clone(),
        size_bytes: 0,
    };
    match storage.resize_volume(resize.clone()) {
        Ok(_) => {}
        // Growing a mounted ext4 needs CAP_SYS_RESOURCE; without it, resize
        // the unmounted volume.
        Err(csi_proxy_host::Error::PermissionDenied(why)) => {
            println!("online resize refused ({why}); resizing unmounted");
            let mount = MountVolumeRequest {
                volume_id: volume_id.clone(),
                target_path: target_path.clone(),
            };
            storage.unmount_volume(UnmountVolumeRequest {
                volume_id: volume_id.clone(),
                target_path: target_path.clone(),
            })?;
            storage.resize_volume(resize)?;
            storage.mount_volume(mount)?;
        }
        Err(e) => return Err(e.into()),
    }
    let grown = storage.get_volume_stats(GetVolumeStatsRequest {
        volume_id: volume_id.clone(),
    })?;
    println!("after growing the disk: {} bytes", grown.total_bytes);
    assert!(grown.total_bytes > stats.total_bytes + (200 << 20));

    storage.unmount_volume(UnmountVolumeRequest {
        volume_id: volume_id.clone(),
        target_path,
    })?;
    storage.set_disk_state(SetDiskStateRequest {
        disk_number,
        is_online: false,
    })?;
    assert!(
        !storage
            .get_disk_state(GetDiskStateRequest { disk_number })?
            .is_online
    );
    storage.set_disk_state(SetDiskStateRequest {
        disk_number,
        is_online: true,
    })?;
    println!("library_mode: life cycle complete");
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn main() {
    println!("library_mode: this example drives the Linux backend");
}
