//! The disk and volume inventory both storage backends answer their list
//! and lookup calls from: held in memory, built by one full scan, and kept
//! current by the kernel's own device events.
//!
//! * A backend supplies a [`Scan`]: how to read every disk, or one disk by
//!   its key (Linux: the kernel name; Windows scans only in full).
//! * An [`EventSource`] says what changed since it was last asked: Linux
//!   drains a `NETLINK_KOBJECT_UEVENT` socket without blocking
//!   ([`netlink::Uevents`], messages parsed by [`uevent`]); Windows compares
//!   a counter bumped by `CM_Register_Notification` callbacks
//!   ([`SeqEvents`], registered by `notify`).
//! * [`Inventory::view`] locks the inventory and first applies everything
//!   already queued, so a change the kernel announced before the call is in
//!   the call's answer: named disks are scanned again, everything else is
//!   left alone. A full rescan happens on first use, when events were lost
//!   (a receive-queue overflow), when there is no event source, after
//!   [`Inventory::invalidate`] (the Rescan call), and when a disk number or
//!   volume id is not known ([`View::disk`], [`View::volume`]): once per
//!   call, and at most once per [`FALLBACK_INTERVAL`] (while events flow,
//!   every change the kernel announces is already applied; the fallback is
//!   for what it does not announce, such as a partition table rewritten in
//!   place, and a full scan of 256 disks takes a quarter of a second, which
//!   a client asking for unknown ids in a loop must not be able to repeat
//!   back to back).
//! * Inside an inline attempt ([`crate::inline`]) a view is only given when
//!   nothing needs reading: pending changes, a full scan or a busy lock
//!   answer "would block" (the drained events are kept for the next view),
//!   and the server runs the call again on its blocking pool.
//!
//! The pure parts (the snapshot and its volume index, the order of events
//! and scans, the sequence counter) are unit-tested on every platform with a
//! scripted scanner and event source; the OS parts run against the real
//! kernel in the storage tests.

#[cfg(target_os = "linux")]
pub mod netlink;
#[cfg(windows)]
pub mod notify;
pub mod reader;
mod snapshot;
pub mod uevent;
mod view;

pub use reader::{DISK_THREADS, READ_TIMEOUT};
pub use snapshot::Snapshot;
use view::unresponsive_disk;
pub use view::View;

use crate::inline;
use crate::storage::VolumeId;
use crate::Error;
use crate::Result;
use reader::{Read, Readers};
use std::collections::{BTreeMap, BTreeSet};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

/// The shortest time between two full scans for an unknown id or number.
pub const FALLBACK_INTERVAL: Duration = Duration::from_secs(1);

/// One volume on one disk, as a scan found it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiskVolume {
    pub id: VolumeId,
    /// The partition number; `None` for a volume spanning several disks
    /// (Windows dynamic volumes), which has none.
    pub partition: Option<u32>,
    /// Which extent of the volume this disk holds (0: the first). Always 0
    /// on Linux.
    pub extent: u32,
}

/// One place a volume id was seen: a disk and a partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Placement {
    pub disk: u32,
    pub partition: Option<u32>,
    pub extent: u32,
}

/// One disk, as a scan found it.
pub struct Scanned<K, D> {
    /// What events name the disk by (Linux: the kernel name).
    pub key: K,
    /// The disk number the APIs use.
    pub number: u32,
    /// What the backend keeps per disk.
    pub disk: D,
    pub volumes: Vec<DiskVolume>,
}

/// How a backend reads its disks. Reads run on threads of their own
/// ([`reader`]), bounded in time.
pub trait Scan: Send + Sync + 'static {
    type Key: Ord + Clone + std::fmt::Debug + Send + Sync + 'static;
    type Disk: Send + 'static;
    /// The keys of every disk, read without asking any device (Linux:
    /// `/sys/block`); a full scan then reads each with [`Scan::scan_one`].
    /// `None`: the backend scans only in full ([`Scan::scan_all`]).
    fn keys(&self) -> Option<Result<Vec<Self::Key>>> {
        None
    }
    /// Every disk of the host (when [`Scan::keys`] is `None`).
    fn scan_all(&self) -> Result<Vec<Scanned<Self::Key, Self::Disk>>>;
    /// The disk `key` now; `None` when it is gone (or is not listed, like a
    /// detached loop device). An error makes the inventory scan everything.
    fn scan_one(&self, key: &Self::Key) -> Result<Option<Scanned<Self::Key, Self::Disk>>>;
}

/// What changed since an event source was last drained.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pending<K> {
    /// Nothing.
    Nothing,
    /// These disks (added, removed or changed).
    Keys(BTreeSet<K>),
    /// Something changed; the source does not say what: scan everything.
    Unknown,
    /// Events were lost (the reason is logged): scan everything.
    Lost(&'static str),
}

