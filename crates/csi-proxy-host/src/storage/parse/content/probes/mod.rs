//! The probe table: one entry per format, each a function that returns
//! the byte offset of the format's signature if the device carries it.
//!
//! Offsets and magic numbers are those the formats document (on-disk
//! layout specifications, the formats' own headers, and where a format
//! has no public specification, the offsets libblkid looks at); the order
//! is the order [`super::identify`] reports them in. A probe checks more
//! than its magic where the magic is short (two bytes, a common word) or
//! where the same bytes could be a near miss of another format, so that
//! stale bytes are not mistaken for a format; it checks no more than
//! libblkid does, so what `blkid -p` names is named here too.
//!
//! - [`members`]: volume-manager, RAID, cache and pool members, encrypted
//!   containers, swap;
//! - [`fs`]: the filesystems;
//! - [`tables`]: partition tables.

mod fs;
mod members;
mod tables;

use super::{Class, Device};

pub use fs::extent;

/// One format.
pub struct Probe {
    /// `blkid -p`'s name for it.
    pub name: &'static str,
    pub class: Class,
    pub find: fn(&Device<'_>) -> Option<u64>,
}

const fn probe(name: &'static str, class: Class, find: fn(&Device<'_>) -> Option<u64>) -> Probe {
    Probe { name, class, find }
}

use Class::*;

/// Every format, members and containers first, partition tables last.
pub static ALL: &[Probe] = &[
    // Encrypted containers and volume-manager / RAID members come first:
    // they often sit under a filesystem signature's offset.
    probe("crypto_LUKS", Crypto, members::luks),
    probe("BitLocker", Crypto, members::bitlocker),
    probe("cs_fvault2", Crypto, members::cs_fvault2),
    probe("DM_integrity", Crypto, members::dm_integrity),
    probe("DM_verity_hash", Crypto, members::dm_verity),
    probe("LVM2_member", Member, members::lvm2),
    probe("LVM1_member", Member, members::lvm1),
    probe("DM_snapshot_cow", Other, members::dm_snapshot_cow),
    probe("linux_raid_member", Member, members::md),
    probe("ddf_raid_member", Member, members::ddf),
    probe("isw_raid_member", Member, members::isw),
    probe("nvidia_raid_member", Member, members::nvidia),
    probe("promise_fasttrack_raid_member", Member, members::promise),
    probe("silicon_medley_raid_member", Member, members::silicon),
    probe("via_raid_member", Member, members::via),
    probe("jmicron_raid_member", Member, members::jmicron),
    probe("lsi_mega_raid_member", Member, members::lsi),
    probe("adaptec_raid_member", Member, members::adaptec),
    probe("hpt45x_raid_member", Member, members::hpt45x),
    probe("hpt37x_raid_member", Member, members::hpt37x),
    probe("zfs_member", Member, members::zfs),
    probe("bcache", Member, members::bcache),
    probe("vdo", Member, members::vdo),
    probe("drbd", Member, members::drbd),
    probe("stratis", Member, members::stratis),
    probe("ceph_bluestore", Member, members::bluestore),
    probe("VMFS_volume_member", Member, members::vmfs_volume),
    probe("ubi", Member, members::ubi),
    probe("mpool", Member, members::mpool),
    probe("oracleasm", Member, members::oracleasm),
    probe("drbdmanage_control_volume", Other, members::drbdmanage),
    probe("drbdproxy_datalog", Member, members::drbdproxy_datalog),
    probe("xfs_external_log", Other, members::xfs_log),
    probe("swap", Other, members::swap),
    probe("swsuspend", Other, members::swsuspend),
    // Filesystems.
    probe("xfs", Filesystem, fs::xfs),
    probe("exfs", Filesystem, fs::exfs),
    probe("btrfs", Filesystem, fs::btrfs),
    probe("bcachefs", Filesystem, fs::bcachefs),
    probe("ntfs", Filesystem, fs::ntfs),
    probe("ntfs", Other, fs::ntfs_unverified),
    probe("exfat", Filesystem, fs::exfat),
    probe("exfat", Other, fs::exfat_unverified),
    probe("vfat", Filesystem, fs::vfat),
    probe("ReFS", Filesystem, fs::refs),
    probe("apfs", Filesystem, fs::apfs),
    probe("hfsplus", Filesystem, fs::hfsplus),
    probe("hfs", Filesystem, fs::hfs),
    probe("ext4", Filesystem, fs::ext4),
    probe("ext3", Filesystem, fs::ext3),
    probe("ext2", Filesystem, fs::ext2),
    probe("jbd", Other, fs::ext_journal),
    probe("udf", Filesystem, fs::udf),
    probe("iso9660", Filesystem, fs::iso9660),
    probe("ufs", Filesystem, fs::ufs),
    probe("f2fs", Filesystem, fs::f2fs),
    probe("squashfs", Filesystem, fs::squashfs),
    probe("squashfs3", Filesystem, fs::squashfs3),
    probe("cramfs", Filesystem, fs::cramfs),
    probe("romfs", Filesystem, fs::romfs),
    probe("erofs", Filesystem, fs::erofs),
    probe("jfs", Filesystem, fs::jfs),
    probe("reiserfs", Filesystem, fs::reiserfs),
    probe("reiser4", Filesystem, fs::reiser4),
    probe("nilfs2", Filesystem, fs::nilfs2),
    probe("minix", Filesystem, fs::minix),
    probe("gfs", Filesystem, fs::gfs),
    probe("gfs2", Filesystem, fs::gfs2),
    probe("ocfs2", Filesystem, fs::ocfs2),
    probe("ocfs", Filesystem, fs::ocfs),
    probe("zonefs", Filesystem, fs::zonefs),
    probe("hpfs", Filesystem, fs::hpfs),
    probe("nss", Filesystem, fs::nss),
    probe("vxfs", Filesystem, fs::vxfs),
    probe("befs", Filesystem, fs::befs),
    probe("bfs", Filesystem, fs::bfs),
    probe("ubifs", Filesystem, fs::ubifs),
    probe("VMFS", Filesystem, fs::vmfs),
    probe("sysv", Filesystem, fs::sysv),
    probe("xenix", Filesystem, fs::xenix),
    // Partition tables.
    probe("aix", PartitionTable, tables::aix),
    probe("gpt", PartitionTable, tables::gpt_primary),
    probe("gpt", PartitionTable, tables::gpt_backup),
    probe("PMBR", PartitionTable, tables::pmbr),
    probe("dos", PartitionTable, tables::dos),
    probe("mac", PartitionTable, tables::mac),
    probe("bsd", PartitionTable, tables::bsd),
    probe("sun", PartitionTable, tables::sun),
    probe("sgi", PartitionTable, tables::sgi),
    probe("atari", PartitionTable, tables::atari),
    probe("ultrix", PartitionTable, tables::ultrix),
    probe("unixware", PartitionTable, tables::unixware),
    probe("solaris", PartitionTable, tables::solaris),
];

