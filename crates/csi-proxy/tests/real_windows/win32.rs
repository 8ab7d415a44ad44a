//! The few Win32 calls the service tests make themselves: which process
//! serves a pipe, and killing a process the way a crash ends it.

use std::io;
use std::os::windows::io::AsRawHandle;
use windows_sys::Win32::Foundation::{
    CloseHandle, GetLastError, ERROR_ACCESS_DENIED, ERROR_NOT_ALL_ASSIGNED, HANDLE, LUID,
};
use windows_sys::Win32::Security::{
    AdjustTokenPrivileges, LookupPrivilegeValueW, LUID_AND_ATTRIBUTES, SE_PRIVILEGE_ENABLED,
    TOKEN_ADJUST_PRIVILEGES, TOKEN_PRIVILEGES, TOKEN_QUERY,
};
use windows_sys::Win32::System::Pipes::GetNamedPipeServerProcessId;
use windows_sys::Win32::System::Threading::{
    GetCurrentProcess, OpenProcess, OpenProcessToken, TerminateProcess, PROCESS_TERMINATE,
};

/// The id of the process that serves pipe `name` (opens one connection to
/// it and closes it again).
pub fn pipe_server_pid(name: &str) -> io::Result<u32> {
    let pipe = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(name)?;
    let mut pid = 0u32;
    // SAFETY: `pipe` is an open pipe client handle for the whole call and
    // `pid` is writable.
    let ok = unsafe { GetNamedPipeServerProcessId(pipe.as_raw_handle() as HANDLE, &mut pid) };
    if ok == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(pid)
}

/// A process or token handle, closed on drop.
struct Handle(HANDLE);

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: a handle OpenProcess or OpenProcessToken returned, closed
        // once.
        unsafe { CloseHandle(self.0) };
    }
}

fn open_for_terminate(pid: u32) -> io::Result<Handle> {
    // SAFETY: plain call; a null result is checked.
    let h = unsafe { OpenProcess(PROCESS_TERMINATE, 0, pid) };
    if h.is_null() {
        return Err(io::Error::last_os_error());
    }
    Ok(Handle(h))
}

/// Enables SeDebugPrivilege in this process's token. An elevated
/// administrator holds it disabled; without it, opening a LocalSystem
/// service's process for PROCESS_TERMINATE is denied.
pub fn enable_debug_privilege() -> io::Result<()> {
    let mut token: HANDLE = std::ptr::null_mut();
    // SAFETY: the pseudo handle of this process; `token` is writable.
    if unsafe {
        OpenProcessToken(
            GetCurrentProcess(),
            TOKEN_ADJUST_PRIVILEGES | TOKEN_QUERY,
            &mut token,
        )
    } == 0
    {
        return Err(io::Error::last_os_error());
    }
    let token = Handle(token);
    let name: Vec<u16> = "SeDebugPrivilege\0".encode_utf16().collect();
    let mut luid = LUID {
        LowPart: 0,
        HighPart: 0,
    };
    // SAFETY: a NUL-terminated name (local system: null) and a writable LUID.
    if unsafe { LookupPrivilegeValueW(std::ptr::null(), name.as_ptr(), &mut luid) } == 0 {
        return Err(io::Error::last_os_error());
    }
    let privileges = TOKEN_PRIVILEGES {
        PrivilegeCount: 1,
        Privileges: [LUID_AND_ATTRIBUTES {
            Luid: luid,
            Attributes: SE_PRIVILEGE_ENABLED,
        }],
    };
    // SAFETY: a token opened with TOKEN_ADJUST_PRIVILEGES, one well-formed
    // TOKEN_PRIVILEGES; the previous state is not asked for.
    let ok = unsafe {
        AdjustTokenPrivileges(
            token.0,
            0,
            &privileges,
            0,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    };
    if ok == 0 {
        return Err(io::Error::last_os_error());
    }
    // It succeeds without enabling a privilege the token does not hold.
    // SAFETY: plain call, right after the one whose outcome it reports.
    if unsafe { GetLastError() } == ERROR_NOT_ALL_ASSIGNED {
        return Err(io::Error::other(
            "the token does not hold SeDebugPrivilege (not an elevated administrator?)",
        ));
    }
    Ok(())
}

/// `TerminateProcess(pid, 1)`: the process ends at once, without running
/// any of its shutdown code (as a crash would end it). A process of
/// another account (a LocalSystem service) can be opened only with
/// SeDebugPrivilege enabled: on access denied it is enabled and the open
/// tried again; the error says which step failed.
pub fn kill(pid: u32) -> io::Result<()> {
    let p = match open_for_terminate(pid) {
        Ok(p) => p,
        Err(e) if e.raw_os_error() == Some(ERROR_ACCESS_DENIED as i32) => {
            enable_debug_privilege().map_err(|pe| {
                io::Error::new(
                    e.kind(),
                    format!(
                        "OpenProcess({pid}, PROCESS_TERMINATE): {e}; enabling SeDebugPrivilege to retry failed: {pe}"
                    ),
                )
            })?;
            open_for_terminate(pid).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!(
                        "OpenProcess({pid}, PROCESS_TERMINATE) with SeDebugPrivilege enabled: {e}"
                    ),
                )
            })?
        }
        Err(e) => return Err(e),
    };
    // SAFETY: `p.0` is a live handle with PROCESS_TERMINATE access.
    if unsafe { TerminateProcess(p.0, 1) } == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// An oplock (read, handle and write caching) held on a file and never
