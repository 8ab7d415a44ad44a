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

pub use reader::{DISK_THREADS, READ_TIMEOUT};
pub use snapshot::Snapshot;

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
    type Key: Ord + Clone + std::fmt::Debug + Send + 'static;
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
    /// time marks the disk unresponsive: [`Error::Unavailable`].
    pub fn read_disk<T: Send + 'static>(
        &self,
        key: &S::Key,
        read: impl FnOnce() -> Result<T> + Send + 'static,
    ) -> Result<T> {
        match self.readers.run(Some(key.clone()), self.read_timeout, read) {
            Read::Done(r) => r,
            Read::Unresponsive => {
                let since = *self
                    .lock()
                    .unresponsive
                    .entry(key.clone())
                    .or_insert_with(Instant::now);
                Err(Error::Unavailable(format!(
                    "disk {key:?} is not answering: a read of it has not returned for {} s; retry later",
                    since.elapsed().as_secs()
                )))
            }
        }
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

/// The inventory's lock, held.
type Guard<'a, S, E> = MutexGuard<'a, Inner<<S as Scan>::Key, <S as Scan>::Disk, E>>;

/// The inventory for one call, with every queued change applied. It holds
/// the inventory lock while the call reads it, and lets it go whenever a
/// disk must be read.
pub struct View<'a, S: Scan, E> {
    inv: &'a Inventory<S, E>,
    inner: Option<Guard<'a, S, E>>,
    /// A full scan happened in this view: an unknown id stays unknown.
    rescanned: bool,
    fallback_interval: Duration,
}

/// The answer for a disk that did not answer its last read.
fn unresponsive_disk(number: u32, key: &dyn std::fmt::Debug, since: Instant) -> Error {
    Error::Unavailable(format!(
        "disk {number} ({key:?}) is not answering: a read of it has not returned for {} s; calls on other disks are not affected; retry later",
        since.elapsed().as_secs()
    ))
}

