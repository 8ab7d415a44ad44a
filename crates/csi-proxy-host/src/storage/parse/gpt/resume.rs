//! Recognising a fresh table of ours that a killed PartitionDisk or
//! InitializeDisk left half-written, so that the retry completes it.
//!
//! A fresh table is written in the order of [`super::create_single_partition`]:
//! backup entries, backup header, primary entries, protective MBR, primary
//! header. Until the last write lands the disk has no valid primary table,
//! and its non-zero bytes would otherwise be refused as content in doubt.
//! Here the table is rebuilt from what was written (the partition's GUIDs
//! from an entry array, the disk GUID from a header) and compared byte for
//! byte: the disk is ours to complete only if every non-zero byte in the
//! spans a table is written over is a byte of that table.

use super::{create_empty, create_single_partition, guid_at, Guid, Write, DEFAULT_ARRAY_BYTES};
use crate::storage::parse::content::{Device, WRITE_SPAN};

/// The writes that complete a fresh table of ours on a disk of
/// `disk_sectors` sectors of `sector_size` bytes, whose partition (if any)
/// has type `type_guid` and name `name`; `spare_disk_guid` is used when no
/// header was written yet (the disk GUID appears nowhere else).
///
/// `None` when the disk holds no such partial table: nothing written,
/// a complete table, or any byte that is not part of one.
pub fn resume_fresh(
    dev: &Device<'_>,
    sector_size: u32,
    disk_sectors: u64,
    type_guid: Guid,
    name: &str,
    spare_disk_guid: Guid,
) -> Option<Vec<Write>> {
    let ss = u64::from(sector_size);
    let array_sectors = DEFAULT_ARRAY_BYTES.div_ceil(ss);
    let backup_lba = disk_sectors.checked_sub(1)?;
    let backup_entry_lba = backup_lba.checked_sub(array_sectors)?;
    let header_guid = |lba: u64| -> Option<Guid> {
        let h = dev.at(lba.checked_mul(ss)?, 92)?;
        (&h[..8] == b"EFI PART").then(|| guid_at(h, 56))
    };
    let disk_guid = header_guid(backup_lba)
        .or_else(|| header_guid(1))
        .unwrap_or(spare_disk_guid);
    // The first entry, from the backup array (written first) or the
    // primary one.
    let entry = |lba: u64| dev.at(lba.checked_mul(ss)?, 128);
    let first = [entry(backup_entry_lba), entry(2)]
        .into_iter()
        .flatten()
        .find(|e| e.iter().any(|&b| b != 0));
    let writes = match first {
        Some(e) if guid_at(e, 0) == type_guid => create_single_partition(
            sector_size,
            disk_sectors,
            disk_guid,
            guid_at(e, 16),
            type_guid,
            name,
        ),
        Some(_) => return None,
        None => create_empty(sector_size, disk_sectors, disk_guid),
    }
    .ok()?;
    partial_of(dev, &writes).then_some(writes)
}

