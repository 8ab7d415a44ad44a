//! Reading: the MBR, the primary GPT at the start of a disk and the
//! backup at its end, every rule of the UEFI layout checked.

use super::*;

/// Reads the partition table from `head`, the first bytes of a disk of
/// `disk_sectors` sectors (at least [`head_len`] bytes, or the whole disk if
/// smaller).
///
/// A protective MBR (type 0xEE) or a GPT header signature at LBA 1 makes the
/// disk a GPT disk: if the primary GPT is invalid the result is
/// [`GptError::Corrupt`] and the disk must be left alone. A primary header
/// whose backup is short of the last LBA is accepted (the disk grew; see
/// [`grow`]); one whose backup lies beyond the disk is not.
pub fn parse_table(head: &[u8], sector_size: u32, disk_sectors: u64) -> Result<Table, GptError> {
    let ss = check_sector_size(sector_size)?;
    check_disk_bytes(ss, disk_sectors)?;
    let disk_bytes = disk_sectors.saturating_mul(ss);
    let needed = to_usize((head_len(sector_size) as u64).min(disk_bytes));
    if head.len() < needed {
        return Err(GptError::Truncated {
            needed,
            got: head.len(),
        });
    }
    if disk_sectors == 0 {
        return Ok(Table::Raw);
    }
    let mbr = &head[..512];
    let mbr_signature = mbr[510] == 0x55 && mbr[511] == 0xAA;
    let protective =
        mbr_signature && (0..4).any(|i| mbr[MBR_TABLE_OFFSET + 16 * i + 4] == MBR_PROTECTIVE_TYPE);
    let ssz = to_usize(ss);
    let gpt_signature = disk_sectors >= 2 && head.get(ssz..ssz + 8) == Some(&GPT_SIGNATURE[..]);
    if protective || gpt_signature {
        return parse_gpt_copy(head, 0, 1, ss, disk_sectors, true).map(Table::Gpt);
    }
    if !mbr_signature {
        return Ok(Table::Raw);
    }
    parse_mbr(mbr, disk_sectors)
}

fn parse_mbr(mbr: &[u8], disk_sectors: u64) -> Result<Table, GptError> {
    let mut partitions: Vec<MbrPartition> = Vec::new();
    for i in 0..4u8 {
        let e = &mbr[MBR_TABLE_OFFSET + 16 * usize::from(i)..][..16];
        let number = i + 1;
        let boot = e[0];
        let type_byte = e[4];
        let start_lba = u64::from(le32(e, 8));
        let sectors = u64::from(le32(e, 12));
        if type_byte == 0 || sectors == 0 {
            continue;
        }
        let end = start_lba.saturating_add(sectors);
        if !(boot == 0 || boot == 0x80) || start_lba == 0 || end > disk_sectors {
            return Err(corrupt(Defect::MbrEntry { number }));
        }
        for p in &partitions {
            if start_lba < p.start_lba + p.sectors && p.start_lba < end {
                return Err(corrupt(Defect::MbrOverlap {
                    a: p.number,
                    b: number,
                }));
            }
        }
        partitions.push(MbrPartition {
            number,
            type_byte,
            bootable: boot == 0x80,
            start_lba,
            sectors,
        });
    }
    Ok(Table::Mbr {
        signature: le32(mbr, MBR_SIGNATURE_OFFSET),
        partitions,
    })
}

/// Reads the backup GPT from `tail`, the bytes of the disk that end with the
/// sector `backup_lba` (normally the last LBA, or the primary header's
/// `alternate_lba`); at least [`tail_len`] bytes for a default-sized table.
/// Compare the result with the primary one using [`Gpt::same_table`].
pub fn parse_backup(tail: &[u8], sector_size: u32, backup_lba: u64) -> Result<Gpt, GptError> {
    let ss = check_sector_size(sector_size)?;
    let disk_sectors = backup_lba
        .checked_add(1)
        .ok_or(GptError::DiskTooLarge(backup_lba))?;
    check_disk_bytes(ss, disk_sectors)?;
    let ssz = to_usize(ss);
    let needed = to_usize((tail_len(sector_size) as u64).min(disk_sectors * ss));
    if tail.len() < needed.max(ssz) {
        return Err(GptError::Truncated {
            needed: needed.max(ssz),
            got: tail.len(),
        });
    }
    // Only whole sectors; more sectors than the disk holds are ignored.
    let tail_sectors = (tail.len() / ssz) as u64;
    let tail_sectors = tail_sectors.min(disk_sectors);
    let tail = &tail[tail.len() - to_usize(tail_sectors * ss)..];
    let start_lba = disk_sectors - tail_sectors;
    parse_gpt_copy(tail, start_lba, backup_lba, ss, disk_sectors, false)
}

/// Fields of a header that passed its own checks (signature, revision,
/// size, CRC).
struct Header {
    my_lba: u64,
    alternate_lba: u64,
    first_usable: u64,
    last_usable: u64,
    disk_guid: Guid,
    entry_lba: u64,
    entry_count: u32,
    entry_size: u32,
    entries_crc: u32,
}

