//! The Service Control Manager calls, each wrapped once: handles closed on
//! drop, buffers sized by the API's own "bytes needed" answer, Win32 errors
//! returned as `io::Error`.

use std::io;
use std::ptr;
use windows_sys::Win32::System::Services::{
    CloseServiceHandle, ControlService, EnumDependentServicesW, EnumServicesStatusExW,
    GetServiceKeyNameW, OpenSCManagerW, OpenServiceW, QueryServiceConfig2W, QueryServiceConfigW,
    QueryServiceStatusEx, StartServiceW, ENUM_SERVICE_STATUSW, ENUM_SERVICE_STATUS_PROCESSW,
    QUERY_SERVICE_CONFIGW, SC_ENUM_PROCESS_INFO, SC_HANDLE, SC_MANAGER_CONNECT,
    SC_MANAGER_ENUMERATE_SERVICE, SC_STATUS_PROCESS_INFO, SERVICE_ACTIVE,
    SERVICE_CONFIG_FAILURE_ACTIONS, SERVICE_CONFIG_TRIGGER_INFO, SERVICE_CONTROL_STOP,
    SERVICE_DRIVER, SERVICE_FAILURE_ACTIONSW, SERVICE_STATE_ALL, SERVICE_STATUS,
    SERVICE_STATUS_PROCESS, SERVICE_TRIGGER_INFO, SERVICE_WIN32,
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

use crate::wide::nul_terminated as wide;

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
    let w = wide(name)?;
    // SAFETY: `scm` is open, `w` is NUL-terminated and alive for the call.
    let h = unsafe { OpenServiceW(scm.0, w.as_ptr(), access) };
    if h.is_null() {
        return Err(io::Error::last_os_error());
    }
    Ok(Handle(h))
}

/// What `QueryServiceConfigW` says of a service.
#[derive(Clone, Debug, Default)]
pub struct Config {
    /// `dwServiceType`.
    pub service_type: u32,
    /// `dwStartType`.
    pub start_type: u32,
    pub display_name: String,
    /// `lpDependencies`, load-order groups as `+Group`.
    pub dependencies: Vec<String>,
    /// `lpLoadOrderGroup`.
    pub group: String,
}

/// `dwStartType`, the display name and the services it depends on (group
/// dependencies, `+group`, left out).
pub fn config(svc: &Handle) -> io::Result<(u32, String, Vec<String>)> {
    let c = full_config(svc)?;
    let deps = c
        .dependencies
        .into_iter()
        .filter(|d| !d.starts_with('+'))
        .collect();
    Ok((c.start_type, c.display_name, deps))
}

/// The service's whole configuration ([`Config`]).
pub fn full_config(svc: &Handle) -> io::Result<Config> {
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
                deps.push(s);
            }
        }
        Ok(Config {
            service_type: (*cfg).dwServiceType,
            start_type: (*cfg).dwStartType,
            display_name: from_wide((*cfg).lpDisplayName),
            dependencies: deps,
            group: from_wide((*cfg).lpLoadOrderGroup),
        })
    }
}

/// How many trigger-start entries a service has
/// (`QueryServiceConfig2W(SERVICE_CONFIG_TRIGGER_INFO)`, `cTriggers`); 0
/// from a manager that does not keep them (`ERROR_INVALID_LEVEL`, wine).
pub fn trigger_count(svc: &Handle) -> io::Result<u32> {
    let mut needed = 0u32;
    // SAFETY: a null buffer of size 0 asks for the size needed.
    let ok = unsafe {
        QueryServiceConfig2W(
            svc.0,
            SERVICE_CONFIG_TRIGGER_INFO,
            ptr::null_mut(),
            0,
            &mut needed,
        )
    };
    let e = io::Error::last_os_error();
    if ok != 0 {
        return Ok(0);
    }
    match e.raw_os_error() {
        Some(122) => {}
        // 124 ERROR_INVALID_LEVEL: a manager that does not keep them.
        Some(124) => return Ok(0),
        _ => return Err(e),
    }
    let mut buf = vec![0u64; (needed as usize).div_ceil(8).max(4)];
    let size = (buf.len() * 8) as u32;
    // SAFETY: `buf` is writable for `size` bytes and aligned for
    // SERVICE_TRIGGER_INFO.
    if unsafe {
        QueryServiceConfig2W(
            svc.0,
            SERVICE_CONFIG_TRIGGER_INFO,
            buf.as_mut_ptr().cast(),
            size,
            &mut needed,
        )
    } == 0
    {
        return Err(io::Error::last_os_error());
    }
    let info = buf.as_ptr() as *const SERVICE_TRIGGER_INFO;
    // SAFETY: the call filled the structure at the start of `buf`.
    Ok(unsafe { (*info).cTriggers })
}

