//! Whether a whole disk may be taken away from its users: SetDiskState
//! (offline) and DisconnectTarget (the logout of the iSCSI session that
//! carries it) ask the same question here, so both refuse the same uses.
//!
//! The answer is a [`Claim`]: the disk opened exclusively (`O_EXCL`),
//! held until the act is done. While it is held the kernel refuses every
//! new exclusive open of the disk and of its partitions, so nothing can be
//! mounted, swapped on, or put under device-mapper or md between the check
//! and the act. The exclusive open fails with `EBUSY` while the disk or a
//! partition is mounted in any mount namespace, held, used as swap or
//! opened exclusively; [`super::usage`] then names the uses.
//!
//! Uses that claim nothing are looked for under the claim: a loop device
//! whose backing file is the disk or a partition (kubelet's raw-block
//! "device lock", a filesystem mounted one layer up), or a file on a
//! filesystem of the disk (then a mount holds the disk already), and any
//! process holding the disk or a partition open (a pod given the raw
//! device, a VM). Those are found by a scan of the loop devices and of
//! `/proc/*/fd`, on a thread of its own bounded by [`SCAN_BUDGET`]: a scan
//! that does not finish counts as a use. An open made after the scan by a
//! program that does not claim the device is not seen (nothing in the
//! kernel refuses it); a memory mapping of the device with its fd closed
//! is not looked for.

use super::sys::{self, Access};
use super::sysfs::{BlockDisk, Sysfs};
use super::{devices, from_io, usage};
use crate::storage::inventory::reader::{Read, Readers};
use crate::{Error, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// How long the scan for non-exclusive uses may take; past it the disk
/// counts as in use.
pub const SCAN_BUDGET: Duration = Duration::from_secs(5);

/// Disk `number` claimed exclusively: nothing can claim it or a partition
/// of it while this is held. Dropping it lets go.
pub struct Claim {
    fd: OwnedFd,
    number: u32,
}

impl Claim {
    /// The exclusive fd: acts on the disk go through it.
    pub(super) fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    /// The disk number (diskseq) claimed.
    pub fn number(&self) -> u32 {
        self.number
    }
}

/// Disk `d` claimed, or what uses it (named for an error message).
pub(super) fn claim(dev_dir: &Path, d: &BlockDisk) -> Result<std::result::Result<Claim, String>> {
    let path = devices::node(dev_dir, &d.name, d.major, d.minor)?;
    let shown = path.display().to_string();
    let fd = match sys::open_block(&path, Access::Claim) {
        Ok(fd) => fd,
        Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
            let uses: Vec<(String, usage::Usage)> = devices_of(d)
                .map(|(n, ma, mi)| (n.to_string(), usage::of(n, ma, mi, &[])))
                .collect();
            return Ok(Err(describe(&d.name, &uses)));
        }
        Err(e) => return Err(from_io("open", &shown, e)),
    };
    // The node is the disk sysfs named, or the answer is not its.
    let rdev = sys::block_rdev(&fd).map_err(|e| from_io("fstat", &shown, e))?;
    if rdev != libc::makedev(d.major, d.minor) {
        return Err(Error::Internal(format!(
            "device node {shown} is stale: sysfs says {}:{}",
            d.major, d.minor
        )));
    }
    devices::same_disk(&fd, d.number, &shown, false)?;
    let devs: BTreeSet<u64> = devices_of(d)
        .map(|(_, ma, mi)| libc::makedev(ma, mi))
        .collect();
    let uses = unclaimed_uses(dev_dir, &d.name, devs)?;
    if !uses.is_empty() {
        return Ok(Err(uses.join("; ")));
    }
    Ok(Ok(Claim {
        fd,
        number: d.number,
    }))
}

/// The disk and its partitions: name, major, minor.
fn devices_of(d: &BlockDisk) -> impl Iterator<Item = (&str, u32, u32)> {
    std::iter::once((d.name.as_str(), d.major, d.minor)).chain(
        d.partitions
            .iter()
            .map(|p| (p.name.as_str(), p.major, p.minor)),
    )
}

/// The uses of the devices `devs` (device numbers) that claim nothing:
/// loop devices backed by one of them (or by a file on one), processes
/// holding one open (other than this process: its own opens are brief
/// reads, or the claim itself). Runs on a thread of its own
/// for at most [`SCAN_BUDGET`].
fn unclaimed_uses(dev_dir: &Path, disk: &str, devs: BTreeSet<u64>) -> Result<Vec<String>> {
    let (tx, rx) = std::sync::mpsc::channel();
    let dev_dir = dev_dir.to_path_buf();
    let me = std::process::id();
    std::thread::Builder::new()
        .name("in-use-scan".into())
        .spawn(move || {
            let mut uses = loops_backed_by(&dev_dir, &devs);
            uses.extend(openers(&devs, me));
            let _ = tx.send(uses);
        })
        .map_err(|e| Error::io("spawn", "in-use scan", e))?;
    match rx.recv_timeout(SCAN_BUDGET) {
        Ok(uses) => Ok(uses),
        Err(_) => Ok(vec![format!(
            "{disk} is possibly in use: the scan of loop devices and open files did not finish in {}s",
            SCAN_BUDGET.as_secs()
        )]),
    }
}

