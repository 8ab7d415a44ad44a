//! Writing: a fresh table (one partition or none) and one partition added
//! to an empty table, as the writes of both copies in a crash-safe order.

use super::*;

/// Where the copies of a table go.
pub(super) struct Layout {
    pub(super) ss: u64,
    pub(super) disk_guid: Guid,
    pub(super) first_usable: u64,
    pub(super) last_usable: u64,
    pub(super) primary_entry_lba: u64,
    pub(super) backup_lba: u64,
    pub(super) backup_entry_lba: u64,
    pub(super) entry_count: u32,
    pub(super) entry_size: u32,
}

impl Layout {
    /// The layout of `gpt` with its backup moved to the last LBA of a disk
    /// of `disk_sectors` sectors and the usable range extended up to the
    /// backup array.
    pub(super) fn relocated(gpt: &Gpt, ss: u64, disk_sectors: u64) -> Result<Layout, GptError> {
        let arr = array_sectors(ss, gpt.entry_count, gpt.entry_size);
        let backup_lba = disk_sectors.checked_sub(1).ok_or(GptError::DiskShrank {
            disk_sectors,
            table_end: gpt.alternate_lba,
        })?;
        if backup_lba < gpt.alternate_lba {
            return Err(GptError::DiskShrank {
                disk_sectors,
                table_end: gpt.alternate_lba,
            });
        }
        let backup_entry_lba = backup_lba
            .checked_sub(arr)
            .ok_or(corrupt(Defect::AlternateLba(gpt.alternate_lba)))?;
        let last_usable = backup_entry_lba
            .checked_sub(1)
            .filter(|&l| l >= gpt.last_usable)
            .ok_or(corrupt(Defect::AlternateLba(gpt.alternate_lba)))?;
        Ok(Layout {
            ss,
            disk_guid: gpt.disk_guid,
            first_usable: gpt.first_usable,
            last_usable,
            primary_entry_lba: gpt.entry_lba,
            backup_lba,
            backup_entry_lba,
            entry_count: gpt.entry_count,
            entry_size: gpt.entry_size,
        })
    }

    fn array_sectors(&self) -> u64 {
        array_sectors(self.ss, self.entry_count, self.entry_size)
    }

    /// Header sector; `template` (a previous header sector) keeps its header
    /// size and any bytes beyond the 92 defined ones.
    fn header(&self, primary: bool, entries_crc: u32, template: Option<&[u8]>) -> Vec<u8> {
        let len = to_usize(self.ss);
        let mut s = vec![0u8; len];
        let mut header_size = GPT_HEADER_SIZE;
        if let Some(t) = template {
            let hs = le32(t, 12);
            if hs >= GPT_HEADER_SIZE && (hs as usize) <= len && t.len() >= len {
                s.copy_from_slice(&t[..len]);
                header_size = hs;
            }
        }
        let (my_lba, alternate, entry_lba) = if primary {
            (1, self.backup_lba, self.primary_entry_lba)
        } else {
            (self.backup_lba, 1, self.backup_entry_lba)
        };
        put(&mut s, 0, GPT_SIGNATURE);
        put(&mut s, 8, &GPT_REVISION.to_le_bytes());
        put(&mut s, 12, &header_size.to_le_bytes());
        put(&mut s, 16, &[0; 4]);
        put(&mut s, 20, &[0; 4]);
        put(&mut s, 24, &u64::to_le_bytes(my_lba));
        put(&mut s, 32, &u64::to_le_bytes(alternate));
        put(&mut s, 40, &self.first_usable.to_le_bytes());
        put(&mut s, 48, &self.last_usable.to_le_bytes());
        put(&mut s, 56, &self.disk_guid.to_windows_bytes());
        put(&mut s, 72, &entry_lba.to_le_bytes());
        put(&mut s, 80, &self.entry_count.to_le_bytes());
        put(&mut s, 84, &self.entry_size.to_le_bytes());
        put(&mut s, 88, &entries_crc.to_le_bytes());
        let crc = header_crc(&s[..header_size as usize]);
        put(&mut s, 16, &crc.to_le_bytes());
        s
    }

