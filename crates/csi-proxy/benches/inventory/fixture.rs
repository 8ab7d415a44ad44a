//! The loop disks of the run and the server process.

use csi_proxy_host::disk::{self, DiskApi};
use csi_proxy_host::storage::linux::LinuxStorage;
use csi_proxy_host::storage::Storage;
use csi_proxy_host::volume::{self, VolumeApi};
use std::path::PathBuf;
use std::process::Command;

/// The disks of the run.
pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub kubelet: PathBuf,
    pub devs: Vec<String>,
    pub numbers: Vec<u32>,
    pub vols: Vec<String>,
    /// Mount points of the first 16 disks' volumes.
    pub targets: Vec<String>,
    pub mounts: Vec<PathBuf>,
    /// The loop devices that existed before the run.
    pub before: Vec<String>,
}

/// The loop devices in `/sys/block`.
pub fn loop_devices() -> Vec<String> {
    std::fs::read_dir("/sys/block")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.starts_with("loop"))
        .collect()
}

impl Drop for Fixture {
    fn drop(&mut self) {
        for m in &self.mounts {
            let _ = nix::mount::umount2(m, nix::mount::MntFlags::MNT_DETACH);
        }
        for d in &self.devs {
            let _ = Command::new("losetup").args(["-d", d]).status();
        }
        // Remove the loop devices this run created (`losetup -f` adds
        // one when none is free), so that later runs (and the "16 disks"
        // scale) do not find hundreds of detached ones. The kernel
        // refuses (EBUSY) any device that is attached or open, such as
        // one another program has just taken.
        // A plain number in <linux/loop.h>, the same on every architecture.
        const LOOP_CTL_REMOVE: libc::Ioctl = 0x4c81;
        let Ok(ctl) = std::fs::File::open("/dev/loop-control") else {
            return;
        };
        let mut removed = 0;
        for name in loop_devices() {
            let size = std::fs::read_to_string(format!("/sys/block/{name}/size"));
            let Ok(index) = name.trim_start_matches("loop").parse::<libc::c_ulong>() else {
                continue;
            };
            if self.before.contains(&name) || size.map_or(true, |s| s.trim() != "0") {
                continue;
            }
            // SAFETY: LOOP_CTL_REMOVE takes the device index by value.
            if unsafe {
                libc::ioctl(
                    std::os::fd::AsRawFd::as_raw_fd(&ctl),
                    LOOP_CTL_REMOVE,
                    index,
                )
            } == 0
            {
                removed += 1;
            }
        }
        println!("removed the {removed} loop devices this run created");
    }
}

impl Fixture {
    /// Attaches loop disks until there are `n`, each partitioned (the
    /// first 16 also formatted and mounted).
    pub fn grow_to(&mut self, n: usize, st: &Storage<LinuxStorage>) {
        while self.devs.len() < n {
            let i = self.devs.len();
            let img = self.dir.path().join(format!("d{i}.img"));
            crate::storage::sparse_file(&img, 128 << 20);
            let (dev, number) = crate::storage::attach(&img, false);
            self.devs.push(dev);
            self.numbers.push(number);
            st.partition_disk(disk::PartitionDiskRequest {
                disk_number: number,
            })
            .unwrap();
            let v = st
                .list_volumes_on_disk(volume::ListVolumesOnDiskRequest {
                    disk_number: number,
                    partition_number: 0,
                })
                .unwrap()
                .volume_ids
                .remove(0);
            if i < 16 {
                st.format_volume(volume::FormatVolumeRequest {
                    volume_id: v.clone(),
                })
                .unwrap();
                let t = self.kubelet.join(format!("mnt{i}"));
                st.mount_volume(volume::MountVolumeRequest {
                    volume_id: v.clone(),
                    target_path: t.display().to_string(),
                })
                .unwrap();
                self.mounts.push(t.clone());
                std::fs::create_dir_all(t.join("pod/sub")).unwrap();
                self.targets.push(t.display().to_string());
            }
            self.vols.push(v);
        }
    }

    /// Detaches every disk after the first `keep` (they stay in
    /// `/sys/block` as size-0 loop devices).
    pub fn detach_after(&mut self, keep: usize) {
        for d in self.devs.drain(keep..) {
            let st = Command::new("losetup").args(["-d", &d]).status().unwrap();
            assert!(st.success(), "losetup -d {d}");
        }
        self.numbers.truncate(keep);
        self.vols.truncate(keep);
    }
}

/// `/sys/block` entries, and how many of them have size 0.
pub fn block_entries() -> (usize, usize) {
    let mut all = 0;
    let mut empty = 0;
    for e in std::fs::read_dir("/sys/block").unwrap().flatten() {
        all += 1;
        let size = std::fs::read_to_string(e.path().join("size")).unwrap_or_default();
        if size.trim() == "0" {
            empty += 1;
        }
    }
    (all, empty)
}

pub use crate::storage::Server;
