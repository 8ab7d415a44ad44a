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
mod snapshot;
pub mod uevent;

pub use snapshot::Snapshot;

use crate::inline;
use crate::storage::VolumeId;
use crate::Result;
use std::collections::BTreeSet;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
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

/// How a backend reads its disks.
pub trait Scan: Send + Sync {
    type Key: Ord + Clone + std::fmt::Debug + Send;
    type Disk: Send;
    /// Every disk of the host.
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
}

/// The inventory of one backend.
pub struct Inventory<S: Scan, E> {
    scan: S,
    inner: Mutex<Inner<S::Key, S::Disk, E>>,
    fallback_interval: Duration,
}

impl<S: Scan, E: EventSource<Key = S::Key>> Inventory<S, E> {
    /// An inventory over `scan`, kept current by `events` (`None`: every
    /// call scans everything). Nothing is scanned before the first call;
    /// the event source must already be listening, so that nothing that
    /// happens between now and the first scan is missed.
    pub fn new(scan: S, events: Option<E>) -> Self {
        Inventory {
            scan,
            inner: Mutex::new(Inner {
                events,
                snap: Snapshot::default(),
                valid: false,
                stash: Pending::Nothing,
                generation: 0,
                last_full_scan: None,
            }),
            fallback_interval: FALLBACK_INTERVAL,
        }
    }

    /// Changes the shortest time between two fallback scans (tests).
    pub fn with_fallback_interval(mut self, interval: Duration) -> Self {
        self.fallback_interval = interval;
        self
    }

    /// The scanner.
    pub fn scanner(&self) -> &S {
        &self.scan
    }

    /// Whether changes are followed through events (else every call scans
    /// everything).
    pub fn has_events(&self) -> bool {
        self.lock().events.is_some()
    }

    fn lock(&self) -> MutexGuard<'_, Inner<S::Key, S::Disk, E>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The inventory with every queued change applied, locked for one call.
    /// In an inline attempt, "would block" unless that needs no I/O.
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
        let from_events = match &mut inner.events {
            Some(e) => e.drain(),
            None => Pending::Unknown,
        };
        let stash = std::mem::replace(&mut inner.stash, Pending::Nothing);
        let pending = from_events.merge(stash);
        let valid = inner.valid;
        if inline && (!valid || pending != Pending::Nothing) {
            inner.stash = pending;
            return Err(inline::would_block(
                "the disk inventory has changes to read",
            ));
        }
        let mut view = View {
            scan: &self.scan,
            inner,
            rescanned: false,
            fallback_interval: self.fallback_interval,
        };
        match pending {
            Pending::Lost(why) => {
                LOST.fetch_add(1, Ordering::Relaxed);
                tracing::info!("device events were lost ({why}); scanning every disk");
                view.rescan()?;
            }
            _ if !valid => view.rescan()?,
            Pending::Unknown => view.rescan()?,
            Pending::Keys(keys) => view.refresh(keys)?,
            Pending::Nothing => {}
        }
        Ok(view)
    }

    /// Marks a disk our own change touched: it is scanned again before the
    /// next call answers, whether or not the kernel announces the change.
    pub fn touch(&self, key: S::Key) {
        let mut inner = self.lock();
        let stash = std::mem::replace(&mut inner.stash, Pending::Nothing);
        inner.stash = stash.merge(Pending::Keys(BTreeSet::from([key])));
    }

    /// Makes the next call scan everything (the Rescan call).
    pub fn invalidate(&self) {
        self.lock().valid = false;
    }
}

/// The inventory locked for one call, with every queued change applied.
pub struct View<'a, S: Scan, E> {
    scan: &'a S,
    inner: MutexGuard<'a, Inner<S::Key, S::Disk, E>>,
    /// A full scan happened in this view: an unknown id stays unknown.
    rescanned: bool,
    fallback_interval: Duration,
}