/// The failure action types (`SC_ACTION.Type`) of a service
/// (`QueryServiceConfig2W(SERVICE_CONFIG_FAILURE_ACTIONS)`), followed by
/// those of the `FailureActions` value the SCM keeps in the registry (wine
/// answers the call but keeps only the value).
pub fn failure_actions(svc: &Handle, name: &str) -> io::Result<Vec<u32>> {
    let mut types = Vec::new();
    let mut needed = 0u32;
    // SAFETY: a null buffer of size 0 asks for the size needed.
    let ok = unsafe {
        QueryServiceConfig2W(
            svc.0,
            SERVICE_CONFIG_FAILURE_ACTIONS,
            ptr::null_mut(),
            0,
            &mut needed,
        )
    };
    let e = io::Error::last_os_error();
    if ok == 0 && e.raw_os_error() == Some(122) {
        let mut buf = vec![0u64; (needed as usize).div_ceil(8).max(8)];
        let size = (buf.len() * 8) as u32;
        // SAFETY: `buf` is writable for `size` bytes and aligned for
        // SERVICE_FAILURE_ACTIONSW.
        if unsafe {
            QueryServiceConfig2W(
                svc.0,
                SERVICE_CONFIG_FAILURE_ACTIONS,
                buf.as_mut_ptr().cast(),
                size,
                &mut needed,
            )
        } == 0
        {
            return Err(io::Error::last_os_error());
        }
        let fa = buf.as_ptr() as *const SERVICE_FAILURE_ACTIONSW;
        // SAFETY: the call filled the structure; lpsaActions, when not
        // null, points at cActions SC_ACTION entries inside `buf`.
        unsafe {
            let list = (*fa).lpsaActions;
            if !list.is_null() {
                for i in 0..(*fa).cActions as usize {
                    types.push((*list.add(i)).Type as u32);
                }
            }
        }
    } else if ok == 0 && e.raw_os_error() != Some(124) {
        // 124 ERROR_INVALID_LEVEL: a manager that does not keep them.
        return Err(e);
    }
    if let Some(v) = registry_value(name, "FailureActions", RegType::Binary) {
        let bytes: Vec<u8> = v.iter().flat_map(|w| w.to_le_bytes()).collect();
        types.extend(crate::system::scm_rules::parse_failure_actions_value(
            &bytes,
        ));
    }
    Ok(types)
}

#[derive(Clone, Copy)]
enum RegType {
    MultiSz,
    Sz,
    Binary,
}

/// A value of `HKLM\SYSTEM\CurrentControlSet\Services\<name>` (as
/// UTF-16 units; binary values as bytes paired into units, an odd last
/// byte dropped), `None` when absent or of another type.
fn registry_value(name: &str, value: &str, ty: RegType) -> Option<Vec<u16>> {
    use windows_sys::Win32::System::Registry::{
        RegGetValueW, HKEY_LOCAL_MACHINE, RRF_RT_REG_BINARY, RRF_RT_REG_MULTI_SZ, RRF_RT_REG_SZ,
    };
    let key = wide(&format!(r"SYSTEM\CurrentControlSet\Services\{name}")).ok()?;
    let value = wide(value).ok()?;
    let flags = match ty {
        RegType::MultiSz => RRF_RT_REG_MULTI_SZ,
        RegType::Sz => RRF_RT_REG_SZ,
        RegType::Binary => RRF_RT_REG_BINARY,
    };
    let mut buf = vec![0u16; 4096];
    let mut size = (buf.len() * 2) as u32;
    // SAFETY: key and value names are NUL-terminated; `buf` is writable for
    // `size` bytes.
    let r = unsafe {
        RegGetValueW(
            HKEY_LOCAL_MACHINE,
            key.as_ptr(),
            value.as_ptr(),
            flags,
            ptr::null_mut(),
            buf.as_mut_ptr() as *mut _,
            &mut size,
        )
    };
    if r != 0 {
        return None;
    }
    buf.truncate(size as usize / 2);
    Some(buf)
}

/// The load-order group of a service as the registry keeps it (`Group`);
/// empty when it has none.
pub fn registry_group(name: &str) -> String {
    registry_value(name, "Group", RegType::Sz)
        .map(|b| String::from_utf16_lossy(b.split(|c| *c == 0).next().unwrap_or(&[])))
        .unwrap_or_default()
}

/// The groups a service depends on as the registry keeps them
/// (`DependOnGroup`), each as `+Group`.
pub fn registry_group_dependencies(name: &str) -> Vec<String> {
    registry_value(name, "DependOnGroup", RegType::MultiSz)
        .map(|buf| {
            buf.split(|c| *c == 0)
                .map(String::from_utf16_lossy)
                .take_while(|s| !s.is_empty())
                .map(|g| format!("+{g}"))
                .collect()
        })
        .unwrap_or_default()
}