    /// The writes of both copies: backup array, backup header, primary
    /// array, primary header, then (if the backup moved) zeroes over the
    /// stale backup header at `old_backup_lba`. `array` is the entry array
    /// (`entry_count * entry_size` bytes).
    pub(super) fn writes(
        &self,
        array: &[u8],
        template: Option<&[u8]>,
        old_backup_lba: Option<u64>,
    ) -> Vec<Write> {
        let crc = crc::crc32(array);
        let mut padded = array.to_vec();
        padded.resize(to_usize(self.array_sectors() * self.ss), 0);
        // All LBAs are below the disk size, whose byte size fits in u64.
        let mut w = vec![
            Write {
                offset: self.backup_entry_lba * self.ss,
                bytes: padded.clone(),
            },
            Write {
                offset: self.backup_lba * self.ss,
                bytes: self.header(false, crc, template),
            },
            Write {
                offset: self.primary_entry_lba * self.ss,
                bytes: padded,
            },
            Write {
                offset: self.ss,
                bytes: self.header(true, crc, template),
            },
        ];
        // The stale header lies outside every partition of the old table;
        // it is left alone if the new backup array now covers it.
        if let Some(old) = old_backup_lba {
            if old < self.backup_entry_lba {
                w.push(Write {
                    offset: old * self.ss,
                    bytes: vec![0; to_usize(self.ss)],
                });
            }
        }
        w
    }
}

pub(super) fn encode_name(name: &str) -> Result<[u8; 2 * NAME_UNITS], GptError> {
    let mut out = [0u8; 2 * NAME_UNITS];
    for (n, unit) in name.encode_utf16().enumerate() {
        if n == NAME_UNITS {
            return Err(GptError::NameTooLong);
        }
        put(&mut out, 2 * n, &unit.to_le_bytes());
    }
    Ok(out)
}

/// Writes `p` into its slot of `array` (entries of `entry_size` bytes).
fn encode_entry(array: &mut [u8], entry_size: u32, p: &GptPartition) -> Result<(), GptError> {
    let name = encode_name(&p.name)?;
    let index = to_usize(u64::from(p.number).saturating_sub(1));
    let start = index.saturating_mul(entry_size as usize);
    let e = array
        .get_mut(start..start.saturating_add(entry_size as usize))
        .ok_or(GptError::TableFull)?;
    e.fill(0);
    put(e, 0, &p.type_guid.to_windows_bytes());
    put(e, 16, &p.unique_guid.to_windows_bytes());
    put(e, 32, &p.first_lba.to_le_bytes());
    put(e, 40, &p.last_lba.to_le_bytes());
    put(e, 48, &p.attributes.to_le_bytes());
    put(e, 56, &name);
    Ok(())
}

/// The protective MBR sector for a disk of `disk_sectors` sectors.
fn protective_mbr(ss: u64, disk_sectors: u64) -> Vec<u8> {
    let mut s = vec![0u8; to_usize(ss)];
    let e = MBR_TABLE_OFFSET;
    // Boot indicator 0; starting CHS 0/0/2 (= LBA 1); type 0xEE; ending CHS
    // saturated; starting LBA 1; size clamped to what 32 bits hold.
    put(
        &mut s,
        e,
        &[
            0x00,
            0x00,
            0x02,
            0x00,
            MBR_PROTECTIVE_TYPE,
            0xFF,
            0xFF,
            0xFF,
        ],
    );
    put(&mut s, e + 8, &1u32.to_le_bytes());
    let size = u32::try_from(disk_sectors.saturating_sub(1)).unwrap_or(u32::MAX);
    put(&mut s, e + 12, &size.to_le_bytes());
    put(&mut s, 510, &[0x55, 0xAA]);
    s
}

fn align_up(lba: u64, align: u64) -> Option<u64> {
    lba.checked_add(align - 1).map(|v| v / align * align)
}