impl<S: Scan, E> View<'_, S, E> {
    fn rescan(&mut self) -> Result<()> {
        if inline::active() {
            return Err(inline::would_block("a full scan of the disks"));
        }
        FULL_SCANS.fetch_add(1, Ordering::Relaxed);
        self.inner.valid = false;
        let all = self.scan.scan_all()?;
        self.inner.snap = Snapshot::from_scan(all);
        self.inner.valid = true;
        self.inner.last_full_scan = Some(Instant::now());
        self.inner.generation = next_generation();
        self.rescanned = true;
        Ok(())
    }

    fn refresh(&mut self, keys: BTreeSet<S::Key>) -> Result<()> {
        for key in keys {
            DISK_SCANS.fetch_add(1, Ordering::Relaxed);
            match self.scan.scan_one(&key) {
                Ok(Some(d)) => self.inner.snap.insert(d),
                Ok(None) => self.inner.snap.remove(&key),
                Err(e) => {
                    tracing::info!(disk = ?key, error = %e, "scanning one disk failed; scanning every disk");
                    return self.rescan();
                }
            }
        }
        self.inner.generation = next_generation();
        Ok(())
    }

    /// The snapshot, as it is (no fallback scan).
    pub fn snapshot(&self) -> &Snapshot<S::Key, S::Disk> {
        &self.inner.snap
    }

    /// Changes whenever the snapshot changes, and is never the same for
    /// two states in this process (to key caches derived from it: encoded
    /// list answers, the Windows disk locations).
    pub fn generation(&self) -> u64 {
        self.inner.generation
    }

    /// Every disk, by ascending number.
    pub fn disks(&self) -> impl Iterator<Item = (u32, &S::Disk)> {
        self.inner.snap.disks()
    }

    /// Whether an unknown id may make a full scan now.
    fn may_fall_back(&self) -> bool {
        !self.rescanned
            && self
                .inner
                .last_full_scan
                .is_none_or(|t| t.elapsed() >= self.fallback_interval)
    }

    /// Makes sure a disk number is known if it exists: an unknown number
    /// makes a full scan (see [`FALLBACK_INTERVAL`]). Returns whether it is
    /// known.
    pub fn knows_disk(&mut self, number: u32) -> Result<bool> {
        if self.inner.snap.disk(number).is_none() && self.may_fall_back() {
            self.rescan()?;
        }
        Ok(self.inner.snap.disk(number).is_some())
    }

    /// The disk with this number (a full scan first if it is unknown).
    pub fn disk(&mut self, number: u32) -> Result<Option<&S::Disk>> {
        self.knows_disk(number)?;
        Ok(self.inner.snap.disk(number))
    }

    /// The key of a known disk.
    pub fn key(&self, number: u32) -> Option<&S::Key> {
        self.inner.snap.key(number)
    }

    /// The volumes of a disk (a full scan first if the disk is unknown);
    /// `None` when there is no such disk.
    pub fn volumes_on(&mut self, number: u32) -> Result<Option<&[DiskVolume]>> {
        self.knows_disk(number)?;
        Ok(self.inner.snap.volumes_on(number))
    }

    /// Every place the volume id is seen (a full scan first if it is seen
    /// nowhere, see [`FALLBACK_INTERVAL`]); empty when it does not exist.
    pub fn volume(&mut self, id: &VolumeId) -> Result<Vec<Placement>> {
        if self.inner.snap.places(id).is_empty() && self.may_fall_back() {
            self.rescan()?;
        }
        Ok(self.inner.snap.places(id).to_vec())
    }

    /// A full scan for something the snapshot does not know (see
    /// [`FALLBACK_INTERVAL`]); nothing if one is not due.
    pub fn fall_back(&mut self) -> Result<()> {
        if self.may_fall_back() {
            self.rescan()?;
        }
        Ok(())
    }

    /// Forces a full scan now (a changing operation found the snapshot
    /// stale), unless this view has just made one.
    pub fn rescan_now(&mut self) -> Result<()> {
        if self.rescanned {
            return Ok(());
        }
        self.rescan()
    }
}

#[cfg(test)]
mod tests;
