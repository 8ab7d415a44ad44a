//! How far a partition can grow, from its disk's layout: the largest size
//! ResizeVolume may give it on Windows. `MSFT_Partition.GetSupportedSize`
//! answers the same question but needs the defragsvc service, which nodes
//! often have disabled; the layout (`IOCTL_DISK_GET_DRIVE_LAYOUT_EX`) is
//! enough: the partition may grow up to the next partition after it, or up
//! to the end of the disk's usable space (GPT: the last usable byte; MBR:
//! the disk's end, and no further than a 32-bit sector count allows).

use super::layout::{DriveLayout, PartitionStyle};

/// The largest size in bytes partition `number` can have without moving
/// or overlapping anything (never less than its current length), or
/// `None` when the layout has no such partition.
pub fn max_partition_size(
    layout: &DriveLayout,
    number: u32,
    disk_size: u64,
    sector_size: u64,
) -> Option<u64> {
    let p = layout.partitions.iter().find(|p| p.number == number)?;
    let (start, len) = (p.offset as u64, p.length as u64);
    let end = start.checked_add(len)?;
    let limit = match (&layout.style, layout.usable) {
        (PartitionStyle::Gpt { .. }, Some((first, usable))) => first.saturating_add(usable),
        (PartitionStyle::Mbr { .. }, _) => {
            // An MBR entry counts sectors in 32 bits, from the start.
            let lba_limit = sector_size.saturating_mul(u64::from(u32::MAX));
            disk_size.min(start.saturating_add(lba_limit))
        }
        _ => return Some(len),
    }
    .min(disk_size);
    // Every other partition that starts at or after this one's end bounds
    // it (an MSR too, and MBR logical drives' containers).
    let next = layout
        .partitions
        .iter()
        .filter(|q| q.number != number && q.offset as u64 >= end)
        .map(|q| q.offset as u64)
        .min()
        .unwrap_or(u64::MAX);
    let max_end = limit.min(next);
    let sector = sector_size.max(1);
    let max_len = (max_end.saturating_sub(start) / sector) * sector;
    Some(max_len.max(len))
}

#[cfg(test)]
mod tests {
    use super::super::guid::Guid;
    use super::super::layout::{PartitionEntry, PartitionKind};
    use super::*;

    const MIB: i64 = 1 << 20;

    fn part(number: u32, offset: i64, length: i64) -> PartitionEntry {
        PartitionEntry {
            number,
            offset,
            length,
            kind: PartitionKind::Mbr { type_byte: 7 },
        }
    }

    fn gpt(parts: Vec<PartitionEntry>, usable: (u64, u64)) -> DriveLayout {
        DriveLayout {
            style: PartitionStyle::Gpt { disk_id: Guid::NIL },
            partitions: parts,
            usable: Some(usable),
        }
    }

    #[test]
    fn grows_to_the_end_of_the_usable_space() {
        // A 1 GiB disk: usable from LBA 34 to 33 sectors before the end.
        let disk = 1024 * MIB as u64;
        let usable = (34 * 512, disk - 34 * 512 - 33 * 512);
        let l = gpt(vec![part(1, MIB, 100 * MIB)], usable);
        assert_eq!(
            max_partition_size(&l, 1, disk, 512),
            Some(disk - 33 * 512 - MIB as u64)
        );
        assert_eq!(max_partition_size(&l, 2, disk, 512), None);
    }

    #[test]
    fn stops_at_the_next_partition_and_never_shrinks() {
        let disk = 1024 * MIB as u64;
        let usable = (17_408, disk - 2 * 17_408);
        let l = gpt(
            vec![
                part(1, MIB, 100 * MIB),
                part(2, 300 * MIB, 100 * MIB),
                part(3, 16 * MIB / 16, 1),
            ],
            usable,
        );
        assert_eq!(max_partition_size(&l, 1, disk, 512), Some(299 * MIB as u64));
        // A partition already past what the layout allows keeps its size.
        let l = gpt(vec![part(1, MIB, 2000 * MIB)], usable);
        assert_eq!(
            max_partition_size(&l, 1, disk, 512),
            Some(2000 * MIB as u64)
        );
    }

    #[test]
    fn mbr_is_bounded_by_the_disk_and_32_bit_sector_counts() {
        let l = DriveLayout {
            style: PartitionStyle::Mbr { signature: 1 },
            partitions: vec![part(1, MIB, 100 * MIB)],
            usable: None,
        };
        let disk = 1024 * MIB as u64;
        assert_eq!(
            max_partition_size(&l, 1, disk, 512),
            Some(disk - MIB as u64)
        );
        let huge = 8u64 << 40;
        assert_eq!(
            max_partition_size(&l, 1, huge, 512),
            Some(512 * u64::from(u32::MAX))
        );
        // A raw layout answers the current length.
        let raw = DriveLayout {
            style: PartitionStyle::Raw,
            partitions: vec![part(1, MIB, 100 * MIB)],
            usable: None,
        };
        assert_eq!(
            max_partition_size(&raw, 1, disk, 512),
            Some(100 * MIB as u64)
        );
    }
}