/// Checks that a caller-supplied [`Gpt`] obeys the rules [`parse_table`]
/// enforces, so the encoders can rely on them.
pub(super) fn check_gpt(gpt: &Gpt, ss: u64) -> Result<(), GptError> {
    if !valid_entry_size(gpt.entry_size) {
        return Err(corrupt(Defect::EntrySize(gpt.entry_size)));
    }
    if gpt.entry_count == 0 || gpt.entry_count > MAX_ENTRY_COUNT {
        return Err(corrupt(Defect::EntryCount(gpt.entry_count)));
    }
    let arr = array_sectors(ss, gpt.entry_count, gpt.entry_size);
    if gpt.entry_lba < 2 || gpt.entry_lba.saturating_add(arr) > gpt.first_usable {
        return Err(corrupt(Defect::EntriesLocation));
    }
    let min_alternate = gpt.last_usable.saturating_add(arr).saturating_add(1);
    if gpt.first_usable > gpt.last_usable || gpt.alternate_lba < min_alternate {
        return Err(corrupt(Defect::AlternateLba(gpt.alternate_lba)));
    }
    let mut seen = std::collections::BTreeSet::new();
    for p in &gpt.partitions {
        if p.number == 0
            || p.number > gpt.entry_count
            || !seen.insert(p.number)
            || p.type_guid.is_nil()
            || p.first_lba > p.last_lba
            || p.first_lba < gpt.first_usable
            || p.last_lba > gpt.last_usable
        {
            return Err(corrupt(Defect::PartitionRange { number: p.number }));
        }
    }
    check_overlaps(&gpt.partitions)
}

/// Builds a fresh GPT on a disk of `disk_sectors` sectors with one partition
/// from 1 MiB to the last usable LBA: protective MBR, primary header and 128
/// entries at LBA 1 and 2, backup entries and header at the end.
pub fn create_single_partition(
    sector_size: u32,
    disk_sectors: u64,
    disk_guid: Guid,
    part_guid: Guid,
    type_guid: Guid,
    name: &str,
) -> Result<Vec<Write>, GptError> {
    if type_guid.is_nil() {
        return Err(corrupt(Defect::PartitionRange { number: 1 }));
    }
    fresh(
        sector_size,
        disk_sectors,
        disk_guid,
        Some((part_guid, type_guid, name)),
    )
}

/// Builds a fresh GPT without partitions (an initialised, empty disk), laid
/// out as [`create_single_partition`]'s.
pub fn create_empty(
    sector_size: u32,
    disk_sectors: u64,
    disk_guid: Guid,
) -> Result<Vec<Write>, GptError> {
    fresh(sector_size, disk_sectors, disk_guid, None)
}

/// The first and last LBA of the partition [`create_single_partition`]
/// creates on a disk of `disk_sectors` sectors.
pub fn fresh_partition_extent(sector_size: u32, disk_sectors: u64) -> Result<(u64, u64), GptError> {
    let ss = check_sector_size(sector_size)?;
    check_disk_bytes(ss, disk_sectors)?;
    let needed = min_disk_sectors(sector_size);
    if disk_sectors < needed {
        return Err(GptError::DiskTooSmall {
            sectors: disk_sectors,
            needed,
        });
    }
    let arr = DEFAULT_ARRAY_BYTES.div_ceil(ss);
    Ok((MIB / ss, disk_sectors - 1 - arr - 1))
}

/// A fresh GPT with at most one partition (unique GUID, type GUID, name).
fn fresh(
    sector_size: u32,
    disk_sectors: u64,
    disk_guid: Guid,
    partition: Option<(Guid, Guid, &str)>,
) -> Result<Vec<Write>, GptError> {
    let ss = check_sector_size(sector_size)?;
    check_disk_bytes(ss, disk_sectors)?;
    let needed = min_disk_sectors(sector_size);
    if disk_sectors < needed {
        return Err(GptError::DiskTooSmall {
            sectors: disk_sectors,
            needed,
        });
    }
    let arr = DEFAULT_ARRAY_BYTES.div_ceil(ss);
    let backup_lba = disk_sectors - 1;
    let backup_entry_lba = backup_lba - arr;
    let layout = Layout {
        ss,
        disk_guid,
        first_usable: 2 + arr,
        last_usable: backup_entry_lba - 1,
        primary_entry_lba: 2,
        backup_lba,
        backup_entry_lba,
        entry_count: DEFAULT_ENTRY_COUNT,
        entry_size: DEFAULT_ENTRY_SIZE,
    };
    let mut array = vec![0u8; DEFAULT_ARRAY_BYTES as usize];
    if let Some((unique_guid, type_guid, name)) = partition {
        let partition = GptPartition {
            number: 1,
            type_guid,
            unique_guid,
            first_lba: MIB / ss,
            last_lba: layout.last_usable,
            attributes: 0,
            name: name.to_string(),
        };
        encode_entry(&mut array, DEFAULT_ENTRY_SIZE, &partition)?;
    }
    let mut writes = layout.writes(&array, None, None);
    // The protective MBR goes before the primary header: the header is
    // the last write, so a table cut short by a kill is never taken for a
    // complete one, and [`resume_fresh`] recognises every earlier state.
    let header = writes.pop().expect("writes end with the primary header");
    writes.push(Write {
        offset: 0,
        bytes: protective_mbr(ss, disk_sectors),
    });
    writes.push(header);
    Ok(writes)
}

