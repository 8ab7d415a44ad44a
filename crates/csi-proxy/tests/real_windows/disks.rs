//! Disk facts read and disks prepared by the tests themselves, with raw I/O
//! controls on `\\.\PhysicalDriveN` (never through the proxy's code): the
//! partition layout the proxy left, an MBR or an MSR-only GPT disk to hand
//! it, the offline attribute, the SCSI address, a volume's filesystem.

use std::fs::File;
use std::io;
use std::os::windows::fs::OpenOptionsExt;
use std::os::windows::io::AsRawHandle;

use windows_sys::core::GUID;
use windows_sys::Win32::Storage::FileSystem::GetVolumeInformationW;
use windows_sys::Win32::System::Ioctl::{
    CREATE_DISK, DRIVE_LAYOUT_INFORMATION_EX, GET_DISK_ATTRIBUTES, IOCTL_DISK_CREATE_DISK,
    IOCTL_DISK_GET_DISK_ATTRIBUTES, IOCTL_DISK_GET_DRIVE_LAYOUT_EX, IOCTL_DISK_SET_DRIVE_LAYOUT_EX,
    IOCTL_DISK_UPDATE_PROPERTIES, PARTITION_INFORMATION_EX, PARTITION_STYLE_GPT,
    PARTITION_STYLE_MBR,
};
use windows_sys::Win32::System::IO::DeviceIoControl;

/// The Microsoft reserved partition type.
pub const MSR: u128 = 0xe3c9e316_0b5c_4db8_817d_f92df00215ae;
/// The basic data partition type.
pub const BASIC_DATA: u128 = 0xebd0a0a2_b9e5_4433_87c0_68b6b72699c7;
/// `DISK_ATTRIBUTE_OFFLINE`.
const ATTRIBUTE_OFFLINE: u64 = 1;
/// `IOCTL_SCSI_GET_ADDRESS`.
const IOCTL_SCSI_GET_ADDRESS: u32 = 0x41018;

pub fn guid_u128(g: &GUID) -> u128 {
    let mut b = [0u8; 16];
    b[..4].copy_from_slice(&g.data1.to_be_bytes());
    b[4..6].copy_from_slice(&g.data2.to_be_bytes());
    b[6..8].copy_from_slice(&g.data3.to_be_bytes());
    b[8..].copy_from_slice(&g.data4);
    u128::from_be_bytes(b)
}

/// A GUID no other test run uses (process id, time, counter).
fn fresh_guid() -> GUID {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let v = (u128::from(std::process::id()) << 96)
        | (u128::from(N.fetch_add(1, Ordering::Relaxed)) << 64)
        | u128::from(t);
    // Version 4, variant 1 bits, as a random GUID would have.
    GUID::from_u128((v & !(0xf << 76) & !(0x3 << 62)) | (0x4 << 76) | (0x2 << 62))
}

/// `\\.\PhysicalDriveN`, opened with read/write access or none.
pub fn open_disk(disk: u32, write: bool) -> io::Result<File> {
    let mut o = std::fs::OpenOptions::new();
    if write {
        o.read(true).write(true);
    } else {
        o.access_mode(0);
    }
    o.open(format!(r"\\.\PhysicalDrive{disk}"))
}

/// `DeviceIoControl` with `input` (any plain struct, or nothing) and an
/// output buffer of `out` bytes (8-byte aligned); the bytes returned.
pub fn ioctl<T>(f: &File, code: u32, input: Option<&T>, out: usize) -> io::Result<Vec<u64>> {
    let mut buf = vec![0u64; out.div_ceil(8)];
    let mut got = 0u32;
    let (ptr, len) = match input {
        Some(t) => (t as *const T as *const _, std::mem::size_of::<T>() as u32),
        None => (std::ptr::null(), 0),
    };
    // SAFETY: `input` is a live value of its size; `buf` is writable for
    // `out` bytes; synchronous call.
    let ok = unsafe {
        DeviceIoControl(
            f.as_raw_handle() as _,
            code,
            ptr,
            len,
            buf.as_mut_ptr().cast(),
            (buf.len() * 8) as u32,
            &mut got,
            std::ptr::null_mut(),
        )
    };
    if ok == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(buf)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    Mbr,
    Gpt,
    Raw,
}

