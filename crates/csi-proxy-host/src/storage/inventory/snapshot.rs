//! What the inventory knows at one moment: the disks by number, each with
//! its volumes, and an index from volume id to every place that id was seen.
//!
//! Pure data, no I/O. The volume index never keeps one place per id: the
//! same GPT partition GUID on two disks (a cloned disk) gives two entries,
//! so a caller can refuse the ambiguity instead of silently picking one.

use super::{DiskVolume, Placement, Scanned};
use crate::storage::VolumeId;
use std::collections::BTreeMap;

struct Entry<K, D> {
    key: K,
    disk: D,
    volumes: Vec<DiskVolume>,
}

/// The disks and volumes of the host as last scanned.
pub struct Snapshot<K, D> {
    disks: BTreeMap<u32, Entry<K, D>>,
    numbers: BTreeMap<K, u32>,
    volumes: BTreeMap<VolumeId, Vec<Placement>>,
}

impl<K, D> Default for Snapshot<K, D> {
    fn default() -> Self {
        Snapshot {
            disks: BTreeMap::new(),
            numbers: BTreeMap::new(),
            volumes: BTreeMap::new(),
        }
    }
}

impl<K: Ord + Clone + std::fmt::Debug, D> Snapshot<K, D> {
    /// A snapshot of exactly these disks.
    pub fn from_scan(all: Vec<Scanned<K, D>>) -> Self {
        let mut s = Snapshot::default();
        for d in all {
            s.insert(d);
        }
        s
    }

    /// Adds a disk, replacing whatever had its key or its number before.
    pub fn insert(&mut self, d: Scanned<K, D>) {
        self.remove(&d.key);
        if let Some(old) = self.disks.get(&d.number) {
            // Two kernel names with one number cannot happen (diskseq is
            // unique); if it does, the newer scan wins.
            tracing::warn!(number = d.number, old = ?old.key, new = ?d.key, "two disks report one number; keeping the newer");
            let old = old.key.clone();
            self.remove(&old);
        }
        for v in &d.volumes {
            let places = self.volumes.entry(v.id.clone()).or_default();
            places.push(Placement {
                disk: d.number,
                partition: v.partition,
                extent: v.extent,
            });
            places.sort_unstable();
        }
        self.numbers.insert(d.key.clone(), d.number);
        self.disks.insert(
            d.number,
            Entry {
                key: d.key,
                disk: d.disk,
                volumes: d.volumes,
            },
        );
    }

    /// Takes the disk with this key out, as it was scanned.
    pub fn take(&mut self, key: &K) -> Option<Scanned<K, D>> {
        self.remove_entry(key).map(|(number, e)| Scanned {
            key: e.key,
            number,
            disk: e.disk,
            volumes: e.volumes,
        })
    }

    /// Forgets the disk with this key (a disk that went away).
    pub fn remove(&mut self, key: &K) {
        self.remove_entry(key);
    }

    fn remove_entry(&mut self, key: &K) -> Option<(u32, Entry<K, D>)> {
        let number = self.numbers.remove(key)?;
        let entry = self.disks.remove(&number)?;
        for v in &entry.volumes {
            if let Some(places) = self.volumes.get_mut(&v.id) {
                places.retain(|p| p.disk != number);
                if places.is_empty() {
                    self.volumes.remove(&v.id);
                }
            }
        }
        Some((number, entry))
    }

    /// The disk with this number.
    pub fn disk(&self, number: u32) -> Option<&D> {
        self.disks.get(&number).map(|e| &e.disk)
    }

    /// The key (Linux: kernel name) of the disk with this number.
    pub fn key(&self, number: u32) -> Option<&K> {
        self.disks.get(&number).map(|e| &e.key)
    }

    /// Every disk, by ascending number.
    pub fn disks(&self) -> impl Iterator<Item = (u32, &D)> {
        self.disks.iter().map(|(n, e)| (*n, &e.disk))
    }

    /// The volumes of a disk, in the order the scan found them; `None`
    /// when there is no such disk.
    pub fn volumes_on(&self, number: u32) -> Option<&[DiskVolume]> {
        self.disks.get(&number).map(|e| e.volumes.as_slice())
    }

    /// Every place a volume id was seen, ordered by disk number (empty if
    /// none).
    pub fn places(&self, id: &VolumeId) -> &[Placement] {
        self.volumes.get(id).map_or(&[], Vec::as_slice)
    }

    /// How many disks are known.
    pub fn len(&self) -> usize {
        self.disks.len()
    }

    /// Whether no disk is known.
    pub fn is_empty(&self) -> bool {
        self.disks.is_empty()
    }
}
