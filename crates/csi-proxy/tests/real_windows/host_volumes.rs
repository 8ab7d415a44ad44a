//! The host's volumes and the disks under them, read by the test itself
//! (`FindFirstVolumeW`, `IOCTL_STORAGE_GET_DEVICE_NUMBER`,
//! `IOCTL_VOLUME_GET_VOLUME_DISK_EXTENTS`), never through the proxy's code.

use std::fs::File;
use std::io;
use std::os::windows::fs::OpenOptionsExt;

use windows_sys::Win32::Storage::FileSystem::{
    FindFirstVolumeW, FindNextVolumeW, FindVolumeClose, IOCTL_VOLUME_GET_VOLUME_DISK_EXTENTS,
};
use windows_sys::Win32::System::Ioctl::{IOCTL_STORAGE_GET_DEVICE_NUMBER, STORAGE_DEVICE_NUMBER};

use super::disks::ioctl;

/// `FILE_DEVICE_DISK`.
const DEVICE_DISK: u32 = 7;

/// Every volume's id (`\\?\Volume{...}\`).
pub fn volumes() -> io::Result<Vec<String>> {
    let mut buf = [0u16; 64];
    // SAFETY: `buf` is writable for its length.
    let find = unsafe { FindFirstVolumeW(buf.as_mut_ptr(), buf.len() as u32) };
    if find.is_null() || find as isize == -1 {
        return Err(io::Error::last_os_error());
    }
    let mut out = Vec::new();
    loop {
        let end = buf.iter().position(|&c| c == 0).unwrap_or(buf.len());
        out.push(String::from_utf16_lossy(&buf[..end]));
        // SAFETY: `find` is the live search handle; `buf` is writable.
        if unsafe { FindNextVolumeW(find, buf.as_mut_ptr(), buf.len() as u32) } == 0 {
            break;
        }
    }
    // SAFETY: `find` is the live search handle, closed once.
    unsafe { FindVolumeClose(find) };
    Ok(out)
}

/// The volume's device (its id without the trailing backslash), opened
/// with no access (enough for both I/O controls).
fn open_volume(id: &str) -> io::Result<File> {
    std::fs::OpenOptions::new()
        .access_mode(0)
        .open(id.trim_end_matches('\\'))
}

/// Where `IOCTL_STORAGE_GET_DEVICE_NUMBER` puts a volume.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// On this one disk.
    Disk(u32),
    /// On a device that is not a disk (a CD-ROM's numbers are its own).
    NotDisk,
    /// No answer: the volume spans disks (spanned or striped).
    Unnumbered,
}

pub fn place(id: &str) -> io::Result<Place> {
    let f = open_volume(id)?;
    match ioctl::<()>(
        &f,
        IOCTL_STORAGE_GET_DEVICE_NUMBER,
        None,
        std::mem::size_of::<STORAGE_DEVICE_NUMBER>(),
    ) {
        Ok(buf) => {
            // SAFETY: the driver filled a STORAGE_DEVICE_NUMBER.
            let n: STORAGE_DEVICE_NUMBER = unsafe { std::ptr::read(buf.as_ptr().cast()) };
            Ok(if n.DeviceType == DEVICE_DISK {
                Place::Disk(n.DeviceNumber)
            } else {
                Place::NotDisk
            })
        }
        Err(_) => Ok(Place::Unnumbered),
    }
}

/// The disks a volume's extents lie on, in extent order, deduplicated.
pub fn extent_disks(id: &str) -> io::Result<Vec<u32>> {
    let f = open_volume(id)?;
    // VOLUME_DISK_EXTENTS: NumberOfDiskExtents (u32, padded to 8), then
    // DISK_EXTENT {DiskNumber u32 (padded), StartingOffset i64,
    // ExtentLength i64} each: room for 64 extents.
    let buf = ioctl::<()>(&f, IOCTL_VOLUME_GET_VOLUME_DISK_EXTENTS, None, 8 + 64 * 24)?;
    let count = (buf[0] & 0xffff_ffff) as usize;
    let mut disks = Vec::new();
    for i in 0..count.min(64) {
        let disk = (buf[1 + 3 * i] & 0xffff_ffff) as u32;
        if !disks.contains(&disk) {
            disks.push(disk);
        }
    }
    Ok(disks)
}
