//! Calls waiting in a file system that does not answer, bounded per caller
//! and mount.
//!
//! A path operation inside a mount whose server or disk hangs (a dead NFS
//! server, a FUSE daemon that stopped, a volume whose LUN lost its paths)
//! blocks its thread until the file system answers, and nothing can cancel
//! it. The server bounds such threads per caller (`caller/jobs.rs`: 64
//! live and 64 past their deadline), but a driver that retries calls into
//! one hung mount would spend that whole budget there, and then be locked
//! out of its other volumes too (red team 39r2 F4).
//!
//! So every blocking confined operation is entered here, keyed by its
//! caller ([`crate::on_behalf`]) and the file system its path lies in: the
//! device of the deepest mount at or above the path's real location (the
//! path holds no links, which the confined walk refuses, so its text names
//! where it is; bind mounts of one file system are one key, red team
//! 40mount). A caller may have [`RUNNING_PER_FS`] operations running in
//! one file system; an operation still running [`SLOW_AFTER`] after it
//! started, or past its call's deadline, counts as stuck, and while
//! [`STUCK_PER_MOUNT`] are stuck there, the caller's next operations there
//! are answered [`Error::Unavailable`] at once, naming the mount, without
//! touching it. Its other file systems, and every other caller, are not
//! affected. An operation that follows a final link into another file
//! system counts where the link is (the caller's own doing, charged to
//! it only).
//!
//! Nested operations (a Mkdir that looks its link's destination up) are
//! one entry: the outermost.

use crate::error::{Error, Result};
use std::cell::Cell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// An operation running this long counts as stuck (path operations take
/// milliseconds; a long tree removal counts, but only eight of one caller
/// at once in one mount refuse the next).
pub const SLOW_AFTER: Duration = Duration::from_secs(2);

/// Stuck operations of one caller in one file system before its next ones
/// there are refused at once.
pub const STUCK_PER_MOUNT: usize = 8;

/// Operations of one caller running in one file system at once, at most:
/// half a caller's jobs, so a burst into a file system that hangs (all in
/// before any counts as stuck, red team 40mount) leaves it the other half.
pub const RUNNING_PER_FS: usize = 32;

type Key = (Option<Arc<str>>, u64);

#[derive(Default)]
struct Table {
    next: u64,
    /// Per caller and mount: each operation's id and when it counts as
    /// stuck.
    running: HashMap<Key, Vec<(u64, Instant)>>,
}

impl Table {
    /// Enter `key` at `now`; an operation past `deadline` (or
    /// [`SLOW_AFTER`]) is stuck. `Err`: how many are stuck there.
    fn enter(&mut self, key: &Key, now: Instant, deadline: Option<Instant>) -> Result<u64, usize> {
        let list = self.running.entry(key.clone()).or_default();
        let stuck = list.iter().filter(|(_, at)| *at <= now).count();
        if stuck >= STUCK_PER_MOUNT || list.len() >= RUNNING_PER_FS {
            return Err(stuck);
        }
        self.next += 1;
        let slow = now + SLOW_AFTER;
        list.push((self.next, deadline.map_or(slow, |d| d.min(slow))));
        Ok(self.next)
    }

    fn leave(&mut self, key: &Key, id: u64) {
        if let Some(list) = self.running.get_mut(key) {
            list.retain(|(i, _)| *i != id);
            if list.is_empty() {
                self.running.remove(key);
            }
        }
    }
}

fn table() -> std::sync::MutexGuard<'static, Table> {
    static TABLE: std::sync::LazyLock<Mutex<Table>> =
        std::sync::LazyLock::new(|| Mutex::new(Table::default()));
    TABLE.lock().unwrap_or_else(|p| p.into_inner())
}

thread_local! {
    static INSIDE: Cell<bool> = const { Cell::new(false) };
}

/// An operation entered ([`enter`]); leaves on drop.
#[must_use]
pub struct Guard(Option<(Key, u64)>);

impl Guard {
    /// No entry (an inline attempt, a nested operation, no mount known).
    pub fn none() -> Guard {
        Guard(None)
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some((key, id)) = self.0.take() {
            table().leave(&key, id);
            INSIDE.with(|i| i.set(false));
        }
    }
}

/// Enter an operation on the file system mounted at `mount`, of device
/// `dev` (`None`: not known, not counted) for the current caller; refused
/// while [`STUCK_PER_MOUNT`] of its operations are stuck there, or
/// [`RUNNING_PER_FS`] run there.
pub fn enter(mount: Option<(PathBuf, u64)>) -> Result<Guard> {
    let Some((mount, dev)) = mount else {
        return Ok(Guard::none());
    };
    if INSIDE.with(Cell::get) {
        return Ok(Guard::none());
    }
    let key = (crate::on_behalf::current(), dev);
    let entered = table().enter(&key, Instant::now(), crate::deadline::current());
    let shown = || crate::path::shown(&mount.to_string_lossy());
    match entered {
        Ok(id) => {
            INSIDE.with(|i| i.set(true));
            Ok(Guard(Some((key, id))))
        }
        Err(stuck) if stuck < STUCK_PER_MOUNT => Err(Error::Unavailable(format!(
            "the file system mounted at {} has {RUNNING_PER_FS} calls of this caller in progress; retry when some have finished",
            shown()
        ))),
        Err(stuck) => Err(Error::Unavailable(format!(
            "the file system mounted at {} does not answer: {stuck} earlier calls of this caller are still waiting in it; retry later",
            shown()
        ))),
    }
}

