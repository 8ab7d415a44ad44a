//! Partition tables: reading MBR and GPT, creating a fresh GPT with one
//! partition, adding a partition to an empty GPT and growing a partition.
//!
//! Everything here is pure: the caller reads the first [`head_len`] bytes of
//! the disk (and, to check the backup, the last [`tail_len`] bytes), passes
//! them in, and applies the returned [`Write`]s **in order**, then flushes.
//! The order is chosen so that a crash part-way leaves at least one valid
//! header/array pair: the backup copy is written first, the primary copy
//! after it, the protective MBR last.
//!
//! Layout facts come from the UEFI specification (chapter "GUID Partition
//! Table (GPT) Disk Layout"): the protective MBR at LBA 0, the primary header
//! at LBA 1 followed by the entry array, the backup entry array just before
//! the backup header in the last LBA. All integers are little-endian, header
//! and array checksums are CRC-32 (IEEE).
//!
//! Sector sizes of 512 and 4096 bytes are supported. All arithmetic is
//! checked; no input makes these functions panic.

use std::fmt;

use super::crc;

const MIB: u64 = 1 << 20;
const GPT_SIGNATURE: &[u8; 8] = b"EFI PART";
const GPT_REVISION: u32 = 0x0001_0000;
const GPT_HEADER_SIZE: u32 = 92;
/// Entries written by [`create_single_partition`] (the minimum the UEFI
/// specification asks for: 16 KiB of entries).
const DEFAULT_ENTRY_COUNT: u32 = 128;
const DEFAULT_ENTRY_SIZE: u32 = 128;
/// Largest entry array accepted when reading.
const MAX_ENTRY_COUNT: u32 = 1024;
const MAX_ENTRY_SIZE: u32 = 4096;
/// Bytes of the default entry array.
const DEFAULT_ARRAY_BYTES: u64 = DEFAULT_ENTRY_COUNT as u64 * DEFAULT_ENTRY_SIZE as u64;
/// Partition name capacity in UTF-16 code units.
const NAME_UNITS: usize = 36;
const MBR_PROTECTIVE_TYPE: u8 = 0xEE;
const MBR_TABLE_OFFSET: usize = 446;
const MBR_SIGNATURE_OFFSET: usize = 440;

/// Bytes from the start of the disk that [`parse_table`] needs for a
/// default-sized table: LBA 0 (MBR), LBA 1 (GPT header) and the 16 KiB entry
/// array from LBA 2 — 34 sectors of 512 bytes, 6 sectors of 4096 bytes.
/// A table with a larger or displaced entry array yields
/// [`GptError::Truncated`] with the exact length to read.
pub const fn head_len(sector_size: u32) -> usize {
    let ss = sector_size as usize;
    if ss == 0 {
        return 0;
    }
    (2 + (DEFAULT_ARRAY_BYTES as usize).div_ceil(ss)) * ss
}

/// Bytes at the end of the disk that [`parse_backup`] needs for a
/// default-sized table: the backup entry array and the backup header.
pub const fn tail_len(sector_size: u32) -> usize {
    let ss = sector_size as usize;
    if ss == 0 {
        return 0;
    }
    (1 + (DEFAULT_ARRAY_BYTES as usize).div_ceil(ss)) * ss
}

/// Smallest disk (in sectors) [`create_single_partition`] accepts: 1 MiB
/// before the partition, a partition of 1 MiB, the backup array and header.
pub const fn min_disk_sectors(sector_size: u32) -> u64 {
    let ss = sector_size as u64;
    if ss == 0 {
        return 0;
    }
    2 * (MIB / ss) + DEFAULT_ARRAY_BYTES.div_ceil(ss) + 1
}

// ---------------------------------------------------------------------------
// GUID

/// What the start of a disk holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Table {
    /// Neither an MBR signature nor a GPT.
    Raw,
    /// An MBR partition table (primary entries only; logical partitions
    /// inside an extended partition are not followed).
    Mbr {
        /// Disk signature at byte 440.
        signature: u32,
        /// The used entries, in slot order.
        partitions: Vec<MbrPartition>,
    },
    /// A valid GPT (primary header and entry array).
    Gpt(Gpt),
}

/// One used primary entry of an MBR.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MbrPartition {
    /// Slot number, 1 to 4.
    pub number: u8,
    /// Partition type ("system ID") byte.
    pub type_byte: u8,
    /// Boot indicator 0x80.
    pub bootable: bool,
    pub start_lba: u64,
    pub sectors: u64,
}