fn parse_header(sector: &[u8]) -> Result<Header, GptError> {
    if sector.get(..8) != Some(&GPT_SIGNATURE[..]) {
        return Err(corrupt(Defect::Signature));
    }
    let revision = le32(sector, 8);
    if revision >> 16 != GPT_REVISION >> 16 {
        return Err(corrupt(Defect::Revision(revision)));
    }
    let header_size = le32(sector, 12);
    let hs = header_size as usize;
    if header_size < GPT_HEADER_SIZE || hs > sector.len() {
        return Err(corrupt(Defect::HeaderSize(header_size)));
    }
    if header_crc(&sector[..hs]) != le32(sector, 16) {
        return Err(corrupt(Defect::HeaderCrc));
    }
    let entry_size = le32(sector, 84);
    if !valid_entry_size(entry_size) {
        return Err(corrupt(Defect::EntrySize(entry_size)));
    }
    let entry_count = le32(sector, 80);
    if entry_count == 0 || entry_count > MAX_ENTRY_COUNT {
        return Err(corrupt(Defect::EntryCount(entry_count)));
    }
    Ok(Header {
        my_lba: le64(sector, 24),
        alternate_lba: le64(sector, 32),
        first_usable: le64(sector, 40),
        last_usable: le64(sector, 48),
        disk_guid: guid_at(sector, 56),
        entry_lba: le64(sector, 72),
        entry_count,
        entry_size,
        entries_crc: le32(sector, 88),
    })
}

/// Parses the GPT copy whose header is at `header_lba`; `buf` holds the disk
/// from `buf_lba` on. `primary` selects the location rules.
fn parse_gpt_copy(
    buf: &[u8],
    buf_lba: u64,
    header_lba: u64,
    ss: u64,
    disk_sectors: u64,
    primary: bool,
) -> Result<Gpt, GptError> {
    let ssz = to_usize(ss);
    let sector_at = |lba: u64| -> Result<&[u8], GptError> {
        let rel = lba.checked_sub(buf_lba).ok_or(GptError::Mismatch)?;
        let start = to_usize(rel.saturating_mul(ss));
        buf.get(start..start.saturating_add(ssz))
            .ok_or(GptError::Truncated {
                needed: start.saturating_add(ssz),
                got: buf.len(),
            })
    };
    if header_lba >= disk_sectors {
        return Err(corrupt(Defect::Signature));
    }
    let h = parse_header(sector_at(header_lba)?)?;
    if h.my_lba != header_lba {
        return Err(corrupt(Defect::MyLba(h.my_lba)));
    }
    let arr_sectors = array_sectors(ss, h.entry_count, h.entry_size);
    // Usable range on this disk.
    if h.first_usable > h.last_usable || h.last_usable >= disk_sectors || h.first_usable < 2 {
        return Err(corrupt(Defect::UsableRange {
            first: h.first_usable,
            last: h.last_usable,
            disk_sectors,
        }));
    }
    let array_end = h.entry_lba.saturating_add(arr_sectors); // exclusive
    if primary {
        // The backup array and header must fit after the usable range and
        // on the disk; a backup short of the end means the disk grew.
        let min_alternate = h.last_usable.saturating_add(arr_sectors).saturating_add(1);
        if h.alternate_lba < min_alternate || h.alternate_lba >= disk_sectors {
            return Err(corrupt(Defect::AlternateLba(h.alternate_lba)));
        }
        if h.entry_lba < 2 || array_end > h.first_usable {
            return Err(corrupt(Defect::EntriesLocation));
        }
    } else {
        if h.alternate_lba != 1 {
            return Err(corrupt(Defect::AlternateLba(h.alternate_lba)));
        }
        if h.entry_lba <= h.last_usable || array_end > header_lba {
            return Err(corrupt(Defect::EntriesLocation));
        }
        // Room for the primary header and array before the usable range.
        if h.first_usable < 2u64.saturating_add(arr_sectors) {
            return Err(corrupt(Defect::UsableRange {
                first: h.first_usable,
                last: h.last_usable,
                disk_sectors,
            }));
        }
    }
    // The entry array.
    let array_bytes = to_usize(u64::from(h.entry_count) * u64::from(h.entry_size));
    if h.entry_lba < buf_lba {
        let needed = to_usize((header_lba + 1 - h.entry_lba) * ss);
        return Err(GptError::Truncated {
            needed,
            got: buf.len(),
        });
    }
    let start = to_usize((h.entry_lba - buf_lba) * ss);
    let end = start.saturating_add(array_bytes);
    let array = buf.get(start..end).ok_or(GptError::Truncated {
        needed: end,
        got: buf.len(),
    })?;
    if crc::crc32(array) != h.entries_crc {
        return Err(corrupt(Defect::EntriesCrc));
    }
    let partitions = decode_entries(array, h.entry_size, h.first_usable, h.last_usable)?;
    Ok(Gpt {
        disk_guid: h.disk_guid,
        first_usable: h.first_usable,
        last_usable: h.last_usable,
        alternate_lba: h.alternate_lba,
        entry_lba: h.entry_lba,
        entry_count: h.entry_count,
        entry_size: h.entry_size,
        partitions,
    })
}

fn decode_entries(
    array: &[u8],
    entry_size: u32,
    first_usable: u64,
    last_usable: u64,
) -> Result<Vec<GptPartition>, GptError> {
    let mut partitions = Vec::new();
    for (i, e) in array.chunks_exact(entry_size as usize).enumerate() {
        let type_guid = guid_at(e, 0);
        if type_guid.is_nil() {
            continue;
        }
        let number = i as u32 + 1;
        let first_lba = le64(e, 32);
        let last_lba = le64(e, 40);
        if first_lba > last_lba || first_lba < first_usable || last_lba > last_usable {
            return Err(corrupt(Defect::PartitionRange { number }));
        }
        let units: Vec<u16> = (0..NAME_UNITS)
            .map(|k| le16(e, 56 + 2 * k))
            .take_while(|&u| u != 0)
            .collect();
        partitions.push(GptPartition {
            number,
            type_guid,
            unique_guid: guid_at(e, 16),
            first_lba,
            last_lba,
            attributes: le64(e, 48),
            name: String::from_utf16_lossy(&units),
        });
    }
    check_overlaps(&partitions)?;
    Ok(partitions)
}
