//! The unsafe Win32 layer of the Windows storage backend: owned handles,
//! device I/O controls and the volume-management calls, each a safe function
//! returning `io::Result` (the raw OS error kept for [`super::errors`]).
//!
//! Nothing here interprets an I/O-control output buffer: the bytes go to the
//! platform-neutral parsers in `storage::parse`.

use std::io;

use windows_sys::Win32::Foundation::{
    CloseHandle, GetLastError, ERROR_INSUFFICIENT_BUFFER, ERROR_MORE_DATA, ERROR_NO_MORE_FILES,
    ERROR_NO_MORE_ITEMS, HANDLE, INVALID_HANDLE_VALUE, MAX_PATH,
};
use windows_sys::Win32::Storage::FileSystem::{
    CreateFileW, DeleteVolumeMountPointW, FindFirstVolumeW, FindNextVolumeW, FindVolumeClose,
    FlushFileBuffers, GetDiskFreeSpaceExW, GetVolumeInformationW,
    GetVolumeNameForVolumeMountPointW, GetVolumePathNameW, ReadFile, SetVolumeMountPointW,
    FILE_SHARE_READ, FILE_SHARE_WRITE, OPEN_EXISTING,
};
use windows_sys::Win32::System::IO::{DeviceIoControl, OVERLAPPED};

pub use windows_sys::Win32::Foundation::{GENERIC_READ, GENERIC_WRITE};

/// Largest output buffer an I/O control may grow to.
const MAX_IOCTL_OUTPUT: usize = 1 << 20;

/// Length of the buffers for volume GUID paths and volume path names: the
/// documented `MAX_PATH` plus room for a long mount-point path.
const PATH_BUF: usize = 1024;

/// The last OS error as an `io::Error`.
fn last_error() -> io::Error {
    io::Error::last_os_error()
}

/// The raw Win32 error code of `e`, if it carries one.
pub fn code(e: &io::Error) -> Option<u32> {
    e.raw_os_error().map(|c| c as u32)
}

/// `s` as a NUL-terminated UTF-16 string; an interior NUL is refused
/// ([`crate::wide`]).
pub fn wide(s: &str) -> io::Result<Vec<u16>> {
    Ok(crate::wide::nul_terminated(s)?)
}

/// The string in `buf` up to its first NUL (or its end).
fn from_wide(buf: &[u16]) -> io::Result<String> {
    let end = buf.iter().position(|&c| c == 0).unwrap_or(buf.len());
    String::from_utf16(&buf[..end]).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "the OS returned a name that is not valid UTF-16",
        )
    })
}

/// An owned kernel handle, closed exactly once on drop.
#[derive(Debug)]
pub struct Handle(HANDLE);

impl Handle {
    /// The raw handle, valid while `self` lives.
    pub fn raw(&self) -> HANDLE {
        self.0
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: the handle came from a successful CreateFileW, is owned by
        // this value alone and is closed only here, once.
        unsafe {
            CloseHandle(self.0);
        }
    }
}

/// Opens a device (`\\.\PhysicalDriveN`, `\\?\Volume{GUID}`) for I/O
/// controls. `access` is 0 (query only: enough for most storage I/O
/// controls), [`GENERIC_READ`] or `GENERIC_READ | GENERIC_WRITE`. Sharing
/// is read and write, so other users of the device are not disturbed.
pub fn open_device(path: &str, access: u32) -> io::Result<Handle> {
    let name = wide(path)?;
    // SAFETY: `name` is a NUL-terminated UTF-16 string alive for the call;
    // no security attributes and no template handle are passed.
    let h = unsafe {
        CreateFileW(
            name.as_ptr(),
            access,
            FILE_SHARE_READ | FILE_SHARE_WRITE,
            std::ptr::null(),
            OPEN_EXISTING,
            0,
            std::ptr::null_mut(),
        )
    };
    if h == INVALID_HANDLE_VALUE {
        return Err(last_error());
    }
    Ok(Handle(h))
}

