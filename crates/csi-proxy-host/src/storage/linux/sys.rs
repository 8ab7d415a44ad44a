//! The block-device system calls the Linux storage backend needs, as safe
//! functions over [`OwnedFd`]. Every `unsafe` of the backend lives here.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The ioctl requests, as `unsafe fn(fd, arg) -> nix::Result<c_int>`.
///
/// `<linux/fs.h>` builds the `BLK*` numbers with `_IO`/`_IOR`, whose
/// direction and size bits differ between architectures (powerpc, mips and
/// sparc put the direction elsewhere; `BLKGETSIZE64` holds
/// `sizeof(size_t)`, 4 on 32-bit targets): libc's per-architecture value
/// where it has one, else nix's `request_code_*` for the target.
/// `<linux/loop.h>` defines the `LOOP_*` requests as plain numbers, the
/// same on every architecture.
mod request {
    use nix::sys::ioctl::ioctl_num_type as Request;
    use std::mem::size_of;

    const BLK: u8 = 0x12;
    pub(super) const BLKGETSIZE64: Request = nix::request_code_read!(BLK, 114, size_of::<usize>());
    pub(super) const BLKSSZGET: Request = libc::BLKSSZGET;
    pub(super) const BLKROSET: Request = nix::request_code_none!(BLK, 93);
    pub(super) const BLKRRPART: Request = nix::request_code_none!(BLK, 95);
    pub(super) const BLKPG: Request = nix::request_code_none!(BLK, 105);
    pub(super) const BLKGETDISKSEQ: Request = nix::request_code_read!(BLK, 128, size_of::<u64>());
    pub(super) const LOOP_SET_STATUS64: Request = 0x4c04;
    pub(super) const LOOP_GET_STATUS64: Request = 0x4c05;
    pub(super) const LOOP_SET_CAPACITY: Request = 0x4c07;

    // Writes a u64 (the number's size field says size_t).
    nix::ioctl_read_bad!(blkgetsize64, BLKGETSIZE64, u64);
    nix::ioctl_read_bad!(blksszget, BLKSSZGET, libc::c_int);
    nix::ioctl_read_bad!(blkgetdiskseq, BLKGETDISKSEQ, u64);
    nix::ioctl_write_ptr_bad!(blkroset, BLKROSET, libc::c_int);
    nix::ioctl_none_bad!(blkrrpart, BLKRRPART);
    nix::ioctl_write_ptr_bad!(blkpg, BLKPG, super::BlkpgIoctlArg);
    nix::ioctl_write_ptr_bad!(loop_set_status64, LOOP_SET_STATUS64, super::LoopInfo64);
    nix::ioctl_read_bad!(loop_get_status64, LOOP_GET_STATUS64, super::LoopInfo64);
    nix::ioctl_none_bad!(loop_set_capacity, LOOP_SET_CAPACITY);
}

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
    /// Read-only and exclusive: the same claim without asking for write
    /// access (a read-only disk can be probed too).
    Claim,
}

