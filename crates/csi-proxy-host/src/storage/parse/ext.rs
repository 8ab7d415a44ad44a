//! ext2/3/4 space usage from the superblock: GetVolumeStats of an
//! unmounted ext volume, and the check that an interrupted grow left the
//! filesystem smaller than its partition. What a device holds is
//! identified by [`super::content`].

/// Bytes from the start of the device that [`ext_usage`] needs: the
/// superblock at 1 KiB.
pub const SUPERBLOCK_END: usize = 2048;

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
const EXT_INCOMPAT_64BIT: u32 = 0x80;

fn bytes_at(head: &[u8], off: usize, len: usize) -> Option<&[u8]> {
    head.get(off..off.checked_add(len)?)
}

fn le16(head: &[u8], off: usize) -> Option<u16> {
    bytes_at(head, off, 2).map(|b| u16::from_le_bytes([b[0], b[1]]))
}

fn le32(head: &[u8], off: usize) -> Option<u32> {
    bytes_at(head, off, 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// Block counts of the ext2/3/4 filesystem in `head` (at least 2048 bytes).
pub fn ext_usage(head: &[u8]) -> Option<ExtUsage> {
    if le16(head, EXT_SB + 0x38)? != EXT_MAGIC {
        return None;
    }
    let log = le32(head, EXT_SB + 0x18)?;
    if log > 6 {
        return None;
    }
    let incompat = le32(head, EXT_SB + 0x60)?;
    let wide = incompat & EXT_INCOMPAT_64BIT != 0;
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
        block_size: 1024 << log,
        blocks_total: count(0x04, 0x150)?,
        reserved: count(0x08, 0x154)?,
        blocks_free: count(0x0C, 0x158)?,
    })
}

#[cfg(test)]
mod tests;
