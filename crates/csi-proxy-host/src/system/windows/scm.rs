//! The Service Control Manager calls. Every call the `windows-service`
//! crate has goes through it: `ServiceManager::local_computer` (OpenSCManagerW),
//! `open_service` (OpenServiceW), `service_name_from_display_name`
//! (GetServiceKeyNameW), `Service::query_status` (QueryServiceStatusEx),
//! `start` (StartServiceW), `stop` (ControlService), and in the test
//! helpers `create_service`, `update_failure_actions`, `delete`. Its
//! errors come back as the `io::Error` of the Win32 call, as before.
//!
//! Kept hand-written, on `Service::raw_handle()` unless said (one line each):
//! - `EnumServicesStatusExW`: the crate has no enumeration, and its
//!   `ServiceManager` gives no raw handle (0.8.1), so [`Enumerator`] opens
//!   its own manager handle with the same rights (connect, enumerate).
//! - `EnumDependentServicesW`: not in the crate.
//! - `QueryServiceConfigW`: the crate's `query_config` refuses the whole
//!   configuration for a `dwStartType` or `dwErrorControl` it does not
//!   name, panics on a null `lpBinaryPathName`/`lpDisplayName`, and its
//!   `ServiceType::from_bits_truncate` drops SERVICE_ADAPTER (0x4),
//!   SERVICE_RECOGNIZER_DRIVER (0x8), SERVICE_USERSERVICE_INSTANCE (0x80)
//!   and SERVICE_PKG_SERVICE (0x200) (the driver bits `scm_rules` reads, 0x1
//!   and 0x2, it keeps); the plan reads every service's and driver's
//!   configuration, where one refusal would lose a group member.
//! - `QueryServiceConfig2W(SERVICE_CONFIG_TRIGGER_INFO)`: not in the crate.
//! - `QueryServiceConfig2W(SERVICE_CONFIG_FAILURE_ACTIONS)`: the crate's
//!   `get_failure_actions` refuses every action type but its four (an
//!   `SC_ACTION_OWN_RESTART`, 4, fails the read) and reports
//!   `ERROR_INVALID_LEVEL` (wine) as an error where we read "none".
//! - The SCM's registry values (`registry.rs`, `RegGetValueW`), where
//!   wine keeps dependencies, groups and failure actions: not the crate's
//!   business.
//! - `ChangeServiceConfigW` (test helper): the crate's `ServiceInfo` has no
//!   load-order group.

use std::ffi::OsStr;
use std::io;
use std::ptr;
use windows_service::service::{ParseRawError, Service, ServiceAccess};
use windows_service::service_manager::{ServiceManager, ServiceManagerAccess};
use windows_sys::Win32::System::Services::{
    CloseServiceHandle, EnumDependentServicesW, EnumServicesStatusExW, OpenSCManagerW,
    QueryServiceConfig2W, QueryServiceConfigW, ENUM_SERVICE_STATUSW, ENUM_SERVICE_STATUS_PROCESSW,
    QUERY_SERVICE_CONFIGW, SC_ENUM_PROCESS_INFO, SC_HANDLE, SC_MANAGER_CONNECT,
    SC_MANAGER_ENUMERATE_SERVICE, SERVICE_ACTIVE, SERVICE_CONFIG_FAILURE_ACTIONS,
    SERVICE_CONFIG_TRIGGER_INFO, SERVICE_DRIVER, SERVICE_ENUMERATE_DEPENDENTS,
    SERVICE_FAILURE_ACTIONSW, SERVICE_STATE_ALL, SERVICE_TRIGGER_INFO, SERVICE_WIN32,
};

use crate::wide::nul_terminated as wide;

/// `SERVICE_ENUMERATE_DEPENDENTS`, which the crate's `ServiceAccess` does
/// not name (its other rights it does).
pub const ENUMERATE_DEPENDENTS: ServiceAccess =
    ServiceAccess::from_bits_retain(SERVICE_ENUMERATE_DEPENDENTS);

/// The rights every manager handle here asks for: connect, enumerate.
const MANAGER_ACCESS: u32 = SC_MANAGER_CONNECT | SC_MANAGER_ENUMERATE_SERVICE;

