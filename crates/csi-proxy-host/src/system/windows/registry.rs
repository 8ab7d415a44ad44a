//! The values the SCM keeps under
//! `HKLM\SYSTEM\CurrentControlSet\Services\<name>` (`RegGetValueW`):
//! wine keeps a service's dependencies, load-order group and failure
//! actions there only (its `QueryServiceConfigW` leaves them out), so the
//! scans read both. Not the `windows-service` crate's business.

use crate::wide::nul_terminated as wide;
use std::ptr;

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
pub fn group(name: &str) -> String {
    registry_value(name, "Group", RegType::Sz)
        .map(|b| String::from_utf16_lossy(b.split(|c| *c == 0).next().unwrap_or(&[])))
        .unwrap_or_default()
}

/// The groups a service depends on as the registry keeps them
/// (`DependOnGroup`), each as `+Group`.
pub fn group_dependencies(name: &str) -> Vec<String> {
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

/// The services `name` depends on as the SCM stores them in the registry
/// (`HKLM\SYSTEM\CurrentControlSet\Services\<name>\DependOnService`);
/// wine's QueryServiceConfigW leaves `lpDependencies` empty, so the scan
/// reads both.
pub fn dependencies(name: &str) -> Vec<String> {
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

/// The failure action types of the service's `FailureActions` value
/// (the SCM's own copy of `SERVICE_FAILURE_ACTIONS`); none when absent.
pub fn failure_action_types(name: &str) -> Vec<u32> {
    registry_value(name, "FailureActions", RegType::Binary)
        .map(|v| {
            let bytes: Vec<u8> = v.iter().flat_map(|w| w.to_le_bytes()).collect();
            crate::system::scm_rules::parse_failure_actions_value(&bytes)
        })
        .unwrap_or_default()
}

/// Test helper: writes registry values as the SCM keeps them.
#[cfg(test)]
pub mod testing {
    use super::*;

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
}