/// A parsed GPT header and its used entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gpt {
    pub disk_guid: Guid,
    pub first_usable: u64,
    pub last_usable: u64,
    /// LBA of the other header: the backup header for a primary header
    /// (possibly short of the last LBA if the disk grew), 1 for a backup.
    pub alternate_lba: u64,
    /// LBA of this header's entry array.
    pub entry_lba: u64,
    pub entry_count: u32,
    pub entry_size: u32,
    /// Used entries (type GUID not nil), in entry order.
    pub partitions: Vec<GptPartition>,
}

/// One used GPT entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GptPartition {
    /// 1-based index of the entry in the array.
    pub number: u32,
    pub type_guid: Guid,
    pub unique_guid: Guid,
    pub first_lba: u64,
    /// Inclusive.
    pub last_lba: u64,
    pub attributes: u64,
    /// Decoded from UTF-16LE up to the first NUL (lossily).
    pub name: String,
}

impl GptPartition {
    /// Length in sectors.
    pub fn sectors(&self) -> u64 {
        // Validated tables have first <= last; saturate for hand-made ones.
        self.last_lba
            .saturating_sub(self.first_lba)
            .saturating_add(1)
    }
}

impl Gpt {
    /// The partition with this entry number.
    pub fn partition(&self, number: u32) -> Option<&GptPartition> {
        self.partitions.iter().find(|p| p.number == number)
    }

    /// Whether `other` (typically from [`parse_backup`]) describes the same
    /// table: same disk GUID, usable range, entry geometry and entries.
    /// Header locations (`alternate_lba`, `entry_lba`) naturally differ.
    pub fn same_table(&self, other: &Gpt) -> bool {
        self.disk_guid == other.disk_guid
            && self.first_usable == other.first_usable
            && self.last_usable == other.last_usable
            && self.entry_count == other.entry_count
            && self.entry_size == other.entry_size
            && self.partitions == other.partitions
    }
}

/// Bytes to write at a byte offset of the disk.
#[derive(Clone, PartialEq, Eq)]
pub struct Write {
    pub offset: u64,
    pub bytes: Vec<u8>,
}

impl fmt::Debug for Write {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Write")
            .field("offset", &self.offset)
            .field("len", &self.bytes.len())
            .finish()
    }
}

/// The outcome of [`grow`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrowPlan {
    /// To apply in order.
    pub writes: Vec<Write>,
    pub old_last_lba: u64,
    pub new_last_lba: u64,
}

/// Which rule a partition table breaks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Defect {
    #[error("a protective MBR (type 0xEE) without a GPT header signature")]
    Signature,
    #[error("unsupported GPT revision {0:#010x}")]
    Revision(u32),
    #[error("GPT header size {0} out of range")]
    HeaderSize(u32),
    #[error("GPT header CRC32 mismatch")]
    HeaderCrc,
    #[error("GPT header claims to be at LBA {0}")]
    MyLba(u64),
    #[error("GPT entry size {0} is not 128 * 2^n in 128..=4096")]
    EntrySize(u32),
    #[error("GPT entry count {0} out of range 1..=1024")]
    EntryCount(u32),
    #[error("GPT entry array CRC32 mismatch")]
    EntriesCrc,
    #[error("GPT entry array location overlaps the header or the usable range")]
    EntriesLocation,
    #[error("GPT usable range {first}..={last} invalid for a disk of {disk_sectors} sectors")]
    UsableRange {
        first: u64,
        last: u64,
        disk_sectors: u64,
    },
    #[error("GPT alternate header LBA {0} invalid (beyond the disk or inside the table)")]
    AlternateLba(u64),
    #[error("GPT partition {number} outside the usable range or inverted")]
    PartitionRange { number: u32 },
    #[error("GPT partitions {a} and {b} overlap")]
    PartitionOverlap { a: u32, b: u32 },
    #[error("MBR entry {number} invalid (boot flag or range)")]
    MbrEntry { number: u8 },
    #[error("MBR entries {a} and {b} overlap")]
    MbrOverlap { a: u8, b: u8 },
}

/// Errors of this module.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GptError {
    #[error("unsupported sector size {0} (expected 512 or 4096)")]
    UnsupportedSectorSize(u32),
    #[error("partition table needs {needed} bytes of the disk, got {got}")]
    Truncated { needed: usize, got: usize },
    /// The disk must not be modified.
    #[error("partition table is corrupt: {0}")]
    Corrupt(Defect),
    #[error("disk of {sectors} sectors is too small: at least {needed} sectors are needed")]
    DiskTooSmall { sectors: u64, needed: u64 },
    #[error("disk of {0} sectors is too large to address in bytes")]
    DiskTooLarge(u64),
    #[error(
        "the disk shrank: it has {disk_sectors} sectors but the table reaches LBA {table_end}"
    )]
    DiskShrank { disk_sectors: u64, table_end: u64 },
    #[error(
        "partition {0} is not a Microsoft Reserved partition; the disk already has data partitions"
    )]
    HasDataPartitions(u32),
    #[error("no free entry in the partition entry array")]
    TableFull,
    #[error("no free space for a partition of at least 1 MiB")]
    NoSpace,
    #[error("partition name longer than 36 UTF-16 code units")]
    NameTooLong,
    #[error("no partition number {0}")]
    NoSuchPartition(u32),
    #[error("partition {number} cannot shrink: last LBA {current}, requested {requested}")]
    Shrink {
        number: u32,
        current: u64,
        requested: u64,
    },
    #[error("partition {number} cannot end at LBA {requested}: the largest possible end is {max}")]
    TooLarge {
        number: u32,
        requested: u64,
        max: u64,
    },
    #[error("the table passed does not match the disk contents")]
    Mismatch,
}

