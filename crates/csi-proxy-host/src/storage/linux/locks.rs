//! One lock per disk: what changes a disk or one of its volumes (its
//! partition table, a filesystem, a mount, its read-only flag) holds the
//! disk's lock, so two changes to one disk never interleave, while changes
//! to different disks run at the same time. A disk is named by its
//! device number (`major:minor` of the whole disk), which stays the same
//! while the device exists; an entry lives only while it is held or waited
//! for. Reads take no lock.

use super::{no_disk, LinuxStorage};
use crate::storage::VolumeId;
use crate::Result;
use std::collections::HashSet;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Instant;

/// The whole disk `major:minor`.
pub(super) type DiskKey = (u32, u32);

/// The disks held now.
#[derive(Default)]
pub(super) struct DiskLocks {
    held: Mutex<HashSet<DiskKey>>,
    released: Condvar,
}

/// A held disk; released when dropped.
pub(super) struct DiskGuard<'a> {
    locks: &'a DiskLocks,
    key: DiskKey,
}

impl DiskLocks {
    fn set(&self) -> MutexGuard<'_, HashSet<DiskKey>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Holds `key`, waiting while someone else does.
    pub(super) fn lock(&self, key: DiskKey) -> DiskGuard<'_> {
        let mut held = self.set();
        while held.contains(&key) {
            held = self.released.wait(held).unwrap_or_else(|p| p.into_inner());
        }
        held.insert(key);
        DiskGuard { locks: self, key }
    }

    /// Holds `key`, waiting while someone else does, until `deadline`;
    /// `None`: still held by another then (its holder may be stuck in a
    /// hung disk's I/O).
    pub(super) fn lock_until(&self, key: DiskKey, deadline: Instant) -> Option<DiskGuard<'_>> {
        let mut held = self.set();
        while held.contains(&key) {
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            held = self
                .released
                .wait_timeout(held, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        held.insert(key);
        Some(DiskGuard { locks: self, key })
    }

    /// Holds `key` if nobody does.
    pub(super) fn try_lock(&self, key: DiskKey) -> Option<DiskGuard<'_>> {
        // Not `then_some`: its guard would be built, then dropped while
        // `held` is locked, and its drop locks `held` again (and frees the
        // real holder's key).
        let mut held = self.set();
        if held.insert(key) {
            Some(DiskGuard { locks: self, key })
        } else {
            None
        }
    }

    /// How many disks are held now (tests).
    #[cfg(test)]
    fn held(&self) -> usize {
        self.set().len()
    }
}

impl Drop for DiskGuard<'_> {
    fn drop(&mut self) {
        self.locks.set().remove(&self.key);
        // Waiters for other disks wake and wait again: few wait at once.
        self.locks.released.notify_all();
    }
}

impl LinuxStorage {
    /// Holds disk `number` (an unknown number is [`no_disk`]).
    pub(super) fn lock_disk(&self, number: u32) -> Result<DiskGuard<'_>> {
        let key = {
            let mut v = self.view()?;
            let d = v.disk(number)?.ok_or_else(|| no_disk(number))?;
            (d.disk.major, d.disk.minor)
        };
        Ok(self.locks.lock(key))
    }

    /// Holds the disk of `volume`. The volume is located again once the
    /// lock is held: a disk that changed meanwhile (a volume id now seen
    /// elsewhere) is let go and the right one taken.
    pub(super) fn lock_volume(&self, volume: &VolumeId) -> Result<DiskGuard<'_>> {
        let mut key = self.volume_disk_key(volume)?;
        loop {
            let g = self.locks.lock(key);
            let now = self.volume_disk_key(volume)?;
            if now == key {
                return Ok(g);
            }
            key = now;
        }
    }

    fn volume_disk_key(&self, volume: &VolumeId) -> Result<DiskKey> {
        let f = self.locate(volume)?;
        Ok((f.disk.major, f.disk.minor))
    }

    /// Holds the disk `major:minor` (Rescan, disk by disk), waiting for
    /// another holder until `deadline`.
    pub(super) fn lock_dev_until(&self, key: DiskKey, deadline: Instant) -> Option<DiskGuard<'_>> {
        self.locks.lock_until(key, deadline)
    }

    /// Holds the disk `major:minor` if nobody does.
    pub(super) fn try_lock_dev(&self, key: DiskKey) -> Option<DiskGuard<'_>> {
        self.locks.try_lock(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    #[test]
    fn one_holder_per_disk_and_other_disks_free() {
        let locks = DiskLocks::default();
        let second_in = AtomicBool::new(false);
        std::thread::scope(|s| {
            let g = locks.lock((7, 0));
            // Another disk is not held up.
            drop(locks.lock((7, 1)));
            assert!(locks.try_lock((7, 0)).is_none());
            assert!(locks.try_lock((7, 2)).is_some());
            let t = s.spawn(|| {
                let _g = locks.lock((7, 0));
                second_in.store(true, Ordering::SeqCst);
            });
            std::thread::sleep(Duration::from_millis(50));
            assert!(!second_in.load(Ordering::SeqCst), "two holders of one disk");
            drop(g);
            t.join().unwrap();
        });
        assert!(second_in.load(Ordering::SeqCst));
        assert_eq!(locks.held(), 0, "entries are dropped when released");
    }

    #[test]
    fn a_bounded_wait_gives_up_on_a_disk_held_forever() {
        let locks = DiskLocks::default();
        let _stuck = locks.lock((8, 0));
        let t = Instant::now();
        let soon = t + Duration::from_millis(100);
        assert!(locks.lock_until((8, 0), soon).is_none());
        assert!(t.elapsed() >= Duration::from_millis(100));
        assert!(locks.lock_until((8, 1), soon).is_some());
    }
}
