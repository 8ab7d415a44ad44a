//! The Service Control Manager calls, each wrapped once: handles closed on
//! drop, buffers sized by the API's own "bytes needed" answer, Win32 errors
//! returned as `io::Error`.

use std::io;
use std::ptr;
use windows_sys::Win32::System::Services::{
    CloseServiceHandle, ControlService, EnumDependentServicesW, EnumServicesStatusExW,
    GetServiceKeyNameW, OpenSCManagerW, OpenServiceW, QueryServiceConfigW, QueryServiceStatusEx,
    StartServiceW, ENUM_SERVICE_STATUSW, ENUM_SERVICE_STATUS_PROCESSW, QUERY_SERVICE_CONFIGW,
    SC_ENUM_PROCESS_INFO, SC_HANDLE, SC_MANAGER_CONNECT, SC_MANAGER_ENUMERATE_SERVICE,
    SC_STATUS_PROCESS_INFO, SERVICE_ACTIVE, SERVICE_CONTROL_STOP, SERVICE_STATE_ALL,
    SERVICE_STATUS, SERVICE_STATUS_PROCESS, SERVICE_WIN32,
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
    let h = unsafe {
        OpenSCManagerW(
            ptr::null(),
            ptr::null(),
            SC_MANAGER_CONNECT | SC_MANAGER_ENUMERATE_SERVICE,
        )
    };
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

/// `dwStartType`, the display name and the services it depends on (group
/// dependencies, `+group`, left out).
pub fn config(svc: &Handle) -> io::Result<(u32, String, Vec<String>)> {
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
    // `buf`, which is alive; lpDependencies is a double-NUL-terminated list.
    unsafe {
        let mut deps = Vec::new();
        let mut p = (*cfg).lpDependencies as *const u16;
        if !p.is_null() {
            loop {
                let s = from_wide(p);
                if s.is_empty() {
                    break;
                }
                p = p.add(s.encode_utf16().count() + 1);
                if !s.starts_with('+') {
                    deps.push(s);
                }
            }
        }
        Ok(((*cfg).dwStartType, from_wide((*cfg).lpDisplayName), deps))
    }
}

/// The services `name` depends on as the SCM stores them in the registry
/// (`HKLM\SYSTEM\CurrentControlSet\Services\<name>\DependOnService`);
/// wine's QueryServiceConfigW leaves `lpDependencies` empty, so the scan
/// reads both.
pub fn registry_dependencies(name: &str) -> Vec<String> {
    use windows_sys::Win32::System::Registry::{
        RegGetValueW, HKEY_LOCAL_MACHINE, RRF_RT_REG_MULTI_SZ,
    };
    let key = wide(&format!(r"SYSTEM\CurrentControlSet\Services\{name}"));
    let value = wide("DependOnService");
    let mut buf = vec![0u16; 4096];
    let mut size = (buf.len() * 2) as u32;
    // SAFETY: key and value names are NUL-terminated; `buf` is writable for
    // `size` bytes.
    let r = unsafe {
        RegGetValueW(
            HKEY_LOCAL_MACHINE,
            key.as_ptr(),
            value.as_ptr(),
            RRF_RT_REG_MULTI_SZ,
            ptr::null_mut(),
            buf.as_mut_ptr() as *mut _,
            &mut size,
        )
    };
    if r != 0 {
        return Vec::new();
    }
    buf.truncate(size as usize / 2);
    buf.split(|c| *c == 0)
        .map(String::from_utf16_lossy)
        .take_while(|s| !s.is_empty())
        .filter(|s| !s.starts_with('+'))
        .collect()
}

/// The names of every Win32 service.
pub fn all_services(scm: &Handle) -> io::Result<Vec<String>> {
    let mut out = Vec::new();
    let mut resume = 0u32;
    loop {
        let mut needed = 0u32;
        let mut count = 0u32;
        let mut buf = vec![0u64; 8192];
        let size = (buf.len() * 8) as u32;
        // SAFETY: `buf` is writable for `size` bytes and aligned for the
        // entries; the resume handle persists between calls.
        let ok = unsafe {
            EnumServicesStatusExW(
                scm.0,
                SC_ENUM_PROCESS_INFO,
                SERVICE_WIN32,
                windows_sys::Win32::System::Services::SERVICE_STATE_ALL,
                buf.as_mut_ptr() as *mut u8,
                size,
                &mut needed,
                &mut count,
                &mut resume,
                ptr::null(),
            )
        };
        let more = if ok == 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(234) {
                return Err(e);
            }
            true
        } else {
            false
        };
        let list = buf.as_ptr() as *const ENUM_SERVICE_STATUS_PROCESSW;
        for i in 0..count as usize {
            // SAFETY: the call wrote `count` entries whose strings live in `buf`.
            out.push(unsafe { from_wide((*list.add(i)).lpServiceName) });
        }
        if !more || count == 0 && needed == 0 {
            return Ok(out);
        }
    }
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

/// The service key name of the service whose display name is `display`
/// (`ERROR_SERVICE_DOES_NOT_EXIST` when no display name is `display`).
pub fn key_name(scm: &Handle, display: &str) -> io::Result<String> {
    let w = wide(display);
    // A service name has at most 256 characters, plus the NUL.
    let mut buf = [0u16; 257];
    let mut len = buf.len() as u32;
    // SAFETY: `scm` is open, `w` NUL-terminated, `buf` writable for `len`
    // characters; the call updates `len`.
    if unsafe { GetServiceKeyNameW(scm.0, w.as_ptr(), buf.as_mut_ptr(), &mut len) } == 0 {
        return Err(io::Error::last_os_error());
    }
    let n = (len as usize).min(buf.len());
    let end = buf[..n].iter().position(|c| *c == 0).unwrap_or(n);
    Ok(String::from_utf16_lossy(&buf[..end]))
}

/// The names of the active services that depend on `svc`, in the order
/// the SCM gives them (the reverse of start order: stop them in it).
pub fn active_dependents(svc: &Handle) -> io::Result<Vec<String>> {
    dependents(svc, SERVICE_ACTIVE)
}

/// The services that depend on `svc`, directly or not, in `state`
/// (`SERVICE_ACTIVE`, `SERVICE_STATE_ALL`), in the SCM's order.
pub fn all_dependents(svc: &Handle) -> io::Result<Vec<String>> {
    dependents(svc, SERVICE_STATE_ALL)
}

fn dependents(svc: &Handle, state: u32) -> io::Result<Vec<String>> {
    let mut needed = 0u32;
    let mut count = 0u32;
    // SAFETY: a null buffer of size 0 asks for the size needed.
    let ok = unsafe {
        EnumDependentServicesW(svc.0, state, ptr::null_mut(), 0, &mut needed, &mut count)
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
    if unsafe { EnumDependentServicesW(svc.0, state, list, size, &mut needed, &mut count) } == 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the call wrote `count` entries whose strings live in `buf`.
    let out = (0..count as usize)
        .map(|i| unsafe { from_wide((*list.add(i)).lpServiceName) })
        .collect();
    Ok(out)
}

/// Test helpers: create and delete a demand-start own-process service.
#[cfg(test)]
pub mod testing {
    use super::*;
    use windows_sys::Win32::System::Services::{
        CreateServiceW, DeleteService, SC_MANAGER_ALL_ACCESS, SERVICE_ALL_ACCESS,
        SERVICE_DEMAND_START, SERVICE_ERROR_NORMAL, SERVICE_WIN32_OWN_PROCESS,
    };

    pub fn create(name: &str, binary: &str, depends_on: &[&str]) -> io::Result<Handle> {
        // SAFETY: null names mean the local active database.
        let scm = unsafe { OpenSCManagerW(ptr::null(), ptr::null(), SC_MANAGER_ALL_ACCESS) };
        if scm.is_null() {
            return Err(io::Error::last_os_error());
        }
        let scm = Handle(scm);
        let n = wide(name);
        let b = wide(binary);
        let mut deps: Vec<u16> = Vec::new();
        for d in depends_on {
            deps.extend(d.encode_utf16());
            deps.push(0);
        }
        deps.push(0);
        // SAFETY: every string is NUL-terminated (the list double-NUL) and
        // alive for the call.
        let h = unsafe {
            CreateServiceW(
                scm.0,
                n.as_ptr(),
                n.as_ptr(),
                SERVICE_ALL_ACCESS,
                SERVICE_WIN32_OWN_PROCESS,
                SERVICE_DEMAND_START,
                SERVICE_ERROR_NORMAL,
                b.as_ptr(),
                ptr::null(),
                ptr::null_mut(),
                deps.as_ptr(),
                ptr::null(),
                ptr::null(),
            )
        };
        if h.is_null() {
            return Err(io::Error::last_os_error());
        }
        Ok(Handle(h))
    }

    pub fn delete(h: &Handle) {
        // SAFETY: an open service handle with DELETE access.
        unsafe { DeleteService(h.0) };
    }
}
