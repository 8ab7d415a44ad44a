//! The one spelling of each allowed root (`spelling`) with Windows' own
//! 8.3 short names: `win::long_path` against `GetShortPathNameW`.

use super::{Flavor, PathPolicy};
use crate::win::long_path::long_path_name;
use windows_sys::Win32::Storage::FileSystem::GetShortPathNameW;

fn short_path_name(path: &str) -> String {
    let wide = crate::wide::nul_terminated(path).unwrap();
    let mut buf = vec![0u16; 600];
    // SAFETY: `wide` is NUL-terminated; `buf` is writable for 600 units.
    let n = unsafe { GetShortPathNameW(wide.as_ptr(), buf.as_mut_ptr(), 600) } as usize;
    assert!(n > 0 && n < buf.len(), "GetShortPathNameW({path}): {n}");
    String::from_utf16(&buf[..n]).unwrap()
}

/// Wine makes short names too (a hashed `XXXXX~YY`), so a root
/// configured by one is taken back to its long form here as on Windows.
#[test]
fn a_root_configured_short_is_taken_long() {
    let base = std::env::temp_dir().join(format!(
        "csi-proxy-long-directory-name-{}",
        std::process::id()
    ));
    let kubelet = base.join("kubelet root with spaces");
    std::fs::create_dir_all(&kubelet).unwrap();
    let long = long_path_name(&kubelet.display().to_string()).unwrap();
    let short = short_path_name(&long);
    println!("long {long}\nshort {short}");
    // Wine maps the Unix root to Z:.
    let under_wine = std::path::Path::new("Z:\\proc\\self").exists();
    if !short.contains('~') {
        // Windows makes 8.3 names only where the volume is set to.
        assert!(!under_wine, "wine made no short name for {long}: {short}");
        println!("no short names on this volume: nothing to expand");
        std::fs::remove_dir_all(&base).unwrap();
        return;
    }
    assert_eq!(long_path_name(&short).as_deref(), Some(long.as_str()));

    let policy = PathPolicy::new(Flavor::Windows, [short.as_str()]).unwrap();
    let taken = policy.with_os_long_roots().unwrap();
    assert_eq!(taken.roots().len(), 1);
    assert!(
        taken.roots()[0].eq_ignore_ascii_case(&long),
        "{:?} vs {long}",
        taken.roots()
    );
    let below = format!(r"{long}\pods\x");
    assert!(policy.check(&below).is_err(), "short root, long path");
    assert!(taken.check(&below).is_ok(), "long root, long path");
    // A missing part below: the existing part expanded, the rest kept.
    let missing = PathPolicy::new(Flavor::Windows, [format!(r"{short}\not-yet\KUBELE~1")])
        .unwrap()
        .with_os_long_roots()
        .unwrap();
    assert!(
        missing.roots()[0].eq_ignore_ascii_case(&format!(r"{long}\not-yet\KUBELE~1")),
        "{:?}",
        missing.roots()
    );
    assert_eq!(long_path_name(&format!(r"{long}\missing")), None);
    std::fs::remove_dir_all(&base).unwrap();
}