/// One `DeviceIoControl` call with `input` (a plain `#[repr(C)]` input
/// structure, or none) into `out` (its length is the buffer size); returns
/// the number of bytes written.
fn ioctl_once<T>(h: &Handle, code: u32, input: Option<&T>, out: &mut [u8]) -> io::Result<usize> {
    let (in_ptr, in_len) = match input {
        Some(t) => (
            (t as *const T).cast::<core::ffi::c_void>(),
            u32::try_from(std::mem::size_of::<T>()).map_err(|_| {
                io::Error::new(io::ErrorKind::InvalidInput, "input buffer too large")
            })?,
        ),
        None => (std::ptr::null(), 0),
    };
    let out_len = u32::try_from(out.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "output buffer too large"))?;
    let mut returned = 0u32;
    // SAFETY: the handle is open for the whole call; `in_ptr` is null or
    // points to a live `T` of `in_len` bytes that the OS only reads; `out`
    // is valid for `out_len` writable bytes; the call is synchronous (no
    // OVERLAPPED, the handle was not opened for overlapped I/O).
    let ok = unsafe {
        DeviceIoControl(
            h.raw(),
            code,
            in_ptr,
            in_len,
            if out.is_empty() {
                std::ptr::null_mut()
            } else {
                out.as_mut_ptr().cast()
            },
            out_len,
            &mut returned,
            std::ptr::null_mut(),
        )
    };
    if ok == 0 {
        return Err(last_error());
    }
    Ok((returned as usize).min(out.len()))
}

/// An I/O control with output: starts with `initial` bytes and doubles the
/// buffer (up to 1 MiB) while the OS answers ERROR_INSUFFICIENT_BUFFER or
/// ERROR_MORE_DATA. Returns the bytes written.
pub fn ioctl<T>(h: &Handle, code: u32, input: Option<&T>, initial: usize) -> io::Result<Vec<u8>> {
    let mut size = initial.clamp(8, MAX_IOCTL_OUTPUT);
    loop {
        let mut out = vec![0u8; size];
        match ioctl_once(h, code, input, &mut out) {
            Ok(n) => {
                out.truncate(n);
                return Ok(out);
            }
            Err(e)
                if matches!(code_of(&e), ERROR_INSUFFICIENT_BUFFER | ERROR_MORE_DATA)
                    && size < MAX_IOCTL_OUTPUT =>
            {
                size = (size * 2).min(MAX_IOCTL_OUTPUT);
            }
            Err(e) => return Err(e),
        }
    }
}

/// The largest output buffer [`ioctl`] uses.
pub const MAX_OUTPUT: usize = MAX_IOCTL_OUTPUT;

/// An I/O control without output.
pub fn ioctl_no_output<T>(h: &Handle, code: u32, input: Option<&T>) -> io::Result<()> {
    ioctl_once(h, code, input, &mut []).map(|_| ())
}

fn code_of(e: &io::Error) -> u32 {
    code(e).unwrap_or(0)
}

/// Alignment of the buffers [`read_at`] reads into: a device opened
/// without buffering may want its buffers aligned to the sector size.
const READ_ALIGN: usize = 4096;

/// Reads `buf.len()` bytes at byte `offset` of a device opened with
/// [`GENERIC_READ`] (`offset` and the length sector multiples, as a disk
/// or volume device wants them), through an aligned bounce buffer, in
/// chunks of at most 1 MiB. A short read is an error.
pub fn read_at(h: &Handle, offset: u64, buf: &mut [u8]) -> io::Result<()> {
    const CHUNK: usize = 1 << 20;
    let mut bounce = vec![0u8; CHUNK.min(buf.len()) + READ_ALIGN];
    let skew = bounce.as_ptr().align_offset(READ_ALIGN);
    let mut done = 0;
    while done < buf.len() {
        let n = CHUNK.min(buf.len() - done);
        let at = offset + done as u64;
        let dst = &mut bounce[skew..skew + n];
        // SAFETY: an all-zero OVERLAPPED is valid; only the offset is set.
        let mut ov: OVERLAPPED = unsafe { std::mem::zeroed() };
        ov.Anonymous.Anonymous.Offset = at as u32;
        ov.Anonymous.Anonymous.OffsetHigh = (at >> 32) as u32;
        let mut got = 0u32;
        // SAFETY: the handle is open (synchronous: the OVERLAPPED only
        // carries the offset and lives across the call); `dst` is valid
        // for `n` writable bytes (n <= 1 MiB fits in u32).
        let ok = unsafe {
            ReadFile(
                h.raw(),
                dst.as_mut_ptr().cast(),
                n as u32,
                &mut got,
                &mut ov,
            )
        };
        if ok == 0 {
            return Err(last_error());
        }
        if got as usize != n {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("short read at byte {at}: {got} of {n} bytes"),
            ));
        }
        buf[done..done + n].copy_from_slice(dst);
        done += n;
    }
    Ok(())
}

