//! How many calls one disk may have in its backend at once.
//!
//! A call that reads or writes a disk whose I/O hangs blocks its thread in
//! the kernel, where nothing can cancel it. Each such call holds one of its
//! disk's [`DISK_CALLS`] permits until it returns; a call that finds its
//! disk's permits spent is answered `Unavailable` at once instead of
//! taking one more thread, so a hung disk holds a bounded number of the
//! blocking pool's threads and the pool never runs dry for other disks,
//! callers or groups.

use crate::{Error, Result};
use std::collections::BTreeMap;
use std::sync::Mutex;

/// Calls one disk may have in flight at once (stuck ones included).
pub const DISK_CALLS: usize = 8;

/// The calls in flight per disk number.
#[derive(Default)]
pub struct DiskBudget {
    in_flight: Mutex<BTreeMap<u32, usize>>,
}

/// One call's permit on its disk, given back when dropped.
pub struct Permit<'a> {
    budget: &'a DiskBudget,
    disk: u32,
}

impl DiskBudget {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u32, usize>> {
        self.in_flight.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A permit for a call on `disk`, or `Unavailable` when its calls in
    /// flight are [`DISK_CALLS`] already.
    pub fn enter(&self, disk: u32, what: &str) -> Result<Permit<'_>> {
        let mut m = self.lock();
        let n = m.entry(disk).or_insert(0);
        if *n >= DISK_CALLS {
            return Err(Error::Unavailable(format!(
                "{what}: disk {disk} has {DISK_CALLS} calls that have not returned (its I/O may hang); retry later"
            )));
        }
        *n += 1;
        Ok(Permit { budget: self, disk })
    }

    /// Calls in flight on `disk`.
    pub fn in_flight(&self, disk: u32) -> usize {
        self.lock().get(&disk).copied().unwrap_or(0)
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        let mut m = self.budget.lock();
        if let Some(n) = m.get_mut(&self.disk) {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.disk);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_disk_spends_only_its_own_permits() {
        let b = DiskBudget::default();
        let held: Vec<_> = (0..DISK_CALLS).map(|_| b.enter(3, "x").unwrap()).collect();
        let e = b.enter(3, "IsVolumeFormatted").err().unwrap();
        assert!(
            matches!(e, Error::Unavailable(ref m) if m.contains("disk 3")),
            "{e}"
        );
        assert!(b.enter(4, "x").is_ok(), "another disk is not affected");
        drop(held);
        assert_eq!(b.in_flight(3), 0);
        assert!(b.enter(3, "x").is_ok());
    }
}
