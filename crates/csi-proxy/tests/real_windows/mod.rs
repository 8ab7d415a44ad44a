//! Shared machinery of the real-Windows tier (`tests/real_windows_*.rs`):
//! knowing whether this process runs on real Windows or under wine, and
//! reporting a test that needs real Windows as skipped, with what it needs,
//! instead of passing it silently.
//!
//! A test of the tier starts with
//! `let Some(_win) = real_windows::require("what it needs") else { return };`
//! and under wine runs only what wine can run before that line.
#![allow(dead_code)]

use std::sync::OnceLock;

pub mod calls;
pub mod disks;
pub mod host_volumes;
pub mod links;
pub mod nvme;
pub mod vhd;

/// True when this process runs under wine: wine's ntdll exports
/// `wine_get_version`, Windows' never does.
pub fn under_wine() -> bool {
    wine_version().is_some()
}

/// The version of the wine this process runs under (`wine_get_version`
/// of its ntdll, e.g. "8.0" or "9.0-rc2"), `None` on Windows. Tests key
/// expectations of wine's own behaviour on it ([`wine_at_least`]): CI runs
/// wine 8 (Debian 12) and wine 9 (ubuntu-24.04).
pub fn wine_version() -> Option<&'static str> {
    static WINE: OnceLock<Option<String>> = OnceLock::new();
    WINE.get_or_init(|| {
        use windows_sys::Win32::System::LibraryLoader::{GetModuleHandleW, GetProcAddress};
        let ntdll: Vec<u16> = "ntdll.dll\0".encode_utf16().collect();
        // SAFETY: a NUL-terminated module name; ntdll is loaded in every
        // process, and the handle is not freed (GetModuleHandleW takes no
        // reference).
        let module = unsafe { GetModuleHandleW(ntdll.as_ptr()) };
        if module.is_null() {
            return None;
        }
        // SAFETY: a valid module handle and a NUL-terminated ASCII name.
        let f = unsafe { GetProcAddress(module, c"wine_get_version".as_ptr().cast()) }?;
        // SAFETY: wine's `const char *wine_get_version(void)`.
        let get: unsafe extern "C" fn() -> *const std::ffi::c_char =
            unsafe { std::mem::transmute(f) };
        // SAFETY: it returns a static NUL-terminated string (or null).
        let v = unsafe { get() };
        Some(if v.is_null() {
            String::new()
        } else {
            // SAFETY: non-null, NUL-terminated, static.
            unsafe { std::ffi::CStr::from_ptr(v) }
                .to_string_lossy()
                .into_owned()
        })
    })
    .as_deref()
}

/// `(major, minor)` of a wine version string ("9.0-rc2" -> (9, 0)); an
/// unreadable one is (0, 0).
pub fn parse_wine_version(v: &str) -> (u32, u32) {
    let mut parts = v
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse::<u32>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(major), Some(minor)) => (major, minor),
        (Some(major), None) => (major, 0),
        _ => (0, 0),
    }
}

/// Under wine, and a wine of at least `major.minor`.
pub fn wine_at_least(major: u32, minor: u32) -> bool {
    wine_version().is_some_and(|v| parse_wine_version(v) >= (major, minor))
}

/// Under wine, and a wine older than `major.minor`.
pub fn wine_before(major: u32, minor: u32) -> bool {
    wine_version().is_some_and(|v| parse_wine_version(v) < (major, minor))
}

/// Proof that the test runs on real Windows.
pub struct RealWindows(());

/// `Some` on real Windows; under wine prints the skip line (the test
/// harness shows it with `--nocapture`; `scripts/real-windows` counts them)
/// and returns `None`.
pub fn require(needs: &str) -> Option<RealWindows> {
    if under_wine() {
        println!("SKIPPED (needs real Windows): {needs}");
        eprintln!("SKIPPED (needs real Windows): {needs}");
        None
    } else {
        Some(RealWindows(()))
    }
}

pub mod account;
pub mod iscsi_target;
pub mod smb;
pub mod win32;