impl<K: Ord> Pending<K> {
    /// Both changes.
    pub fn merge(self, other: Pending<K>) -> Pending<K> {
        match (self, other) {
            (Pending::Lost(why), _) | (_, Pending::Lost(why)) => Pending::Lost(why),
            (Pending::Unknown, _) | (_, Pending::Unknown) => Pending::Unknown,
            (Pending::Nothing, p) | (p, Pending::Nothing) => p,
            (Pending::Keys(mut a), Pending::Keys(b)) => {
                a.extend(b);
                Pending::Keys(a)
            }
        }
    }
}

/// A stream of device events.
pub trait EventSource: Send {
    type Key;
    /// Everything queued since the last call, without blocking.
    fn drain(&mut self) -> Pending<Self::Key>;
}

/// The event source of a notification callback: the callback bumps a
/// shared counter; a moved counter means "something changed, scan
/// everything" (the callbacks do not say which disk number changed).
pub struct SeqEvents<K> {
    counter: Arc<AtomicU64>,
    applied: u64,
    key: PhantomData<fn() -> K>,
}

impl<K> SeqEvents<K> {
    /// Follows `counter` from its current value.
    pub fn new(counter: Arc<AtomicU64>) -> Self {
        let applied = counter.load(Ordering::Acquire);
        SeqEvents {
            counter,
            applied,
            key: PhantomData,
        }
    }
}

impl<K> EventSource for SeqEvents<K> {
    type Key = K;
    fn drain(&mut self) -> Pending<K> {
        // Read before the scan that follows: a notification that arrives
        // during the scan moves the counter again and is seen next time.
        let now = self.counter.load(Ordering::Acquire);
        if now == self.applied {
            Pending::Nothing
        } else {
            self.applied = now;
            Pending::Unknown
        }
    }
}

static FULL_SCANS: AtomicU64 = AtomicU64::new(0);
/// Generations are unique in the process, across inventories: a number
/// never names two different states.
static GENERATIONS: AtomicU64 = AtomicU64::new(1);

fn next_generation() -> u64 {
    GENERATIONS.fetch_add(1, Ordering::Relaxed)
}
static DISK_SCANS: AtomicU64 = AtomicU64::new(0);
static LOST: AtomicU64 = AtomicU64::new(0);
static VIEWS: AtomicU64 = AtomicU64::new(0);

/// What the inventories of this process have done (for logs, tests and
/// benchmarks).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Full scans (first use, lost events, Rescan, unknown ids).
    pub full_scans: u64,
    /// Single disks scanned again after an event.
    pub disk_scans: u64,
    /// Times the event stream was lost (overflow or receive error).
    pub lost: u64,
    /// Calls answered (views taken).
    pub views: u64,
}

/// The counters of every inventory in this process.
pub fn counters() -> Counters {
    Counters {
        full_scans: FULL_SCANS.load(Ordering::Relaxed),
        disk_scans: DISK_SCANS.load(Ordering::Relaxed),
        lost: LOST.load(Ordering::Relaxed),
        views: VIEWS.load(Ordering::Relaxed),
    }
}

struct Inner<K, D, E> {
    events: Option<E>,
    snap: Snapshot<K, D>,
    /// False until a full scan succeeded, and after [`Inventory::invalidate`].
    valid: bool,
    /// Changes to apply before the next answer: disks our own changes
    /// touched (the kernel may not announce them), and what an inline
    /// attempt drained but could not apply.
    stash: Pending<K>,
    generation: u64,
    /// When the last full scan finished.
    last_full_scan: Option<Instant>,
    /// Full scans finished (a caller that waited for another's scan
    /// does not make one more).
    full_scans: u64,
    /// Bumped at every swap of one disk; `swapped` says when each disk was
    /// last swapped, so that a full scan that read a disk before a newer
    /// single-disk read does not put the older state back.
    seq: u64,
    swapped: BTreeMap<K, u64>,
    /// Reads of pending changes in progress (calls that start meanwhile
    /// wait for them, bounded by the read timeout).
    applying: usize,
    /// Disks whose last read did not return in time, and since when.
    unresponsive: BTreeMap<K, Instant>,
}

/// The inventory of one backend.
pub struct Inventory<S: Scan, E> {
    scan: Arc<S>,
    inner: Mutex<Inner<S::Key, S::Disk, E>>,
    applied: Condvar,
    /// Held by a full scan (outside `inner`): scans do not overlap.
    scanning: Mutex<()>,
    readers: Arc<Readers<S::Key>>,
    fallback_interval: Duration,
    read_timeout: Duration,
}

