//! The Win32/NT calls of the Windows confined filesystem: every `unsafe`
//! block of it lives here, behind safe functions over `OwnedHandle`.

use std::io;
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};

use windows_sys::Wdk::Foundation::OBJECT_ATTRIBUTES;
use windows_sys::Wdk::Storage::FileSystem::{
    FileFullDirectoryInformation, NtCreateFile, NtQueryDirectoryFile, FILE_OPEN,
    FILE_OPEN_FOR_BACKUP_INTENT, FILE_OPEN_REPARSE_POINT, FILE_SYNCHRONOUS_IO_NONALERT,
    NTCREATEFILE_CREATE_DISPOSITION, NTCREATEFILE_CREATE_OPTIONS,
};
use windows_sys::Win32::Foundation::{
    RtlNtStatusToDosError, HANDLE, INVALID_HANDLE_VALUE, NTSTATUS, OBJ_CASE_INSENSITIVE,
    OBJ_DONT_REPARSE, UNICODE_STRING,
};
use windows_sys::Win32::Storage::FileSystem::{
    CreateFileW, CreateSymbolicLinkW, FileAttributeTagInfo, FileBasicInfo, FileDispositionInfo,
    FileDispositionInfoEx, GetFileInformationByHandle, GetFileInformationByHandleEx,
    GetFinalPathNameByHandleW, SetFileInformationByHandle, BY_HANDLE_FILE_INFORMATION, DELETE,
    FILE_ATTRIBUTE_NORMAL, FILE_ATTRIBUTE_READONLY, FILE_ATTRIBUTE_TAG_INFO, FILE_BASIC_INFO,
    FILE_DISPOSITION_FLAG_DELETE, FILE_DISPOSITION_FLAG_IGNORE_READONLY_ATTRIBUTE,
    FILE_DISPOSITION_FLAG_POSIX_SEMANTICS, FILE_DISPOSITION_INFO, FILE_DISPOSITION_INFO_EX,
    FILE_FLAG_BACKUP_SEMANTICS, FILE_READ_ATTRIBUTES, FILE_SHARE_DELETE, FILE_SHARE_READ,
    FILE_SHARE_WRITE, FILE_WRITE_ATTRIBUTES, MAXIMUM_REPARSE_DATA_BUFFER_SIZE, OPEN_EXISTING,
    SYMBOLIC_LINK_FLAG_ALLOW_UNPRIVILEGED_CREATE, SYMBOLIC_LINK_FLAG_DIRECTORY,
};
use windows_sys::Win32::System::Ioctl::FSCTL_GET_REPARSE_POINT;
use windows_sys::Win32::System::IO::{DeviceIoControl, IO_STATUS_BLOCK};

/// An NT status as an `io::Error` (through its Win32 error code). A
/// sharing or lock violation is [`io::ErrorKind::ResourceBusy`]: another
/// process (a client renaming or deleting the entry meanwhile) has it open
/// in a conflicting way, a state of the host and not a fault of ours.
pub fn status_error(status: NTSTATUS) -> io::Error {
    // SAFETY: a pure conversion function without preconditions.
    let code = unsafe { RtlNtStatusToDosError(status) };
    let e = io::Error::from_raw_os_error(code as i32);
    // ERROR_SHARING_VIOLATION, ERROR_LOCK_VIOLATION.
    if matches!(code, 32 | 33) {
        return io::Error::new(
            io::ErrorKind::ResourceBusy,
            format!("{e}; another process is using it (renaming or deleting it?), try again"),
        );
    }
    e
}

/// A name of a relative open as UTF-16 ([`crate::wide`]); an embedded
/// NUL is `STATUS_OBJECT_NAME_INVALID`.
fn wide(s: &str) -> Result<Vec<u16>, NTSTATUS> {
    crate::wide::units(s).map_err(|_| STATUS_OBJECT_NAME_INVALID)
}

use crate::wide::nul_terminated as wide_z;

const STATUS_OBJECT_NAME_INVALID: NTSTATUS = 0xC000_0033_u32 as i32;

