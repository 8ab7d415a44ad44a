//! Filesystem detection from the first bytes of a partition or volume, and
//! ext2/3/4 space usage from its superblock.
//!
//! The caller reads [`PROBE_LEN`] bytes from the start of the device (fewer
//! if the device is smaller) and passes them to [`probe`]. Signatures and
//! offsets are those documented by each format (ext4 disk layout, XFS
//! superblock, btrfs superblock at 64 KiB, NTFS/FAT/exFAT boot sectors, the
//! Linux swap header, LUKS header, ISO 9660 volume descriptor).

/// Bytes from the start of the device that [`probe`] and [`ext_usage`]
/// look at: up to the end of the btrfs superblock at 64 KiB (4 KiB long).
pub const PROBE_LEN: usize = 0x10000 + 4096;

/// A recognised filesystem (or other volume content).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FsKind {
    Ext2,
    Ext3,
    Ext4,
    Xfs,
    Btrfs,
    Ntfs,
    Vfat,
    Exfat,
    Swap,
    Luks,
    Iso9660,
}

impl FsKind {
    /// The name `blkid` reports as TYPE (and `mkfs.<name>` formats).
    pub fn name(self) -> &'static str {
        match self {
            FsKind::Ext2 => "ext2",
            FsKind::Ext3 => "ext3",
            FsKind::Ext4 => "ext4",
            FsKind::Xfs => "xfs",
            FsKind::Btrfs => "btrfs",
            FsKind::Ntfs => "ntfs",
            FsKind::Vfat => "vfat",
            FsKind::Exfat => "exfat",
            FsKind::Swap => "swap",
            FsKind::Luks => "crypto_LUKS",
            FsKind::Iso9660 => "iso9660",
        }
    }
}

impl std::fmt::Display for FsKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Block counts of an ext2/3/4 filesystem, from its superblock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtUsage {
    /// Bytes per block, 1024 to 65536.
    pub block_size: u32,
    pub blocks_total: u64,
    pub blocks_free: u64,
    /// Blocks reserved for the superuser.
    pub reserved: u64,
}

impl ExtUsage {
    /// Total size in bytes.
    pub fn total_bytes(&self) -> u64 {
        self.blocks_total.saturating_mul(u64::from(self.block_size))
    }

    /// Free bytes (including the reserved ones).
    pub fn free_bytes(&self) -> u64 {
        self.blocks_free.saturating_mul(u64::from(self.block_size))
    }
}

const EXT_SB: usize = 1024;
const EXT_MAGIC: u16 = 0xEF53;
const EXT_COMPAT_HAS_JOURNAL: u32 = 0x4;
/// Incompatible features ext3 also knows: filetype, recover, meta_bg.
const EXT3_INCOMPAT: u32 = 0x2 | 0x4 | 0x10;
/// Read-only compatible features ext3 also knows: sparse_super, large_file,
/// btree_dir.
const EXT3_RO_COMPAT: u32 = 0x1 | 0x2 | 0x4;
const EXT_INCOMPAT_JOURNAL_DEV: u32 = 0x8;
const EXT_INCOMPAT_64BIT: u32 = 0x80;

fn bytes_at(head: &[u8], off: usize, len: usize) -> Option<&[u8]> {
    head.get(off..off.checked_add(len)?)
}

fn has(head: &[u8], off: usize, magic: &[u8]) -> bool {
    bytes_at(head, off, magic.len()) == Some(magic)
}

fn le16(head: &[u8], off: usize) -> Option<u16> {
    bytes_at(head, off, 2).map(|b| u16::from_le_bytes([b[0], b[1]]))
}