/// acknowledged when broken: what a hostile plugin does in its own
/// directory. Released (the handle closed) on drop.
pub struct HeldOplock {
    file: std::fs::File,
    // Boxed: the kernel writes to both until the request completes.
    _overlapped: Box<windows_sys::Win32::System::IO::OVERLAPPED>,
    _out: Box<windows_sys::Win32::System::Ioctl::REQUEST_OPLOCK_OUTPUT_BUFFER>,
}

impl HeldOplock {
    pub fn take(path: &std::path::Path) -> io::Result<HeldOplock> {
        use std::os::windows::fs::OpenOptionsExt;
        use windows_sys::Win32::Foundation::ERROR_IO_PENDING;
        use windows_sys::Win32::Storage::FileSystem::FILE_FLAG_OVERLAPPED;
        use windows_sys::Win32::System::Ioctl::{
            FSCTL_REQUEST_OPLOCK, OPLOCK_LEVEL_CACHE_HANDLE, OPLOCK_LEVEL_CACHE_READ,
            OPLOCK_LEVEL_CACHE_WRITE, REQUEST_OPLOCK_CURRENT_VERSION, REQUEST_OPLOCK_INPUT_BUFFER,
            REQUEST_OPLOCK_INPUT_FLAG_REQUEST, REQUEST_OPLOCK_OUTPUT_BUFFER,
        };
        use windows_sys::Win32::System::IO::{DeviceIoControl, OVERLAPPED};
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(FILE_FLAG_OVERLAPPED)
            .open(path)?;
        let input = REQUEST_OPLOCK_INPUT_BUFFER {
            StructureVersion: REQUEST_OPLOCK_CURRENT_VERSION as u16,
            StructureLength: std::mem::size_of::<REQUEST_OPLOCK_INPUT_BUFFER>() as u16,
            RequestedOplockLevel: OPLOCK_LEVEL_CACHE_READ
                | OPLOCK_LEVEL_CACHE_HANDLE
                | OPLOCK_LEVEL_CACHE_WRITE,
            Flags: REQUEST_OPLOCK_INPUT_FLAG_REQUEST,
        };
        let mut out = Box::new(REQUEST_OPLOCK_OUTPUT_BUFFER {
            StructureVersion: REQUEST_OPLOCK_CURRENT_VERSION as u16,
            StructureLength: std::mem::size_of::<REQUEST_OPLOCK_OUTPUT_BUFFER>() as u16,
            ..Default::default()
        });
        // SAFETY: an all-zero OVERLAPPED (no event) is a valid initial value.
        let mut overlapped: Box<OVERLAPPED> = Box::new(unsafe { std::mem::zeroed() });
        // SAFETY: `file` is an open overlapped handle; `input` is read during
        // the call; `out` and `overlapped` are boxed and live in the
        // returned value (with the handle) until the handle is closed.
        let ok = unsafe {
            DeviceIoControl(
                file.as_raw_handle() as HANDLE,
                FSCTL_REQUEST_OPLOCK,
                (&input as *const REQUEST_OPLOCK_INPUT_BUFFER).cast(),
                std::mem::size_of::<REQUEST_OPLOCK_INPUT_BUFFER>() as u32,
                (&mut *out as *mut REQUEST_OPLOCK_OUTPUT_BUFFER).cast(),
                std::mem::size_of::<REQUEST_OPLOCK_OUTPUT_BUFFER>() as u32,
                std::ptr::null_mut(),
                &mut *overlapped,
            )
        };
        // Granted: the request stays pending until the oplock is broken.
        // SAFETY: reads the calling thread's last error.
        if ok != 0 || unsafe { GetLastError() } != ERROR_IO_PENDING {
            return Err(io::Error::other("the oplock was not granted"));
        }
        Ok(HeldOplock {
            file,
            _overlapped: overlapped,
            _out: out,
        })
    }
}

impl Drop for HeldOplock {
    fn drop(&mut self) {
        use windows_sys::Win32::System::IO::CancelIoEx;
        // SAFETY: cancels this handle's pending request before `overlapped`
        // and `out` are freed (the handle is closed after this, by `file`).
        unsafe { CancelIoEx(self.file.as_raw_handle() as HANDLE, std::ptr::null()) };
    }
}