/// The deepest of `mounts` at or above `path` (both absolute, by whole
/// components), with what goes with it; of mounts at the same point, the
/// last (the one on top, in mount-table order).
pub fn deepest_mount<'a, T>(
    mounts: impl IntoIterator<Item = (&'a Path, T)>,
    path: &Path,
) -> Option<(&'a Path, T)> {
    mounts
        .into_iter()
        .filter(|(m, _)| path.starts_with(m))
        .max_by_key(|(m, _)| m.components().count())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(who: &str, dev: u64) -> Key {
        (Some(Arc::from(who)), dev)
    }

    #[test]
    fn a_caller_stuck_in_one_mount_is_refused_there_only() {
        let mut t = Table::default();
        let now = Instant::now();
        let hung = key("driver", 77);
        let mut ids = Vec::new();
        for _ in 0..STUCK_PER_MOUNT {
            ids.push(t.enter(&hung, now, None).unwrap());
        }
        // Not stuck yet: more may start.
        let extra = t.enter(&hung, now, None).unwrap();
        t.leave(&hung, extra);
        let later = now + SLOW_AFTER;
        assert_eq!(t.enter(&hung, later, None), Err(STUCK_PER_MOUNT));
        // Its other mounts, and other callers in this one, are not held.
        let other = key("driver", 8);
        t.enter(&other, later, None).unwrap();
        let someone = key("other", 77);
        t.enter(&someone, later, None).unwrap();
        // One answers: the next may go in.
        t.leave(&hung, ids.pop().unwrap());
        t.enter(&hung, later, None).unwrap();
    }

    #[test]
    fn a_deadline_sooner_than_slow_after_makes_it_stuck_sooner() {
        let mut t = Table::default();
        let now = Instant::now();
        let k = key("d", 5);
        let soon = Some(now + Duration::from_millis(10));
        for _ in 0..STUCK_PER_MOUNT {
            t.enter(&k, now, soon).unwrap();
        }
        assert!(t.enter(&k, now + Duration::from_millis(10), None).is_err());
    }

    #[test]
    fn the_deepest_mount_by_whole_components() {
        let mounts = [
            Path::new("/"),
            Path::new("/var/lib/kubelet"),
            Path::new("/var/lib/kubelet/pods/a/volumes/v"),
            Path::new("/var/lib/kubelet/pods/a/volumes/vv"),
        ];
        let at =
            |p: &str| deepest_mount(mounts.iter().map(|m| (*m, ())), Path::new(p)).map(|(m, _)| m);
        assert_eq!(
            at("/var/lib/kubelet/pods/a/volumes/v/x"),
            Some(Path::new("/var/lib/kubelet/pods/a/volumes/v"))
        );
        assert_eq!(
            at("/var/lib/kubelet/pods/a/volumes/vvv"),
            Some(Path::new("/var/lib/kubelet"))
        );
        assert_eq!(at("/tmp"), Some(Path::new("/")));
        // Two mounts at one point: the later one is on top.
        let stacked = [(Path::new("/m"), 1), (Path::new("/m"), 2)];
        assert_eq!(
            deepest_mount(stacked.iter().copied(), Path::new("/m/x")),
            Some((Path::new("/m"), 2))
        );
    }

    #[test]
    fn a_burst_into_one_file_system_is_bounded_before_anything_is_stuck() {
        // Red team 40mount F1: 90 calls at once all went in (64 threads in
        // a hung mount) before any counted as stuck.
        let mut t = Table::default();
        let now = Instant::now();
        let hung = key("driver", 77);
        for _ in 0..RUNNING_PER_FS {
            t.enter(&hung, now, None).unwrap();
        }
        assert_eq!(t.enter(&hung, now, None), Err(0));
        t.enter(&key("driver", 8), now, None).unwrap();
    }

    #[test]
    fn nested_operations_are_one_entry_and_leave() {
        let m = Some((PathBuf::from("/nested-test-mount"), 4_000_001));
        let g = enter(m.clone()).unwrap();
        assert!(g.0.is_some());
        let inner = enter(m.clone()).unwrap();
        assert!(inner.0.is_none());
        drop(inner);
        drop(g);
        assert!(!INSIDE.with(Cell::get));
        assert!(table().running.keys().all(|(_, d)| *d != 4_000_001));
    }
}