fn corrupt(d: Defect) -> GptError {
    GptError::Corrupt(d)
}

// ---------------------------------------------------------------------------
// Little-endian helpers. Callers check lengths first; out-of-range reads
// yield 0 rather than panicking.

fn le16(b: &[u8], off: usize) -> u16 {
    match b.get(off..off + 2) {
        Some(s) => u16::from_le_bytes([s[0], s[1]]),
        None => 0,
    }
}

fn le32(b: &[u8], off: usize) -> u32 {
    match b.get(off..off + 4) {
        Some(s) => u32::from_le_bytes([s[0], s[1], s[2], s[3]]),
        None => 0,
    }
}

fn le64(b: &[u8], off: usize) -> u64 {
    match b.get(off..off + 8) {
        Some(s) => u64::from_le_bytes([s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]]),
        None => 0,
    }
}

/// The GUID at `off`, in its on-disk (mixed-endian) layout; nil if short.
fn guid_at(b: &[u8], off: usize) -> Guid {
    let mut g = [0u8; 16];
    if let Some(src) = b.get(off..off + 16) {
        g.copy_from_slice(src);
    }
    Guid::from_windows_bytes(g)
}

fn put(b: &mut [u8], off: usize, v: &[u8]) {
    if let Some(dst) = b.get_mut(off..off + v.len()) {
        dst.copy_from_slice(v);
    }
}

/// Entry sizes the UEFI specification allows (128 * 2^n), bounded.
fn valid_entry_size(entry_size: u32) -> bool {
    (DEFAULT_ENTRY_SIZE..=MAX_ENTRY_SIZE).contains(&entry_size) && entry_size.is_power_of_two()
}

fn check_sector_size(sector_size: u32) -> Result<u64, GptError> {
    match sector_size {
        512 | 4096 => Ok(u64::from(sector_size)),
        other => Err(GptError::UnsupportedSectorSize(other)),
    }
}

/// Rejects disks whose byte size does not fit in u64 (so every LBA below
/// `disk_sectors` has a byte offset).
fn check_disk_bytes(ss: u64, disk_sectors: u64) -> Result<(), GptError> {
    disk_sectors
        .checked_mul(ss)
        .map(|_| ())
        .ok_or(GptError::DiskTooLarge(disk_sectors))
}

fn to_usize(v: u64) -> usize {
    usize::try_from(v).unwrap_or(usize::MAX)
}

fn array_sectors(ss: u64, entry_count: u32, entry_size: u32) -> u64 {
    (u64::from(entry_count) * u64::from(entry_size)).div_ceil(ss)
}

/// CRC-32 of a header (its `header_size` bytes) with the CRC field as zero.
fn header_crc(header: &[u8]) -> u32 {
    let c = crc::update(0, &header[..16]);
    let c = crc::update(c, &[0; 4]);
    crc::update(c, &header[20..])
}

/// Refuses partitions that overlap (read and written tables alike).
fn check_overlaps(partitions: &[GptPartition]) -> Result<(), GptError> {
    let mut order: Vec<&GptPartition> = partitions.iter().collect();
    order.sort_by_key(|p| (p.first_lba, p.number));
    for w in order.windows(2) {
        if w[1].first_lba <= w[0].last_lba {
            return Err(corrupt(Defect::PartitionOverlap {
                a: w[0].number.min(w[1].number),
                b: w[0].number.max(w[1].number),
            }));
        }
    }
    Ok(())
}

mod grow;
mod read;
mod write;

/// The one GUID type (`storage::parse::guid`), read and written here in
/// its on-disk (mixed-endian) layout.
pub use super::guid::Guid;
pub use grow::{grow, max_partition_end};
pub use read::{parse_backup, parse_table};
pub use write::{
    add_single_partition, create_empty, create_single_partition, fresh_partition_extent,
    single_partition_extent,
};

mod resume;
pub use resume::resume_fresh;

#[cfg(test)]
mod tests;
