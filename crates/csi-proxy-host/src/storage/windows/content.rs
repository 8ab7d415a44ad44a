//! What a disk or a volume holds, read through a handle of ours: before
//! PartitionDisk initialises a RAW disk and before FormatVolume, and for
//! IsVolumeFormatted and GetVolumeStats where Windows recognises no
//! filesystem (an ext4, LVM or ZFS partition is RAW to Windows). The
//! decisions are the platform-neutral ones of [`crate::storage::content`].

use windows_sys::Win32::System::Ioctl::{
    IOCTL_DISK_GET_DRIVE_GEOMETRY_EX, IOCTL_DISK_GET_LENGTH_INFO,
};

use super::disk::{self, bad_answer};
use super::errors::{self, win32};
use super::win32::{self as w, Handle, GENERIC_READ};
use crate::storage::parse::content::{self as identify, Device, Found};
use crate::storage::parse::{extents, gpt};
use crate::storage::VolumeId;
use crate::Result;

/// The bytes read from a device, and what was found there.
pub struct Content {
    head: Vec<u8>,
    tail: Vec<u8>,
    size: u64,
    pub found: Vec<Found>,
}

impl Content {
    fn read(h: &Handle, size: u64, subject: &str) -> Result<Content> {
        let (head, tail) = identify::read_regions(size, |off, buf| w::read_at(h, off, buf))
            .map_err(|e| win32("ReadFile", subject, e))?;
        let found = identify::identify(&Device::new(&head, &tail, size));
        Ok(Content {
            head,
            tail,
            size,
            found,
        })
    }

    pub fn device(&self) -> Device<'_> {
        Device::new(&self.head, &self.tail, self.size)
    }

    /// Disk `disk`, and whether it has a partition table Windows will keep
    /// (then PartitionDisk initialises nothing). A table that does not
    /// parse counts as none: the check then finds what is there.
    pub fn of_disk(number: u32) -> Result<(Content, bool)> {
        let subject = format!("disk {number}");
        let h = disk::open_disk(number, GENERIC_READ)?;
        let geo = w::ioctl::<()>(&h, IOCTL_DISK_GET_DRIVE_GEOMETRY_EX, None, 256)
            .map_err(|e| win32("IOCTL_DISK_GET_DRIVE_GEOMETRY_EX", &subject, e))?;
        let size = extents::parse_disk_geometry_ex_size(&geo)
            .map_err(|e| bad_answer("IOCTL_DISK_GET_DRIVE_GEOMETRY_EX", &subject, e))?
            as u64;
        let ss = extents::parse_disk_geometry_ex_sector_size(&geo)
            .map_err(|e| bad_answer("IOCTL_DISK_GET_DRIVE_GEOMETRY_EX", &subject, e))?;
        let c = Content::read(&h, size, &subject)?;
        let table = matches!(
            gpt::parse_table(&c.head, ss, size / u64::from(ss)),
            Ok(gpt::Table::Gpt(_) | gpt::Table::Mbr { .. })
        );
        Ok((c, table))
    }

    /// Volume `v` (its partition's bytes, through the volume device).
    pub fn of_volume(v: &VolumeId) -> Result<Content> {
        let (h, size) = open_volume(v)?;
        Content::read(&h, size, v.as_str())
    }

    /// Whether anything is identified on volume `v`: its first bytes first
    /// (a formatted volume costs only those), then the whole regions.
    pub fn volume_holds_anything(v: &VolumeId) -> Result<bool> {
        let (h, size) = open_volume(v)?;
        if identify::quick_found(size, |off, buf| w::read_at(&h, off, buf))
            .map_err(|e| win32("ReadFile", v.as_str(), e))?
        {
            return Ok(true);
        }
        Ok(!Content::read(&h, size, v.as_str())?.found.is_empty())
    }
}

/// The volume device of `v`, open for reading, and its size.
fn open_volume(v: &VolumeId) -> Result<(Handle, u64)> {
    let h = w::open_device(v.device_path(), GENERIC_READ).map_err(|e| {
        errors::win32_or_missing("CreateFileW", v.as_str(), e, &super::volume::no_volume(v))
    })?;
    let out = w::ioctl::<()>(&h, IOCTL_DISK_GET_LENGTH_INFO, None, 8)
        .map_err(|e| win32("IOCTL_DISK_GET_LENGTH_INFO", v.as_str(), e))?;
    let size = extents::parse_length_info(&out)
        .map_err(|e| bad_answer("IOCTL_DISK_GET_LENGTH_INFO", v.as_str(), e))?
        as u64;
    Ok((h, size))
}