/// `FlushFileBuffers` on an open handle (a volume handle needs
/// `GENERIC_READ | GENERIC_WRITE` and administrator rights).
pub fn flush(h: &Handle) -> io::Result<()> {
    // SAFETY: the handle is open for the whole call.
    if unsafe { FlushFileBuffers(h.raw()) } == 0 {
        return Err(last_error());
    }
    Ok(())
}

/// The volumes of this host, as `\\?\Volume{GUID}\` strings
/// (`FindFirstVolumeW`/`FindNextVolumeW`); the search handle is closed when
/// the iterator is dropped.
pub struct Volumes {
    handle: HANDLE,
    first: Option<io::Result<String>>,
    done: bool,
}

impl Volumes {
    /// Starts the enumeration.
    pub fn new() -> io::Result<Volumes> {
        let mut buf = [0u16; PATH_BUF];
        // SAFETY: `buf` is writable for the stated number of characters.
        let h = unsafe { FindFirstVolumeW(buf.as_mut_ptr(), buf.len() as u32) };
        if h == INVALID_HANDLE_VALUE {
            return Err(last_error());
        }
        Ok(Volumes {
            handle: h,
            first: Some(from_wide(&buf)),
            done: false,
        })
    }
}

impl Iterator for Volumes {
    type Item = io::Result<String>;

    fn next(&mut self) -> Option<io::Result<String>> {
        if let Some(first) = self.first.take() {
            return Some(first);
        }
        if self.done {
            return None;
        }
        let mut buf = [0u16; PATH_BUF];
        // SAFETY: the search handle is open (closed only in Drop); `buf` is
        // writable for the stated number of characters.
        let ok = unsafe { FindNextVolumeW(self.handle, buf.as_mut_ptr(), buf.len() as u32) };
        if ok == 0 {
            self.done = true;
            // SAFETY: reads the calling thread's last-error value.
            let err = unsafe { GetLastError() };
            if err == ERROR_NO_MORE_FILES {
                return None;
            }
            return Some(Err(io::Error::from_raw_os_error(err as i32)));
        }
        Some(from_wide(&buf))
    }
}

impl Drop for Volumes {
    fn drop(&mut self) {
        // SAFETY: the handle came from a successful FindFirstVolumeW and is
        // closed only here, once.
        unsafe {
            FindVolumeClose(self.handle);
        }
    }
}

/// What `GetVolumeInformationW` says about a mounted filesystem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeInformation {
    pub label: String,
    pub filesystem: String,
    pub serial: u32,
    pub flags: u32,
}

/// `GetVolumeInformationW(root)`; `root` is `\\?\Volume{GUID}\` or `X:\`
/// (with the trailing backslash). ERROR_UNRECOGNIZED_VOLUME means there is
/// no filesystem.
pub fn volume_information(root: &str) -> io::Result<VolumeInformation> {
    let name = wide(root)?;
    let mut label = [0u16; MAX_PATH as usize + 1];
    let mut fs = [0u16; MAX_PATH as usize + 1];
    let (mut serial, mut max_component, mut flags) = (0u32, 0u32, 0u32);
    // SAFETY: `name` is NUL-terminated; both name buffers are writable for
    // the stated lengths; the three u32 out-pointers are valid.
    let ok = unsafe {
        GetVolumeInformationW(
            name.as_ptr(),
            label.as_mut_ptr(),
            label.len() as u32,
            &mut serial,
            &mut max_component,
            &mut flags,
            fs.as_mut_ptr(),
            fs.len() as u32,
        )
    };
    if ok == 0 {
        return Err(last_error());
    }
    Ok(VolumeInformation {
        label: from_wide(&label)?,
        filesystem: from_wide(&fs)?,
        serial,
        flags,
    })
}

/// `GetDiskFreeSpaceExW(root)`: (total bytes, free bytes of the filesystem).
pub fn disk_free_space(root: &str) -> io::Result<(u64, u64)> {
    let name = wide(root)?;
    let (mut avail, mut total, mut free) = (0u64, 0u64, 0u64);
    // SAFETY: `name` is NUL-terminated; the three u64 out-pointers are valid.
    let ok = unsafe { GetDiskFreeSpaceExW(name.as_ptr(), &mut avail, &mut total, &mut free) };
    if ok == 0 {
        return Err(last_error());
    }
    Ok((total, free))
}

