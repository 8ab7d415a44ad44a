//! The Service Control Manager calls, each wrapped once: handles closed on
//! drop, buffers sized by the API's own "bytes needed" answer, Win32 errors
//! returned as `io::Error`.

use std::io;
use std::ptr;
use windows_sys::Win32::System::Services::{
    CloseServiceHandle, ControlService, EnumDependentServicesW, OpenSCManagerW, OpenServiceW,
    QueryServiceConfigW, QueryServiceStatusEx, StartServiceW, ENUM_SERVICE_STATUSW,
    QUERY_SERVICE_CONFIGW, SC_HANDLE, SC_MANAGER_CONNECT, SC_STATUS_PROCESS_INFO, SERVICE_ACTIVE,
    SERVICE_CONTROL_STOP, SERVICE_STATUS, SERVICE_STATUS_PROCESS,
};

/// An open SCM or service handle.
pub struct Handle(SC_HANDLE);

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: the handle came from OpenSCManagerW/OpenServiceW, is
        // non-null and is closed exactly once.
        unsafe { CloseServiceHandle(self.0) };
    }
}

fn wide(s: &str) -> Vec<u16> {
    s.encode_utf16().chain(std::iter::once(0)).collect()
}

/// Reads a NUL-terminated UTF-16 string (empty for null).
///
/// # Safety
/// `p` is null or points to a NUL-terminated UTF-16 string.
unsafe fn from_wide(p: *const u16) -> String {
    if p.is_null() {
        return String::new();
    }
    let mut n = 0;
    // SAFETY: the string is NUL-terminated (caller's contract).
    while unsafe { *p.add(n) } != 0 {
        n += 1;
    }
    // SAFETY: `n` units before the NUL are readable.
    String::from_utf16_lossy(unsafe { std::slice::from_raw_parts(p, n) })
}

/// The local SCM, for connecting to services.
pub fn open_manager() -> io::Result<Handle> {
    // SAFETY: null machine and database names mean the local active
    // database; the handle is owned by the returned value.
    let h = unsafe { OpenSCManagerW(ptr::null(), ptr::null(), SC_MANAGER_CONNECT) };
    if h.is_null() {
        return Err(io::Error::last_os_error());
    }
    Ok(Handle(h))
}

/// Open service `name` with `access` rights.
pub fn open_service(scm: &Handle, name: &str, access: u32) -> io::Result<Handle> {
    let w = wide(name);
    // SAFETY: `scm` is open, `w` is NUL-terminated and alive for the call.
    let h = unsafe { OpenServiceW(scm.0, w.as_ptr(), access) };
    if h.is_null() {
        return Err(io::Error::last_os_error());
    }
    Ok(Handle(h))
}

/// `dwStartType` and the display name.
pub fn config(svc: &Handle) -> io::Result<(u32, String)> {
    let mut needed = 0u32;
    // SAFETY: a null buffer of size 0 asks for the size needed.
    let ok = unsafe { QueryServiceConfigW(svc.0, ptr::null_mut(), 0, &mut needed) };
    if ok == 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(122) {
            return Err(e);
        }
    }
    // u64 elements: the buffer is aligned for QUERY_SERVICE_CONFIGW.
    let mut buf = vec![0u64; (needed as usize).div_ceil(8).max(8)];
    let size = (buf.len() * 8) as u32;
    let cfg = buf.as_mut_ptr() as *mut QUERY_SERVICE_CONFIGW;
    // SAFETY: `buf` is writable for `size` bytes and suitably aligned.
    if unsafe { QueryServiceConfigW(svc.0, cfg, size, &mut needed) } == 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the call filled the structure; its string pointers point into
    // `buf`, which is alive.
    unsafe { Ok(((*cfg).dwStartType, from_wide((*cfg).lpDisplayName))) }
}

/// `(dwCurrentState, dwCheckPoint, dwWaitHint)`.
pub fn status(svc: &Handle) -> io::Result<(u32, u32, u32)> {
    let mut st = SERVICE_STATUS_PROCESS {
        dwServiceType: 0,
        dwCurrentState: 0,
        dwControlsAccepted: 0,
        dwWin32ExitCode: 0,
        dwServiceSpecificExitCode: 0,
        dwCheckPoint: 0,
        dwWaitHint: 0,
        dwProcessId: 0,
        dwServiceFlags: 0,
    };
    let mut needed = 0u32;
    // SAFETY: `st` is a writable SERVICE_STATUS_PROCESS of the size given.
    let ok = unsafe {
        QueryServiceStatusEx(
            svc.0,
            SC_STATUS_PROCESS_INFO,
            &mut st as *mut _ as *mut u8,
            std::mem::size_of::<SERVICE_STATUS_PROCESS>() as u32,
            &mut needed,
        )
    };
    if ok == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((st.dwCurrentState, st.dwCheckPoint, st.dwWaitHint))
}

/// `StartServiceW` without arguments.
pub fn start(svc: &Handle) -> io::Result<()> {
    // SAFETY: no argument vector.
    if unsafe { StartServiceW(svc.0, 0, ptr::null()) } == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `ControlService(STOP)`.
pub fn stop(svc: &Handle) -> io::Result<()> {
    let mut st = SERVICE_STATUS {
        dwServiceType: 0,
        dwCurrentState: 0,
        dwControlsAccepted: 0,
        dwWin32ExitCode: 0,
        dwServiceSpecificExitCode: 0,
        dwCheckPoint: 0,
        dwWaitHint: 0,
    };
    // SAFETY: `st` is a writable SERVICE_STATUS.
    if unsafe { ControlService(svc.0, SERVICE_CONTROL_STOP, &mut st) } == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The names of the active services that depend on `svc`, in the order
/// the SCM gives them (the reverse of start order: stop them in it).
pub fn active_dependents(svc: &Handle) -> io::Result<Vec<String>> {
    let mut needed = 0u32;
    let mut count = 0u32;
    // SAFETY: a null buffer of size 0 asks for the size needed.
    let ok = unsafe {
        EnumDependentServicesW(
            svc.0,
            SERVICE_ACTIVE,
            ptr::null_mut(),
            0,
            &mut needed,
            &mut count,
        )
    };
    if ok != 0 {
        return Ok(Vec::new());
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() != Some(234) {
        return Err(e);
    }
    let mut buf = vec![0u64; (needed as usize).div_ceil(8).max(4)];
    let size = (buf.len() * 8) as u32;
    let list = buf.as_mut_ptr() as *mut ENUM_SERVICE_STATUSW;
    // SAFETY: `buf` is writable for `size` bytes and aligned for the array.
    if unsafe { EnumDependentServicesW(svc.0, SERVICE_ACTIVE, list, size, &mut needed, &mut count) }
        == 0
    {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the call wrote `count` entries whose strings live in `buf`.
    let out = (0..count as usize)
        .map(|i| unsafe { from_wide((*list.add(i)).lpServiceName) })
        .collect();
    Ok(out)
}