/// How a relative open is made.
#[derive(Clone, Copy)]
pub struct Open {
    pub access: u32,
    pub share: u32,
    pub disposition: NTCREATEFILE_CREATE_DISPOSITION,
    pub options: NTCREATEFILE_CREATE_OPTIONS,
    /// `OBJ_DONT_REPARSE`: fail with `STATUS_REPARSE_POINT_ENCOUNTERED`
    /// instead of following any reparse point on the way.
    pub dont_reparse: bool,
}

/// Sharing that lets others read and write but not rename or delete: a
/// directory held with it keeps its name while the handle lives.
pub const SHARE_PIN: u32 = FILE_SHARE_READ | FILE_SHARE_WRITE;
/// Full sharing.
pub const SHARE_ALL: u32 = FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE;

/// `NtCreateFile` of `name` (one or more components separated by `\`)
/// relative to the directory `parent`. Synchronous I/O, backup intent.
///
/// Never waits on an oplock holder: every open asks
/// `FILE_COMPLETE_IF_OPLOCKED`, so an open that breaks another process's
/// oplock returns at once with `STATUS_OPLOCK_BREAK_IN_PROGRESS` instead
/// of waiting (with no time limit) for the holder to acknowledge. Such a
/// handle is closed and the open tried again until the call's deadline
/// ([`crate::deadline`], else [`OPLOCK_WAIT`]); past it the entry is busy
/// (a sharing violation: `ResourceBusy`), and the holder, a plugin in its
/// own directory, has held up only its own call.
pub fn open_relative(parent: HANDLE, name: &str, how: &Open) -> Result<OwnedHandle, NTSTATUS> {
    open_relative_units(parent, &wide(name)?, how)
}

/// [`open_relative`] with a name as UTF-16 units (as a listing returns it).
pub fn open_relative_units(
    parent: HANDLE,
    units: &[u16],
    how: &Open,
) -> Result<OwnedHandle, NTSTATUS> {
    let bytes = u16::try_from(units.len() * 2).map_err(|_| STATUS_NAME_TOO_LONG)?;
    let us = UNICODE_STRING {
        Length: bytes,
        MaximumLength: bytes,
        Buffer: units.as_ptr() as *mut u16,
    };
    let mut attributes = OBJ_CASE_INSENSITIVE;
    if how.dont_reparse {
        attributes |= OBJ_DONT_REPARSE;
    }
    let oa = OBJECT_ATTRIBUTES {
        Length: std::mem::size_of::<OBJECT_ATTRIBUTES>() as u32,
        RootDirectory: parent,
        ObjectName: &us,
        Attributes: attributes,
        SecurityDescriptor: std::ptr::null(),
        SecurityQualityOfService: std::ptr::null(),
    };
    let until =
        crate::deadline::current().unwrap_or_else(|| std::time::Instant::now() + OPLOCK_WAIT);
    loop {
        match create(&oa, how)? {
            Some(h) => return Ok(h),
            None if std::time::Instant::now() >= until => return Err(STATUS_SHARING_VIOLATION),
            None => std::thread::sleep(OPLOCK_RETRY),
        }
    }
}

const STATUS_ACCESS_DENIED: NTSTATUS = 0xC000_0022_u32 as i32;

/// Opens the entry `name` of `parent` itself (a link is the link) to be
/// deleted: with the right to clear its read-only attribute where the
/// caller has it ([`delete`] needs it where the system cannot ignore
/// the attribute), without it otherwise.
pub fn open_for_delete(parent: HANDLE, name: &[u16]) -> Result<OwnedHandle, NTSTATUS> {
    let mut how = Open {
        access: DELETE | FILE_READ_ATTRIBUTES | FILE_WRITE_ATTRIBUTES,
        share: SHARE_ALL,
        disposition: FILE_OPEN,
        options: FILE_OPEN_REPARSE_POINT,
        dont_reparse: false,
    };
    match open_relative_units(parent, name, &how) {
        Err(STATUS_ACCESS_DENIED) => {
            how.access = DELETE | FILE_READ_ATTRIBUTES;
            open_relative_units(parent, name, &how)
        }
        other => other,
    }
}