/// Adds one partition to a valid GPT that has no partitions other than
/// Microsoft Reserved ones: it starts 1 MiB-aligned after the last existing
/// partition and ends at the last usable LBA. If the disk grew, the backup
/// copy moves to the new end first. Existing entries are re-encoded from
/// `gpt` (names round-trip through `String`).
pub fn add_single_partition(
    gpt: &Gpt,
    sector_size: u32,
    disk_sectors: u64,
    part_guid: Guid,
    type_guid: Guid,
    name: &str,
) -> Result<Vec<Write>, GptError> {
    let ss = check_sector_size(sector_size)?;
    check_disk_bytes(ss, disk_sectors)?;
    check_gpt(gpt, ss)?;
    if let Some(p) = gpt
        .partitions
        .iter()
        .find(|p| p.type_guid != Guid::MICROSOFT_RESERVED)
    {
        return Err(GptError::HasDataPartitions(p.number));
    }
    if type_guid.is_nil() {
        return Err(corrupt(Defect::PartitionRange { number: 0 }));
    }
    encode_name(name)?;
    let layout = Layout::relocated(gpt, ss, disk_sectors)?;
    let number = (1..=gpt.entry_count)
        .find(|n| gpt.partition(*n).is_none())
        .ok_or(GptError::TableFull)?;
    let (first_lba, last_lba) = new_extent(gpt, ss, &layout)?;
    let mut partitions = gpt.partitions.clone();
    partitions.push(GptPartition {
        number,
        type_guid,
        unique_guid: part_guid,
        first_lba,
        last_lba,
        attributes: 0,
        name: name.to_string(),
    });
    let mut array = vec![0u8; to_usize(u64::from(gpt.entry_count) * u64::from(gpt.entry_size))];
    for p in &partitions {
        encode_entry(&mut array, gpt.entry_size, p)?;
    }
    Ok(layout.writes(&array, None, Some(gpt.alternate_lba)))
}

/// Where [`add_single_partition`] puts the partition it adds, as its
/// first and last LBA: what that partition will cover, to be checked
/// before the table is written.
pub fn single_partition_extent(
    gpt: &Gpt,
    sector_size: u32,
    disk_sectors: u64,
) -> Result<(u64, u64), GptError> {
    let ss = check_sector_size(sector_size)?;
    check_disk_bytes(ss, disk_sectors)?;
    check_gpt(gpt, ss)?;
    new_extent(gpt, ss, &Layout::relocated(gpt, ss, disk_sectors)?)
}

/// 1 MiB-aligned after the last existing partition, to the last usable LBA.
fn new_extent(gpt: &Gpt, ss: u64, layout: &Layout) -> Result<(u64, u64), GptError> {
    let after = gpt
        .partitions
        .iter()
        .map(|p| p.last_lba.saturating_add(1))
        .fold(layout.first_usable, u64::max);
    let align = MIB / ss;
    let first_lba = align_up(after, align).ok_or(GptError::NoSpace)?;
    let last_lba = layout.last_usable;
    if first_lba > last_lba || last_lba - first_lba + 1 < align {
        return Err(GptError::NoSpace);
    }
    Ok((first_lba, last_lba))
}
