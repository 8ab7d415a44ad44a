//! One call's view of the inventory: it holds the inventory lock while the
//! call reads it and lets it go whenever a disk must be read (a full scan
//! for an unknown id, a disk named by an event), so that no device read
//! ever runs under the lock.

use super::*;

/// The inventory's lock, held.
pub(super) type Guard<'a, S, E> = MutexGuard<'a, Inner<<S as Scan>::Key, <S as Scan>::Disk, E>>;

/// The inventory for one call, with every queued change applied. It holds
/// the inventory lock while the call reads it, and lets it go whenever a
/// disk must be read.
pub struct View<'a, S: Scan, E> {
    pub(super) inv: &'a Inventory<S, E>,
    pub(super) inner: Option<Guard<'a, S, E>>,
    /// A full scan happened in this view: an unknown id stays unknown.
    pub(super) rescanned: bool,
    pub(super) fallback_interval: Duration,
}

/// The answer for a disk that did not answer its last read.
pub(super) fn unresponsive_disk(number: u32, key: &dyn std::fmt::Debug, since: Instant) -> Error {
    Error::Unavailable(format!(
        "disk {number} ({key:?}) is not answering: a read of it has not returned for {} s; calls on other disks are not affected; retry later",
        since.elapsed().as_secs()
    ))
}

impl<'a, S: Scan, E: EventSource<Key = S::Key>> View<'a, S, E> {
    pub(super) fn guard(&mut self) -> &mut Guard<'a, S, E> {
        if self.inner.is_none() {
            self.inner = Some(self.inv.lock());
        }
        self.inner.as_mut().expect("just locked")
    }

    pub(super) fn state(&self) -> &Inner<S::Key, S::Disk, E> {
        self.inner
            .as_ref()
            .expect("a view holds the lock between reads")
    }

    pub(super) fn rescan(&mut self) -> Result<()> {
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

    pub(super) fn refresh(&mut self, keys: BTreeSet<S::Key>) -> Result<()> {
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