/// One partition: number, offset, length and type (a GPT type GUID, or
/// an MBR type byte).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Partition {
    pub number: u32,
    pub offset: u64,
    pub length: u64,
    pub gpt_type: Option<u128>,
    pub mbr_type: Option<u8>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    pub style: Style,
    pub partitions: Vec<Partition>,
}

/// The partition table of disk `disk` (`IOCTL_DISK_GET_DRIVE_LAYOUT_EX`),
/// without the unused MBR slots.
pub fn layout(disk: u32) -> io::Result<Layout> {
    let f = open_disk(disk, false)?;
    let buf = ioctl::<()>(&f, IOCTL_DISK_GET_DRIVE_LAYOUT_EX, None, 64 * 1024)?;
    let base = buf.as_ptr() as *const u8;
    // SAFETY: the driver filled a DRIVE_LAYOUT_INFORMATION_EX header into
    // this aligned buffer, larger than the header.
    let head: DRIVE_LAYOUT_INFORMATION_EX = unsafe { std::ptr::read(base.cast()) };
    let style = match head.PartitionStyle as i32 {
        PARTITION_STYLE_MBR => Style::Mbr,
        PARTITION_STYLE_GPT => Style::Gpt,
        _ => Style::Raw,
    };
    let first = std::mem::offset_of!(DRIVE_LAYOUT_INFORMATION_EX, PartitionEntry);
    let size = std::mem::size_of::<PARTITION_INFORMATION_EX>();
    let mut partitions = Vec::new();
    for i in 0..head.PartitionCount as usize {
        let at = first + i * size;
        assert!(at + size <= buf.len() * 8, "layout of disk {disk} too long");
        // SAFETY: in bounds (checked) and aligned (the entries are laid out
        // as an array of this type after an aligned header).
        let p: PARTITION_INFORMATION_EX = unsafe { std::ptr::read(base.add(at).cast()) };
        // SAFETY: the union member named by the layout's style.
        let (gpt_type, mbr_type) = unsafe {
            match style {
                Style::Gpt => (Some(guid_u128(&p.Anonymous.Gpt.PartitionType)), None),
                _ => (None, Some(p.Anonymous.Mbr.PartitionType)),
            }
        };
        if p.PartitionLength == 0 || mbr_type == Some(0) {
            continue;
        }
        partitions.push(Partition {
            number: p.PartitionNumber,
            offset: p.StartingOffset as u64,
            length: p.PartitionLength as u64,
            gpt_type,
            mbr_type,
        });
    }
    Ok(Layout { style, partitions })
}

/// The GPT disk GUID of disk `disk` (`None`: not a GPT disk).
pub fn gpt_disk_id(disk: u32) -> io::Result<Option<u128>> {
    let f = open_disk(disk, false)?;
    let buf = ioctl::<()>(&f, IOCTL_DISK_GET_DRIVE_LAYOUT_EX, None, 64 * 1024)?;
    // SAFETY: the driver filled a DRIVE_LAYOUT_INFORMATION_EX header into
    // this aligned buffer, larger than the header.
    let head: DRIVE_LAYOUT_INFORMATION_EX = unsafe { std::ptr::read(buf.as_ptr().cast()) };
    if head.PartitionStyle as i32 != PARTITION_STYLE_GPT {
        return Ok(None);
    }
    // SAFETY: the union member named by the layout's style.
    Ok(Some(guid_u128(unsafe { &head.Anonymous.Gpt.DiskId })))
}

fn update_properties(f: &File) -> io::Result<()> {
    ioctl::<()>(f, IOCTL_DISK_UPDATE_PROPERTIES, None, 0).map(drop)
}

/// Initialises a raw disk as MBR, without partitions.
pub fn init_mbr(disk: u32) -> io::Result<()> {
    let f = open_disk(disk, true)?;
    let mut c = CREATE_DISK {
        PartitionStyle: PARTITION_STYLE_MBR,
        ..Default::default()
    };
    c.Anonymous.Mbr.Signature = fresh_guid().data1;
    ioctl(&f, IOCTL_DISK_CREATE_DISK, Some(&c), 0)?;
    update_properties(&f)
}