/// The names of every service of any type, Win32 services and drivers
/// (load-order groups hold both).
pub fn all_services_and_drivers(scm: &Handle) -> io::Result<Vec<String>> {
    enumerate(scm, SERVICE_WIN32 | SERVICE_DRIVER)
}

/// The services `name` depends on as the SCM stores them in the registry
/// (`HKLM\SYSTEM\CurrentControlSet\Services\<name>\DependOnService`);
/// wine's QueryServiceConfigW leaves `lpDependencies` empty, so the scan
/// reads both.
pub fn registry_dependencies(name: &str) -> Vec<String> {
    registry_value(name, "DependOnService", RegType::MultiSz)
        .map(|buf| {
            buf.split(|c| *c == 0)
                .map(String::from_utf16_lossy)
                .take_while(|s| !s.is_empty())
                .filter(|s| !s.starts_with('+'))
                .collect()
        })
        .unwrap_or_default()
}

/// The names of every Win32 service.
pub fn all_services(scm: &Handle) -> io::Result<Vec<String>> {
    enumerate(scm, SERVICE_WIN32)
}

fn enumerate(scm: &Handle, types: u32) -> io::Result<Vec<String>> {
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
                types,
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
    let w = wide(display)?;
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
        create_with(name, binary, depends_on, None, SERVICE_WIN32_OWN_PROCESS)
    }

    /// [`create`] in a load-order group, of a service type.
    pub fn create_with(
        name: &str,
        binary: &str,
        depends_on: &[&str],
        group: Option<&str>,
        service_type: u32,
    ) -> io::Result<Handle> {
        // SAFETY: null names mean the local active database.
        let scm = unsafe { OpenSCManagerW(ptr::null(), ptr::null(), SC_MANAGER_ALL_ACCESS) };
        if scm.is_null() {
            return Err(io::Error::last_os_error());
        }
        let scm = Handle(scm);
        let n = wide(name)?;
        let b = wide(binary)?;
        let g = group.map(wide).transpose()?;
        let mut deps: Vec<u16> = Vec::new();
        for d in depends_on {
            deps.extend(crate::wide::units(d)?);
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
                service_type,
                SERVICE_DEMAND_START,
                SERVICE_ERROR_NORMAL,
                b.as_ptr(),
                g.as_ref().map_or(ptr::null(), |g| g.as_ptr()),
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

    /// Sets the failure actions of a service (`types`, each after 1 s)
    /// through `ChangeServiceConfig2W`; `false` when the manager refused.
    pub fn set_failure_actions(h: &Handle, types: &[i32]) -> bool {
        use windows_sys::Win32::System::Services::{ChangeServiceConfig2W, SC_ACTION};
        let mut actions: Vec<SC_ACTION> = types
            .iter()
            .map(|t| SC_ACTION {
                Type: *t,
                Delay: 1000,
            })
            .collect();
        let mut command = wide("cmd.exe /c exit 0").expect("no NUL");
        let fa = SERVICE_FAILURE_ACTIONSW {
            dwResetPeriod: 86400,
            lpRebootMsg: ptr::null_mut(),
            lpCommand: command.as_mut_ptr(),
            cActions: actions.len() as u32,
            lpsaActions: actions.as_mut_ptr(),
        };
        // SAFETY: `fa` and what it points to are alive for the call.
        unsafe {
            ChangeServiceConfig2W(
                h.0,
                SERVICE_CONFIG_FAILURE_ACTIONS,
                &fa as *const _ as *const core::ffi::c_void,
            ) != 0
        }
    }

    /// Writes a service's `FailureActions` registry value as the SCM
    /// keeps it (`types`, each after 1 s).
    pub fn write_failure_actions_value(name: &str, types: &[u32]) -> bool {
        use windows_sys::Win32::System::Registry::{
            RegSetKeyValueW, HKEY_LOCAL_MACHINE, REG_BINARY,
        };
        let mut v: Vec<u8> = Vec::new();
        for w in [86400u32, 0, 0, types.len() as u32, 0] {
            v.extend(w.to_le_bytes());
        }
        for t in types {
            v.extend(t.to_le_bytes());
            v.extend(1000u32.to_le_bytes());
        }
        let key = wide(&format!(r"SYSTEM\CurrentControlSet\Services\{name}")).expect("no NUL");
        let value = wide("FailureActions").expect("no NUL");
        // SAFETY: names NUL-terminated, `v` alive and `v.len()` bytes long.
        unsafe {
            RegSetKeyValueW(
                HKEY_LOCAL_MACHINE,
                key.as_ptr(),
                value.as_ptr(),
                REG_BINARY,
                v.as_ptr().cast(),
                v.len() as u32,
            ) == 0
        }
    }

    pub fn delete(h: &Handle) {
        // SAFETY: an open service handle with DELETE access.
        unsafe { DeleteService(h.0) };
    }
}