/// `GetVolumePathNameW(path)`: the mount point (`C:\`, `C:\mnt\vol\`) of the
/// volume that holds `path`.
pub fn volume_path_name(path: &str) -> io::Result<String> {
    let name = wide(path)?;
    let mut buf = vec![0u16; PATH_BUF.max(path.len() + 2)];
    // SAFETY: `name` is NUL-terminated; `buf` is writable for its length.
    let ok = unsafe { GetVolumePathNameW(name.as_ptr(), buf.as_mut_ptr(), buf.len() as u32) };
    if ok == 0 {
        return Err(last_error());
    }
    from_wide(&buf)
}

/// The Windows directory (`GetSystemWindowsDirectoryW`), if it can be read.
pub fn windows_directory() -> Option<String> {
    use windows_sys::Win32::System::SystemInformation::GetSystemWindowsDirectoryW;
    let mut buf = vec![0u16; PATH_BUF];
    // SAFETY: `buf` is writable for its length.
    let n = unsafe { GetSystemWindowsDirectoryW(buf.as_mut_ptr(), buf.len() as u32) } as usize;
    if n == 0 || n >= buf.len() {
        return None;
    }
    String::from_utf16(&buf[..n]).ok()
}

/// `GetVolumeNameForVolumeMountPointW(mount_point)`: the `\\?\Volume{GUID}\`
/// mounted at `mount_point` (which must end with `\`).
pub fn volume_name_for_mount_point(mount_point: &str) -> io::Result<String> {
    let name = wide(mount_point)?;
    let mut buf = [0u16; PATH_BUF];
    // SAFETY: `name` is NUL-terminated; `buf` is writable for its length.
    let ok = unsafe {
        GetVolumeNameForVolumeMountPointW(name.as_ptr(), buf.as_mut_ptr(), buf.len() as u32)
    };
    if ok == 0 {
        return Err(last_error());
    }
    from_wide(&buf)
}

/// `SetVolumeMountPointW(mount_point, volume)`: both end with `\`; the
/// mount point is an existing empty directory.
pub fn set_volume_mount_point(mount_point: &str, volume: &str) -> io::Result<()> {
    let mp = wide(mount_point)?;
    let vol = wide(volume)?;
    // SAFETY: both strings are NUL-terminated and alive for the call.
    if unsafe { SetVolumeMountPointW(mp.as_ptr(), vol.as_ptr()) } == 0 {
        return Err(last_error());
    }
    Ok(())
}

/// `DeleteVolumeMountPointW(mount_point)` (ending with `\`): removes the
/// mount, keeps the directory.
pub fn delete_volume_mount_point(mount_point: &str) -> io::Result<()> {
    let mp = wide(mount_point)?;
    // SAFETY: `mp` is NUL-terminated and alive for the call.
    if unsafe { DeleteVolumeMountPointW(mp.as_ptr()) } == 0 {
        return Err(last_error());
    }
    Ok(())
}

