//! Who uses a block device: mounts in every mount namespace, holders
//! (device-mapper, md, ...), swap. Asked after an exclusive open of the
//! device failed with `EBUSY` (the kernel's own answer to "is it in use
//! anywhere?"), to decide whether the use is one csi-proxy made inside the
//! allowed roots and to say in the error what holds the device.

use super::mountinfo::{self, Mount};
use crate::storage::parse::mountinfo::unescape;
use std::collections::HashSet;
use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Bytes of other namespaces' mount tables one scan reads at most; past
/// it, the namespaces left count as unchecked.
const SCAN_BUDGET: u64 = 256 << 20;

/// Parts of a description past which the rest is only counted.
const DESCRIBED: usize = 8;

/// The uses found of one device.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Mounts in this process's mount namespace: mount point, and whether
    /// it lies strictly below an allowed root.
    pub mounts: Vec<(PathBuf, bool)>,
    /// Mounts in other mount namespaces that are not propagated copies of
    /// one of our mounts inside the roots: (a process in that namespace,
    /// mount point there), one per namespace.
    pub foreign: Vec<(String, PathBuf)>,
    /// Mount tables (or lists) that could not be read or parsed, with the
    /// reason: each may hold a use, so each counts as one.
    pub unchecked: Vec<String>,
    /// Entries of `/sys/class/block/<dev>/holders`.
    pub holders: Vec<String>,
    /// Listed in `/proc/swaps`.
    pub swap: bool,
}

impl Usage {
    /// Is the device used (or possibly used) by anything but mounts inside
    /// the allowed roots?
    pub fn outside_roots(&self) -> bool {
        self.mounts.iter().any(|(_, inside)| !inside)
            || !self.foreign.is_empty()
            || !self.unchecked.is_empty()
            || !self.holders.is_empty()
            || self.swap
    }

    /// Is anything found at all?
    pub fn is_empty(&self) -> bool {
        self.mounts.is_empty()
            && self.foreign.is_empty()
            && self.unchecked.is_empty()
            && self.holders.is_empty()
            && !self.swap
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
        for u in &self.unchecked {
            parts.push(format!("possibly in use: {u}"));
        }
        if !self.holders.is_empty() {
            parts.push(format!("held by {}", self.holders.join(", ")));
        }
        if self.swap {
            parts.push("used as swap".to_string());
        }
        // Each use once, however many ways it was found.
        let mut said = HashSet::new();
        parts.retain(|p| said.insert(p.clone()));
        if parts.len() > DESCRIBED {
            let more = parts.len() - DESCRIBED;
            parts.truncate(DESCRIBED);
            parts.push(format!("and {more} more"));
        }
        if parts.is_empty() {
            "in use (held open exclusively by another program)".to_string()
        } else {
            parts.join("; ")
        }
    }
}

/// Is `mount_point` strictly below one of `roots` (real paths)?
pub fn below_a_root(mount_point: &Path, roots: &[PathBuf]) -> bool {
    roots
        .iter()
        .any(|r| mount_point != r && mount_point.starts_with(r))
}

/// The uses of device `major:minor` (sysfs name `name`), with `roots` the
/// real paths of the allowed roots.
pub fn of(name: &str, major: u32, minor: u32, roots: &[PathBuf]) -> Usage {
    let mut usage = Usage::default();
    // Peer groups of our mounts of this device inside the roots: copies of
    // them in other namespaces (mount propagation) are ours too.
    let mut groups = HashSet::new();
    // The ids of our mounts at "/": a table that lists one of them is
    // this namespace's (a live mount is in one namespace, and its id is
    // nobody else's meanwhile).
    let mut own_roots = HashSet::new();
    match mountinfo::read() {
        Ok(ours) => {
            own_roots.extend(ours.iter().filter(|m| m.mount_point == b"/").map(|m| m.id));
            for m in mountinfo::of_device(&ours, major, minor) {
                let inside = below_a_root(m.path(), roots);
                if inside {
                    groups.extend(m.shared);
                }
                usage.mounts.push((m.path().to_path_buf(), inside));
            }
        }
        Err(e) => usage.unchecked.push(format!(
            "this process's mount table (/proc/self/mountinfo): {e}"
        )),
    }
    other_namespaces(major, minor, &groups, &own_roots, &mut usage);
    usage.holders = holders(name);
    match in_swap(major, minor) {
        Ok(swap) => usage.swap = swap,
        Err(e) => usage
            .unchecked
            .push(format!("the swap list (/proc/swaps): {e}")),
    }
    usage
}

fn propagated_from(m: &Mount, groups: &HashSet<u32>) -> bool {
    m.shared.is_some_and(|g| groups.contains(&g)) || m.master.is_some_and(|g| groups.contains(&g))
}

/// The process (or thread) is gone: no longer in `/proc` (`ENOENT`,
/// `ESRCH`).
fn gone(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ESRCH))
}

