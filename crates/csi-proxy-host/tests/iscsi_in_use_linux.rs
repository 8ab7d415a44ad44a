//! DisconnectTarget refuses a target whose disk is in use (Linux).
//!
//! This kernel has no SCSI layer, no iSCSI initiator transport and no LIO
//! target (`CONFIG_SCSI`, `CONFIG_ISCSI_TCP`, `CONFIG_TARGET_CORE`,
//! `CONFIG_CONFIGFS_FS` and `CONFIG_MODULES` are all off), so no real
//! session can be logged in here. The session is therefore a sysfs tree of
//! our own whose disk is a real loop device (its `block` entry is the real
//! `/sys/block`): the backend finds the session's disks and asks the
//! kernel whether they are in use exactly as it does for a real session,
//! against a real mount and a real exclusive open. Root only (loop
//! devices, mount); loop devices and mounts made here are removed on every
//! path.
#![cfg(target_os = "linux")]

/// The loop-disk fixture shared with csi-proxy's tests and benches.
#[path = "../../csi-proxy/tests/storage/mod.rs"]
mod storage;

use csi_proxy_host::iscsi::linux::LinuxIscsi;
use csi_proxy_host::iscsi::{DisconnectTargetRequest, Iscsi, IscsiApi, TargetPortal};
use csi_proxy_host::path::Flavor;
use csi_proxy_host::Error;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

const IQN: &str = "iqn.2026-11.io.example:in-use";
const PORT: u16 = 3299;

fn run(prog: &str, args: &[&str]) -> String {
    let out = Command::new(prog).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{prog} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A loop device over a 64 MiB file with one ext4 partition, and the
/// mount made of it; both undone on drop.
struct Disk {
    dev: String,
    mounted: Option<PathBuf>,
}

impl Disk {
    fn new(dir: &Path) -> Disk {
        let img = dir.join("lun.img");
        storage::sparse_file(&img, 64 << 20);
        let (dev, _) = storage::attach(&img, false);
        assert!(dev.starts_with("/dev/loop") && dev != "/dev/loop1", "{dev}");
        let d = Disk { dev, mounted: None };
        storage::one_ext4_partition(&d.dev);
        d
    }

    fn name(&self) -> &str {
        self.dev.trim_start_matches("/dev/")
    }

    fn part(&self) -> String {
        format!("{}p1", self.dev)
    }

    fn mount(&mut self, at: &Path) {
        std::fs::create_dir_all(at).unwrap();
        run("mount", &["-t", "ext4", &self.part(), at.to_str().unwrap()]);
        self.mounted = Some(at.to_path_buf());
    }

    fn unmount(&mut self) {
        if let Some(at) = self.mounted.take() {
            run("umount", &[at.to_str().unwrap()]);
        }
    }
}

impl Drop for Disk {
    fn drop(&mut self) {
        if let Some(at) = self.mounted.take() {
            let _ = Command::new("umount").arg(&at).status();
        }
        let _ = Command::new("losetup").args(["-d", &self.dev]).status();
    }
}

/// A sysfs tree holding one iSCSI session to `IQN` at 127.0.0.1:`PORT`
/// whose LUN is the kernel disk `name`; `block` is the real `/sys/block`.
fn session_sysfs(root: &Path, name: &str) {
    let session = root.join("class/iscsi_session/session77");
    let lun = session
        .join("device/target77:0:0/77:0:0:0/block")
        .join(name);
    std::fs::create_dir_all(&lun).unwrap();
    std::fs::write(session.join("targetname"), format!("{IQN}\n")).unwrap();
    let conn = root.join("class/iscsi_connection/connection77:0");
    std::fs::create_dir_all(&conn).unwrap();
    std::fs::write(conn.join("persistent_address"), "127.0.0.1\n").unwrap();
    std::fs::write(conn.join("persistent_port"), format!("{PORT}\n")).unwrap();
    std::os::unix::fs::symlink("/sys/block", root.join("block")).unwrap();
}

fn disconnect(api: &Iscsi<LinuxIscsi>) -> csi_proxy_host::Result<()> {
    api.disconnect_target(DisconnectTargetRequest {
        target_portal: TargetPortal {
            target_address: "127.0.0.1".into(),
            target_port: u32::from(PORT),
        },
        iqn: IQN.into(),
    })
    .map(drop)
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

#[test]
fn a_target_whose_disk_is_mounted_or_held_is_not_disconnected() {
    assert!(
        is_root(),
        "needs root (loop devices, mount): run the tests as root, as CI does"
    );
    let t = tempfile::tempdir().unwrap();
    let mut disk = Disk::new(t.path());
    let sysfs = t.path().join("sys");
    session_sysfs(&sysfs, disk.name());
    let api = Iscsi::new(
        LinuxIscsi::new().with_paths(&t.path().join("nodes"), &t.path().join("initiator"), &sysfs),
        Flavor::Unix,
    );
    let part = format!("{}p1", disk.name());

    // A volume of the target's disk mounted: refused, naming the mount.
    let mnt = t.path().join("pod-volume");
    disk.mount(&mnt);
    let e = disconnect(&api).unwrap_err();
    let m = e.to_string();
    assert!(matches!(e, Error::FailedPrecondition(_)), "{e}");
    assert!(
        m.contains(&format!("{part} is mounted at {:?}", mnt))
            && m.contains(disk.name())
            && m.contains(IQN),
        "{m}"
    );
    disk.unmount();

    // Open exclusively by another program (as a mount or a device-mapper
    // table would hold it): refused.
    let held = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_EXCL)
        .open(disk.part())
        .unwrap();
    let e = disconnect(&api).unwrap_err();
    assert!(
        matches!(&e, Error::FailedPrecondition(m) if m.contains("held open exclusively")),
        "{e}"
    );
    drop(held);

    // Nothing uses it: the logout goes ahead (open-iscsi has no such
    // session here, which DisconnectTarget answers OK, as before).
    disconnect(&api).unwrap();
}