/// How long one loop device's status may take to read (its node's open
/// and `LOOP_GET_STATUS64`): a loop device whose own I/O hangs can hold
/// its open for ever (the kernel's open mutex, held by a partition scan
/// stuck on it).
pub const LOOP_PROBE_BUDGET: Duration = Duration::from_secs(1);

/// A loop device's instance: name, kernel `diskseq` (new on every attach,
/// and on `LOOP_CHANGE_FD`) and backing file as sysfs shows it.
type LoopKey = (String, u64, String);

/// The backing identity (`st_dev` of the backing file, its `st_rdev`) of
/// each loop instance read once: it does not change while the instance
/// lives.
fn known() -> std::sync::MutexGuard<'static, BTreeMap<LoopKey, (u64, u64)>> {
    static KNOWN: std::sync::OnceLock<std::sync::Mutex<BTreeMap<LoopKey, (u64, u64)>>> =
        std::sync::OnceLock::new();
    KNOWN
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

/// The probes of loop devices, by name and device number: the inventory's
/// bounded readers (a device whose probe was given up on is not probed
/// again until it returns; a hung one holds at most its readers' threads,
/// whoever asks).
fn probes() -> &'static Arc<Readers<(String, u32, u32)>> {
    static PROBES: std::sync::OnceLock<Arc<Readers<(String, u32, u32)>>> =
        std::sync::OnceLock::new();
    PROBES.get_or_init(|| Arc::new(Readers::default()))
}

/// What one loop device's probe gave.
enum Probe {
    /// Its backing identity (read now, or known for this instance).
    Backing(std::io::Result<(u64, u64)>),
    /// Reading its node failed.
    Failed(Error),
    /// No answer within [`LOOP_PROBE_BUDGET`], or a probe of it is still out.
    Silent,
}

/// Reads the backing identity of loop device `name` through its node.
fn read_backing(
    dev_dir: &Path,
    name: &str,
    major: u32,
    minor: u32,
) -> Result<std::io::Result<(u64, u64)>> {
    let p = devices::node(dev_dir, name, major, minor)?;
    let fd = sys::open_block(&p, Access::Read)
        .map_err(|e| from_io("open", &p.display().to_string(), e))?;
    if sys::block_rdev(&fd).ok() != Some(libc::makedev(major, minor)) {
        return Err(Error::Internal(format!("{} is stale", p.display())));
    }
    Ok(sys::loop_backing(&fd))
}

/// The loop devices whose backing file is one of `devs`, or a file on a
/// filesystem of one of them (the kernel's own stat of the backing file,
/// `LOOP_GET_STATUS64`: a path renamed or deleted since still counts).
/// Each device is read at most [`LOOP_PROBE_BUDGET`], its answer kept for
/// its instance: a loop device that hangs (its own I/O) costs one scan a
/// second and is named as a possible use only while nothing is known of
/// it; it never holds up the scan for the others.
fn loops_backed_by(dev_dir: &Path, devs: &BTreeSet<u64>) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir("/sys/block") else {
        return vec!["possibly in use: the block device list (/sys/block) is unreadable".into()];
    };
    let mut names: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("loop"))
        .collect();
    names.sort();
    // The devices not known yet probed all at once, one deadline for all.
    let mut listed = Vec::new();
    for name in names {
        // Only bound loop devices have a backing file.
        let Ok(file) = std::fs::read_to_string(format!("/sys/block/{name}/loop/backing_file"))
        else {
            continue;
        };
        let Some((ma, mi)) = std::fs::read_to_string(format!("/sys/block/{name}/dev"))
            .ok()
            .and_then(|s| {
                let (a, b) = s.trim().split_once(':')?;
                Some((a.parse().ok()?, b.parse().ok()?))
            })
        else {
            continue;
        };
        // Without a diskseq (kernels before 5.15) nothing is kept.
        let seq = std::fs::read_to_string(format!("/sys/block/{name}/diskseq"))
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok());
        listed.push(((name, seq.unwrap_or(0), file), seq.is_some(), ma, mi));
    }
    let mut answers: BTreeMap<String, Probe> = BTreeMap::new();
    let mut unknown = Vec::new();
    {
        let known = known();
        for (key, _, ma, mi) in &listed {
            match known.get(key) {
                Some(b) => {
                    answers.insert(key.0.clone(), Probe::Backing(Ok(*b)));
                }
                None => unknown.push((key.0.clone(), *ma, *mi)),
            }
        }
    }
    let dir = dev_dir.to_path_buf();
    for ((name, _, _), r) in probes().run_all(unknown, LOOP_PROBE_BUDGET, move |(n, ma, mi)| {
        read_backing(&dir, n, *ma, *mi)
    }) {
        let probe = match r {
            Read::Done(Ok(b)) => Probe::Backing(b),
            Read::Done(Err(e)) => Probe::Failed(e),
            Read::Unresponsive => Probe::Silent,
        };
        answers.insert(name, probe);
    }
    let mut seen = BTreeSet::new();
    for (key, keep, _, _) in listed {
        let Some(backing) = answers.remove(&key.0) else {
            continue;
        };
        if let (true, Probe::Backing(Ok(b))) = (keep, &backing) {
            known().insert(key.clone(), *b);
        }
        let (name, file) = (key.0.clone(), key.2.clone());
        seen.insert(key);
        match backing {
            Probe::Backing(Ok((_, rdev))) if devs.contains(&rdev) => out.push(format!(
                "used by loop device {name} (backing file {})",
                file.trim()
            )),
            Probe::Backing(Ok((on, _))) if devs.contains(&on) => out.push(format!(
                "holds the backing file {} of loop device {name}",
                file.trim()
            )),
            // The kernel could not stat the backing file because its
            // filesystem is disconnected (FUSE, a network filesystem): a
            // filesystem on no block device, so not one of the disk's.
            Probe::Backing(Err(e)) if e.raw_os_error() == Some(libc::ENOTCONN) => {}
            Probe::Backing(Ok(_)) => {}
            // Detached meanwhile: nothing to see.
            _ if !Path::new(&format!("/sys/block/{name}/loop/backing_file")).exists() => {}
            Probe::Backing(Err(e)) => out.push(format!(
                "possibly used by loop device {name} (backing file {}; its status is unreadable: {e})",
                file.trim()
            )),
            Probe::Failed(e) => out.push(format!(
                "possibly used by loop device {name} (backing file {}; {e})",
                file.trim()
            )),
            Probe::Silent => out.push(format!(
                "possibly used by loop device {name} (backing file {}; it does not answer)",
                file.trim()
            )),
        }
    }
    // Instances gone: forgotten.
    known().retain(|k, _| seen.contains(k));
    out
}

