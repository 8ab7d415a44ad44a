//! Growing: a partition extended after the disk grew, the backup copy
//! moved to the new end.

use super::write::{check_gpt, Layout};
use super::*;

/// The largest last LBA partition `number` can have once the table spans a
/// disk of `new_disk_sectors` sectors: just before the next partition (by
/// position), or the new last usable LBA if none follows.
pub fn max_partition_end(
    gpt: &Gpt,
    sector_size: u32,
    number: u32,
    new_disk_sectors: u64,
) -> Result<u64, GptError> {
    let ss = check_sector_size(sector_size)?;
    check_disk_bytes(ss, new_disk_sectors)?;
    check_gpt(gpt, ss)?;
    let layout = Layout::relocated(gpt, ss, new_disk_sectors)?;
    max_end(gpt, number, layout.last_usable)
}

fn max_end(gpt: &Gpt, number: u32, last_usable: u64) -> Result<u64, GptError> {
    let p = gpt
        .partition(number)
        .ok_or(GptError::NoSuchPartition(number))?;
    Ok(gpt
        .partitions
        .iter()
        .filter(|q| q.first_lba > p.last_lba)
        .map(|q| q.first_lba - 1)
        .min()
        .unwrap_or(last_usable))
}

/// Grows partition `partition_number` after the disk grew to
/// `new_disk_sectors` (or in place, when the disk did not grow but there is
/// free space after the partition): moves the backup copy to the new last
/// LBA, extends the usable range, and sets the partition's last LBA to
/// `new_last_lba` or, for `None`, to [`max_partition_end`].
///
/// `gpt` must be what [`parse_table`] returned for `head` on the grown disk;
/// the raw header and entry array from `head` are kept except for the
/// changed fields. Shrinking is refused, as is reaching into the next
/// partition or past the usable range.
pub fn grow(
    gpt: &Gpt,
    head: &[u8],
    sector_size: u32,
    new_disk_sectors: u64,
    partition_number: u32,
    new_last_lba: Option<u64>,
) -> Result<GrowPlan, GptError> {
    let ss = check_sector_size(sector_size)?;
    match parse_table(head, sector_size, new_disk_sectors)? {
        Table::Gpt(on_disk) if on_disk == *gpt => {}
        _ => return Err(GptError::Mismatch),
    }
    let layout = Layout::relocated(gpt, ss, new_disk_sectors)?;
    let p = gpt
        .partition(partition_number)
        .ok_or(GptError::NoSuchPartition(partition_number))?;
    let max = max_end(gpt, partition_number, layout.last_usable)?;
    let requested = new_last_lba.unwrap_or(max);
    if requested < p.last_lba {
        return Err(GptError::Shrink {
            number: partition_number,
            current: p.last_lba,
            requested,
        });
    }
    if requested > max {
        return Err(GptError::TooLarge {
            number: partition_number,
            requested,
            max,
        });
    }
    // Raw copies from the disk (present: parse_table succeeded).
    let ssz = to_usize(ss);
    let template = head.get(ssz..2 * ssz).ok_or(GptError::Mismatch)?;
    let array_bytes = to_usize(u64::from(gpt.entry_count) * u64::from(gpt.entry_size));
    let start = to_usize(gpt.entry_lba * ss);
    let mut array = head
        .get(start..start.saturating_add(array_bytes))
        .ok_or(GptError::Mismatch)?
        .to_vec();
    let entry = to_usize(u64::from(partition_number - 1) * u64::from(gpt.entry_size));
    put(&mut array, entry + 40, &requested.to_le_bytes());
    Ok(GrowPlan {
        writes: layout.writes(&array, Some(template), Some(gpt.alternate_lba)),
        old_last_lba: p.last_lba,
        new_last_lba: requested,
    })
}