/// How long an open waits for an oplock holder without a call deadline.
pub const OPLOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(30);
const OPLOCK_RETRY: std::time::Duration = std::time::Duration::from_millis(50);
const STATUS_OPLOCK_BREAK_IN_PROGRESS: NTSTATUS = 0x0000_0108;
const STATUS_SHARING_VIOLATION: NTSTATUS = 0xC000_0043_u32 as i32;
/// `FILE_COMPLETE_IF_OPLOCKED` (wdm.h).
const FILE_COMPLETE_IF_OPLOCKED: NTCREATEFILE_CREATE_OPTIONS = 0x0000_0100;

/// One `NtCreateFile`; `Ok(None)` when it broke an oplock whose holder has
/// not acknowledged yet (the handle is closed).
fn create(oa: &OBJECT_ATTRIBUTES, how: &Open) -> Result<Option<OwnedHandle>, NTSTATUS> {
    let mut handle: HANDLE = std::ptr::null_mut();
    // SAFETY: an all-zero IO_STATUS_BLOCK is a valid initial value.
    let mut iosb: IO_STATUS_BLOCK = unsafe { std::mem::zeroed() };
    // SAFETY: `oa` points to a UNICODE_STRING whose buffer the caller
    // keeps alive, and its RootDirectory is a directory handle the caller
    // owns for the call;
    // `handle` and `iosb` are writable; no allocation size and no extended
    // attributes are passed.
    let status = unsafe {
        NtCreateFile(
            &mut handle,
            how.access | SYNCHRONIZE,
            oa,
            &mut iosb,
            std::ptr::null(),
            0,
            how.share,
            how.disposition,
            how.options
                | FILE_SYNCHRONOUS_IO_NONALERT
                | FILE_OPEN_FOR_BACKUP_INTENT
                | FILE_COMPLETE_IF_OPLOCKED,
            std::ptr::null(),
            0,
        )
    };
    if status < 0 {
        return Err(status);
    }
    // SAFETY: NtCreateFile succeeded, so `handle` is a new handle owned by
    // nobody else.
    let handle = unsafe { OwnedHandle::from_raw_handle(handle as _) };
    // A success status: the open completed, the break goes on; using the
    // handle (a delete, a rename) could wait on the holder. Close it.
    if status == STATUS_OPLOCK_BREAK_IN_PROGRESS {
        return Ok(None);
    }
    Ok(Some(handle))
}

const SYNCHRONIZE: u32 = 0x0010_0000;
const STATUS_NAME_TOO_LONG: NTSTATUS = 0xC000_0106_u32 as i32;

