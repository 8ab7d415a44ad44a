//! Win32 errors → host [`Error`] kinds, in one place. Every message names
//! the operation, its subject and the OS text with its code.

use crate::Error;
use std::io;

/// Kinds a Win32 error code is sorted into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    NotFound,
    PermissionDenied,
    InvalidArgument,
    AlreadyExists,
    FailedPrecondition,
    Unsupported,
    Internal,
}

impl Kind {
    /// The host error of this kind carrying `msg`.
    fn error(self, msg: String) -> Error {
        match self {
            Kind::NotFound => Error::NotFound(msg),
            Kind::PermissionDenied => Error::PermissionDenied(msg),
            Kind::InvalidArgument => Error::InvalidArgument(msg),
            Kind::AlreadyExists => Error::AlreadyExists(msg),
            Kind::FailedPrecondition => Error::FailedPrecondition(msg),
            Kind::Unsupported => Error::Unimplemented(msg),
            Kind::Internal => Error::Internal(msg),
        }
    }
}

/// The kind of a Win32 error code.
pub fn kind_of(code: u32) -> Kind {
    match code {
        // FILE_NOT_FOUND, PATH_NOT_FOUND, INVALID_DRIVE, DEV_NOT_EXIST,
        // BAD_NETPATH, BAD_UNIT, NO_SUCH_DEVICE, NOT_FOUND, NO_VOLUME_ID
        2 | 3 | 15 | 55 | 53 | 20 | 433 | 1168 | 1173 => Kind::NotFound,
        // ACCESS_DENIED, PRIVILEGE_NOT_HELD
        5 | 1314 => Kind::PermissionDenied,
        // INVALID_PARAMETER, INVALID_NAME, BAD_PATHNAME, DIRECTORY (not a
        // directory name), FILENAME_EXCED_RANGE
        87 | 123 | 161 | 267 | 206 => Kind::InvalidArgument,
        // FILE_EXISTS, ALREADY_EXISTS
        80 | 183 => Kind::AlreadyExists,
        // WRITE_PROTECT, NOT_READY, SHARING_VIOLATION, LOCK_VIOLATION,
        // DIR_NOT_EMPTY, BUSY, UNRECOGNIZED_VOLUME, DEVICE_IN_USE,
        // DISK_FULL, HANDLE_DISK_FULL, MOUNT_POINT (4390 is
        // NOT_A_REPARSE_POINT)
        19 | 21 | 32 | 33 | 145 | 170 | 1005 | 2404 | 112 | 39 | 4390 => Kind::FailedPrecondition,
        // INVALID_FUNCTION, NOT_SUPPORTED, CALL_NOT_IMPLEMENTED
        1 | 50 | 120 => Kind::Unsupported,
        _ => Kind::Internal,
    }
}

/// A host error for a failed Win32 call: `op` is what we tried (e.g.
/// "GetDiskFreeSpaceExW"), `subject` what on (a volume id, a disk, a path).
pub fn win32(op: &str, subject: &str, e: io::Error) -> Error {
    let msg = format!("{op} {subject}: {e}");
    let kind = match e.raw_os_error() {
        Some(c) => kind_of(c as u32),
        None => match e.kind() {
            io::ErrorKind::NotFound => Kind::NotFound,
            io::ErrorKind::PermissionDenied => Kind::PermissionDenied,
            io::ErrorKind::InvalidInput => Kind::InvalidArgument,
            io::ErrorKind::InvalidData => Kind::Internal,
            io::ErrorKind::Unsupported => Kind::Unsupported,
            _ => Kind::Internal,
        },
    };
    match kind {
        Kind::Unsupported => kind.error(format!(
            "{msg} (the device or this Windows does not support the operation)"
        )),
        _ => kind.error(msg),
    }
}

/// Like [`win32`], but a missing object is reported as `missing` (e.g.
/// "disk 7 does not exist") so the client sees what was not found.
pub fn win32_or_missing(op: &str, subject: &str, e: io::Error, missing: &str) -> Error {
    match win32(op, subject, e) {
        Error::NotFound(msg) => Error::NotFound(format!("{missing} ({msg})")),
        other => other,
    }
}

/// A host error for a failed COM/WMI call (an HRESULT). WMI's own codes and
/// Win32 errors wrapped in an HRESULT are sorted like [`kind_of`].
pub fn hresult(op: &str, subject: &str, e: &windows::core::Error) -> Error {
    use windows::Win32::System::Wmi::{
        WBEM_E_ACCESS_DENIED, WBEM_E_INVALID_CLASS, WBEM_E_INVALID_METHOD,
        WBEM_E_INVALID_NAMESPACE, WBEM_E_INVALID_OBJECT_PATH, WBEM_E_INVALID_PARAMETER,
        WBEM_E_METHOD_NOT_IMPLEMENTED, WBEM_E_NOT_FOUND, WBEM_E_NOT_SUPPORTED,
    };
    let hr = e.code().0;
    let text = e.message();
    let msg = format!(
        "{op} {subject}: {} (HRESULT 0x{:08X})",
        text.trim(),
        hr as u32
    );
    let kind = match hr {
        x if x == WBEM_E_NOT_FOUND.0
            || x == WBEM_E_INVALID_CLASS.0
            || x == WBEM_E_INVALID_NAMESPACE.0
            || x == WBEM_E_INVALID_OBJECT_PATH.0 =>
        {
            Kind::NotFound
        }
        x if x == WBEM_E_ACCESS_DENIED.0 => Kind::PermissionDenied,
        x if x == WBEM_E_NOT_SUPPORTED.0
            || x == WBEM_E_METHOD_NOT_IMPLEMENTED.0
            || x == WBEM_E_INVALID_METHOD.0 =>
        {
            Kind::Unsupported
        }
        // Our parameters are built from validated values: a rejected one
        // is our fault, not the client's.
        x if x == WBEM_E_INVALID_PARAMETER.0 => Kind::Internal,
        // FACILITY_WIN32: the low word is a Win32 error code.
        x if (x as u32) & 0xFFFF_0000 == 0x8007_0000 => kind_of((x as u32) & 0xFFFF),
        _ => Kind::Internal,
    };
    kind.error(msg)
}