/// The processes holding one of `devs` open, by any name: pid and command,
/// once per process; process `me` (this one) left out.
fn openers(devs: &BTreeSet<u64>, me: u32) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return vec!["possibly in use: the process list (/proc) is unreadable".into()];
    };
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        for f in fds.flatten() {
            // Only links to a path can be a device node (not "pipe:[..]",
            // "socket:[..]", "anon_inode:..."); stat follows the link to
            // the open file itself, whatever its name now.
            match std::fs::read_link(f.path()) {
                Ok(t) if t.as_os_str().as_encoded_bytes().starts_with(b"/") => {}
                _ => continue,
            }
            // The kernel's cached attributes (type and device number never
            // change): a file on a network or FUSE filesystem that hangs
            // is not asked.
            let Ok(st) = rustix::fs::statx(
                rustix::fs::CWD,
                f.path(),
                rustix::fs::AtFlags::STATX_DONT_SYNC,
                rustix::fs::StatxFlags::TYPE,
            ) else {
                continue;
            };
            let is_block = u32::from(st.stx_mode) & libc::S_IFMT == libc::S_IFBLK;
            let rdev = libc::makedev(st.stx_rdev_major, st.stx_rdev_minor);
            if is_block && devs.contains(&rdev) {
                let comm = std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .map(|c| c.trim().to_string())
                    .unwrap_or_default();
                out.push(format!("open in process {pid} ({comm})"));
                break;
            }
        }
    }
    out
}

/// Test hooks: code to run while a claim is held, before the act.
#[cfg(test)]
pub(crate) mod hooks {
    use std::sync::Mutex;

    type Hook = Box<dyn FnMut(&str) + Send>;
    static CLAIMED: Mutex<Option<Hook>> = Mutex::new(None);

    /// Runs `f` with the disk's name in the window between the claim and
    /// the act (until [`clear`]).
    pub(crate) fn on_claimed(f: impl FnMut(&str) + Send + 'static) {
        *CLAIMED.lock().unwrap() = Some(Box::new(f));
    }

    pub(crate) fn clear() {
        *CLAIMED.lock().unwrap() = None;
    }

    pub(crate) fn claimed(name: &str) {
        if let Some(f) = CLAIMED.lock().unwrap().as_mut() {
            f(name);
        }
    }
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

/// The disk the kernel names `name`, read from the sysfs tree at `sysfs`
/// and opened in `dev_dir`: claimed (hold the claim until the act is
/// done), or its number and what uses it; `Ok(Ok(None))` when it has gone
/// (nothing left to take away).
pub fn claim_disk(
    sysfs: &Path,
    dev_dir: &Path,
    name: &str,
) -> Result<std::result::Result<Option<Claim>, (u32, String)>> {
    let d = match Sysfs::at(sysfs).disk(name) {
        Ok(Some(d)) => d,
        Ok(None) => return Ok(Ok(None)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Ok(None)),
        Err(e) => return Err(from_io("read", &format!("/sys/block/{name}"), e)),
    };
    Ok(claim(dev_dir, &d)?.map(Some).map_err(|u| (d.number, u)))
}

/// The disk number and the uses of the disk the kernel names `name` (see
/// [`claim_disk`]); `None` when nothing uses it, or when it has gone.
pub fn disk_in_use(sysfs: &Path, dev_dir: &Path, name: &str) -> Result<Option<(u32, String)>> {
    Ok(claim_disk(sysfs, dev_dir, name)?.err())
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