/// Opens an allowed root (its configured path: reparse points in it are
/// followed) for relative opens and listing.
pub fn open_root(path: &str) -> io::Result<OwnedHandle> {
    let name = wide_z(path)?;
    // SAFETY: `name` is NUL-terminated and alive for the call; no security
    // attributes, no template.
    let h = unsafe {
        CreateFileW(
            name.as_ptr(),
            super::DIR_ACCESS,
            SHARE_ALL,
            std::ptr::null(),
            OPEN_EXISTING,
            FILE_FLAG_BACKUP_SEMANTICS,
            std::ptr::null_mut(),
        )
    };
    if h == INVALID_HANDLE_VALUE {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new, valid handle owned by nobody else.
    Ok(unsafe { OwnedHandle::from_raw_handle(h as _) })
}

fn raw(h: &OwnedHandle) -> HANDLE {
    h.as_raw_handle() as HANDLE
}

/// Attributes and reparse tag of an open file.
pub fn attr_tag(h: &OwnedHandle) -> io::Result<(u32, u32)> {
    let mut info = FILE_ATTRIBUTE_TAG_INFO {
        FileAttributes: 0,
        ReparseTag: 0,
    };
    // SAFETY: `info` is a writable FILE_ATTRIBUTE_TAG_INFO of the size passed.
    let ok = unsafe {
        GetFileInformationByHandleEx(
            raw(h),
            FileAttributeTagInfo,
            &mut info as *mut _ as *mut _,
            std::mem::size_of::<FILE_ATTRIBUTE_TAG_INFO>() as u32,
        )
    };
    if ok == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((info.FileAttributes, info.ReparseTag))
}

/// Volume serial number and file index: the identity of an open file.
pub fn file_id(h: &OwnedHandle) -> io::Result<(u64, u64)> {
    // SAFETY: all-zero is a valid BY_HANDLE_FILE_INFORMATION.
    let mut info: BY_HANDLE_FILE_INFORMATION = unsafe { std::mem::zeroed() };
    // SAFETY: `info` is writable and of the expected type.
    if unsafe { GetFileInformationByHandle(raw(h), &mut info) } == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((
        u64::from(info.dwVolumeSerialNumber),
        (u64::from(info.nFileIndexHigh) << 32) | u64::from(info.nFileIndexLow),
    ))
}

/// `GetFinalPathNameByHandleW` with `flags` (`VOLUME_NAME_DOS` or
/// `VOLUME_NAME_GUID`).
pub fn final_path(h: &OwnedHandle, flags: u32) -> io::Result<String> {
    let mut buf = vec![0u16; 512];
    loop {
        // SAFETY: `buf` is writable for `buf.len()` units.
        let n =
            unsafe { GetFinalPathNameByHandleW(raw(h), buf.as_mut_ptr(), buf.len() as u32, flags) }
                as usize;
        if n == 0 {
            return Err(io::Error::last_os_error());
        }
        if n < buf.len() {
            buf.truncate(n);
            return String::from_utf16(&buf)
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "final path"));
        }
        if buf.len() >= 1 << 16 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "final path too long",
            ));
        }
        buf.resize(n + 1, 0);
    }
}

/// The raw reparse data of an open reparse point (`FSCTL_GET_REPARSE_POINT`).
pub fn reparse_data(h: &OwnedHandle) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; MAXIMUM_REPARSE_DATA_BUFFER_SIZE as usize];
    let mut got = 0u32;
    // SAFETY: no input; `buf` is writable for its length; `got` is writable;
    // synchronous call (no OVERLAPPED).
    let ok = unsafe {
        DeviceIoControl(
            raw(h),
            FSCTL_GET_REPARSE_POINT,
            std::ptr::null(),
            0,
            buf.as_mut_ptr() as *mut _,
            buf.len() as u32,
            &mut got,
            std::ptr::null_mut(),
        )
    };
    if ok == 0 {
        return Err(io::Error::last_os_error());
    }
    buf.truncate(got as usize);
    Ok(buf)
}

/// One batch of `FILE_FULL_DIR_INFORMATION` records into `buf`; `Ok(0)`
/// when the listing is done.
pub fn query_dir(h: &OwnedHandle, buf: &mut [u8], restart: bool) -> io::Result<usize> {
    // SAFETY: an all-zero IO_STATUS_BLOCK is a valid initial value.
    let mut iosb: IO_STATUS_BLOCK = unsafe { std::mem::zeroed() };
    // SAFETY: synchronous handle (no event, no APC); `buf` is writable for
    // its length; no file name filter.
    let status = unsafe {
        NtQueryDirectoryFile(
            raw(h),
            std::ptr::null_mut(),
            None,
            std::ptr::null(),
            &mut iosb,
            buf.as_mut_ptr() as *mut _,
            buf.len() as u32,
            FileFullDirectoryInformation,
            false,
            std::ptr::null(),
            restart,
        )
    };
    const STATUS_NO_MORE_FILES: NTSTATUS = 0x8000_0006_u32 as i32;
    const STATUS_NO_SUCH_FILE: NTSTATUS = 0xC000_000F_u32 as i32;
    match status {
        STATUS_NO_MORE_FILES | STATUS_NO_SUCH_FILE => Ok(0),
        s if s < 0 => Err(status_error(s)),
        _ => Ok(iosb.Information),
    }
}