/// What a full scan found.
struct FullScan<K, D> {
    disks: Vec<Scanned<K, D>>,
    /// Disks that did not answer in time.
    unresponsive: Vec<K>,
    /// The scan itself did not finish (a backend that scans only in full).
    incomplete: bool,
}

impl<S: Scan, E: EventSource<Key = S::Key>> Inventory<S, E> {
    /// An inventory over `scan`, kept current by `events` (`None`: every
    /// call scans everything). Nothing is scanned before the first call;
    /// the event source must already be listening, so that nothing that
    /// happens between now and the first scan is missed.
    pub fn new(scan: S, events: Option<E>) -> Self {
        Inventory {
            scan: Arc::new(scan),
            inner: Mutex::new(Inner {
                events,
                snap: Snapshot::default(),
                valid: false,
                stash: Pending::Nothing,
                generation: 0,
                last_full_scan: None,
                full_scans: 0,
                seq: 0,
                swapped: BTreeMap::new(),
                applying: 0,
                unresponsive: BTreeMap::new(),
            }),
            applied: Condvar::new(),
            scanning: Mutex::new(()),
            readers: Arc::new(Readers::default()),
            fallback_interval: FALLBACK_INTERVAL,
            read_timeout: READ_TIMEOUT,
        }
    }

    /// Changes the shortest time between two fallback scans (tests).
    pub fn with_fallback_interval(mut self, interval: Duration) -> Self {
        self.fallback_interval = interval;
        self
    }

    /// Changes how long one disk's read may take (tests).
    pub fn with_read_timeout(mut self, timeout: Duration) -> Self {
        self.read_timeout = timeout;
        self
    }

    /// The scanner.
    pub fn scanner(&self) -> &S {
        &self.scan
    }

    /// Threads still reading disk `key` (stuck ones included; at most
    /// [`DISK_THREADS`]).
    pub fn reads_in_flight(&self, key: &S::Key) -> usize {
        self.readers.in_flight(Some(key))
    }

    /// Whether changes are followed through events (else every call scans
    /// everything).
    pub fn has_events(&self) -> bool {
        self.lock().events.is_some()
    }

    fn lock(&self) -> MutexGuard<'_, Inner<S::Key, S::Disk, E>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The inventory with every queued change applied, for one call. The
    /// lock is held only to copy or swap state: every read of a disk runs
    /// outside it, on a thread of its own, bounded by the read timeout. In
    /// an inline attempt, "would block" unless that needs no I/O.
    pub fn view(&self) -> Result<View<'_, S, E>> {
        VIEWS.fetch_add(1, Ordering::Relaxed);
        let inline = inline::active();
        let mut inner = if inline {
            match self.inner.try_lock() {
                Ok(g) => g,
                Err(TryLockError::Poisoned(p)) => p.into_inner(),
                Err(TryLockError::WouldBlock) => {
                    return Err(inline::would_block("the disk inventory is busy"))
                }
            }
        } else {
            self.lock()
        };
        // Another call is reading changes announced before this one
        // started: wait for it (bounded: its reads are).
        if inner.applying > 0 {
            if inline {
                return Err(inline::would_block("the disk inventory is reading changes"));
            }
            let limit = Instant::now() + self.read_timeout * 2;
            while inner.applying > 0 && Instant::now() < limit {
                let left = limit.saturating_duration_since(Instant::now());
                inner = self
                    .applied
                    .wait_timeout(inner, left)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
        }
        let from_events = match &mut inner.events {
            Some(e) => e.drain(),
            None => Pending::Unknown,
        };
        // Reads left behind that returned since: read those disks again.
        let mut late = Pending::Nothing;
        for k in self.readers.take_late() {
            late = late.merge(match k {
                Some(k) => Pending::Keys(BTreeSet::from([k])),
                None => Pending::Unknown,
            });
        }
        let stash = std::mem::replace(&mut inner.stash, Pending::Nothing);
        let pending = from_events.merge(stash).merge(late);
        let valid = inner.valid;
        if inline && (!valid || pending != Pending::Nothing) {
            inner.stash = pending;
            return Err(inline::would_block(
                "the disk inventory has changes to read",
            ));
        }
        let applying = pending != Pending::Nothing || !valid;
        if applying {
            inner.applying += 1;
        }
        let mut view = View {
            inv: self,
            inner: Some(inner),
            rescanned: false,
            fallback_interval: self.fallback_interval,
        };
        let r = match pending {
            Pending::Lost(why) => {
                LOST.fetch_add(1, Ordering::Relaxed);
                tracing::info!("device events were lost ({why}); scanning every disk");
                view.rescan()
            }
            _ if !valid => view.rescan(),
            Pending::Unknown => view.rescan(),
            Pending::Keys(keys) => view.refresh(keys),
            Pending::Nothing => Ok(()),
        };
        if applying {
            view.guard().applying -= 1;
            self.applied.notify_all();
        }
        r?;
        Ok(view)
    }