/// The crate's error as the `io::Error` of the Win32 call it wraps.
fn os(e: windows_service::Error) -> io::Error {
    match e {
        windows_service::Error::Winapi(e) => e,
        other => io::Error::new(io::ErrorKind::InvalidData, other.to_string()),
    }
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

/// The local SCM, for connecting to services (connect and enumerate
/// rights).
pub fn open_manager() -> io::Result<ServiceManager> {
    ServiceManager::local_computer(
        None::<&OsStr>,
        ServiceManagerAccess::from_bits_retain(MANAGER_ACCESS),
    )
    .map_err(os)
}

/// Open service `name` with `access` rights.
pub fn open_service(
    scm: &ServiceManager,
    name: &str,
    access: ServiceAccess,
) -> io::Result<Service> {
    // Our own check first: the same error for an embedded NUL as every
    // other wide string of the crate.
    wide(name)?;
    scm.open_service(name, access).map_err(os)
}

/// What `QueryServiceConfigW` says of a service.
#[derive(Clone, Debug, Default)]
pub struct Config {
    /// `dwServiceType`, every bit.
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
pub fn config(svc: &Service) -> io::Result<(u32, String, Vec<String>)> {
    let c = full_config(svc)?;
    let deps = c
        .dependencies
        .into_iter()
        .filter(|d| !d.starts_with('+'))
        .collect();
    Ok((c.start_type, c.display_name, deps))
}

/// The service's whole configuration ([`Config`]), read raw (see the
/// module's comment for why not through the crate).
pub fn full_config(svc: &Service) -> io::Result<Config> {
    let h = svc.raw_handle();
    let mut needed = 0u32;
    // SAFETY: a null buffer of size 0 asks for the size needed.
    let ok = unsafe { QueryServiceConfigW(h, ptr::null_mut(), 0, &mut needed) };
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
    if unsafe { QueryServiceConfigW(h, cfg, size, &mut needed) } == 0 {
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
pub fn trigger_count(svc: &Service) -> io::Result<u32> {
    let h = svc.raw_handle();
    let mut needed = 0u32;
    // SAFETY: a null buffer of size 0 asks for the size needed.
    let ok = unsafe {
        QueryServiceConfig2W(
            h,
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
            h,
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
pub fn failure_actions(svc: &Service, name: &str) -> io::Result<Vec<u32>> {
    let h = svc.raw_handle();
    let mut types = Vec::new();
    let mut needed = 0u32;
    // SAFETY: a null buffer of size 0 asks for the size needed.
    let ok = unsafe {
        QueryServiceConfig2W(
            h,
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
                h,
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
    types.extend(super::registry::failure_action_types(name));
    Ok(types)
}

/// A manager handle of our own for `EnumServicesStatusExW`, which the
/// crate does not have (nor a way to reach its manager's raw handle);
/// the same rights as [`open_manager`]'s.
pub struct Enumerator(SC_HANDLE);

impl Drop for Enumerator {
    fn drop(&mut self) {
        // SAFETY: the handle came from OpenSCManagerW, is non-null and is
        // closed exactly once.
        unsafe { CloseServiceHandle(self.0) };
    }
}

impl Enumerator {
    /// The local SCM (`OpenSCManagerW`, connect and enumerate rights).
    pub fn open() -> io::Result<Self> {
        // SAFETY: null machine and database names mean the local active
        // database; the handle is owned by the returned value.
        let h = unsafe { OpenSCManagerW(ptr::null(), ptr::null(), MANAGER_ACCESS) };
        if h.is_null() {
            return Err(io::Error::last_os_error());
        }
        Ok(Enumerator(h))
    }

    /// The names of every service of any type, Win32 services and drivers
    /// (load-order groups hold both).
    pub fn all_services_and_drivers(&self) -> io::Result<Vec<String>> {
        self.enumerate(SERVICE_WIN32 | SERVICE_DRIVER)
    }

    /// The names of every Win32 service.
    pub fn all_services(&self) -> io::Result<Vec<String>> {
        self.enumerate(SERVICE_WIN32)
    }

    fn enumerate(&self, types: u32) -> io::Result<Vec<String>> {
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
                    self.0,
                    SC_ENUM_PROCESS_INFO,
                    types,
                    SERVICE_STATE_ALL,
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
}

/// `(dwCurrentState, dwCheckPoint, dwWaitHint)` (`query_status`). A state
/// the crate does not name comes back raw, the rest zero, for
/// `codes::state` to refuse as before.
pub fn status(svc: &Service) -> io::Result<(u32, u32, u32)> {
    match svc.query_status() {
        Ok(st) => Ok((
            st.current_state as u32,
            st.checkpoint,
            u32::try_from(st.wait_hint.as_millis()).unwrap_or(u32::MAX),
        )),
        Err(windows_service::Error::ParseValue(_, ParseRawError::InvalidInteger(state))) => {
            Ok((state, 0, 0))
        }
        Err(e) => Err(os(e)),
    }
}

/// `StartServiceW` without arguments.
pub fn start(svc: &Service) -> io::Result<()> {
    svc.start::<&OsStr>(&[]).map_err(os)
}

/// `ControlService(STOP)`; the status it returns is not read (one the
/// crate cannot parse after an accepted control is no failure).
pub fn stop(svc: &Service) -> io::Result<()> {
    match svc.stop() {
        Ok(_) | Err(windows_service::Error::ParseValue(..)) => Ok(()),
        Err(e) => Err(os(e)),
    }
}

/// The service key name of the service whose display name is `display`
/// (`ERROR_SERVICE_DOES_NOT_EXIST` when no display name is `display`).
pub fn key_name(scm: &ServiceManager, display: &str) -> io::Result<String> {
    wide(display)?;
    let name = scm.service_name_from_display_name(display).map_err(os)?;
    let name = name.to_string_lossy();
    // The name ends at its NUL, whatever length the manager gave.
    Ok(name.split('\0').next().unwrap_or_default().to_string())
}

/// The names of the active services that depend on `svc`, in the order
/// the SCM gives them (the reverse of start order: stop them in it).
pub fn active_dependents(svc: &Service) -> io::Result<Vec<String>> {
    dependents(svc, SERVICE_ACTIVE)
}

/// The services that depend on `svc`, directly or not, in `state`
/// (`SERVICE_ACTIVE`, `SERVICE_STATE_ALL`), in the SCM's order.
pub fn all_dependents(svc: &Service) -> io::Result<Vec<String>> {
    dependents(svc, SERVICE_STATE_ALL)
}

fn dependents(svc: &Service, state: u32) -> io::Result<Vec<String>> {
    let h = svc.raw_handle();
    let mut needed = 0u32;
    let mut count = 0u32;
    // SAFETY: a null buffer of size 0 asks for the size needed.
    let ok =
        unsafe { EnumDependentServicesW(h, state, ptr::null_mut(), 0, &mut needed, &mut count) };
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
    if unsafe { EnumDependentServicesW(h, state, list, size, &mut needed, &mut count) } == 0 {
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
    use std::ffi::OsString;
    use std::path::PathBuf;
    use std::time::Duration;
    use windows_service::service::{
        ServiceAction, ServiceActionType, ServiceDependency, ServiceErrorControl,
        ServiceFailureActions, ServiceFailureResetPeriod, ServiceInfo, ServiceStartType,
        ServiceType,
    };
    use windows_sys::Win32::System::Services::SERVICE_WIN32_OWN_PROCESS;

    pub fn create(name: &str, binary: &str, depends_on: &[&str]) -> io::Result<Service> {
        create_with(name, binary, depends_on, None, SERVICE_WIN32_OWN_PROCESS)
    }

    /// [`create`] in a load-order group, of a service type (every bit
    /// kept).
    pub fn create_with(
        name: &str,
        binary: &str,
        depends_on: &[&str],
        group: Option<&str>,
        service_type: u32,
    ) -> io::Result<Service> {
        let scm = ServiceManager::local_computer(None::<&OsStr>, ServiceManagerAccess::ALL_ACCESS)
            .map_err(os)?;
        let info = ServiceInfo {
            name: OsString::from(name),
            display_name: OsString::from(name),
            service_type: ServiceType::from_bits_retain(service_type),
            start_type: ServiceStartType::OnDemand,
            error_control: ServiceErrorControl::Normal,
            executable_path: PathBuf::from(binary),
            launch_arguments: Vec::new(),
            dependencies: depends_on
                .iter()
                .map(ServiceDependency::from_system_identifier)
                .collect(),
            account_name: None,
            account_password: None,
        };
        let svc = scm
            .create_service(&info, ServiceAccess::ALL_ACCESS)
            .map_err(os)?;
        if let Some(g) = group {
            set_group(&svc, g)?;
        }
        Ok(svc)
    }

    /// `ChangeServiceConfigW` with only the load-order group changed (the
    /// crate's `ServiceInfo` has none).
    fn set_group(svc: &Service, group: &str) -> io::Result<()> {
        use windows_sys::Win32::System::Services::{ChangeServiceConfigW, SERVICE_NO_CHANGE};
        let g = wide(group)?;
        // SAFETY: `svc` is open with SERVICE_CHANGE_CONFIG; `g` is
        // NUL-terminated and alive for the call; null strings mean
        // "unchanged".
        let ok = unsafe {
            ChangeServiceConfigW(
                svc.raw_handle(),
                SERVICE_NO_CHANGE,
                SERVICE_NO_CHANGE,
                SERVICE_NO_CHANGE,
                ptr::null(),
                g.as_ptr(),
                ptr::null_mut(),
                ptr::null(),
                ptr::null(),
                ptr::null(),
                ptr::null(),
            )
        };
        if ok == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Sets the failure actions of a service (`types`, each after 1 s)
    /// through `update_failure_actions` (`ChangeServiceConfig2W`); `false`
    /// when the manager refused or a type is not one the crate names.
    pub fn set_failure_actions(h: &Service, types: &[i32]) -> bool {
        let Ok(actions) = types
            .iter()
            .map(|t| {
                ServiceActionType::from_raw(*t).map(|action_type| ServiceAction {
                    action_type,
                    delay: Duration::from_secs(1),
                })
            })
            .collect::<Result<Vec<_>, _>>()
        else {
            return false;
        };
        h.update_failure_actions(ServiceFailureActions {
            reset_period: ServiceFailureResetPeriod::After(Duration::from_secs(86400)),
            reboot_msg: None,
            command: Some(OsString::from("cmd.exe /c exit 0")),
            actions: Some(actions),
        })
        .is_ok()
    }

    /// `DeleteService` (the handle has DELETE access).
    pub fn delete(h: &Service) {
        let _ = h.delete();
    }
}
