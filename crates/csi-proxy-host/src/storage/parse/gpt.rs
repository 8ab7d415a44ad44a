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

use super::crc32;

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

/// A GUID in its on-disk byte order: the first three fields little-endian,
/// the last eight bytes as written (the "mixed-endian" layout of GPT and
/// Windows).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct Guid(pub [u8; 16]);

/// Text that is not a GUID.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a GUID: {0:?}")]
pub struct ParseGuidError(pub String);

impl Guid {
    /// The all-zero GUID; an entry with this type GUID is unused.
    pub const NIL: Guid = Guid([0; 16]);
    /// Windows basic data partition, ebd0a0a2-b9e5-4433-87c0-68b6b72699c7.
    pub const BASIC_DATA: Guid = Guid::from_fields(
        0xebd0_a0a2,
        0xb9e5,
        0x4433,
        [0x87, 0xc0, 0x68, 0xb6, 0xb7, 0x26, 0x99, 0xc7],
    );
    /// Microsoft reserved partition, e3c9e316-0b5c-4db8-817d-f92df00215ae.
    pub const MICROSOFT_RESERVED: Guid = Guid::from_fields(
        0xe3c9_e316,
        0x0b5c,
        0x4db8,
        [0x81, 0x7d, 0xf9, 0x2d, 0xf0, 0x02, 0x15, 0xae],
    );
    /// Linux filesystem data, 0fc63daf-8483-4772-8e79-3d69d8477de4.
    pub const LINUX_FILESYSTEM: Guid = Guid::from_fields(
        0x0fc6_3daf,
        0x8483,
        0x4772,
        [0x8e, 0x79, 0x3d, 0x69, 0xd8, 0x47, 0x7d, 0xe4],
    );

    /// The GUID whose text form is `d1-d2-d3-d4[0..2]-d4[2..8]`.
    pub const fn from_fields(d1: u32, d2: u16, d3: u16, d4: [u8; 8]) -> Guid {
        let a = d1.to_le_bytes();
        let b = d2.to_le_bytes();
        let c = d3.to_le_bytes();
        Guid([
            a[0], a[1], a[2], a[3], b[0], b[1], c[0], c[1], d4[0], d4[1], d4[2], d4[3], d4[4],
            d4[5], d4[6], d4[7],
        ])
    }

    /// A random (version 4, RFC 4122 variant) GUID from 16 random bytes.
    pub fn from_random_bytes(mut bytes: [u8; 16]) -> Guid {
        // Version: high nibble of the third field, stored little-endian.
        bytes[7] = (bytes[7] & 0x0F) | 0x40;
        // Variant 10xx in the first byte of the fourth field.
        bytes[8] = (bytes[8] & 0x3F) | 0x80;
        Guid(bytes)
    }

    /// Parses `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` in any case, optionally
    /// in braces as Windows prints it.
    pub fn parse(text: &str) -> Result<Guid, ParseGuidError> {
        let err = || ParseGuidError(text.to_string());
        let inner = match text.strip_prefix('{') {
            Some(rest) => rest.strip_suffix('}').ok_or_else(err)?,
            None => text,
        };
        let g = super::guid::Guid::parse(inner).map_err(|_| err())?;
        Ok(Guid(g.to_windows_bytes()))
    }

    /// The same GUID in the canonical representation of [`super::guid`].
    pub fn canonical(self) -> super::guid::Guid {
        super::guid::Guid::from_windows_bytes(self.0)
    }

    /// Whether this is the all-zero GUID.
    pub fn is_nil(&self) -> bool {
        self.0 == [0; 16]
    }

    fn read(bytes: &[u8], offset: usize) -> Guid {
        let mut g = [0u8; 16];
        if let Some(src) = bytes.get(offset..offset + 16) {
            g.copy_from_slice(src);
        }
        Guid(g)
    }
}

impl fmt::Display for Guid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.canonical(), f)
    }
}

impl fmt::Debug for Guid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Guid({self})")
    }
}

impl std::str::FromStr for Guid {
    type Err = ParseGuidError;
    fn from_str(s: &str) -> Result<Guid, ParseGuidError> {
        Guid::parse(s)
    }
}

// ---------------------------------------------------------------------------
// Types

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

// ---------------------------------------------------------------------------
// Reading

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
        disk_guid: Guid::read(sector, 56),
        entry_lba: le64(sector, 72),
        entry_count,
        entry_size,
        entries_crc: le32(sector, 88),
    })
}

/// CRC-32 of a header (its `header_size` bytes) with the CRC field as zero.
fn header_crc(header: &[u8]) -> u32 {
    let c = crc32::update(0, &header[..16]);
    let c = crc32::update(c, &[0; 4]);
    crc32::update(c, &header[20..])
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
    if crc32::crc32(array) != h.entries_crc {
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
        let type_guid = Guid::read(e, 0);
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
            unique_guid: Guid::read(e, 16),
            first_lba,
            last_lba,
            attributes: le64(e, 48),
            name: String::from_utf16_lossy(&units),
        });
    }
    check_overlaps(&partitions)?;
    Ok(partitions)
}

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

// ---------------------------------------------------------------------------
// Writing

/// Where the copies of a table go.
struct Layout {
    ss: u64,
    disk_guid: Guid,
    first_usable: u64,
    last_usable: u64,
    primary_entry_lba: u64,
    backup_lba: u64,
    backup_entry_lba: u64,
    entry_count: u32,
    entry_size: u32,
}

impl Layout {
    /// The layout of `gpt` with its backup moved to the last LBA of a disk
    /// of `disk_sectors` sectors and the usable range extended up to the
    /// backup array.
    fn relocated(gpt: &Gpt, ss: u64, disk_sectors: u64) -> Result<Layout, GptError> {
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
        put(&mut s, 56, &self.disk_guid.0);
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
    fn writes(
        &self,
        array: &[u8],
        template: Option<&[u8]>,
        old_backup_lba: Option<u64>,
    ) -> Vec<Write> {
        let crc = crc32::crc32(array);
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

fn encode_name(name: &str) -> Result<[u8; 2 * NAME_UNITS], GptError> {
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
    put(e, 0, &p.type_guid.0);
    put(e, 16, &p.unique_guid.0);
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
fn check_gpt(gpt: &Gpt, ss: u64) -> Result<(), GptError> {
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

mod resume;
pub use resume::resume_fresh;

#[cfg(test)]
mod tests;
