//! Whether a whole disk may be taken away from its users: SetDiskState
//! (offline) and DisconnectTarget (the logout of the iSCSI session that
//! carries it) ask the same question here, so both refuse the same uses.
//!
//! The kernel answers it: an exclusive open (`O_EXCL`) of the whole disk
//! fails with `EBUSY` while the disk or any partition of it is mounted in
//! any mount namespace, held by device-mapper or md, used as swap, or
//! opened exclusively by another program. Only then is [`super::usage`]
//! asked what the uses are, to name them.

use super::sys::{self, Access};
use super::sysfs::{BlockDisk, Sysfs};
use super::{devices, from_io, usage};
use crate::{Error, Result};
use std::path::Path;

/// What uses disk `d` or a partition of it, named for an error message;
/// `None` when the kernel lets the disk be claimed exclusively.
pub(super) fn uses_of(dev_dir: &Path, d: &BlockDisk) -> Result<Option<String>> {
    let path = devices::node(dev_dir, &d.name, d.major, d.minor)?;
    match sys::open_block(&path, Access::Claim) {
        Ok(fd) => {
            // The node is the disk sysfs named, or the answer is not its.
            let rdev = sys::block_rdev(&fd)
                .map_err(|e| from_io("fstat", &path.display().to_string(), e))?;
            if rdev != libc::makedev(d.major, d.minor) {
                return Err(Error::Internal(format!(
                    "device node {} is stale: sysfs says {}:{}",
                    path.display(),
                    d.major,
                    d.minor
                )));
            }
            return Ok(None);
        }
        Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {}
        Err(e) => return Err(from_io("open", &path.display().to_string(), e)),
    }
    let uses: Vec<(String, usage::Usage)> = std::iter::once((&d.name, d.major, d.minor))
        .chain(d.partitions.iter().map(|p| (&p.name, p.major, p.minor)))
        .map(|(n, ma, mi)| (n.clone(), usage::of(n, ma, mi, &[])))
        .collect();
    Ok(Some(describe(&d.name, &uses)))
}

/// The uses found of a disk and its partitions, one part per device that
/// has any; the kernel's refusal alone when none is found (an exclusive
/// open by another program leaves no other trace).
fn describe(disk: &str, uses: &[(String, usage::Usage)]) -> String {
    let found: Vec<String> = uses
        .iter()
        .filter(|(_, u)| !u.is_empty())
        .map(|(n, u)| format!("{n} is {}", u.describe()))
        .collect();
    if found.is_empty() {
        format!("{disk} is held open exclusively by another program")
    } else {
        found.join("; ")
    }
}

/// The disk number and the uses of the disk the kernel names `name`, read
/// from the sysfs tree at `sysfs` and opened in `dev_dir`; `None` when
/// nothing uses it, or when it has gone (nothing left to take away).
pub fn disk_in_use(sysfs: &Path, dev_dir: &Path, name: &str) -> Result<Option<(u32, String)>> {
    let d = match Sysfs::at(sysfs).disk(name) {
        Ok(Some(d)) => d,
        Ok(None) => return Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(from_io("read", &format!("/sys/block/{name}"), e)),
    };
    Ok(uses_of(dev_dir, &d)?.map(|u| (d.number, u)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn uses_are_named_per_device_and_the_bare_refusal_otherwise() {
        let mounted = usage::Usage {
            mounts: vec![(PathBuf::from("/var/lib/kubelet/pods/a/mount"), true)],
            ..Default::default()
        };
        let held = usage::Usage {
            holders: vec!["dm-0".into()],
            ..Default::default()
        };
        let uses = vec![
            ("sdb".to_string(), usage::Usage::default()),
            ("sdb1".to_string(), mounted),
            ("sdb2".to_string(), held),
        ];
        let d = describe("sdb", &uses);
        assert!(
            d.starts_with("sdb1 is mounted at \"/var/lib/kubelet/pods/a/mount\"")
                && d.contains("; sdb2 is held by dm-0")
                && !d.contains("sdb is"),
            "{d}"
        );
        assert_eq!(
            describe("sdb", &uses[..1]),
            "sdb is held open exclusively by another program"
        );
    }
}