impl<'a, S: Scan, E: EventSource<Key = S::Key>> View<'a, S, E> {
    fn guard(&mut self) -> &mut Guard<'a, S, E> {
        if self.inner.is_none() {
            self.inner = Some(self.inv.lock());
        }
        self.inner.as_mut().expect("just locked")
    }

    fn state(&self) -> &Inner<S::Key, S::Disk, E> {
        self.inner
            .as_ref()
            .expect("a view holds the lock between reads")
    }

    fn rescan(&mut self) -> Result<()> {
        if inline::active() {
            return Err(inline::would_block("a full scan of the disks"));
        }
        let (done_before, seq_before) = {
            let g = self.guard();
            (g.full_scans, g.seq)
        };
        // Let the lock go: calls that need no scan go on meanwhile.
        self.inner = None;
        let found = {
            let _scanning = self.inv.scanning.lock().unwrap_or_else(|p| p.into_inner());
            let finished_meanwhile = self.inv.lock().full_scans != done_before;
            if finished_meanwhile {
                None
            } else {
                FULL_SCANS.fetch_add(1, Ordering::Relaxed);
                Some(self.inv.full_scan().map(|f| self.swap_full(seq_before, f)))
            }
        };
        self.rescanned = true;
        let g = self.guard();
        match found {
            // Another call's scan finished while this one waited.
            None => Ok(()),
            Some(Err(e)) => Err(e),
            Some(Ok(true)) if !g.valid => Err(Error::Unavailable(format!(
                "the disk scan did not finish within {} s: a disk is not answering; retry later",
                self.inv.read_timeout.as_secs_f32()
            ))),
            Some(Ok(_)) => Ok(()),
        }
    }

    /// Puts a full scan's result in place (under the lock, nothing read).
    /// Returns whether the scan was incomplete (nothing changed then).
    fn swap_full(&self, seq_before: u64, f: FullScan<S::Key, S::Disk>) -> bool {
        let mut g = self.inv.lock();
        let now = Instant::now();
        if f.incomplete {
            tracing::warn!("the disk scan did not finish in time; answering from the last one");
            if g.valid {
                g.last_full_scan = Some(now);
            }
            return true;
        }
        let mut snap = Snapshot::from_scan(f.disks);
        let mut old = std::mem::take(&mut g.snap);
        // A disk read again by another call while this scan ran keeps that
        // newer state; a disk that did not answer keeps its last known one.
        let newer: BTreeSet<S::Key> = g
            .swapped
            .iter()
            .filter(|(_, s)| **s > seq_before)
            .map(|(k, _)| k.clone())
            .collect();
        for k in newer.iter().chain(f.unresponsive.iter()) {
            match old.take(k) {
                Some(d) => snap.insert(d),
                None if newer.contains(k) => snap.remove(k),
                None => {}
            }
        }
        g.swapped.retain(|_, s| *s > seq_before);
        // A disk stays unresponsive while a read of it is still stuck (a
        // backend that scans in full reads only part of what a disk is
        // asked for: Windows' identifiers are read apart).
        let still: Vec<S::Key> = g
            .unresponsive
            .keys()
            .filter(|k| self.inv.readers.in_flight(Some(k)) > 0)
            .cloned()
            .collect();
        let mut unresponsive = BTreeMap::new();
        for k in f.unresponsive.into_iter().chain(still) {
            if !g.unresponsive.contains_key(&k) {
                tracing::warn!(disk = ?k, "a disk did not answer in time; its calls are answered Unavailable until it does");
            }
            let since = g.unresponsive.get(&k).copied().unwrap_or(now);
            unresponsive.insert(k, since);
        }
        g.unresponsive = unresponsive;
        g.snap = snap;
        g.valid = true;
        g.last_full_scan = Some(now);
        g.generation = next_generation();
        g.full_scans += 1;
        false
    }

    fn refresh(&mut self, keys: BTreeSet<S::Key>) -> Result<()> {
        self.inner = None;
        let timeout = self.inv.read_timeout;
        for key in keys {
            DISK_SCANS.fetch_add(1, Ordering::Relaxed);
            let scan = self.inv.scan.clone();
            let k = key.clone();
            let read = self
                .inv
                .readers
                .run(Some(key.clone()), timeout, move || scan.scan_one(&k));
            let g = self.guard();
            match read {
                Read::Done(Ok(found)) => {
                    g.unresponsive.remove(&key);
                    match found {
                        Some(d) => g.snap.insert(d),
                        None => g.snap.remove(&key),
                    }
                    g.seq += 1;
                    let seq = g.seq;
                    g.swapped.insert(key, seq);
                }
                Read::Done(Err(e)) => {
                    tracing::info!(disk = ?key, error = %e, "scanning one disk failed; scanning every disk");
                    return self.rescan();
                }
                Read::Unresponsive => {
                    tracing::warn!(disk = ?key, "a disk did not answer in time; its calls are answered Unavailable until it does");
                    g.unresponsive.entry(key).or_insert_with(Instant::now);
                }
            }
            self.inner = None;
        }
        self.guard().generation = next_generation();
        Ok(())
    }

    /// The snapshot, as it is (no fallback scan).
    pub fn snapshot(&self) -> &Snapshot<S::Key, S::Disk> {
        &self.state().snap
    }

    /// Changes whenever the snapshot changes, and is never the same for
    /// two states in this process (to key caches derived from it: encoded
    /// list answers, the Windows disk locations).
    pub fn generation(&self) -> u64 {
        self.state().generation
    }

    /// Every disk, by ascending number (unresponsive ones as last known).
    pub fn disks(&self) -> impl Iterator<Item = (u32, &S::Disk)> {
        self.state().snap.disks()
    }

    /// Whether disk `number` did not answer its last read.
    pub fn is_unresponsive(&self, number: u32) -> bool {
        let st = self.state();
        st.snap
            .key(number)
            .is_some_and(|k| st.unresponsive.contains_key(k))
    }

    /// [`Error::Unavailable`] naming disk `number` if it did not answer its
    /// last read.
    fn check_responsive(&self, number: u32) -> Result<()> {
        let st = self.state();
        if let Some(k) = st.snap.key(number) {
            if let Some(since) = st.unresponsive.get(k) {
                return Err(unresponsive_disk(number, k, *since));
            }
        }
        Ok(())
    }

    /// Whether an unknown id may make a full scan now.
    fn may_fall_back(&self) -> bool {
        !self.rescanned
            && self
                .state()
                .last_full_scan
                .is_none_or(|t| t.elapsed() >= self.fallback_interval)
    }

    /// Makes sure a disk number is known if it exists: an unknown number
    /// makes a full scan (see [`FALLBACK_INTERVAL`]). Returns whether it is
    /// known; a disk that does not answer is [`Error::Unavailable`].
    pub fn knows_disk(&mut self, number: u32) -> Result<bool> {
        if self.state().snap.disk(number).is_none() && self.may_fall_back() {
            self.rescan()?;
        }
        self.check_responsive(number)?;
        Ok(self.state().snap.disk(number).is_some())
    }

    /// The disk with this number (a full scan first if it is unknown).
    pub fn disk(&mut self, number: u32) -> Result<Option<&S::Disk>> {
        self.knows_disk(number)?;
        Ok(self.state().snap.disk(number))
    }

    /// The key of a known disk.
    pub fn key(&self, number: u32) -> Option<&S::Key> {
        self.state().snap.key(number)
    }

    /// The volumes of a disk (a full scan first if the disk is unknown);
    /// `None` when there is no such disk.
    pub fn volumes_on(&mut self, number: u32) -> Result<Option<&[DiskVolume]>> {
        self.knows_disk(number)?;
        Ok(self.state().snap.volumes_on(number))
    }

    /// Every place the volume id is seen (a full scan first if it is seen
    /// nowhere, see [`FALLBACK_INTERVAL`]); empty when it does not exist.
    /// A volume on a disk that does not answer, or not found while a disk
    /// does not answer, is [`Error::Unavailable`].
    pub fn volume(&mut self, id: &VolumeId) -> Result<Vec<Placement>> {
        if self.state().snap.places(id).is_empty() && self.may_fall_back() {
            self.rescan()?;
        }
        let places = self.state().snap.places(id).to_vec();
        for p in &places {
            self.check_responsive(p.disk)?;
        }
        if places.is_empty() {
            let st = self.state();
            if let Some((k, since)) = st.unresponsive.iter().next() {
                return Err(Error::Unavailable(format!(
                    "volume {id} was not found on the disks that answer; disk {k:?} has not answered for {} s and may hold it; retry later",
                    since.elapsed().as_secs()
                )));
            }
        }
        Ok(places)
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
#[cfg(test)]
mod tests_hung;