    /// Marks a disk our own change touched: it is scanned again before the
    /// next call answers, whether or not the kernel announces the change.
    pub fn touch(&self, key: S::Key) {
        let mut inner = self.lock();
        let stash = std::mem::replace(&mut inner.stash, Pending::Nothing);
        inner.stash = stash.merge(Pending::Keys(BTreeSet::from([key])));
    }

    /// Runs `read`, a read of disk `key` that may ask the device (its
    /// identifiers), on a thread of its own within the disk's budget,
    /// waiting at most the read timeout. A read that does not return in
    /// time marks the disk unresponsive: [`Error::Unavailable`]. In an
    /// inline attempt, "would block".
    pub fn read_disk<T: Send + 'static>(
        &self,
        key: &S::Key,
        read: impl FnOnce() -> Result<T> + Send + 'static,
    ) -> Result<T> {
        if inline::active() {
            return Err(inline::would_block("a read of a disk"));
        }
        match self.readers.run(Some(key.clone()), self.read_timeout, read) {
            Read::Done(r) => r,
            Read::Unresponsive => Err(self.mark_unresponsive(key)),
        }
    }

    /// [`Inventory::read_disk`] for every disk of `keys` at once, each on
    /// its own thread within its disk's budget, all waited for until one
    /// deadline: one hung disk costs the whole call at most the read
    /// timeout, and the other disks are read.
    pub fn read_disks<T: Send + 'static, F>(
        &self,
        keys: Vec<S::Key>,
        read: F,
    ) -> Vec<(S::Key, Result<T>)>
    where
        F: Fn(&S::Key) -> Result<T> + Send + Sync + 'static,
    {
        self.readers
            .run_all(keys, self.read_timeout, read)
            .into_iter()
            .map(|(k, r)| {
                let r = match r {
                    Read::Done(r) => r,
                    Read::Unresponsive => Err(self.mark_unresponsive(&k)),
                };
                (k, r)
            })
            .collect()
    }

    /// Marks `key` unresponsive (since now, unless it was already).
    fn mark_unresponsive(&self, key: &S::Key) -> Error {
        let since = *self
            .lock()
            .unresponsive
            .entry(key.clone())
            .or_insert_with(Instant::now);
        Error::Unavailable(format!(
            "disk {key:?} is not answering: a read of it has not returned for {} s; retry later",
            since.elapsed().as_secs()
        ))
    }

    /// [`Error::Unavailable`] if disk `key` (number `number`) did not
    /// answer its last read; nothing is read or scanned.
    pub fn responsive(&self, key: &S::Key, number: u32) -> Result<()> {
        match self.lock().unresponsive.get(key) {
            Some(since) => Err(unresponsive_disk(number, key, *since)),
            None => Ok(()),
        }
    }

    /// Makes the next call scan everything (the Rescan call).
    pub fn invalidate(&self) {
        self.lock().valid = false;
    }

    /// Reads every disk, outside the inventory lock: disk by disk, each on
    /// its own thread, all bounded by one deadline; a backend that scans
    /// only in full runs its scan on one thread under the same bound.
    fn full_scan(&self) -> Result<FullScan<S::Key, S::Disk>> {
        let timeout = self.read_timeout;
        let Some(keys) = self.scan.keys() else {
            let scan = self.scan.clone();
            return match self.readers.run(None, timeout, move || scan.scan_all()) {
                Read::Done(r) => r.map(|disks| FullScan {
                    disks,
                    unresponsive: Vec::new(),
                    incomplete: false,
                }),
                Read::Unresponsive => Ok(FullScan {
                    disks: Vec::new(),
                    unresponsive: Vec::new(),
                    incomplete: true,
                }),
            };
        };
        let scan = self.scan.clone();
        let mut out = FullScan {
            disks: Vec::new(),
            unresponsive: Vec::new(),
            incomplete: false,
        };
        for (k, r) in self
            .readers
            .run_all(keys?, timeout, move |k| scan.scan_one(k))
        {
            match r {
                Read::Done(Ok(Some(d))) => out.disks.push(d),
                Read::Done(Ok(None)) => {}
                Read::Done(Err(e)) => {
                    tracing::debug!(disk = ?k, error = %e, "skipping unreadable block device");
                }
                Read::Unresponsive => out.unresponsive.push(k),
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_hung;
