//! The block-device system calls the Linux storage backend needs, as safe
//! functions over [`OwnedFd`]. Every `unsafe` of the backend lives here.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

// <linux/fs.h>, <linux/blkpg.h>, <linux/loop.h> (x86_64 and aarch64 agree).
const BLKROSET: libc::c_ulong = 0x125d;
const BLKRRPART: libc::c_ulong = 0x125f;
const BLKPG: libc::c_ulong = 0x1269;
const BLKGETSIZE64: libc::c_ulong = 0x8008_1272;
const BLKSSZGET: libc::c_ulong = 0x1268;
const LOOP_SET_STATUS64: libc::c_ulong = 0x4c04;
const LOOP_GET_STATUS64: libc::c_ulong = 0x4c05;
const LOOP_SET_CAPACITY: libc::c_ulong = 0x4c07;
const LO_FLAGS_PARTSCAN: u32 = 8;
const BLKPG_ADD_PARTITION: libc::c_int = 1;
const BLKPG_RESIZE_PARTITION: libc::c_int = 3;

#[repr(C)]
struct BlkpgIoctlArg {
    op: libc::c_int,
    flags: libc::c_int,
    datalen: libc::c_int,
    data: *mut libc::c_void,
}

#[repr(C)]
struct BlkpgPartition {
    start: libc::c_longlong,
    length: libc::c_longlong,
    pno: libc::c_int,
    devname: [u8; 64],
    volname: [u8; 64],
}

#[repr(C)]
struct LoopInfo64 {
    lo_device: u64,
    lo_inode: u64,
    lo_rdevice: u64,
    lo_offset: u64,
    lo_sizelimit: u64,
    lo_number: u32,
    lo_encrypt_type: u32,
    lo_encrypt_key_size: u32,
    lo_flags: u32,
    lo_file_name: [u8; 64],
    lo_crypt_name: [u8; 64],
    lo_encrypt_key: [u8; 32],
    lo_init: [u64; 2],
}

fn cpath(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path holds a NUL byte"))
}

fn check(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// How to open a block device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Read-only.
    Read,
    /// Read-write.
    Write,
    /// Read-write and exclusive: fails with EBUSY while anything holds the
    /// device (a mount, a partition in use, another exclusive opener).
    Exclusive,
}

/// Opens a block device node (never following a link at `path`).
pub fn open_block(path: &Path, access: Access) -> io::Result<OwnedFd> {
    let c = cpath(path)?;
    let mode = match access {
        Access::Read => libc::O_RDONLY,
        Access::Write => libc::O_RDWR,
        Access::Exclusive => libc::O_RDWR | libc::O_EXCL,
    };
    // SAFETY: `c` is a valid NUL-terminated string; on success the returned
    // descriptor is owned by nobody else, so wrapping it in OwnedFd is sound.
    unsafe {
        let fd = check(libc::open(
            c.as_ptr(),
            mode | libc::O_CLOEXEC | libc::O_NOFOLLOW,
        ))?;
        Ok(OwnedFd::from_raw_fd(fd))
    }
}

/// The device number (`st_rdev`) of an open block device, or an error if it
/// is not a block device.
pub fn block_rdev(fd: &OwnedFd) -> io::Result<u64> {
    let st = nix::sys::stat::fstat(fd).map_err(io::Error::from)?;
    if st.st_mode & libc::S_IFMT != libc::S_IFBLK {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a block device",
        ));
    }
    Ok(st.st_rdev)
}

/// Creates a block device node `path` for `major:minor` (mode 0600).
pub fn mknod_block(path: &Path, major: u32, minor: u32) -> io::Result<()> {
    let c = cpath(path)?;
    let dev = libc::makedev(major, minor);
    // SAFETY: `c` is a valid NUL-terminated string; mknod does not retain it.
    check(unsafe { libc::mknod(c.as_ptr(), libc::S_IFBLK | 0o600, dev) }).map(|_| ())
}

/// Size of the device in bytes.
pub fn size_bytes(fd: &OwnedFd) -> io::Result<u64> {
    let mut size: u64 = 0;
    // SAFETY: BLKGETSIZE64 writes one u64 through the pointer, which points
    // to a live local.
    check(unsafe { libc::ioctl(fd.as_raw_fd(), BLKGETSIZE64, &mut size as *mut u64) })?;
    Ok(size)
}

/// Logical sector size in bytes.
pub fn sector_size(fd: &OwnedFd) -> io::Result<u32> {
    let mut size: libc::c_int = 0;
    // SAFETY: BLKSSZGET writes one int through the pointer to a live local.
    check(unsafe { libc::ioctl(fd.as_raw_fd(), BLKSSZGET, &mut size as *mut libc::c_int) })?;
    u32::try_from(size).map_err(|_| io::Error::other("negative sector size"))
}

/// Sets or clears the read-only flag of the device.
pub fn set_read_only(fd: &OwnedFd, read_only: bool) -> io::Result<()> {
    let flag: libc::c_int = read_only.into();
    // SAFETY: BLKROSET reads one int through the pointer to a live local.
    check(unsafe { libc::ioctl(fd.as_raw_fd(), BLKROSET, &flag as *const libc::c_int) }).map(|_| ())
}