/// Initialises a raw disk as GPT with one Microsoft reserved partition
/// (16 MiB at the first aligned offset) and nothing else.
pub fn init_gpt_msr_only(disk: u32) -> io::Result<()> {
    let f = open_disk(disk, true)?;
    let mut c = CREATE_DISK {
        PartitionStyle: PARTITION_STYLE_GPT,
        ..Default::default()
    };
    c.Anonymous.Gpt.DiskId = fresh_guid();
    c.Anonymous.Gpt.MaxPartitionCount = 128;
    ioctl(&f, IOCTL_DISK_CREATE_DISK, Some(&c), 0)?;
    let buf = ioctl::<()>(&f, IOCTL_DISK_GET_DRIVE_LAYOUT_EX, None, 64 * 1024)?;
    // SAFETY: as in `layout`: an aligned buffer the driver filled.
    let mut l: DRIVE_LAYOUT_INFORMATION_EX = unsafe { std::ptr::read(buf.as_ptr().cast()) };
    // SAFETY: a GPT layout, so the GPT member.
    let usable = unsafe { l.Anonymous.Gpt.StartingUsableOffset } as u64;
    let mib = 1u64 << 20;
    l.PartitionCount = 1;
    let e = &mut l.PartitionEntry[0];
    *e = PARTITION_INFORMATION_EX {
        PartitionStyle: PARTITION_STYLE_GPT,
        StartingOffset: usable.div_ceil(mib) as i64 * mib as i64,
        PartitionLength: 16 * mib as i64,
        PartitionNumber: 1,
        RewritePartition: true,
        ..Default::default()
    };
    e.Anonymous.Gpt.PartitionType = GUID::from_u128(MSR);
    e.Anonymous.Gpt.PartitionId = fresh_guid();
    let mut name = [0u16; 36];
    for (d, s) in name
        .iter_mut()
        .zip("Microsoft reserved partition".encode_utf16())
    {
        *d = s;
    }
    e.Anonymous.Gpt.Name = name;
    ioctl(&f, IOCTL_DISK_SET_DRIVE_LAYOUT_EX, Some(&l), 0)?;
    update_properties(&f)
}

/// Whether Windows has the disk offline (`DISK_ATTRIBUTE_OFFLINE`).
pub fn is_offline(disk: u32) -> io::Result<bool> {
    let f = open_disk(disk, false)?;
    let buf = ioctl::<()>(
        &f,
        IOCTL_DISK_GET_DISK_ATTRIBUTES,
        None,
        std::mem::size_of::<GET_DISK_ATTRIBUTES>(),
    )?;
    // SAFETY: the driver filled a GET_DISK_ATTRIBUTES into the buffer.
    let a: GET_DISK_ATTRIBUTES = unsafe { std::ptr::read(buf.as_ptr().cast()) };
    Ok(a.Attributes & ATTRIBUTE_OFFLINE != 0)
}

/// The SCSI address of a disk: port (adapter), path (bus), target, LUN.
pub fn scsi_address(disk: u32) -> io::Result<[u8; 4]> {
    let f = open_disk(disk, false)?;
    // SCSI_ADDRESS: Length (u32), PortNumber, PathId, TargetId, Lun.
    let buf = ioctl::<()>(&f, IOCTL_SCSI_GET_ADDRESS, None, 8)?;
    let b = buf[0].to_le_bytes();
    Ok([b[4], b[5], b[6], b[7]])
}

/// The filesystem name of a volume (`GetVolumeInformationW`, id with its
/// trailing backslash).
pub fn filesystem(volume: &str) -> io::Result<String> {
    let v = super::links::wide_z(volume);
    let mut fs = [0u16; 64];
    // SAFETY: `v` is NUL-terminated; `fs` is writable for its length; the
    // other outputs are not asked for.
    let ok = unsafe {
        GetVolumeInformationW(
            v.as_ptr(),
            std::ptr::null_mut(),
            0,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            fs.as_mut_ptr(),
            fs.len() as u32,
        )
    };
    if ok == 0 {
        return Err(io::Error::last_os_error());
    }
    let end = fs.iter().position(|&c| c == 0).unwrap_or(fs.len());
    Ok(String::from_utf16_lossy(&fs[..end]))
}
