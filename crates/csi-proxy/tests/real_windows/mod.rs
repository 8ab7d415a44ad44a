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
pub mod vhd;

/// True when this process runs under wine: wine's ntdll exports
/// `wine_get_version`, Windows' never does.
pub fn under_wine() -> bool {
    static WINE: OnceLock<bool> = OnceLock::new();
    *WINE.get_or_init(|| {
        use windows_sys::Win32::System::LibraryLoader::{GetModuleHandleW, GetProcAddress};
        let ntdll: Vec<u16> = "ntdll.dll\0".encode_utf16().collect();
        // SAFETY: a NUL-terminated module name; ntdll is loaded in every
        // process, and the handle is not freed (GetModuleHandleW takes no
        // reference).
        let module = unsafe { GetModuleHandleW(ntdll.as_ptr()) };
        if module.is_null() {
            return false;
        }
        // SAFETY: a valid module handle and a NUL-terminated ASCII name.
        unsafe { GetProcAddress(module, c"wine_get_version".as_ptr().cast()) }.is_some()
    })
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
