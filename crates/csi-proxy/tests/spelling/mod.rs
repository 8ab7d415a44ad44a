//! The long and the short (8.3) spelling of an existing path, as the
//! tests need them: the harnesses (`pipes`, `scm`) name paths in their
//! long form (as Windows reports mount points and as the proxy keeps its
//! roots; on GitHub's runners `%TEMP%` itself is spelled short,
//! `RUNNER~1`), and a test may configure the proxy's root by its short
//! spelling on purpose.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use windows_sys::Win32::Storage::FileSystem::{GetLongPathNameW, GetShortPathNameW};

type Convert = unsafe extern "system" fn(*const u16, *mut u16, u32) -> u32;

fn convert(f: Convert, path: &Path) -> std::io::Result<PathBuf> {
    let wide: Vec<u16> = path
        .as_os_str()
        .to_string_lossy()
        .encode_utf16()
        .chain(Some(0))
        .collect();
    let mut buf = vec![0u16; 300];
    loop {
        // SAFETY: `wide` is NUL-terminated; `buf` is writable for its
        // length in UTF-16 units.
        let n = unsafe { f(wide.as_ptr(), buf.as_mut_ptr(), buf.len() as u32) } as usize;
        if n == 0 {
            return Err(std::io::Error::last_os_error());
        }
        if n < buf.len() {
            return Ok(PathBuf::from(String::from_utf16_lossy(&buf[..n])));
        }
        buf = vec![0; n + 1];
    }
}

/// `path` (existing) with every short component expanded.
pub fn long_path(path: &Path) -> PathBuf {
    convert(GetLongPathNameW, path)
        .unwrap_or_else(|e| panic!("GetLongPathNameW({}): {e}", path.display()))
}

/// `path` (existing) with every component that has a short alias spelled
/// by it; the same path where the volume makes no short names.
pub fn short_path(path: &Path) -> PathBuf {
    convert(GetShortPathNameW, path)
        .unwrap_or_else(|e| panic!("GetShortPathNameW({}): {e}", path.display()))
}
