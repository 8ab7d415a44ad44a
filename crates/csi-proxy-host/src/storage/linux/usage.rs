//! Who uses a block device: mounts in every mount namespace, holders
//! (device-mapper, md, ...), swap. Asked after an exclusive open of the
//! device failed with `EBUSY` (the kernel's own answer to "is it in use
//! anywhere?"), to decide whether the use is one csi-proxy made inside the
//! allowed roots and to say in the error what holds the device.

use super::mountinfo::{self, Mount};
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// The uses found of one device.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Mounts in this process's mount namespace: mount point, and whether
    /// it lies strictly below an allowed root.
    pub mounts: Vec<(String, bool)>,
    /// Mounts in other mount namespaces that are not propagated copies of
    /// one of our mounts inside the roots: (a process in that namespace,
    /// mount point there).
    pub foreign: Vec<(String, String)>,
    /// Entries of `/sys/class/block/<dev>/holders`.
    pub holders: Vec<String>,
    /// Listed in `/proc/swaps`.
    pub swap: bool,
}

impl Usage {
    /// Is the device used by anything but mounts inside the allowed roots?
    pub fn outside_roots(&self) -> bool {
        self.mounts.iter().any(|(_, inside)| !inside)
            || !self.foreign.is_empty()
            || !self.holders.is_empty()
            || self.swap
    }

    /// Is anything found at all?
    pub fn is_empty(&self) -> bool {
        self.mounts.is_empty() && self.foreign.is_empty() && self.holders.is_empty() && !self.swap
    }

    /// What holds the device, for an error message.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        for (m, inside) in &self.mounts {
            parts.push(if *inside {
                format!("mounted at {m:?}")
            } else {
                format!("mounted at {m:?}, outside the allowed roots")
            });
        }
        for (pid, m) in &self.foreign {
            parts.push(format!(
                "mounted at {m:?} in the mount namespace of process {pid}"
            ));
        }
        if !self.holders.is_empty() {
            parts.push(format!("held by {}", self.holders.join(", ")));
        }
        if self.swap {
            parts.push("used as swap".to_string());
        }
        if parts.is_empty() {
            "in use (held open exclusively by another program)".to_string()
        } else {
            parts.join("; ")
        }
    }
}

/// Is `mount_point` strictly below one of `roots` (real paths)?
pub fn below_a_root(mount_point: &str, roots: &[PathBuf]) -> bool {
    let mp = Path::new(mount_point);
    roots.iter().any(|r| mp != r && mp.starts_with(r))
}

/// The uses of device `major:minor` (sysfs name `name`), with `roots` the
/// real paths of the allowed roots.
pub fn of(name: &str, major: u32, minor: u32, roots: &[PathBuf]) -> Usage {
    let ours = mountinfo::read().unwrap_or_default();
    let mut usage = Usage::default();
    // Peer groups of our mounts of this device inside the roots: copies of
    // them in other namespaces (mount propagation) are ours too.
    let mut groups = HashSet::new();
    for m in mountinfo::of_device(&ours, major, minor) {
        let inside = below_a_root(&m.mount_point, roots);
        if inside {
            groups.extend(m.shared);
        }
        usage.mounts.push((m.mount_point.clone(), inside));
    }
    for (pid, mounts) in other_namespaces() {
        for m in mountinfo::of_device(&mounts, major, minor) {
            if !propagated_from(m, &groups) {
                usage.foreign.push((pid.clone(), m.mount_point.clone()));
            }
        }
    }
    usage.holders = holders(name);
    usage.swap = in_swap(major, minor);
    usage
}

fn propagated_from(m: &Mount, groups: &HashSet<u32>) -> bool {
    m.shared.is_some_and(|g| groups.contains(&g)) || m.master.is_some_and(|g| groups.contains(&g))
}

/// One process per mount namespace other than ours, with its mounts.
fn other_namespaces() -> Vec<(String, Vec<Mount>)> {
    let ns_of = |pid: &str| std::fs::read_link(format!("/proc/{pid}/ns/mnt")).ok();
    let Some(own) = ns_of("self") else {
        return Vec::new();
    };
    let mut seen = HashSet::from([own]);
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|s| s.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        let Some(ns) = ns_of(pid) else { continue };
        if !seen.insert(ns) {
            continue;
        }
        // The process may be gone by now: skip it.
        if let Ok(m) = mountinfo::read_of(pid) {
            out.push((pid.to_string(), m));
        }
    }
    out
}

fn holders(name: &str) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(format!("/sys/class/block/{name}/holders"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// Is `major:minor` an active swap device? `/proc/swaps` names devices by
/// path; each is compared by its device number.
fn in_swap(major: u32, minor: u32) -> bool {
    use std::os::unix::fs::FileTypeExt;
    use std::os::unix::fs::MetadataExt;
    let Ok(text) = std::fs::read_to_string("/proc/swaps") else {
        return false;
    };
    text.lines().skip(1).any(|l| {
        let Some(path) = l.split_whitespace().next() else {
            return false;
        };
        std::fs::metadata(path).is_ok_and(|md| {
            md.file_type().is_block_device() && md.rdev() == libc::makedev(major, minor)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn below_roots() {
        let roots = [PathBuf::from("/var/lib/kubelet")];
        assert!(below_a_root("/var/lib/kubelet/pods/x/mount", &roots));
        assert!(!below_a_root("/var/lib/kubelet", &roots));
        assert!(!below_a_root("/var/lib/kubeletX/a", &roots));
        assert!(!below_a_root("/", &roots));
    }

    #[test]
    fn descriptions() {
        let mut u = Usage::default();
        assert!(u.is_empty() && !u.outside_roots());
        assert!(u.describe().contains("held open exclusively"));
        u.mounts.push(("/var/lib/kubelet/a".into(), true));
        assert!(!u.outside_roots());
        u.mounts.push(("/boot".into(), false));
        u.holders.push("dm-0".into());
        u.foreign.push(("42".into(), "/mnt".into()));
        assert!(u.outside_roots());
        let d = u.describe();
        for needle in ["\"/boot\", outside", "held by dm-0", "process 42"] {
            assert!(d.contains(needle), "{d}");
        }
    }

    #[test]
    fn propagation_groups() {
        let m = |shared, master| Mount {
            major: 7,
            minor: 1,
            mount_point: "/x".into(),
            fs_type: "ext4".into(),
            shared,
            master,
        };
        let groups = HashSet::from([5]);
        assert!(propagated_from(&m(Some(5), None), &groups));
        assert!(propagated_from(&m(None, Some(5)), &groups));
        assert!(!propagated_from(&m(Some(6), Some(7)), &groups));
        assert!(!propagated_from(&m(None, None), &groups));
    }

    #[test]
    fn the_root_filesystem_is_in_use() {
        // Whatever backs "/" here is mounted outside any root we pass.
        let md = std::fs::metadata("/").unwrap();
        use std::os::unix::fs::MetadataExt;
        let (ma, mi) = (libc::major(md.dev()), libc::minor(md.dev()));
        let u = of(
            "nonexistent-name",
            ma,
            mi,
            &[PathBuf::from("/var/lib/kubelet")],
        );
        assert!(
            u.mounts.iter().any(|(m, inside)| m == "/" && !inside),
            "{u:?}"
        );
        assert!(u.outside_roots());
    }
}