/// Whether the write spans of `dev` hold some but not all of `writes`, and
/// nothing else.
fn partial_of(dev: &Device<'_>, writes: &[Write]) -> bool {
    let mut written = false;
    let mut missing = false;
    for w in writes {
        let Some(got) = dev.at(w.offset, w.bytes.len()) else {
            return false;
        };
        for (&g, &e) in got.iter().zip(&w.bytes) {
            if g == e {
                written |= g != 0;
            } else if g == 0 {
                missing = true;
            } else {
                return false;
            }
        }
    }
    if !written || !missing {
        return false;
    }
    let covered = |off: u64| {
        writes
            .iter()
            .any(|w| off >= w.offset && off - w.offset < w.bytes.len() as u64)
    };
    let head = &dev.head()[..dev.head().len().min(WRITE_SPAN)];
    let tail = &dev.tail()[dev.tail().len() - dev.tail().len().min(WRITE_SPAN)..];
    let tail_start = dev.size() - tail.len() as u64;
    let stray = |span: &[u8], start: u64| {
        span.iter()
            .enumerate()
            .any(|(i, &b)| b != 0 && !covered(start + i as u64))
    };
    !stray(head, 0) && !stray(tail, tail_start)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::parse::content::{read_regions, Device};

    const SECTORS: u64 = 16 * 2048; // 16 MiB of 512-byte sectors

    fn guid(n: u8) -> Guid {
        Guid::from_windows_bytes([n; 16])
    }

    fn disk(size: u64, writes: &[Write]) -> Vec<u8> {
        let mut d = vec![0u8; size as usize];
        for w in writes {
            d[w.offset as usize..w.offset as usize + w.bytes.len()].copy_from_slice(&w.bytes);
        }
        d
    }

    fn resume(bytes: &[u8], ss: u32) -> Option<Vec<Write>> {
        let size = bytes.len() as u64;
        let (h, t) = read_regions(size, |o, b| {
            b.copy_from_slice(&bytes[o as usize..o as usize + b.len()]);
            Ok(())
        })
        .unwrap();
        resume_fresh(
            &Device::new(&h, &t, size),
            ss,
            size / u64::from(ss),
            Guid::BASIC_DATA,
            "Basic data partition",
            guid(9),
        )
    }

    #[test]
    fn every_cut_of_a_fresh_table_is_completed_to_the_same_table() {
        for ss in [512u32, 4096] {
            let sectors = SECTORS * 512 / u64::from(ss);
            let size = sectors * u64::from(ss);
            for empty in [false, true] {
                let full = if empty {
                    create_empty(ss, sectors, guid(1)).unwrap()
                } else {
                    create_single_partition(
                        ss,
                        sectors,
                        guid(1),
                        guid(2),
                        Guid::BASIC_DATA,
                        "Basic data partition",
                    )
                    .unwrap()
                };
                let complete = disk(size, &full);
                for cut in 1..full.len() {
                    let partial = disk(size, &full[..cut]);
                    if partial.iter().all(|&b| b == 0) {
                        // An empty array written: nothing to tell apart
                        // from a new disk, which is partitioned anew.
                        assert!(resume(&partial, ss).is_none());
                        continue;
                    }
                    let writes = resume(&partial, ss)
                        .unwrap_or_else(|| panic!("ss {ss} empty {empty} cut {cut}"));
                    let mut done = partial.clone();
                    for w in &writes {
                        done[w.offset as usize..][..w.bytes.len()].copy_from_slice(&w.bytes);
                    }
                    if cut >= 2 {
                        // A header was written: the disk GUID is kept,
                        // so the result is the very table.
                        assert!(done == complete, "ss {ss} empty {empty} cut {cut}");
                    }
                    assert!(resume(&done, ss).is_none(), "complete now");
                }
                assert!(resume(&complete, ss).is_none(), "a complete table");
                assert!(resume(&disk(size, &[]), ss).is_none(), "a zero disk");
            }
        }
    }

    #[test]
    fn foreign_bytes_beside_a_partial_table_are_not_ours() {
        let full = create_single_partition(
            512,
            SECTORS,
            guid(1),
            guid(2),
            Guid::BASIC_DATA,
            "Basic data partition",
        )
        .unwrap();
        let size = SECTORS * 512;
        let mut d = disk(size, &full[..2]);
        d[100_000] = 1;
        assert!(resume(&d, 512).is_none(), "a stray byte in the first MiB");
        let mut d = disk(size, &full[..2]);
        d[(size - 600_000) as usize] = 1;
        assert!(resume(&d, 512).is_none(), "a stray byte in the last MiB");
        // Another name, or another type, is another tool's table.
        let other =
            create_single_partition(512, SECTORS, guid(1), guid(2), Guid::BASIC_DATA, "data")
                .unwrap();
        assert!(resume(&disk(size, &other[..2]), 512).is_none());
        let linux = create_single_partition(
            512,
            SECTORS,
            guid(1),
            guid(2),
            Guid::LINUX_FILESYSTEM,
            "Basic data partition",
        )
        .unwrap();
        assert!(resume(&disk(size, &linux[..2]), 512).is_none());
        // A backup header whose CRC or fields differ.
        let mut d = disk(size, &full[..2]);
        d[(size - 512 + 40) as usize] ^= 0x55;
        assert!(resume(&d, 512).is_none());
    }
}