/// Marks an open file for deletion: POSIX semantics (the name goes at once)
/// where the filesystem has them, the classic disposition otherwise (wine,
/// Windows before 1809, FAT).
pub fn delete(h: &OwnedHandle) -> io::Result<()> {
    let ex = FILE_DISPOSITION_INFO_EX {
        Flags: FILE_DISPOSITION_FLAG_DELETE
            | FILE_DISPOSITION_FLAG_POSIX_SEMANTICS
            | FILE_DISPOSITION_FLAG_IGNORE_READONLY_ATTRIBUTE,
    };
    // SAFETY: `ex` is a readable FILE_DISPOSITION_INFO_EX of the size passed.
    let ok = unsafe {
        SetFileInformationByHandle(
            raw(h),
            FileDispositionInfoEx,
            &ex as *const _ as *const _,
            std::mem::size_of::<FILE_DISPOSITION_INFO_EX>() as u32,
        )
    };
    if ok != 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    // ERROR_INVALID_PARAMETER, ERROR_INVALID_FUNCTION, ERROR_NOT_SUPPORTED:
    // an older system or another filesystem.
    if !matches!(e.raw_os_error(), Some(87) | Some(1) | Some(50)) {
        return Err(e);
    }
    // The classic disposition refuses a read-only entry (the flag above
    // ignored it): clear the attribute on the handle first (the handle
    // needs FILE_WRITE_ATTRIBUTES for that), and put it back if the entry
    // stays after all.
    let (attrs, _) = attr_tag(h)?;
    let cleared = attrs & FILE_ATTRIBUTE_READONLY != 0
        && set_attributes(h, attrs & !FILE_ATTRIBUTE_READONLY).is_ok();
    let classic = FILE_DISPOSITION_INFO { DeleteFile: true };
    // SAFETY: as above, with FILE_DISPOSITION_INFO.
    let ok = unsafe {
        SetFileInformationByHandle(
            raw(h),
            FileDispositionInfo,
            &classic as *const _ as *const _,
            std::mem::size_of::<FILE_DISPOSITION_INFO>() as u32,
        )
    };
    if ok == 0 {
        let e = io::Error::last_os_error();
        if cleared {
            let _ = set_attributes(h, attrs);
        }
        return Err(e);
    }
    Ok(())
}

/// Sets the attributes of an open file (times unchanged).
fn set_attributes(h: &OwnedHandle, attrs: u32) -> io::Result<()> {
    let info = FILE_BASIC_INFO {
        CreationTime: 0,
        LastAccessTime: 0,
        LastWriteTime: 0,
        ChangeTime: 0,
        // 0 would mean "unchanged".
        FileAttributes: if attrs == 0 {
            FILE_ATTRIBUTE_NORMAL
        } else {
            attrs
        },
    };
    // SAFETY: `info` is a readable FILE_BASIC_INFO of the size passed; zero
    // times leave the times unchanged.
    let ok = unsafe {
        SetFileInformationByHandle(
            raw(h),
            FileBasicInfo,
            &info as *const _ as *const _,
            std::mem::size_of::<FILE_BASIC_INFO>() as u32,
        )
    };
    if ok == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `CreateSymbolicLinkW(link, target, DIRECTORY)`; `link` is a full path
/// whose parents the caller holds open (so none can be renamed meanwhile).
pub fn create_dir_symlink(link: &str, target: &str) -> io::Result<()> {
    let (l, t) = (wide_z(link)?, wide_z(target)?);
    // SAFETY: both strings are NUL-terminated and alive for the call.
    let ok = unsafe {
        CreateSymbolicLinkW(
            l.as_ptr(),
            t.as_ptr(),
            SYMBOLIC_LINK_FLAG_DIRECTORY | SYMBOLIC_LINK_FLAG_ALLOW_UNPRIVILEGED_CREATE,
        )
    };
    if !ok {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