fn le32(head: &[u8], off: usize) -> Option<u32> {
    bytes_at(head, off, 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// The ext superblock fields [`probe`] and [`ext_usage`] need, if `head`
/// holds a plausible one.
struct ExtSuper {
    block_size: u32,
    compat: u32,
    incompat: u32,
    ro_compat: u32,
}

fn ext_super(head: &[u8]) -> Option<ExtSuper> {
    if le16(head, EXT_SB + 0x38)? != EXT_MAGIC {
        return None;
    }
    let log = le32(head, EXT_SB + 0x18)?;
    if log > 6 {
        return None;
    }
    Some(ExtSuper {
        block_size: 1024 << log,
        compat: le32(head, EXT_SB + 0x5C)?,
        incompat: le32(head, EXT_SB + 0x60)?,
        ro_compat: le32(head, EXT_SB + 0x64)?,
    })
}

fn probe_ext(head: &[u8]) -> Option<FsKind> {
    let sb = ext_super(head)?;
    if sb.incompat & EXT_INCOMPAT_JOURNAL_DEV != 0 {
        // An external journal, not a filesystem.
        return None;
    }
    Some(
        if sb.incompat & !EXT3_INCOMPAT != 0 || sb.ro_compat & !EXT3_RO_COMPAT != 0 {
            FsKind::Ext4
        } else if sb.compat & EXT_COMPAT_HAS_JOURNAL != 0 {
            FsKind::Ext3
        } else {
            FsKind::Ext2
        },
    )
}

/// Whether sector 0 is an NTFS, FAT or exFAT boot sector.
fn is_boot_sector_fs(head: &[u8]) -> bool {
    has(head, 3, b"NTFS    ") || has(head, 3, b"EXFAT   ") || is_fat(head)
}

fn is_fat(head: &[u8]) -> bool {
    has(head, 510, &[0x55, 0xAA]) && (has(head, 54, b"FAT") || has(head, 82, b"FAT32"))
}

fn is_swap(head: &[u8]) -> bool {
    [4096usize, 8192, 16384, 65536]
        .iter()
        .any(|&page| has(head, page - 10, b"SWAPSPACE2") || has(head, page - 10, b"SWAP-SPACE"))
}

/// What `head` (the first [`PROBE_LEN`] bytes of a volume) holds, if it is
/// one of the known formats.
pub fn probe(head: &[u8]) -> Option<FsKind> {
    if has(head, 0, b"LUKS\xba\xbe") {
        return Some(FsKind::Luks);
    }
    if has(head, 0, b"XFSB") {
        return Some(FsKind::Xfs);
    }
    if has(head, 0x10040, b"_BHRfS_M") {
        return Some(FsKind::Btrfs);
    }
    if has(head, 3, b"NTFS    ") {
        return Some(FsKind::Ntfs);
    }
    if has(head, 3, b"EXFAT   ") {
        return Some(FsKind::Exfat);
    }
    if is_fat(head) {
        return Some(FsKind::Vfat);
    }
    if let Some(kind) = probe_ext(head) {
        return Some(kind);
    }
    if has(head, 0x8001, b"CD001") {
        return Some(FsKind::Iso9660);
    }
    if is_swap(head) {
        return Some(FsKind::Swap);
    }
    None
}

/// Whether `head` (the first bytes of a whole disk, at least 8 KiB) starts
/// with a partition table: an MBR signature that is not part of an
/// NTFS/FAT/exFAT boot sector, or a GPT header at LBA 1 for 512- or
/// 4096-byte sectors.
pub fn has_partition_table(head: &[u8]) -> bool {
    if has(head, 512, b"EFI PART") || has(head, 4096, b"EFI PART") {
        return true;
    }
    has(head, 510, &[0x55, 0xAA]) && !is_boot_sector_fs(head)
}

/// Block counts of the ext2/3/4 filesystem in `head` (at least 2048 bytes).
pub fn ext_usage(head: &[u8]) -> Option<ExtUsage> {
    let sb = ext_super(head)?;
    let wide = sb.incompat & EXT_INCOMPAT_64BIT != 0;
    let count = |lo: usize, hi: usize| -> Option<u64> {
        let lo = u64::from(le32(head, EXT_SB + lo)?);
        let hi = if wide {
            u64::from(le32(head, EXT_SB + hi)?)
        } else {
            0
        };
        Some(hi << 32 | lo)
    };
    Some(ExtUsage {
        block_size: sb.block_size,
        blocks_total: count(0x04, 0x150)?,
        reserved: count(0x08, 0x154)?,
        blocks_free: count(0x0C, 0x158)?,
    })
}

#[cfg(test)]
mod tests;