/// The types libblkid probes for (see `blkid-types.txt`, made by
/// scripts/blkid-types.sh from util-linux's sources) that have no probe
/// here, and why: (chain, name, why), the chain being libblkid's
/// (`superblocks` or `partitions`). A test fails for any listed type that
/// has neither a probe nor an entry here.
#[cfg_attr(not(test), allow(dead_code))]
pub static NOT_PROBED: &[(&str, &str, &str)] = &[
    (
        "superblocks",
        "ext4dev",
        "the same superblock as ext4 (libblkid names an ext2/3/4 superblock with the \
         test-filesystem flag ext4dev); found here as ext4, ext3 or ext2, a filesystem either way",
    ),
    (
        "partitions",
        "minix",
        "the MINIX partition table is a DOS table libblkid reads only inside a DOS \
         partition of type 0x81: on a whole disk or volume that DOS table is found (dos)",
    ),
];

const SECTOR: u64 = 512;

/// The first of `offsets` at which `magic` is.
fn at_any(d: &Device<'_>, offsets: &[u64], magic: &[u8]) -> Option<u64> {
    offsets.iter().copied().find(|&o| d.has(o, magic))
}

/// The byte offset of the sector `n` sectors (of 512 bytes) before the
/// end of the device, the device size rounded down to whole sectors: where
/// the RAID formats that keep their metadata at the end put it.
fn sector_from_end(d: &Device<'_>, n: u64) -> Option<u64> {
    (d.size() / SECTOR).checked_sub(n).map(|s| s * SECTOR)
}

fn le16(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}

fn be16(b: &[u8], o: usize) -> u16 {
    u16::from_be_bytes([b[o], b[o + 1]])
}

fn le32(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

fn be32(b: &[u8], o: usize) -> u32 {
    u32::from_be_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}
