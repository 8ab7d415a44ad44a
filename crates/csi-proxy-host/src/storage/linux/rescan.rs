//! Rescan on Linux: the SCSI hosts and NVMe controllers asked to scan, then
//! every disk refreshed (a loop device's capacity read again and its
//! partitions synced; a SCSI disk's `device/rescan`), each while its lock
//! is held. Disks that another operation holds come last, so a slow change
//! on one disk delays only that disk's refresh.
//!
//! Every step that may ask a device (a host's `scan`, a disk's refresh)
//! runs on a reader thread of its own within its disk's budget
//! (`inventory::reader`), all waited for until one deadline
//! ([`READ_TIMEOUT`]): a hung disk is marked unresponsive and skipped, and
//! Rescan still answers OK for the others (a driver calls Rescan before it
//! looks for its new disk), with a warning in the log naming the disk; a
//! later call on that disk gets `Unavailable` naming it. A refresh left
//! behind goes on without the disk's lock (it cannot be cancelled). The
//! disks other operations hold are waited for together, at most
//! [`BUSY_WAIT`] in all and never past the call's deadline.

use super::sys::{self, Access};
use super::sysfs::{BlockDisk, Sysfs};
use super::{devices, from_io, LinuxStorage};
use crate::storage::inventory::reader::{Read, Readers};
use crate::storage::inventory::READ_TIMEOUT;
use crate::{Error, Result};
use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// How long Rescan waits for a disk another operation holds (a format, a
/// partitioning); past it (the holder may be stuck in a hung disk's I/O)
/// that disk is skipped with a warning. The holder refreshes what it
/// changed itself.
pub(super) const BUSY_WAIT: Duration = Duration::from_secs(60);

/// How long Rescan waits for the disks other operations hold: until
/// [`BUSY_WAIT`] from `now`, or a little before the call's `deadline`, so
/// that it answers (OK for the disks it refreshed) in time.
fn busy_deadline(now: Instant, deadline: Option<Instant>) -> Instant {
    let own = now + BUSY_WAIT;
    match deadline {
        Some(d) => {
            let margin = d.saturating_duration_since(now) / 10;
            own.min(d.checked_sub(margin).unwrap_or(d)).max(now)
        }
        None => own,
    }
}

/// The host scans in flight, per sysfs file (a hung host holds at most
/// `DISK_THREADS` threads).
fn host_scans() -> &'static Arc<Readers<PathBuf>> {
    static HOSTS: OnceLock<Arc<Readers<PathBuf>>> = OnceLock::new();
    HOSTS.get_or_init(|| Arc::new(Readers::default()))
}

impl LinuxStorage {
    pub(super) fn rescan_all(&self) -> Result<()> {
        let mut writes: Vec<PathBuf> = self
            .sysfs
            .class_entries("scsi_host")
            .into_iter()
            .map(|e| e.join("scan"))
            .collect();
        writes.extend(
            self.sysfs
                .class_entries("nvme")
                .into_iter()
                .map(|e| e.join("rescan_controller")),
        );
        for (file, r) in host_scans().run_all(writes, READ_TIMEOUT, |f: &PathBuf| {
            let what = if f.ends_with("scan") { "- - -" } else { "1" };
            std::fs::write(f, what).map_err(|e| Error::io("write", f.display().to_string(), e))
        }) {
            match r {
                Read::Done(Ok(())) => {}
                Read::Done(Err(e)) => {
                    tracing::warn!(file = %file.display(), error = %e, "host scan failed")
                }
                Read::Unresponsive => {
                    tracing::warn!(file = %file.display(), "host scan did not return in time; skipped")
                }
            }
        }
        let disks = self
            .sysfs
            .disks()
            .map_err(|e| Error::io("read", "/sys/block", e))?;
        let refresh = Refresh {
            sysfs: self.sysfs.clone(),
            dev_dir: self.dev_dir.clone(),
        };
        let mut held = Vec::new();
        let mut free = BTreeMap::new();
        let mut busy = Vec::new();
        for d in disks {
            match self.try_lock_dev((d.major, d.minor)) {
                Some(g) => {
                    held.push(g);
                    free.insert(d.name.clone(), d);
                }
                None => busy.push(d),
            }
        }
        let names = free.keys().cloned().collect();
        let r = refresh.clone();
        let done = self
            .inventory
            .read_disks(names, move |name| match free.get(name) {
                Some(d) => r.disk(d),
                None => Ok(()),
            });
        drop(held);
        for (name, r) in done {
            warn_failed(&name, r);
        }
        // One deadline for all the busy disks (not one each, one after
        // another: a few disks held by calls stuck in their I/O once made
        // Rescan wait a minute per disk), and never past the call's own.
        let until = busy_deadline(Instant::now(), crate::deadline::current());
        for d in busy {
            if let Err(e) = self.inventory.responsive(&d.name, d.number) {
                warn_failed(&d.name, Err(e));
                continue;
            }
            let Some(_g) = self.lock_dev_until((d.major, d.minor), until) else {
                tracing::warn!(
                    disk = d.name,
                    "rescan skipped a disk another operation holds (it refreshes what it changes itself)"
                );
                continue;
            };
            let (r, name) = (refresh.clone(), d.name.clone());
            warn_failed(&name, self.inventory.read_disk(&name, move || r.disk(&d)));
        }
        self.inventory.invalidate();
        Ok(())
    }
}

fn warn_failed(disk: &str, r: Result<()>) {
    match r {
        Ok(()) => {}
        Err(e @ Error::Unavailable(_)) => {
            tracing::warn!(disk, error = %e, "rescan skipped a disk that does not answer")
        }
        Err(e) => tracing::warn!(disk, error = %e, "rescan of disk failed"),
    }
}

/// What refreshing a disk needs, owned (it runs on a reader thread).
#[derive(Clone)]
struct Refresh {
    sysfs: Sysfs,
    dev_dir: PathBuf,
}

impl Refresh {
    /// Refreshes one disk (held by the caller while it waits).
    fn disk(&self, d: &BlockDisk) -> Result<()> {
        if d.name.starts_with("loop") {
            let (p, fd) = devices::open(
                &self.dev_dir,
                &d.name,
                d.major,
                d.minor,
                d.number,
                Access::Read,
            )?;
            sys::loop_set_capacity(&fd)
                .map_err(|e| from_io("LOOP_SET_CAPACITY", &p.display().to_string(), e))?;
            if d.partscan {
                super::sync_partitions(&self.sysfs, &self.dev_dir, d, &fd)?;
            }
            Ok(())
        } else {
            let rescan = self.sysfs.disk_dir(&d.name).join("device/rescan");
            match std::fs::write(&rescan, "1") {
                Err(e) if e.kind() != io::ErrorKind::NotFound => {
                    Err(Error::io("write", rescan.display().to_string(), e))
                }
                _ => Ok(()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_disks_are_waited_for_until_one_deadline_within_the_calls() {
        let now = Instant::now();
        assert_eq!(busy_deadline(now, None), now + BUSY_WAIT);
        // A call with 5 s left: Rescan stops waiting 0.5 s before.
        let d = now + Duration::from_secs(5);
        assert_eq!(busy_deadline(now, Some(d)), d - Duration::from_millis(500));
        // A long deadline: BUSY_WAIT.
        assert_eq!(
            busy_deadline(now, Some(now + Duration::from_secs(3600))),
            now + BUSY_WAIT
        );
        // Passed: no wait.
        assert_eq!(busy_deadline(now, Some(now)), now);
    }
}