/// The device paths of the present disks, from SetupDi over
/// `GUID_DEVINTERFACE_DISK` (empty under wine, which has no such
/// interfaces).
pub fn disk_interface_paths() -> io::Result<Vec<String>> {
    use windows_sys::Win32::Devices::DeviceAndDriverInstallation::{
        SetupDiDestroyDeviceInfoList, SetupDiEnumDeviceInterfaces, SetupDiGetClassDevsW,
        SetupDiGetDeviceInterfaceDetailW, DIGCF_DEVICEINTERFACE, DIGCF_PRESENT,
        SP_DEVICE_INTERFACE_DATA, SP_DEVICE_INTERFACE_DETAIL_DATA_W,
    };
    use windows_sys::Win32::System::Ioctl::GUID_DEVINTERFACE_DISK;

    /// Owns a device information set.
    struct DevInfo(isize);
    impl Drop for DevInfo {
        fn drop(&mut self) {
            // SAFETY: the set came from a successful SetupDiGetClassDevsW and
            // is destroyed only here, once.
            unsafe {
                SetupDiDestroyDeviceInfoList(self.0);
            }
        }
    }

    // SAFETY: the GUID is a static; no enumerator string, no window.
    let set = unsafe {
        SetupDiGetClassDevsW(
            &GUID_DEVINTERFACE_DISK,
            std::ptr::null(),
            std::ptr::null_mut(),
            DIGCF_PRESENT | DIGCF_DEVICEINTERFACE,
        )
    };
    if set == INVALID_HANDLE_VALUE as isize {
        return Err(last_error());
    }
    let set = DevInfo(set);
    let mut paths = Vec::new();
    for index in 0u32.. {
        let mut data = SP_DEVICE_INTERFACE_DATA {
            cbSize: std::mem::size_of::<SP_DEVICE_INTERFACE_DATA>() as u32,
            ..Default::default()
        };
        // SAFETY: the set is open; `data` is a writable, size-stamped
        // SP_DEVICE_INTERFACE_DATA.
        let ok = unsafe {
            SetupDiEnumDeviceInterfaces(
                set.0,
                std::ptr::null(),
                &GUID_DEVINTERFACE_DISK,
                index,
                &mut data,
            )
        };
        if ok == 0 {
            // SAFETY: reads the calling thread's last-error value.
            let err = unsafe { GetLastError() };
            if err == ERROR_NO_MORE_ITEMS {
                break;
            }
            return Err(io::Error::from_raw_os_error(err as i32));
        }
        let mut required = 0u32;
        // SAFETY: a size query: no output buffer, `required` is writable.
        unsafe {
            SetupDiGetDeviceInterfaceDetailW(
                set.0,
                &data,
                std::ptr::null_mut(),
                0,
                &mut required,
                std::ptr::null_mut(),
            )
        };
        let header = std::mem::size_of::<SP_DEVICE_INTERFACE_DETAIL_DATA_W>();
        let bytes = (required as usize).max(header);
        // u32 elements keep the buffer aligned for the structure's cbSize.
        let mut buf = vec![0u32; bytes.div_ceil(4)];
        let detail = buf.as_mut_ptr().cast::<SP_DEVICE_INTERFACE_DETAIL_DATA_W>();
        // SAFETY: `buf` is at least as large and as aligned as the structure
        // header; cbSize is the size of the fixed part, as the API requires.
        unsafe { (*detail).cbSize = header as u32 };
        // SAFETY: `detail` points to `bytes` writable, aligned bytes whose
        // header has been stamped; `data` came from the enumeration above.
        let ok = unsafe {
            SetupDiGetDeviceInterfaceDetailW(
                set.0,
                &data,
                detail,
                (buf.len() * 4) as u32,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        if ok == 0 {
            return Err(last_error());
        }
        // The path is the NUL-terminated UTF-16 string that starts at the
        // DevicePath field and runs to the end of the buffer at most.
        let offset = std::mem::offset_of!(SP_DEVICE_INTERFACE_DETAIL_DATA_W, DevicePath);
        let chars = (buf.len() * 4 - offset) / 2;
        // SAFETY: offset + 2 * chars ≤ the buffer's byte length, the field is
        // 2-byte aligned, and the buffer is not mutated while the slice lives.
        let path = unsafe {
            std::slice::from_raw_parts(buf.as_ptr().cast::<u8>().add(offset).cast::<u16>(), chars)
        };
        paths.push(from_wide(path)?);
    }
    Ok(paths)
}

/// `GetVolumePathNamesForVolumeNameW(volume)`: every drive letter and
/// directory where the volume (`\\?\Volume{GUID}\`) is mounted, as the raw
/// NUL-separated list (parsed by `storage::parse::multi_sz`).
pub fn volume_path_names_raw(volume: &str) -> io::Result<Vec<u16>> {
    use windows_sys::Win32::Storage::FileSystem::GetVolumePathNamesForVolumeNameW;
    let name = wide(volume)?;
    let mut len = 1024u32;
    loop {
        let mut buf = vec![0u16; len as usize];
        let mut needed = 0u32;
        // SAFETY: `name` is NUL-terminated; `buf` is writable for `len`
        // characters; `needed` is writable.
        let ok = unsafe {
            GetVolumePathNamesForVolumeNameW(name.as_ptr(), buf.as_mut_ptr(), len, &mut needed)
        };
        if ok != 0 {
            return Ok(buf);
        }
        let e = last_error();
        if code_of(&e) == ERROR_MORE_DATA && needed > len && (needed as usize) < MAX_IOCTL_OUTPUT {
            len = needed;
            continue;
        }
        return Err(e);
    }
}

/// A new random GUID (`CoCreateGuid`: a version-4 GUID from the system's
/// random source), in `storage::parse`'s canonical form.
pub fn new_guid() -> io::Result<crate::storage::parse::guid::Guid> {
    // SAFETY: CoCreateGuid takes no pointer from us (the binding returns
    // the GUID by value) and needs no COM initialisation.
    let g = unsafe { windows::Win32::System::Com::CoCreateGuid() }
        .map_err(|e| io::Error::other(format!("CoCreateGuid: {e}")))?;
    Ok(crate::storage::parse::guid::Guid::from_u128(g.to_u128()))
}
