//! `GetLongPathNameW`: the long form of an existing path, for the one
//! spelling of each allowed root (`path::spelling`).

use windows_sys::Win32::Storage::FileSystem::GetLongPathNameW;

/// The long form of `path` (each 8.3 short component replaced by its long
/// name), `None` if the system cannot give it (a missing component, no
/// access to list a parent).
pub fn long_path_name(path: &str) -> Option<String> {
    let wide = crate::wide::nul_terminated(path).ok()?;
    let mut buf: Vec<u16> = vec![0; 300];
    // A path can grow while we ask (a component renamed): a few rounds.
    for _ in 0..4 {
        let cap = u32::try_from(buf.len()).ok()?;
        // SAFETY: `wide` is NUL-terminated; `buf` is writable for `cap`
        // UTF-16 units.
        let n = unsafe { GetLongPathNameW(wide.as_ptr(), buf.as_mut_ptr(), cap) } as usize;
        if n == 0 {
            return None;
        }
        if n < buf.len() {
            return String::from_utf16(&buf[..n]).ok();
        }
        // Too small: `n` is the size needed, its NUL included.
        buf = vec![0; n + 1];
    }
    None
}
