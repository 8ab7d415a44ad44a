//! The Windows storage backend: Disk and Volume operations over I/O
//! controls and the Win32 volume-management API, with WMI (on one COM
//! worker thread) only where Windows has no other public API.
//!
//! See `docs/windows-storage.md` for the mechanism of every operation and
//! what has run where.

mod errors;
mod win32;
pub mod wmi;

#[cfg(test)]
mod tests;