/// Opens a block device node (never following a link at `path`).
pub fn open_block(path: &Path, access: Access) -> io::Result<OwnedFd> {
    let c = cpath(path)?;
    let mode = match access {
        Access::Read => libc::O_RDONLY,
        Access::Write => libc::O_RDWR,
        Access::Exclusive => libc::O_RDWR | libc::O_EXCL,
        Access::Claim => libc::O_RDONLY | libc::O_EXCL,
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
    unsafe { request::blkgetsize64(fd.as_raw_fd(), &mut size) }?;
    Ok(size)
}

/// The `diskseq` of the disk the open device is (or is a partition of):
/// what the fd names, whatever the node's name now names (Linux >= 5.15).
pub fn disk_seq(fd: &OwnedFd) -> io::Result<u64> {
    let mut seq: u64 = 0;
    // SAFETY: BLKGETDISKSEQ writes one u64 through the pointer, which points
    // to a live local.
    unsafe { request::blkgetdiskseq(fd.as_raw_fd(), &mut seq) }?;
    Ok(seq)
}

/// The backing file of a loop device, as the kernel stat()ed it: the
/// device its filesystem lives on (`st_dev`) and, for a block device, its
/// own number (`st_rdev`).
pub fn loop_backing(fd: &OwnedFd) -> io::Result<(u64, u64)> {
    // SAFETY: LoopInfo64 is plain data; all-zero is a valid value.
    let mut info: LoopInfo64 = unsafe { std::mem::zeroed() };
    // SAFETY: LOOP_GET_STATUS64 fills a `struct loop_info64`, which
    // LoopInfo64 mirrors exactly; the pointer is to a live local.
    unsafe { request::loop_get_status64(fd.as_raw_fd(), &mut info) }?;
    Ok((info.lo_device, info.lo_rdevice))
}

/// Logical sector size in bytes.
pub fn sector_size(fd: &OwnedFd) -> io::Result<u32> {
    let mut size: libc::c_int = 0;
    // SAFETY: BLKSSZGET writes one int through the pointer to a live local.
    unsafe { request::blksszget(fd.as_raw_fd(), &mut size) }?;
    u32::try_from(size).map_err(|_| io::Error::other("negative sector size"))
}

/// Sets or clears the read-only flag of the device.
pub fn set_read_only(fd: &OwnedFd, read_only: bool) -> io::Result<()> {
    let flag: libc::c_int = read_only.into();
    // SAFETY: BLKROSET reads one int through the pointer to a live local.
    unsafe { request::blkroset(fd.as_raw_fd(), &flag) }?;
    Ok(())
}

/// Asks the kernel to re-read the partition table.
pub fn reread_partitions(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: BLKRRPART takes no argument.
    unsafe { request::blkrrpart(fd.as_raw_fd()) }?;
    Ok(())
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
    let arg = BlkpgIoctlArg {
        op,
        flags: 0,
        datalen: std::mem::size_of::<BlkpgPartition>() as libc::c_int,
        data: (&mut part as *mut BlkpgPartition).cast(),
    };
    // SAFETY: `arg` and the `part` it points to are live, correctly laid out
    // (repr(C) copies of <linux/blkpg.h>) for the duration of the call.
    unsafe { request::blkpg(fd.as_raw_fd(), &arg) }?;
    Ok(())
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
    unsafe { request::loop_set_capacity(fd.as_raw_fd()) }?;
    Ok(())
}

/// Loop devices: turns on partition scanning (as `losetup -P` would); a
/// no-op if it is on.
pub fn loop_enable_partscan(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: LoopInfo64 is plain data; all-zero is a valid value.
    let mut info: LoopInfo64 = unsafe { std::mem::zeroed() };
    // SAFETY: LOOP_GET_STATUS64 fills a `struct loop_info64`, which
    // LoopInfo64 mirrors exactly; the pointer is to a live local.
    unsafe { request::loop_get_status64(fd.as_raw_fd(), &mut info) }?;
    if info.lo_flags & LO_FLAGS_PARTSCAN != 0 {
        return Ok(());
    }
    info.lo_flags |= LO_FLAGS_PARTSCAN;
    // SAFETY: as above; LOOP_SET_STATUS64 reads the struct.
    unsafe { request::loop_set_status64(fd.as_raw_fd(), &info) }?;
    Ok(())
}

/// The size and free space in bytes of the filesystem mounted at `path`.
/// `statvfs64`: the plain `statvfs` of 32-bit targets fails with EOVERFLOW
/// on a filesystem of more than 2^32 blocks.
pub fn fs_bytes(path: &Path) -> io::Result<(u64, u64)> {
    let c = cpath(path)?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs64>::zeroed();
    // SAFETY: `c` is a valid NUL-terminated string and `st` writable memory
    // of the struct's size, both alive for the call.
    check(unsafe { libc::statvfs64(c.as_ptr(), st.as_mut_ptr()) })?;
    // SAFETY: statvfs64 succeeded and filled the struct (zeroed before).
    let st = unsafe { st.assume_init() };
    // c_ulong: 32-bit on 32-bit targets.
    #[allow(clippy::unnecessary_cast)]
    let frsize = st.f_frsize as u64;
    let total = st.f_blocks.saturating_mul(frsize);
    let free = st.f_bfree.saturating_mul(frsize);
    Ok((total, free))
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
        let pointer = std::mem::size_of::<usize>();
        assert_eq!(std::mem::size_of::<super::LoopInfo64>(), 232);
        // Three long longs and 128 bytes, padded to their alignment (4 on
        // i386, 8 elsewhere).
        let align = std::mem::align_of::<libc::c_longlong>();
        assert_eq!(
            std::mem::size_of::<super::BlkpgPartition>(),
            148usize.next_multiple_of(align)
        );
        // Three ints and a pointer.
        assert_eq!(
            std::mem::size_of::<super::BlkpgIoctlArg>(),
            12usize.next_multiple_of(pointer) + pointer
        );
    }

    #[test]
    fn fs_bytes_agree_with_statvfs() {
        let dir = std::env::temp_dir();
        let (total, free) = super::fs_bytes(&dir).unwrap();
        let st = nix::sys::statvfs::statvfs(&dir).unwrap();
        #[allow(clippy::unnecessary_cast)]
        let frsize = st.fragment_size() as u64;
        assert_eq!(total, st.blocks() as u64 * frsize);
        assert!(free <= total && total > 0, "{free} {total}");
        assert!(super::fs_bytes(std::path::Path::new("/nonexistent/x")).is_err());
    }

    /// The numbers the kernel headers give on the architectures CI checks
    /// (`_IOC` of asm-generic, and powerpc's own).
    #[test]
    fn ioctl_numbers_match_the_kernel_headers() {
        use super::request::*;
        #[cfg(any(target_arch = "x86_64", target_arch = "aarch64", target_arch = "s390x"))]
        let expected = [0x8008_1272, 0x1268, 0x125d, 0x125f, 0x1269];
        #[cfg(target_arch = "x86")]
        let expected = [0x8004_1272, 0x1268, 0x125d, 0x125f, 0x1269];
        #[cfg(target_arch = "powerpc64")]
        let expected = [
            0x4008_1272,
            0x2000_1268,
            0x2000_125d,
            0x2000_125f,
            0x2000_1269,
        ];
        #[cfg(any(
            target_arch = "x86_64",
            target_arch = "aarch64",
            target_arch = "s390x",
            target_arch = "x86",
            target_arch = "powerpc64"
        ))]
        assert_eq!(
            [BLKGETSIZE64, BLKSSZGET, BLKROSET, BLKRRPART, BLKPG],
            expected
        );
        assert_eq!(
            [LOOP_SET_STATUS64, LOOP_GET_STATUS64, LOOP_SET_CAPACITY],
            [0x4c04, 0x4c05, 0x4c07]
        );
    }
}