/// Asks the kernel to re-read the partition table.
pub fn reread_partitions(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: BLKRRPART takes no argument.
    check(unsafe { libc::ioctl(fd.as_raw_fd(), BLKRRPART, 0) }).map(|_| ())
}

fn blkpg(fd: &OwnedFd, op: libc::c_int, number: u32, start: u64, length: u64) -> io::Result<()> {
    let too_big = || io::Error::new(io::ErrorKind::InvalidInput, "partition out of range");
    let mut part = BlkpgPartition {
        start: i64::try_from(start).map_err(|_| too_big())?,
        length: i64::try_from(length).map_err(|_| too_big())?,
        pno: libc::c_int::try_from(number).map_err(|_| too_big())?,
        devname: [0; 64],
        volname: [0; 64],
    };
    let mut arg = BlkpgIoctlArg {
        op,
        flags: 0,
        datalen: std::mem::size_of::<BlkpgPartition>() as libc::c_int,
        data: (&mut part as *mut BlkpgPartition).cast(),
    };
    // SAFETY: `arg` and the `part` it points to are live, correctly laid out
    // (repr(C) copies of <linux/blkpg.h>) for the duration of the call.
    check(unsafe { libc::ioctl(fd.as_raw_fd(), BLKPG, &mut arg as *mut BlkpgIoctlArg) }).map(|_| ())
}

/// Tells the kernel that partition `number` now spans `length` bytes from
/// `start` (works while the partition is mounted).
pub fn resize_partition(fd: &OwnedFd, number: u32, start: u64, length: u64) -> io::Result<()> {
    blkpg(fd, BLKPG_RESIZE_PARTITION, number, start, length)
}

/// Tells the kernel about partition `number` spanning `length` bytes from
/// `start` (for kernels without a partition-table parser, and disks whose
/// table the kernel has not read).
pub fn add_partition(fd: &OwnedFd, number: u32, start: u64, length: u64) -> io::Result<()> {
    blkpg(fd, BLKPG_ADD_PARTITION, number, start, length)
}

/// Loop devices: re-reads the size of the backing file.
pub fn loop_set_capacity(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: LOOP_SET_CAPACITY takes no argument.
    check(unsafe { libc::ioctl(fd.as_raw_fd(), LOOP_SET_CAPACITY, 0) }).map(|_| ())
}

/// Loop devices: turns on partition scanning (as `losetup -P` would); a
/// no-op if it is on.
pub fn loop_enable_partscan(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: LoopInfo64 is plain data; all-zero is a valid value.
    let mut info: LoopInfo64 = unsafe { std::mem::zeroed() };
    // SAFETY: LOOP_GET_STATUS64 fills a `struct loop_info64`, which
    // LoopInfo64 mirrors exactly; the pointer is to a live local.
    check(unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            LOOP_GET_STATUS64,
            &mut info as *mut LoopInfo64,
        )
    })?;
    if info.lo_flags & LO_FLAGS_PARTSCAN != 0 {
        return Ok(());
    }
    info.lo_flags |= LO_FLAGS_PARTSCAN;
    // SAFETY: as above; LOOP_SET_STATUS64 reads the struct.
    check(unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            LOOP_SET_STATUS64,
            &info as *const LoopInfo64,
        )
    })
    .map(|_| ())
}

/// Flushes the filesystem that holds the open file or directory `fd`.
pub fn syncfs(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: syncfs only reads the descriptor number.
    check(unsafe { libc::syncfs(fd.as_raw_fd()) }).map(|_| ())
}

/// Reads exactly `len` bytes at `offset` (short only at the end of the device).
pub fn read_at(fd: &OwnedFd, offset: u64, len: usize) -> io::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::from(fd.try_clone()?);
    let mut buf = vec![0u8; len];
    let mut done = 0;
    while done < len {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(done);
    Ok(buf)
}

/// Writes all of `bytes` at `offset`.
pub fn write_at(fd: &OwnedFd, offset: u64, bytes: &[u8]) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::from(fd.try_clone()?);
    file.write_all_at(bytes, offset)
}

/// Fills `buf` from the kernel's random source.
pub fn random_bytes(buf: &mut [u8]) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        let rest = &mut buf[done..];
        // SAFETY: the pointer and length describe the live, writable `rest`.
        let n = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        done += n as usize;
    }
    Ok(())
}

/// fsync.
pub fn fsync(fd: &OwnedFd) -> io::Result<()> {
    nix::unistd::fsync(fd).map_err(io::Error::from)
}

#[cfg(test)]
mod tests {
    #[test]
    fn struct_layouts_match_the_kernel_headers() {
        assert_eq!(std::mem::size_of::<super::LoopInfo64>(), 232);
        assert_eq!(std::mem::size_of::<super::BlkpgPartition>(), 152);
        assert_eq!(std::mem::size_of::<super::BlkpgIoctlArg>(), 24);
    }
}