/// A directory entry of `/proc` that names a process or thread.
fn id_of(name: &OsStr) -> Option<&str> {
    name.to_str()
        .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
}

/// Adds to `usage` the mounts of `major:minor` in every mount namespace a
/// thread of any process is in, other than ours: one per namespace, copies
/// of our peer `groups` left out. A namespace whose table cannot be read
/// is recorded as unchecked; a process that exits meanwhile is skipped.
/// Threads are looked at one by one: a thread can have a mount namespace of
/// its own. A namespace the proxy may not name (`ns/mnt` refused, as for a
/// process an LSM guards) is read all the same, and is ours if its table
/// lists one of `own_roots`.
fn other_namespaces(
    major: u32,
    minor: u32,
    groups: &HashSet<u32>,
    own_roots: &HashSet<u32>,
    usage: &mut Usage,
) {
    let ns_of = |task: &str| std::fs::read_link(format!("{task}/ns/mnt"));
    let own = match ns_of("/proc/self") {
        Ok(n) => n,
        Err(e) => {
            usage
                .unchecked
                .push(format!("this process's mount namespace: {e}"));
            return;
        }
    };
    // Namespaces whose table has been read, ours first.
    let mut seen = HashSet::from([own]);
    let mut budget = SCAN_BUDGET;
    let mut unchecked = |what: String, e: &dyn std::fmt::Display| {
        usage.unchecked.push(format!("{what}: {e}"));
    };
    let mut found = Vec::new();
    let mut named = HashSet::new();
    let procs = match std::fs::read_dir("/proc") {
        Ok(d) => d,
        Err(e) => return unchecked("the process list (/proc)".into(), &e),
    };
    for p in procs {
        let p = match p {
            Ok(p) => p,
            Err(e) => return unchecked("the process list (/proc)".into(), &e),
        };
        let name = p.file_name();
        let Some(pid) = id_of(&name) else { continue };
        let tasks = match std::fs::read_dir(format!("/proc/{pid}/task")) {
            Ok(t) => t,
            Err(e) if gone(&e) => continue,
            Err(e) => {
                unchecked(format!("the threads of process {pid}"), &e);
                continue;
            }
        };
        for t in tasks {
            let t = match t {
                Ok(t) => t,
                Err(e) if gone(&e) => break,
                Err(e) => {
                    unchecked(format!("the threads of process {pid}"), &e);
                    break;
                }
            };
            let name = t.file_name();
            let Some(tid) = id_of(&name) else { continue };
            let task = format!("/proc/{pid}/task/{tid}");
            // A namespace that cannot be named (no right to) is read
            // anyway, just never counted as seen.
            let before = match ns_of(&task) {
                Ok(n) if seen.contains(&n) => continue,
                Ok(n) => Some(n),
                Err(e) if gone(&e) => continue,
                Err(_) => None,
            };
            // The kernel answers EINVAL (no namespaces left) or ENOENT (no
            // filesystem context left) for a task that is exiting; a live
            // task always has both.
            let file = match std::fs::File::open(format!("{task}/mountinfo")) {
                Ok(f) => f,
                Err(e) if gone(&e) || e.raw_os_error() == Some(libc::EINVAL) => continue,
                Err(e) => {
                    unchecked(format!("the mount table of process {pid}"), &e);
                    continue;
                }
            };
            // The open file holds the namespace the task was in: its table
            // is read whole even if the task exits meanwhile.
            let (mut first, mut ours) = (None, false);
            let read = mountinfo::scan(file, &mut budget, |m| {
                ours |= own_roots.contains(&m.id);
                if first.is_none()
                    && m.major == major
                    && m.minor == minor
                    && !propagated_from(&m, groups)
                {
                    first = Some(m.path().to_path_buf());
                }
            });
            if let (Some(mp), false) = (first, ours && before.is_none()) {
                // Once per namespace, or, for a namespace that cannot be
                // named, once per process and mount point (not per thread).
                let key = (
                    before
                        .clone()
                        .map_or_else(|| pid.to_string(), |n| n.to_string_lossy().into_owned()),
                    mp.clone(),
                );
                if named.insert(key) {
                    found.push((pid.to_string(), mp));
                }
            }
            if let Err(e) = read {
                unchecked(format!("the mount table of process {pid}"), &e);
                if budget == 0 {
                    return unchecked(
                        "the mount namespaces not read yet".into(),
                        &format!("over {} MiB of mount tables read", SCAN_BUDGET >> 20),
                    );
                }
                continue;
            }
            // Seen only if the task was in that namespace before and after
            // the read: one that moved is looked at again via its other
            // tasks.
            if let (Some(b), Ok(a)) = (before, ns_of(&task)) {
                if a == b {
                    seen.insert(b);
                }
            }
        }
    }
    usage.foreign.append(&mut found);
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
/// path (escaped as mountinfo is, raw bytes otherwise); each is compared by
/// its device number. No `/proc/swaps` is a kernel without swap.
fn in_swap(major: u32, minor: u32) -> io::Result<bool> {
    use std::os::unix::fs::FileTypeExt;
    use std::os::unix::fs::MetadataExt;
    let text = match std::fs::read("/proc/swaps") {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    Ok(text.split(|&b| b == b'\n').skip(1).any(|l| {
        let Some(path) = l.split(|&b| b == b' ' || b == b'\t').next() else {
            return false;
        };
        let path = unescape(path);
        !path.is_empty()
            && std::fs::metadata(OsStr::from_bytes(&path)).is_ok_and(|md| {
                md.file_type().is_block_device() && md.rdev() == libc::makedev(major, minor)
            })
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_use_is_named_once() {
        let u = Usage {
            foreign: vec![("1".into(), PathBuf::from("/mnt/a")); 12],
            ..Default::default()
        };
        assert_eq!(
            u.describe(),
            "mounted at \"/mnt/a\" in the mount namespace of process 1"
        );
    }

    #[test]
    fn below_roots() {
        let roots = [PathBuf::from("/var/lib/kubelet")];
        let below = |p: &str| below_a_root(Path::new(p), &roots);
        assert!(below("/var/lib/kubelet/pods/x/mount"));
        assert!(!below("/var/lib/kubelet"));
        assert!(!below("/var/lib/kubeletX/a"));
        assert!(!below("/"));
        let odd = Path::new(OsStr::from_bytes(b"/var/lib/kubelet/\xff/mount"));
        assert!(below_a_root(odd, &roots));
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
        u.foreign
            .push(("42".into(), PathBuf::from(OsStr::from_bytes(b"/mnt/\xff"))));
        assert!(u.outside_roots());
        let d = u.describe();
        for needle in [
            "\"/boot\", outside",
            "held by dm-0",
            "\"/mnt/\\xFF\" in the mount namespace of process 42",
        ] {
            assert!(d.contains(needle), "{d}");
        }
    }

    #[test]
    fn an_unreadable_table_is_a_use() {
        let mut u = Usage::default();
        u.mounts.push(("/var/lib/kubelet/a".into(), true));
        u.unchecked
            .push("the mount table of process 7: Permission denied".into());
        assert!(u.outside_roots() && !u.is_empty());
        assert!(u
            .describe()
            .contains("possibly in use: the mount table of process 7"));
        // A flood of uses is described in bounded words.
        for i in 0..1000 {
            u.foreign.push((i.to_string(), "/m".into()));
        }
        let d = u.describe();
        assert!(d.ends_with("and 994 more"), "{d}");
    }

    #[test]
    fn propagation_groups() {
        let m = |shared, master| Mount {
            id: 30,
            parent: 1,
            major: 7,
            minor: 1,
            mount_point: b"/x".to_vec(),
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
            u.mounts
                .iter()
                .any(|(m, inside)| m == Path::new("/") && !inside),
            "{u:?}"
        );
        assert!(u.outside_roots());
        assert!(u.unchecked.is_empty(), "{u:?}");
    }

    /// A thread of this very process in a mount namespace of its own, with
    /// a tmpfs on a directory whose name is not UTF-8: the scan finds the
    /// mount (per thread, as bytes).
    #[test]
    fn a_threads_own_namespace_is_scanned() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipping: needs root to mount");
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(OsStr::from_bytes(b"ns-\xff"));
        std::fs::create_dir(&dir).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let at = dir.clone();
        let t = std::thread::spawn(move || {
            use nix::mount::{mount, MsFlags};
            use std::os::unix::fs::MetadataExt;
            // SAFETY: unshare affects only this thread (CLONE_NEWNS implies
            // CLONE_FS, which a thread may unshare).
            assert_eq!(unsafe { libc::unshare(libc::CLONE_NEWNS) }, 0);
            mount(
                None::<&str>,
                "/",
                None::<&str>,
                MsFlags::MS_REC | MsFlags::MS_PRIVATE,
                None::<&str>,
            )
            .unwrap();
            mount(
                Some("none"),
                &at,
                Some("tmpfs"),
                MsFlags::empty(),
                None::<&str>,
            )
            .unwrap();
            let dev = std::fs::metadata(&at).unwrap().dev();
            tx.send(dev).unwrap();
            let _ = done_rx.recv();
        });
        let dev = rx.recv().unwrap();
        let u = of("none", libc::major(dev), libc::minor(dev), &[]);
        drop(done_tx);
        t.join().unwrap();
        assert!(u.mounts.is_empty(), "{u:?}");
        assert_eq!(
            u.foreign,
            [(std::process::id().to_string(), dir.clone())],
            "{u:?}"
        );
        assert!(u.outside_roots());
    }
}
