//! Tests of the path gate: hostile and accept tables for both flavours,
//! property tests, resolution with a fake link reader, and real-filesystem
//! tests with [`OsLinks`] (Unix).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::io;

use proptest::prelude::*;

use super::*;

const WIN_ROOTS: [&str; 2] = [r"C:\var\lib\kubelet", r"C:\work"];
const UNIX_ROOTS: [&str; 2] = ["/var/lib/kubelet", "/work"];

fn win() -> PathPolicy {
    PathPolicy::new(Flavor::Windows, WIN_ROOTS).unwrap()
}

fn unix() -> PathPolicy {
    PathPolicy::new(Flavor::Unix, UNIX_ROOTS).unwrap()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// InvalidArgument
    IA,
    /// PermissionDenied
    PD,
}

fn kind_of(e: &Error) -> Option<Kind> {
    match e {
        Error::InvalidArgument(_) => Some(Kind::IA),
        Error::PermissionDenied(_) => Some(Kind::PD),
        _ => None,
    }
}

fn assert_rejected(policy: &PathPolicy, path: &str, kind: Kind, needle: &str) {
    let err = match policy.check(path) {
        Ok(p) => panic!(
            "{:?}: {path:?} accepted as {:?}",
            policy.flavor(),
            p.as_str()
        ),
        Err(e) => e,
    };
    let msg = err.to_string();
    assert_eq!(
        kind_of(&err),
        Some(kind),
        "{:?}: {path:?}: wrong kind: {msg}",
        policy.flavor()
    );
    assert!(
        msg.contains(needle),
        "{:?}: {path:?}: message {msg:?} lacks {needle:?}",
        policy.flavor()
    );
    assert!(
        msg.contains(&shown(path)),
        "{:?}: {path:?}: message {msg:?} does not name the path",
        policy.flavor()
    );
}

fn long(prefix: &str, total: usize) -> String {
    let mut s = prefix.to_string();
    while s.len() < total {
        s.push('a');
    }
    s
}

// ---------------------------------------------------------------- Windows

fn windows_hostile() -> Vec<(String, Kind, &'static str)> {
    use Kind::*;
    let mut v: Vec<(String, Kind, &'static str)> = [
        // Syntax.
        ("", IA, "is empty"),
        // Upstream gap: prefix match without a separator boundary.
        (
            r"C:\var\lib\kubeletX\a",
            PD,
            r"is outside the allowed roots (C:\var\lib\kubelet, C:\work)",
        ),
        (r"C:\var\lib\kubeletX", PD, "is outside the allowed roots"),
        (
            r"C:\var\lib\kubelet-evil\x",
            PD,
            "is outside the allowed roots",
        ),
        (r"C:\work2\x", PD, "is outside the allowed roots"),
        (r"C:\var\lib", PD, "is outside the allowed roots"),
        (
            r"C:\Windows\System32\config\SAM",
            PD,
            "is outside the allowed roots",
        ),
        (r"D:\var\lib\kubelet\x", PD, "is outside the allowed roots"),
        (r"C:\var\lib\KUBELE~1\x", PD, "is outside the allowed roots"),
        (
            "C:\\var\\lib\\\u{212A}ubelet\\x",
            PD,
            "is outside the allowed roots",
        ),
        // UNC and device paths.
        (
            r"\\server\share\x",
            IA,
            r"is a UNC or device path (\\server\share",
        ),
        (
            r"\\?\C:\var\lib\kubelet\x",
            IA,
            r"is a UNC or device path (\\?\",
        ),
        (r"\\.\PhysicalDrive0", IA, r"is a UNC or device path (\\.\"),
        (r"\\.\pipe\csi-proxy-filesystem-v1", IA, r"(\\.\"),
        (r"\??\C:\var\lib\kubelet\x", IA, r"(\??\"),
        (r"\var\lib\kubelet\x", IA, "rooted at the current drive"),
        ("//server/share/x", IA, "is a UNC or device path"),
        ("//?/C:/var/lib/kubelet", IA, r"(\\?\"),
        // Alternate data streams.
        (
            r"C:\var\lib\kubelet\a:stream",
            IA,
            "contains an alternate data stream (':')",
        ),
        (r"C:\var\lib\kubelet\a::$DATA", IA, "alternate data stream"),
        (r"C:\var\lib\kubelet\x:", IA, "alternate data stream"),
        // Forbidden characters.
        (r"C:\var\lib\kubelet\a<b", IA, "forbidden character ('<')"),
        (r"C:\var\lib\kubelet\a>b", IA, "forbidden character ('>')"),
        (r"C:\var\lib\kubelet\a|b", IA, "forbidden character ('|')"),
        (
            r#"C:\var\lib\kubelet\a"b"#,
            IA,
            "forbidden character ('\"')",
        ),
        (r"C:\var\lib\kubelet\*", IA, "forbidden character ('*')"),
        (r"C:\var\lib\kubelet\a?", IA, "forbidden character ('?')"),
        // Control characters.
        (
            "C:\\var\\lib\\kubelet\\a\u{1}b",
            IA,
            "control character (U+0001)",
        ),
        (
            "C:\\var\\lib\\kubelet\\a\nb",
            IA,
            "control character (U+000A)",
        ),
        ("C:\\var\\lib\\kubelet\\a\rb", IA, "control character"),
        (
            "C:\\var\\lib\\kubelet\\a\u{1b}[31m",
            IA,
            "control character",
        ),
        (
            "C:\\var\\lib\\kubelet\\a\u{7f}",
            IA,
            "control character (U+007F)",
        ),
        (
            "C:\\var\\lib\\kubelet\\a\u{85}",
            IA,
            "control character (U+0085)",
        ),
        (
            "C:\\var\\lib\\kubelet\\a\0b",
            IA,
            "contains a NUL character",
        ),
        ("C:\\var\\lib\\kubelet\0", IA, "NUL character"),
        // DOS device names.
        (
            r"C:\var\lib\kubelet\CON",
            IA,
            "names a reserved device (CON)",
        ),
        (
            r"C:\var\lib\kubelet\nul.txt",
            IA,
            "names a reserved device (NUL)",
        ),
        (
            r"C:\var\lib\kubelet\com1",
            IA,
            "names a reserved device (COM1)",
        ),
        (
            r"C:\var\lib\kubelet\LpT9.log",
            IA,
            "names a reserved device (LPT9)",
        ),
        (
            r"C:\var\lib\kubelet\aux\x",
            IA,
            "names a reserved device (AUX)",
        ),
        (
            r"C:\var\lib\kubelet\prn .txt",
            IA,
            "names a reserved device (PRN)",
        ),
        (
            "C:\\var\\lib\\kubelet\\com\u{b9}",
            IA,
            "names a reserved device (COM\u{b9})",
        ),
        (
            "C:\\var\\lib\\kubelet\\LPT\u{b3}.x",
            IA,
            "names a reserved device (LPT\u{b3})",
        ),
        (
            r"C:\var\lib\kubelet\conin$",
            IA,
            "names a reserved device (CONIN$)",
        ),
        (
            r"C:\var\lib\kubelet\CONOUT$.a.b",
            IA,
            "names a reserved device (CONOUT$)",
        ),
        (
            r"C:\var\lib\kubelet\com0",
            IA,
            "names a reserved device (COM0)",
        ),
        // Trailing dot or space.
        (r"C:\var\lib\kubelet\pods.", IA, "ending in '.'"),
        (r"C:\var\lib\kubelet.\x", IA, "ending in '.'"),
        (r"C:\var\lib\kubelet\pods \x", IA, "ending in a space"),
        (r"C:\var\lib\kubelet\x ", IA, "ending in a space"),
        // Dot-dot and dot.
        (r"C:\var\lib\kubelet\..", IA, r#"contains a ".." component"#),
        (
            r"C:\var\lib\kubelet\..\..\Windows",
            IA,
            r#"contains a ".." component"#,
        ),
        (
            r"C:\var\lib\kubelet\a\..\..\Windows",
            IA,
            r#"contains a ".." component"#,
        ),
        (
            r"C:\var\lib\kubelet\a..b",
            IA,
            r#"contains ".." (rejected anywhere"#,
        ),
        (r"C:\var\lib\kubelet\..a", IA, r#"contains "..""#),
        (r"C:\var\lib\kubelet\.\x", IA, r#"contains a "." component"#),
        (r"C:\var\lib\kubelet\.", IA, r#"contains a "." component"#),
        (r"C:\var\lib\kubelet\x\.", IA, r#"contains a "." component"#),
        // Forward slashes.
        (
            r"c:\var\lib\kubelet/../x",
            IA,
            r"contains '/' (only '\' is a separator)",
        ),
        ("C:/var/lib/kubelet/x", IA, "contains '/'"),
        (r"C:\var\lib\kubelet\a/b", IA, "contains '/'"),
        // Relative and drive-relative.
        (r"var\lib\kubelet\x", IA, "is not absolute"),
        (r"kubelet", IA, "is not absolute"),
        (r" C:\var\lib\kubelet", IA, "is not absolute"),
        (r"1:\x", IA, "is not absolute"),
        (r"C:var\lib\kubelet", IA, "is drive-relative"),
        ("C:", IA, "is drive-relative"),
        // Empty components.
        (r"C:\var\lib\kubelet\\x", IA, "contains an empty component"),
        (r"C:\var\lib\kubelet\x\\", IA, "contains an empty component"),
        (r"C:\\", IA, "contains an empty component"),
    ]
    .into_iter()
    .map(|(p, k, m)| (p.to_string(), k, m))
    .collect();
    // Over-long.
    v.push((
        long(r"C:\var\lib\kubelet\", 261),
        IA,
        "is longer than 260 bytes (261 bytes)",
    ));
    v.push((
        long(r"C:\var\lib\kubelet\", 5000),
        IA,
        "is longer than 260 bytes",
    ));
    // Multi-byte characters count in bytes, like upstream.
    v.push((
        format!(r"C:\var\lib\kubelet\{}", "é".repeat(121)),
        IA,
        "is longer than 260 bytes",
    ));
    v
}

#[test]
fn windows_hostile_table() {
    let policy = win();
    let table = windows_hostile();
    assert!(table.len() >= 40, "only {} Windows cases", table.len());
    for (path, kind, needle) in &table {
        assert_rejected(&policy, path, *kind, needle);
    }
}

#[test]
fn windows_long_component() {
    let policy = PathPolicy::new(Flavor::Windows, [r"D:\"]).unwrap();
    assert_rejected(
        &policy,
        &long(r"D:\", 259),
        Kind::IA,
        "has a component longer than 255 bytes (256 bytes)",
    );
    assert!(policy.check(&long(r"D:\", 258)).is_ok());
}

#[test]
fn windows_accept_table() {
    let policy = win();
    let uid = "a0b1c2d3-e4f5-6789-abcd-ef0123456789";
    let hash = "2ea7c4c0cf8e8e2d2f1d5b38d8c42b8a0f1de2cd6bb0c4d1fd3d5c1e1b0c0a7f";
    let cases: Vec<(String, String, bool)> = vec![
        (
            r"C:\var\lib\kubelet".into(),
            r"C:\var\lib\kubelet".into(),
            true,
        ),
        (
            r"C:\var\lib\kubelet\".into(),
            r"C:\var\lib\kubelet".into(),
            true,
        ),
        (
            r"c:\var\lib\kubelet".into(),
            r"c:\var\lib\kubelet".into(),
            true,
        ),
        (
            r"C:\VAR\Lib\KUBELET\".into(),
            r"C:\VAR\Lib\KUBELET".into(),
            true,
        ),
        (r"C:\work".into(), r"C:\work".into(), true),
        (r"c:\WORK\".into(), r"c:\WORK".into(), true),
        (
            format!(r"c:\var\lib\kubelet\pods\{uid}\volumes\kubernetes.io~csi\pvc-1\mount"),
            format!(r"c:\var\lib\kubelet\pods\{uid}\volumes\kubernetes.io~csi\pvc-1\mount"),
            false,
        ),
        (
            format!(r"C:\var\lib\kubelet\pods\{uid}\volumes\kubernetes.io~csi\pvc-1\mount\"),
            format!(r"C:\var\lib\kubelet\pods\{uid}\volumes\kubernetes.io~csi\pvc-1\mount"),
            false,
        ),
        (
            format!(
                r"C:\var\lib\kubelet\plugins\kubernetes.io\csi\pd.csi.storage.gke.io\{hash}\globalmount"
            ),
            format!(
                r"C:\var\lib\kubelet\plugins\kubernetes.io\csi\pd.csi.storage.gke.io\{hash}\globalmount"
            ),
            false,
        ),
        (
            r"C:\var\lib\kubelet\plugins\kubernetes.io\csi\smb.csi.k8s.io\abc\globalmount".into(),
            r"C:\var\lib\kubelet\plugins\kubernetes.io\csi\smb.csi.k8s.io\abc\globalmount".into(),
            false,
        ),
        (
            r"C:\var\lib\kubelet\plugins\disk.csi.azure.com\csi.sock".into(),
            r"C:\var\lib\kubelet\plugins\disk.csi.azure.com\csi.sock".into(),
            false,
        ),
        (
            r"C:\work\staging\x\".into(),
            r"C:\work\staging\x".into(),
            false,
        ),
        (
            r"C:\var\lib\kubelet\.hidden".into(),
            r"C:\var\lib\kubelet\.hidden".into(),
            false,
        ),
        (
            r"C:\var\lib\kubelet\a b\c d".into(),
            r"C:\var\lib\kubelet\a b\c d".into(),
            false,
        ),
        (
            r"C:\var\lib\kubelet\x.y.z".into(),
            r"C:\var\lib\kubelet\x.y.z".into(),
            false,
        ),
        (
            r"C:\var\lib\kubelet\console\nullable\com10\lpt\CONIN\auxiliary".into(),
            r"C:\var\lib\kubelet\console\nullable\com10\lpt\CONIN\auxiliary".into(),
            false,
        ),
        (
            "C:\\var\\lib\\kubelet\\donn\u{e9}es\\\u{fc}".into(),
            "C:\\var\\lib\\kubelet\\donn\u{e9}es\\\u{fc}".into(),
            false,
        ),
        (
            r"C:\var\lib\kubelet\pvc-1234_abc~def$".into(),
            r"C:\var\lib\kubelet\pvc-1234_abc~def$".into(),
            false,
        ),
        (
            long(r"C:\var\lib\kubelet\", 260),
            long(r"C:\var\lib\kubelet\", 260),
            false,
        ),
    ];
    for (input, want, is_root) in cases {
        let got = policy
            .check(&input)
            .unwrap_or_else(|e| panic!("{input:?} rejected: {e}"));
        assert_eq!(got.as_str(), want, "{input:?}");
        assert_eq!(got.is_root(), is_root, "{input:?}");
        assert_eq!(
            policy.check(got.as_str()).unwrap(),
            got,
            "idempotent {input:?}"
        );
    }
}

// ---------------------------------------------------------------- Unix

fn unix_hostile() -> Vec<(String, Kind, &'static str)> {
    use Kind::*;
    let mut v: Vec<(String, Kind, &'static str)> = [
        ("", IA, "is empty"),
        (
            "/var/lib/kubeletX",
            PD,
            "is outside the allowed roots (/var/lib/kubelet, /work)",
        ),
        ("/var/lib/kubeletX/a", PD, "is outside the allowed roots"),
        ("/var/lib/kubelet-evil", PD, "is outside the allowed roots"),
        ("/var/lib", PD, "is outside the allowed roots"),
        ("/", PD, "is outside the allowed roots"),
        ("/etc/passwd", PD, "is outside the allowed roots"),
        ("/VAR/LIB/KUBELET/x", PD, "is outside the allowed roots"),
        ("/work2", PD, "is outside the allowed roots"),
        ("/proc/self/root/etc", PD, "is outside the allowed roots"),
        (
            "/var/lib/kubelet/../../etc",
            IA,
            r#"contains a ".." component"#,
        ),
        ("/var/lib/kubelet/..", IA, r#"contains a ".." component"#),
        (
            "/var/lib/kubelet/../kubelet/x",
            IA,
            r#"contains a ".." component"#,
        ),
        (
            "/var/lib/kubelet/x/../../../etc/shadow",
            IA,
            r#"contains a ".." component"#,
        ),
        (
            "/var/lib/kubelet/a..b",
            IA,
            r#"contains ".." (rejected anywhere"#,
        ),
        ("/var/lib/kubelet/..a", IA, r#"contains "..""#),
        ("/var/lib/kubelet/a..", IA, r#"contains "..""#),
        (
            "var/lib/kubelet",
            IA,
            "is not absolute (must start with '/')",
        ),
        ("./var/lib/kubelet", IA, "is not absolute"),
        ("../var/lib/kubelet", IA, "is not absolute"),
        ("~/x", IA, "is not absolute"),
        (" /var/lib/kubelet", IA, "is not absolute"),
        (r"\var\lib\kubelet", IA, "is not absolute"),
        (r"C:\var\lib\kubelet", IA, "is not absolute"),
        (
            "//var/lib/kubelet",
            IA,
            "contains an empty component (doubled separator '//')",
        ),
        ("/var/lib//kubelet/x", IA, "contains an empty component"),
        ("/var/lib/kubelet//x", IA, "contains an empty component"),
        ("/var/lib/kubelet/x//", IA, "contains an empty component"),
        ("//", IA, "contains an empty component"),
        ("/var/lib/kubelet/\0x", IA, "contains a NUL character"),
        ("/var/lib/kubelet\0", IA, "NUL character"),
        ("/var/lib/kubelet\0/../etc", IA, "NUL character"),
        ("/var/lib/kubelet/a\nb", IA, "control character (U+000A)"),
        ("/var/lib/kubelet/a\rb", IA, "control character (U+000D)"),
        ("/var/lib/kubelet/a\tb", IA, "control character (U+0009)"),
        (
            "/var/lib/kubelet/\u{1b}[31m",
            IA,
            "control character (U+001B)",
        ),
        ("/var/lib/kubelet/\u{7f}", IA, "control character (U+007F)"),
        ("/var/lib/kubelet/\u{9b}", IA, "control character (U+009B)"),
        ("/var/lib/kubelet/./x", IA, r#"contains a "." component"#),
        ("/var/lib/kubelet/.", IA, r#"contains a "." component"#),
        ("/var/lib/kubelet/x/.", IA, r#"contains a "." component"#),
        ("/./var/lib/kubelet", IA, r#"contains a "." component"#),
    ]
    .into_iter()
    .map(|(p, k, m)| (p.to_string(), k, m))
    .collect();
    v.push((
        long("/var/lib/kubelet/x/", 4097),
        IA,
        "is longer than 4096 bytes (4097 bytes)",
    ));
    v.push((
        long("/var/lib/kubelet/", 100_000),
        IA,
        "is longer than 4096 bytes",
    ));
    v.push((
        long("/var/lib/kubelet/", 17 + 256),
        IA,
        "has a component longer than 255 bytes",
    ));
    v
}

#[test]
fn unix_hostile_table() {
    let policy = unix();
    let table = unix_hostile();
    assert!(table.len() >= 40, "only {} Unix cases", table.len());
    for (path, kind, needle) in &table {
        assert_rejected(&policy, path, *kind, needle);
    }
}

#[test]
fn unix_accept_table() {
    let policy = unix();
    let uid = "a0b1c2d3-e4f5-6789-abcd-ef0123456789";
    let cases: Vec<(String, String, bool)> = vec![
        ("/var/lib/kubelet".into(), "/var/lib/kubelet".into(), true),
        ("/var/lib/kubelet/".into(), "/var/lib/kubelet".into(), true),
        ("/work".into(), "/work".into(), true),
        ("/work/".into(), "/work".into(), true),
        (
            format!("/var/lib/kubelet/pods/{uid}/volumes/kubernetes.io~csi/pvc-1/mount"),
            format!("/var/lib/kubelet/pods/{uid}/volumes/kubernetes.io~csi/pvc-1/mount"),
            false,
        ),
        (
            "/var/lib/kubelet/plugins/kubernetes.io/csi/pd.csi.storage.gke.io/abc/globalmount/"
                .into(),
            "/var/lib/kubelet/plugins/kubernetes.io/csi/pd.csi.storage.gke.io/abc/globalmount"
                .into(),
            false,
        ),
        ("/work/x/y".into(), "/work/x/y".into(), false),
        (
            "/var/lib/kubelet/.hidden".into(),
            "/var/lib/kubelet/.hidden".into(),
            false,
        ),
        (
            r"/var/lib/kubelet/a\b".into(),
            r"/var/lib/kubelet/a\b".into(),
            false,
        ),
        (
            "/var/lib/kubelet/CON".into(),
            "/var/lib/kubelet/CON".into(),
            false,
        ),
        (
            "/var/lib/kubelet/a:b".into(),
            "/var/lib/kubelet/a:b".into(),
            false,
        ),
        (
            "/var/lib/kubelet/x. ".into(),
            "/var/lib/kubelet/x. ".into(),
            false,
        ),
        (
            long("/var/lib/kubelet/", 17 + 255),
            long("/var/lib/kubelet/", 17 + 255),
            false,
        ),
    ];
    for (input, want, is_root) in cases {
        let got = policy
            .check(&input)
            .unwrap_or_else(|e| panic!("{input:?} rejected: {e}"));
        assert_eq!(got.as_str(), want, "{input:?}");
        assert_eq!(got.is_root(), is_root, "{input:?}");
        assert_eq!(
            policy.check(got.as_str()).unwrap(),
            got,
            "idempotent {input:?}"
        );
    }
    // Exactly 4096 bytes is accepted.
    let mut p = String::from("/var/lib/kubelet");
    while p.len() + 11 <= 4096 {
        p.push_str("/aaaaaaaaaa");
    }
    while p.len() < 4096 {
        p.push('b');
    }
    assert_eq!(p.len(), 4096);
    assert!(policy.check(&p).is_ok());
}

// ---------------------------------------------------------------- policy

#[test]
fn policy_roots() {
    let p = PathPolicy::new(
        Flavor::Windows,
        [
            r"C:\var\lib\kubelet\\",
            r"c:\VAR\lib\kubelet",
            r"D:\",
            r"E:\\",
        ],
    )
    .unwrap();
    assert_eq!(p.roots(), [r"C:\var\lib\kubelet", r"D:\", r"E:\"]);
    assert_eq!(p.flavor(), Flavor::Windows);
    assert!(p.check(r"D:\anything").is_ok());
    assert!(p.check(r"D:\").unwrap().is_root());
    assert!(p.check(r"e:\").unwrap().is_root());

    let u = PathPolicy::new(Flavor::Unix, vec!["/var/lib/kubelet//".to_string()]).unwrap();
    assert_eq!(u.roots(), ["/var/lib/kubelet"]);
    let all = PathPolicy::new(Flavor::Unix, ["/"]).unwrap();
    assert_eq!(all.roots(), ["/"]);
    assert!(all.check("/etc").is_ok());

    for bad in [
        r"var\lib",
        r"C:\a\..\b",
        r"\\srv\share",
        r"C:\a:b",
        "",
        r"C:\CON",
    ] {
        let e = PathPolicy::new(Flavor::Windows, [bad]).unwrap_err();
        assert_eq!(kind_of(&e), Some(Kind::IA), "{bad:?}");
        assert!(e.to_string().contains("invalid allowed root"), "{e}");
    }
    for bad in ["relative", "/a/../b", "/a\0"] {
        let e = PathPolicy::new(Flavor::Unix, [bad]).unwrap_err();
        assert_eq!(kind_of(&e), Some(Kind::IA), "{bad:?}");
    }
    let e = PathPolicy::new(Flavor::Unix, Vec::<String>::new()).unwrap_err();
    assert!(e.to_string().contains("no allowed roots"));
}

#[test]
fn native_flavor() {
    assert_eq!(
        Flavor::NATIVE,
        if cfg!(windows) {
            Flavor::Windows
        } else {
            Flavor::Unix
        }
    );
    assert_eq!(Flavor::Windows.separator(), '\\');
    assert_eq!(Flavor::Unix.separator(), '/');
}

#[test]
fn long_paths_are_truncated_in_messages() {
    let path = long("/var/lib/kubelet/", 100_000);
    let msg = unix().check(&path).unwrap_err().to_string();
    assert!(msg.len() < 500, "{} bytes", msg.len());
    assert!(msg.contains("... (100000 bytes)"), "{msg}");
    // Control characters are escaped, never written raw into logs.
    let msg = unix()
        .check("/var/lib/kubelet/a\nb")
        .unwrap_err()
        .to_string();
    assert!(!msg.contains('\n'));
    assert!(msg.contains(r"a\nb"));
}

#[test]
fn reserved_device_names() {
    for n in [
        "con",
        "CON.txt",
        "nul.tar.gz",
        "Com9",
        "lpt1 ",
        "CONIN$",
        "aux .x",
    ] {
        assert!(rules::reserved_device(n).is_some(), "{n:?}");
    }
    for n in [
        "conx", "com10", "lpt", "CONIN", "xcon", ".con", "nul_", "con-fig",
    ] {
        assert!(rules::reserved_device(n).is_none(), "{n:?}");
    }
}

// ---------------------------------------------------------------- proptest

/// Independent of `rules`: the DOS device names, case-insensitive, before
/// the first dot, trailing spaces ignored.
fn is_reserved_name(c: &str) -> bool {
    let base = c
        .split('.')
        .next()
        .unwrap()
        .trim_end_matches(' ')
        .to_ascii_uppercase();
    matches!(
        base.as_str(),
        "CON" | "PRN" | "AUX" | "NUL" | "CONIN$" | "CONOUT$"
    ) || ((base.starts_with("COM") || base.starts_with("LPT"))
        && matches!(
            &base[3..],
            "0" | "1"
                | "2"
                | "3"
                | "4"
                | "5"
                | "6"
                | "7"
                | "8"
                | "9"
                | "\u{b9}"
                | "\u{b2}"
                | "\u{b3}"
        ))
}

fn safe_component(flavor: Flavor) -> BoxedStrategy<String> {
    let re = match flavor {
        // Ends in neither '.' nor ' '.
        Flavor::Windows => "[A-Za-z0-9_~$é-]([A-Za-z0-9_~$ .é-]{0,14}[A-Za-z0-9_~$é-])?",
        Flavor::Unix => "[A-Za-z0-9_~$é:\\\\<>*?|\"-][A-Za-z0-9_~$ .é:\\\\<>*?|\"-]{0,15}",
    };
    re.prop_filter("no '..', not '.', no device name", move |c| {
        !c.contains("..") && c != "." && (flavor == Flavor::Unix || !is_reserved_name(c))
    })
    .boxed()
}

fn roots_of(flavor: Flavor) -> [&'static str; 2] {
    match flavor {
        Flavor::Windows => WIN_ROOTS,
        Flavor::Unix => UNIX_ROOTS,
    }
}

fn policy_of(flavor: Flavor) -> PathPolicy {
    PathPolicy::new(flavor, roots_of(flavor)).unwrap()
}

fn build(flavor: Flavor, root: &str, comps: &[String]) -> String {
    let sep = flavor.separator();
    let mut s = root.to_string();
    for c in comps {
        s.push(sep);
        s.push_str(c);
    }
    s
}

fn hostile_element(flavor: Flavor) -> BoxedStrategy<String> {
    let common = vec![
        "..", ".", "", "a\0b", "a\u{1}b", "a\nb", "a\u{7f}b", "\u{85}", "a..b", "..x", "x..",
    ];
    let windows = vec![
        "a:b",
        "x:",
        "CON",
        "nul.txt",
        "com1",
        "Lpt3.x",
        "conout$",
        "COM\u{b2}",
        "aux .c",
        "x.",
        "x ",
        "a<b",
        "a>b",
        "a|b",
        "a\"b",
        "a*b",
        "a?b",
        "a/b",
    ];
    let mut all: Vec<String> = common.into_iter().map(String::from).collect();
    if flavor == Flavor::Windows {
        all.extend(windows.into_iter().map(String::from));
    }
    all.push("a".repeat(256));
    proptest::sample::select(all).boxed()
}

fn flavors() -> impl Strategy<Value = Flavor> {
    prop_oneof![Just(Flavor::Windows), Just(Flavor::Unix)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// (a) Safe components under a root are accepted, normalised and
    /// idempotent.
    #[test]
    fn prop_safe_paths_accepted(
        (flavor, comps) in flavors().prop_flat_map(|f| (Just(f), proptest::collection::vec(safe_component(f), 0..7))),
        root_idx in 0usize..2,
        trailing in any::<bool>(),
        upper in any::<bool>(),
    ) {
        let policy = policy_of(flavor);
        let mut root = roots_of(flavor)[root_idx].to_string();
        if upper && flavor == Flavor::Windows {
            root = root.to_ascii_uppercase();
        }
        let want = build(flavor, &root, &comps);
        let mut input = want.clone();
        if trailing {
            input.push(flavor.separator());
        }
        let got = policy.check(&input);
        prop_assert!(got.is_ok(), "{:?} rejected: {}", input, got.unwrap_err());
        let got = got.unwrap();
        prop_assert_eq!(got.as_str(), want.as_str());
        prop_assert_eq!(got.is_root(), comps.is_empty());
        prop_assert_eq!(policy.check(got.as_str()).unwrap(), got.clone());
        // Lexical resolution with nothing on disk gives the same path.
        let r = policy.resolve(&input, &Fake::missing(), true).unwrap();
        prop_assert_eq!(r.as_str(), got.as_str());
    }

    /// (b) One hostile element anywhere in a good path is rejected.
    #[test]
    fn prop_hostile_element_rejected(
        (flavor, comps, hostile) in flavors().prop_flat_map(|f| (
            Just(f),
            proptest::collection::vec(safe_component(f), 1..6),
            hostile_element(f),
        )),
        root_idx in 0usize..2,
        at in any::<proptest::sample::Index>(),
    ) {
        let policy = policy_of(flavor);
        let mut comps = comps;
        // Insert before an existing component, so an empty element is an
        // interior one (a single trailing separator is legal).
        let i = at.index(comps.len());
        comps.insert(i, hostile.clone());
        let path = build(flavor, roots_of(flavor)[root_idx], &comps);
        let res = policy.check(&path);
        prop_assert!(res.is_err(), "{:?} accepted", path);
        let e = res.unwrap_err();
        prop_assert_eq!(kind_of(&e), Some(Kind::IA), "{:?}: {}", path, e);
    }

    /// (b') A root followed by more characters without a separator is
    /// outside that root.
    #[test]
    fn prop_no_prefix_match(
        (flavor, suffix, comps) in flavors().prop_flat_map(|f| (
            Just(f),
            "[A-Za-z0-9_-]{1,8}",
            proptest::collection::vec(safe_component(f), 0..4),
        )),
        root_idx in 0usize..2,
    ) {
        let policy = policy_of(flavor);
        let root = format!("{}{}", roots_of(flavor)[root_idx], suffix);
        let path = build(flavor, &root, &comps);
        let e = policy.check(&path).unwrap_err();
        prop_assert_eq!(kind_of(&e), Some(Kind::PD), "{:?}: {}", path, e);
    }

    /// (c) Arbitrary strings never panic; whatever is accepted is clean.
    #[test]
    fn prop_never_panics(
        flavor in flavors(),
        s in prop_oneof![
            any::<String>(),
            "[\\\\/:.a-zA-Z\\x00 ?*<>|\"~$\u{b9}\\n]{0,40}",
            "(C:\\\\var\\\\lib\\\\kubelet|/var/lib/kubelet)[\\\\/:.a-zA-Z\\x00 ?*<>|\"~$\u{b9}]{0,40}",
        ],
    ) {
        let policy = policy_of(flavor);
        if let Ok(p) = policy.check(&s) {
            prop_assert!(!p.as_str().contains(".."));
            prop_assert!(!p.as_str().chars().any(|c| c.is_control()));
            prop_assert_eq!(policy.check(p.as_str()).unwrap(), p.clone());
            prop_assert!(roots_of(flavor).iter().any(|r| rules::within(flavor, p.as_str(), r)));
        }
        let _ = policy.resolve(&s, &Fake::missing(), false);
        let _ = policy.resolve(&s, &Fake::existing(), true);
    }

    /// Random link graphs: resolution never panics, always terminates, and an
    /// accepted result lies inside a root.
    #[test]
    fn prop_random_links_stay_inside(
        flavor in flavors(),
        edges in proptest::collection::vec((0usize..6, 0usize..10), 0..8),
        start in 0usize..6,
        tail in "[a-z]{1,3}",
        follow in any::<bool>(),
    ) {
        // Nodes: link locations under the root; targets: a mix of inside,
        // outside, relative and looping names.
        let nodes = ["/var/lib/kubelet/a", "/var/lib/kubelet/b", "/var/lib/kubelet/c/d",
                     "/var/lib/kubelet", "/work/e", "/var/lib/kubelet/c"];
        let targets = ["/var/lib/kubelet/b", "../b", "/etc", "../../..", "a", "/work",
                       "../c/d", "d/../../a", "/var/lib/kubelet/c", "../../lib/kubelet/zz"];
        let mut fake = Fake::existing();
        for (n, t) in &edges {
            fake.link(flavor, nodes[*n], &native(flavor, targets[*t]));
        }
        let policy = policy_of(flavor);
        let path = native(flavor, &format!("{}/{}", nodes[start], tail));
        if let Ok(r) = policy.resolve(&path, &fake, follow) {
            prop_assert!(roots_of(flavor).iter().any(|root| rules::within(flavor, r.as_str(), root))
                || fake.resolved_roots_contain(flavor, &policy, r.as_str()),
                "{:?} resolved to {:?} outside the roots", path, r.as_str());
        }
    }
}

// ---------------------------------------------------------------- resolution

/// Converts a Unix-style test path to the flavour: `/a/b` -> `C:\a\b`,
/// relative `../x` -> `..\x`.
fn native(flavor: Flavor, p: &str) -> String {
    match flavor {
        Flavor::Unix => p.to_string(),
        Flavor::Windows => {
            let s = p.replace('/', "\\");
            if p.starts_with('/') {
                format!("C:{s}")
            } else {
                s
            }
        }
    }
}

/// A fake filesystem: listed entries, everything else `default`.
struct Fake {
    map: HashMap<String, Link>,
    default: Link,
    calls: Cell<usize>,
    asked: RefCell<Vec<String>>,
    fail: Option<String>,
}

impl Fake {
    fn with_default(default: Link) -> Self {
        Fake {
            map: HashMap::new(),
            default,
            calls: Cell::new(0),
            asked: RefCell::new(Vec::new()),
            fail: None,
        }
    }
    /// Every path not listed exists and is not a link.
    fn existing() -> Self {
        Self::with_default(Link::NotALink)
    }
    /// Every path not listed does not exist.
    fn missing() -> Self {
        Self::with_default(Link::NotFound)
    }
    fn set(&mut self, flavor: Flavor, at: &str, l: Link) -> &mut Self {
        self.map.insert(native(flavor, at), l);
        self
    }
    /// A symlink at `at` (Unix-style, converted) with `target` as stored.
    fn link(&mut self, flavor: Flavor, at: &str, target: &str) -> &mut Self {
        self.set(flavor, at, Link::Symlink(target.to_string()))
    }
    fn resolved_roots_contain(&self, flavor: Flavor, policy: &PathPolicy, p: &str) -> bool {
        policy.roots().iter().any(|root| {
            policy
                .resolve(root, self, true)
                .is_ok_and(|r| rules::within(flavor, p, r.as_str()))
        })
    }
}

impl LinkReader for Fake {
    fn read_link(&self, path: &str) -> io::Result<Link> {
        self.calls.set(self.calls.get() + 1);
        self.asked.borrow_mut().push(path.to_string());
        if self.fail.as_deref() == Some(path) {
            return Err(io::Error::new(io::ErrorKind::PermissionDenied, "denied"));
        }
        Ok(self
            .map
            .get(path)
            .cloned()
            .unwrap_or_else(|| self.default.clone()))
    }
}

const BOTH: [Flavor; 2] = [Flavor::Windows, Flavor::Unix];

fn resolve_ok(flavor: Flavor, fake: &Fake, path: &str, follow: bool) -> ResolvedPath {
    let path = native(flavor, path);
    policy_of(flavor)
        .resolve(&path, fake, follow)
        .unwrap_or_else(|e| panic!("{flavor:?}: {path:?}: {e}"))
}

fn resolve_err(flavor: Flavor, fake: &Fake, path: &str, follow: bool, kind: Kind, needle: &str) {
    let path = native(flavor, path);
    match policy_of(flavor).resolve(&path, fake, follow) {
        Ok(r) => panic!("{flavor:?}: {path:?} resolved to {:?}", r.as_str()),
        Err(e) => {
            assert_eq!(kind_of(&e), Some(kind), "{flavor:?}: {path:?}: {e}");
            let msg = e.to_string();
            assert!(
                msg.contains(needle),
                "{flavor:?}: {path:?}: {msg:?} lacks {needle:?}"
            );
            assert!(
                msg.contains(&shown(&path)),
                "{msg:?} does not name the path"
            );
        }
    }
}

#[test]
fn link_inside_to_outside_is_refused() {
    for f in BOTH {
        let mut fake = Fake::existing();
        fake.link(f, "/var/lib/kubelet/pods/evil", &native(f, "/etc"));
        let esc = "escapes the allowed roots through a link";
        resolve_err(
            f,
            &fake,
            "/var/lib/kubelet/pods/evil/passwd",
            false,
            Kind::PD,
            esc,
        );
        resolve_err(
            f,
            &fake,
            "/var/lib/kubelet/pods/evil/passwd",
            true,
            Kind::PD,
            esc,
        );
        resolve_err(f, &fake, "/var/lib/kubelet/pods/evil", true, Kind::PD, esc);
        // Not following the final link: the link itself is the object.
        let r = resolve_ok(f, &fake, "/var/lib/kubelet/pods/evil", false);
        assert_eq!(r.as_str(), native(f, "/var/lib/kubelet/pods/evil"));
        assert!(!r.is_root());
        // The message shows where it leads.
        let e = policy_of(f)
            .resolve(&native(f, "/var/lib/kubelet/pods/evil/x"), &fake, false)
            .unwrap_err()
            .to_string();
        assert!(e.contains(&shown(&native(f, "/etc/x"))), "{e}");
    }
}

#[test]
fn link_inside_to_inside_is_resolved() {
    for f in BOTH {
        let mut fake = Fake::existing();
        fake.link(
            f,
            "/var/lib/kubelet/pods/a",
            &native(f, "/var/lib/kubelet/plugins/b"),
        );
        fake.link(f, "/var/lib/kubelet/pods/w", &native(f, "/work/staging"));
        let r = resolve_ok(f, &fake, "/var/lib/kubelet/pods/a/x", false);
        assert_eq!(r.as_str(), native(f, "/var/lib/kubelet/plugins/b/x"));
        let r = resolve_ok(f, &fake, "/var/lib/kubelet/pods/a", true);
        assert_eq!(r.as_str(), native(f, "/var/lib/kubelet/plugins/b"));
        // Into another allowed root.
        let r = resolve_ok(f, &fake, "/var/lib/kubelet/pods/w/y/", true);
        assert_eq!(r.as_str(), native(f, "/work/staging/y"));
    }
}

#[test]
fn relative_targets_with_dotdot() {
    for f in BOTH {
        let mut fake = Fake::existing();
        fake.link(f, "/var/lib/kubelet/pods/a", &native(f, "../plugins/./b"));
        fake.link(f, "/var/lib/kubelet/pods/up", &native(f, "../../../../etc"));
        fake.link(
            f,
            "/var/lib/kubelet/pods/top",
            &native(f, "../../../../../../../../.."),
        );
        fake.link(f, "/var/lib/kubelet/pods/same", ".");
        let r = resolve_ok(f, &fake, "/var/lib/kubelet/pods/a/x", false);
        assert_eq!(r.as_str(), native(f, "/var/lib/kubelet/plugins/b/x"));
        let esc = "escapes the allowed roots through a link";
        resolve_err(
            f,
            &fake,
            "/var/lib/kubelet/pods/up/shadow",
            false,
            Kind::PD,
            esc,
        );
        resolve_err(
            f,
            &fake,
            "/var/lib/kubelet/pods/top/x",
            false,
            Kind::PD,
            esc,
        );
        let r = resolve_ok(f, &fake, "/var/lib/kubelet/pods/same/x", false);
        assert_eq!(r.as_str(), native(f, "/var/lib/kubelet/pods/x"));
    }
}

#[test]
fn dotdot_applies_to_the_resolved_link_target() {
    // `a/..` where `a` is a link goes up from the link's target (physical),
    // not from the link's parent.
    for f in BOTH {
        let mut fake = Fake::existing();
        fake.link(
            f,
            "/var/lib/kubelet/x/a",
            &native(f, "/var/lib/kubelet/deep/er"),
        );
        fake.link(f, "/var/lib/kubelet/pods/l", &native(f, "../x/a/../sib"));
        let r = resolve_ok(f, &fake, "/var/lib/kubelet/pods/l/z", false);
        assert_eq!(r.as_str(), native(f, "/var/lib/kubelet/deep/sib/z"));

        // Physically climbing out through a link is caught.
        let mut fake = Fake::existing();
        fake.link(f, "/var/lib/kubelet/x/a", &native(f, "/opt/p/q"));
        fake.link(
            f,
            "/var/lib/kubelet/pods/l",
            &native(f, "../x/a/../../../var/lib/kubelet/ok"),
        );
        let r = resolve_ok(f, &fake, "/var/lib/kubelet/pods/l", true);
        assert_eq!(r.as_str(), native(f, "/var/lib/kubelet/ok"));
        fake.link(f, "/var/lib/kubelet/pods/m", &native(f, "../x/a/../r"));
        resolve_err(
            f,
            &fake,
            "/var/lib/kubelet/pods/m",
            true,
            Kind::PD,
            "escapes",
        );
    }
}

#[test]
fn chains() {
    for f in BOTH {
        let mut fake = Fake::existing();
        fake.link(f, "/var/lib/kubelet/a", "b")
            .link(f, "/var/lib/kubelet/b", &native(f, "/var/lib/kubelet/c"))
            .link(f, "/var/lib/kubelet/c", &native(f, "d/e"))
            .link(f, "/var/lib/kubelet/d/e", &native(f, "../f"));
        let r = resolve_ok(f, &fake, "/var/lib/kubelet/a/x", false);
        assert_eq!(r.as_str(), native(f, "/var/lib/kubelet/f/x"));
        // The same chain ending outside.
        fake.link(f, "/var/lib/kubelet/f", &native(f, "/tmp"));
        resolve_err(f, &fake, "/var/lib/kubelet/a/x", false, Kind::PD, "escapes");
        // ... but the chain up to the final link is fine when not followed.
        let r = resolve_ok(f, &fake, "/var/lib/kubelet/a", false);
        assert_eq!(r.as_str(), native(f, "/var/lib/kubelet/a"));
    }
}

#[test]
fn loops_are_bounded() {
    for f in BOTH {
        let mut fake = Fake::existing();
        fake.link(f, "/var/lib/kubelet/a", "b")
            .link(f, "/var/lib/kubelet/b", "a");
        fake.link(f, "/var/lib/kubelet/self", "self");
        fake.link(f, "/var/lib/kubelet/grow", &native(f, "grow/grow"));
        for p in [
            "/var/lib/kubelet/a/x",
            "/var/lib/kubelet/self/x",
            "/var/lib/kubelet/grow/x",
        ] {
            resolve_err(f, &fake, p, false, Kind::IA, "too many levels of links");
        }
        assert!(
            fake.calls.get() < 3 * 2 * (MAX_LINK_HOPS + 10),
            "{} calls",
            fake.calls.get()
        );
        // A loop at the final component is not touched unless followed.
        resolve_ok(f, &fake, "/var/lib/kubelet/a", false);
        resolve_err(
            f,
            &fake,
            "/var/lib/kubelet/a",
            true,
            Kind::IA,
            "too many levels of links",
        );
    }
}

#[test]
fn chain_of_exactly_max_hops() {
    for f in BOTH {
        let mut fake = Fake::existing();
        for i in 0..MAX_LINK_HOPS {
            fake.link(f, &format!("/var/lib/kubelet/l{i}"), &format!("l{}", i + 1));
        }
        let r = resolve_ok(f, &fake, "/var/lib/kubelet/l0/x", false);
        assert_eq!(
            r.as_str(),
            native(f, &format!("/var/lib/kubelet/l{MAX_LINK_HOPS}/x"))
        );
        let last = MAX_LINK_HOPS;
        fake.link(f, &format!("/var/lib/kubelet/l{last}"), "end");
        resolve_err(
            f,
            &fake,
            "/var/lib/kubelet/l0/x",
            false,
            Kind::IA,
            "too many levels of links",
        );
    }
}

#[test]
fn mount_points_are_not_followed() {
    for f in BOTH {
        let mut fake = Fake::existing();
        fake.set(
            f,
            "/var/lib/kubelet/plugins/x/globalmount",
            Link::MountPoint,
        );
        let r = resolve_ok(
            f,
            &fake,
            "/var/lib/kubelet/plugins/x/globalmount/data",
            false,
        );
        assert_eq!(
            r.as_str(),
            native(f, "/var/lib/kubelet/plugins/x/globalmount/data")
        );
        let r = resolve_ok(f, &fake, "/var/lib/kubelet/plugins/x/globalmount", true);
        assert_eq!(
            r.as_str(),
            native(f, "/var/lib/kubelet/plugins/x/globalmount")
        );
    }
}

#[test]
fn final_link_only_followed_when_asked() {
    for f in BOTH {
        let mut fake = Fake::existing();
        fake.link(f, "/var/lib/kubelet/pods/l", "target");
        let r = resolve_ok(f, &fake, "/var/lib/kubelet/pods/l", false);
        assert_eq!(r.as_str(), native(f, "/var/lib/kubelet/pods/l"));
        assert!(!fake
            .asked
            .borrow()
            .contains(&native(f, "/var/lib/kubelet/pods/l")));
        let r = resolve_ok(f, &fake, "/var/lib/kubelet/pods/l", true);
        assert_eq!(r.as_str(), native(f, "/var/lib/kubelet/pods/target"));
        // A link that resolves to the root itself is flagged as the root.
        fake.link(f, "/var/lib/kubelet/pods/r", "..");
        let r = resolve_ok(f, &fake, "/var/lib/kubelet/pods/r", true);
        assert_eq!(r.as_str(), native(f, "/var/lib/kubelet"));
        assert!(r.is_root());
        assert!(!resolve_ok(f, &fake, "/var/lib/kubelet/pods/r", false).is_root());
    }
}

#[test]
fn root_that_is_a_link() {
    for f in BOTH {
        for target in ["/data/kubelet", "../../data/kubelet"] {
            let mut fake = Fake::existing();
            fake.link(f, "/var/lib/kubelet", &native(f, target));
            let r = resolve_ok(f, &fake, "/var/lib/kubelet/pods/x", false);
            assert_eq!(r.as_str(), native(f, "/data/kubelet/pods/x"));
            assert!(!r.is_root());
            let r = resolve_ok(f, &fake, "/var/lib/kubelet/", true);
            assert_eq!(r.as_str(), native(f, "/data/kubelet"));
            assert!(r.is_root());
            let r = resolve_ok(f, &fake, "/var/lib/kubelet", false);
            assert_eq!(r.as_str(), native(f, "/var/lib/kubelet"));
            assert!(r.is_root());
            // A link inside the resolved root leading next to it escapes.
            fake.link(f, "/data/kubelet/pods/e", &native(f, "/data/other"));
            resolve_err(
                f,
                &fake,
                "/var/lib/kubelet/pods/e/x",
                false,
                Kind::PD,
                "escapes",
            );
        }
        // A root that does not exist stays as written.
        let fake = Fake::missing();
        let r = resolve_ok(f, &fake, "/var/lib/kubelet/pods/x", true);
        assert_eq!(r.as_str(), native(f, "/var/lib/kubelet/pods/x"));
        // A root whose resolution loops is ignored (fail closed).
        let mut fake = Fake::existing();
        fake.link(f, "/work", "work");
        resolve_err(f, &fake, "/work/x", false, Kind::IA, "too many levels");
        resolve_ok(f, &fake, "/var/lib/kubelet/x", false);
    }
}

#[test]
fn missing_components_are_lexical() {
    for f in BOTH {
        let mut fake = Fake::existing();
        fake.set(f, "/var/lib/kubelet/new", Link::NotFound);
        let r = resolve_ok(f, &fake, "/var/lib/kubelet/new/dir/x", true);
        assert_eq!(r.as_str(), native(f, "/var/lib/kubelet/new/dir/x"));
        let asked = fake.asked.borrow();
        assert!(
            !asked.contains(&native(f, "/var/lib/kubelet/new/dir")),
            "{asked:?}"
        );
    }
}

#[test]
fn climbing_back_out_of_a_missing_component_asks_again() {
    for f in BOTH {
        let mut fake = Fake::existing();
        fake.set(f, "/var/lib/kubelet/pods/missing", Link::NotFound);
        fake.link(f, "/var/lib/kubelet/pods/a", &native(f, "missing/../evil"));
        fake.link(f, "/var/lib/kubelet/pods/evil", &native(f, "/etc"));
        resolve_err(
            f,
            &fake,
            "/var/lib/kubelet/pods/a/x",
            false,
            Kind::PD,
            "escapes",
        );
    }
}

#[test]
fn reader_errors_and_empty_targets() {
    for f in BOTH {
        let mut fake = Fake::existing();
        fake.fail = Some(native(f, "/var/lib/kubelet/pods"));
        let e = policy_of(f)
            .resolve(&native(f, "/var/lib/kubelet/pods/x"), &fake, false)
            .unwrap_err();
        assert!(matches!(e, Error::Io { .. }), "{e}");
        let mut fake = Fake::existing();
        fake.link(f, "/var/lib/kubelet/e", "");
        resolve_err(
            f,
            &fake,
            "/var/lib/kubelet/e/x",
            false,
            Kind::IA,
            "empty target",
        );
    }
}

#[test]
fn check_errors_come_first() {
    for f in BOTH {
        let fake = Fake::existing();
        resolve_err(f, &fake, "/var/lib/kubelet/../x", false, Kind::IA, "\"..\"");
        resolve_err(
            f,
            &fake,
            "/etc/x",
            false,
            Kind::PD,
            "outside the allowed roots",
        );
        assert_eq!(fake.calls.get(), 0);
    }
}

#[test]
fn windows_link_targets() {
    let f = Flavor::Windows;
    let mut fake = Fake::existing();
    let k = r"C:\var\lib\kubelet";
    let mut link = |name: &str, target: &str| {
        fake.map
            .insert(format!(r"{k}\{name}"), Link::Symlink(target.to_string()));
    };
    link("verbatim", r"\\?\C:\var\lib\kubelet\y");
    link("nt", r"\??\c:\VAR\lib\KUBELET\y");
    link("rooted", r"\var\lib\kubelet\y");
    link("fwd", "sub/dir");
    link("unc", r"\??\UNC\srv\share\x");
    link("unc2", r"\\srv\share\x");
    link("vol", r"\\?\Volume{01234567-89ab-cdef-0123-456789abcdef}\");
    link("dev", r"\\.\PhysicalDrive0");
    link("glob", r"\??\GLOBALROOT\Device\HarddiskVolume1\x");
    link("otherdrive", r"D:\data");
    link("driverel", r"C:data");
    link("condev", "CON");
    link("ads", "xy:stream");
    link("ads2", "a:stream");
    link("dot", "x.");
    link("rootedout", r"\Windows");
    let policy = policy_of(f);
    let ok = |name: &str, want: &str| {
        let r = policy
            .resolve(&format!(r"{k}\{name}\z"), &fake, false)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(r.as_str(), want, "{name}");
    };
    ok("verbatim", r"C:\var\lib\kubelet\y\z");
    ok("nt", r"c:\VAR\lib\KUBELET\y\z");
    ok("rooted", r"C:\var\lib\kubelet\y\z");
    ok("fwd", r"C:\var\lib\kubelet\sub\dir\z");
    let bad = |name: &str, needle: &str| {
        let e = policy
            .resolve(&format!(r"{k}\{name}\z"), &fake, false)
            .unwrap_err();
        assert_eq!(kind_of(&e), Some(Kind::PD), "{name}: {e}");
        assert!(e.to_string().contains(needle), "{name}: {e}");
    };
    bad("unc", "through a link to a UNC network share");
    bad("unc2", "through a link to a UNC network share");
    bad("vol", "through a link to a volume GUID path");
    bad("dev", "through a link to a device path");
    bad("glob", "through a link to a device or NT namespace path");
    bad("otherdrive", "escapes the allowed roots through a link");
    bad("driverel", "through a link to a drive-relative path");
    bad("condev", "names a reserved device (CON)");
    bad("ads", "alternate data stream");
    bad("ads2", "drive-relative");
    bad("dot", "ending in '.'");
    bad("rootedout", "escapes the allowed roots through a link");
}

#[test]
fn windows_resolved_long_paths_are_allowed() {
    // The 260-byte limit applies to what clients send, not to where links
    // lead inside a root.
    let f = Flavor::Windows;
    let mut fake = Fake::existing();
    let deep = format!(r"{}\{}\{}", WIN_ROOTS[0], "b".repeat(200), "c".repeat(200));
    fake.map
        .insert(format!(r"{}\l", WIN_ROOTS[0]), Link::Symlink(deep.clone()));
    let r = policy_of(f)
        .resolve(&format!(r"{}\l\x", WIN_ROOTS[0]), &fake, false)
        .unwrap();
    assert_eq!(r.as_str(), format!(r"{deep}\x"));
}

// ---------------------------------------------------------------- reparse tags

#[test]
fn reparse_tag_classification() {
    let t = |s: &'static str| move || Ok::<_, io::Error>(s.to_string());
    let never = || -> io::Result<String> { panic!("target read for a non-link tag") };
    let vol = r"\??\Volume{01234567-89ab-cdef-0123-456789abcdef}\";
    assert_eq!(
        classify_reparse_point(IO_REPARSE_TAG_SYMLINK, t(r"\??\C:\x")).unwrap(),
        Link::Symlink(r"C:\x".into())
    );
    assert_eq!(
        classify_reparse_point(IO_REPARSE_TAG_SYMLINK, t(r"\\?\d:\x\y")).unwrap(),
        Link::Symlink(r"d:\x\y".into())
    );
    assert_eq!(
        classify_reparse_point(IO_REPARSE_TAG_SYMLINK, t(r"..\x")).unwrap(),
        Link::Symlink(r"..\x".into())
    );
    // UNC targets keep their prefix so the resolver refuses them.
    assert_eq!(
        classify_reparse_point(IO_REPARSE_TAG_SYMLINK, t(r"\\?\UNC\srv\s")).unwrap(),
        Link::Symlink(r"\\?\UNC\srv\s".into())
    );
    // Upstream's bug: a symlink is never a mount point, whatever it targets.
    assert_eq!(
        classify_reparse_point(IO_REPARSE_TAG_SYMLINK, t(vol)).unwrap(),
        Link::Symlink(vol.into())
    );
    assert_ne!(IO_REPARSE_TAG_SYMLINK & IO_REPARSE_TAG_MOUNT_POINT, 0);
    // Junction to a volume: a mount point; to a directory: a link.
    assert_eq!(
        classify_reparse_point(IO_REPARSE_TAG_MOUNT_POINT, t(vol)).unwrap(),
        Link::MountPoint
    );
    assert_eq!(
        classify_reparse_point(
            IO_REPARSE_TAG_MOUNT_POINT,
            t(r"\\?\volume{01234567-89ab-cdef-0123-456789abcdef}\")
        )
        .unwrap(),
        Link::MountPoint
    );
    assert_eq!(
        classify_reparse_point(IO_REPARSE_TAG_MOUNT_POINT, t(r"\??\C:\target\dir")).unwrap(),
        Link::Symlink(r"C:\target\dir".into())
    );
    // Data reparse points (dedup, cloud files, AF_UNIX) are plain entries.
    for tag in [0, 0x8000_0013, 0x9000_001A, 0x8000_0023, 0x8000_001B] {
        assert_eq!(
            classify_reparse_point(tag, never).unwrap(),
            Link::NotALink,
            "{tag:#x}"
        );
    }
    // Unknown name surrogates (WSL symlink, silo global link): fail closed.
    for tag in [0xA000_001D, 0xA000_0019, 0xA000_1027] {
        let e = classify_reparse_point(tag, never).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::Unsupported, "{tag:#x}");
    }
    // Target read errors propagate.
    let e = classify_reparse_point(IO_REPARSE_TAG_SYMLINK, || Err(io::Error::other("boom")))
        .unwrap_err();
    assert_eq!(e.to_string(), "boom");
}

// ---------------------------------------------------------------- real filesystem

#[cfg(unix)]
mod real_fs {
    use super::*;
    use std::os::unix::fs::symlink;

    /// The OS reader without its fast path: every component is asked.
    struct SlowLinks;
    impl LinkReader for SlowLinks {
        fn read_link(&self, path: &str) -> std::io::Result<Link> {
            OsLinks.read_link(path)
        }
    }

    /// The openat2 fast path answers exactly what the component walk answers,
    /// for existing and missing paths, links in the chain, final links
    /// (followed or not), links escaping the root and link loops.
    #[test]
    fn fast_path_agrees_with_the_walk() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        let root = base.join("root");
        let outside = base.join("outside");
        std::fs::create_dir_all(root.join("a/b/c")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        symlink(root.join("a/b"), root.join("inner")).unwrap();
        symlink(&outside, root.join("escape")).unwrap();
        symlink("b/c", root.join("a/rel")).unwrap();
        symlink(root.join("loop2"), root.join("loop1")).unwrap();
        symlink(root.join("loop1"), root.join("loop2")).unwrap();
        symlink(root.join("missing-target"), root.join("dangling")).unwrap();
        let r = root.display().to_string();
        let policy = PathPolicy::new(Flavor::Unix, [r.clone()]).unwrap();
        let fast_hits = std::cell::Cell::new(0);
        let paths = [
            "",
            "/a",
            "/a/b",
            "/a/b/c",
            "/a/b/c/new",
            "/new/deeper",
            "/inner",
            "/inner/c",
            "/escape",
            "/escape/x",
            "/a/rel",
            "/a/rel/x",
            "/loop1",
            "/loop1/x",
            "/dangling",
            "/dangling/x",
        ];
        for p in paths {
            let path = format!("{r}{p}");
            for follow in [false, true] {
                let fast = policy
                    .resolve(&path, &OsLinks, follow)
                    .map(|x| x.as_str().to_string());
                let slow = policy
                    .resolve(&path, &SlowLinks, follow)
                    .map(|x| x.as_str().to_string());
                match (&fast, &slow) {
                    (Ok(a), Ok(b)) => assert_eq!(a, b, "{path} follow={follow}"),
                    (Err(a), Err(b)) => {
                        assert_eq!(a.to_string(), b.to_string(), "{path} follow={follow}")
                    }
                    _ => panic!("{path} follow={follow}: fast {fast:?} vs slow {slow:?}"),
                }
                if OsLinks.is_link_free(&path) {
                    fast_hits.set(fast_hits.get() + 1);
                }
            }
        }
        // The fast path is really taken for link-free existing paths (on a
        // kernel with openat2), and never for paths with links.
        assert!(!OsLinks.is_link_free(&format!("{r}/inner/c")));
        assert!(!OsLinks.is_link_free(&format!("{r}/a/b/c/new")));
        if OsLinks.is_link_free(&format!("{r}/a/b/c")) {
            assert!(fast_hits.get() >= 8);
        }
    }

    fn s(p: &std::path::Path) -> String {
        p.to_str().unwrap().to_string()
    }

    #[test]
    fn planted_symlink_escaping_the_root_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("kubelet");
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(root.join("pods")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("secret"), b"x").unwrap();
        symlink(&outside, root.join("pods/evil")).unwrap();
        symlink("../../outside/secret", root.join("pods/rel")).unwrap();
        symlink("loop", root.join("pods/loop")).unwrap();
        std::fs::write(root.join("pods/file"), b"x").unwrap();

        let policy = PathPolicy::new(Flavor::Unix, [s(&root)]).unwrap();
        let p = |rest: &str| format!("{}/{rest}", s(&root));
        let e = policy
            .resolve(&p("pods/evil/secret"), &OsLinks, false)
            .unwrap_err();
        assert!(matches!(e, Error::PermissionDenied(_)), "{e}");
        let e = policy.resolve(&p("pods/evil"), &OsLinks, true).unwrap_err();
        assert!(matches!(e, Error::PermissionDenied(_)), "{e}");
        let e = policy.resolve(&p("pods/rel"), &OsLinks, true).unwrap_err();
        assert!(matches!(e, Error::PermissionDenied(_)), "{e}");
        // Removing the link itself is allowed: it is the object operated on.
        let r = policy.resolve(&p("pods/evil"), &OsLinks, false).unwrap();
        assert_eq!(r.as_str(), p("pods/evil"));
        // Loops.
        let e = policy
            .resolve(&p("pods/loop/x"), &OsLinks, false)
            .unwrap_err();
        assert!(e.to_string().contains("too many levels of links"), "{e}");
        // Missing and under-a-file paths resolve lexically.
        let r = policy.resolve(&p("pods/new/a/b"), &OsLinks, true).unwrap();
        assert_eq!(r.as_str(), p("pods/new/a/b"));
        let r = policy.resolve(&p("pods/file/x"), &OsLinks, true).unwrap();
        assert_eq!(r.as_str(), p("pods/file/x"));
        assert_eq!(
            OsLinks.read_link(&p("pods/file/x")).unwrap(),
            Link::NotFound
        );
        assert_eq!(OsLinks.read_link(&p("pods")).unwrap(), Link::NotALink);
        assert_eq!(
            OsLinks.read_link(&p("pods/rel")).unwrap(),
            Link::Symlink("../../outside/secret".into())
        );
    }

    #[test]
    fn symlinked_root_works() {
        let tmp = tempfile::tempdir().unwrap();
        let real = tmp.path().join("data/kubelet");
        std::fs::create_dir_all(real.join("pods/uid")).unwrap();
        let link = tmp.path().join("kubelet");
        symlink(&real, &link).unwrap();
        // Inside the real root, a relative link to a sibling dir inside.
        std::fs::create_dir_all(real.join("plugins/x")).unwrap();
        symlink("../../plugins/x", real.join("pods/uid/vol")).unwrap();

        let policy = PathPolicy::new(Flavor::Unix, [s(&link)]).unwrap();
        let real_s = std::fs::canonicalize(&real).unwrap();
        let r = policy
            .resolve(&format!("{}/pods/uid/vol/file", s(&link)), &OsLinks, true)
            .unwrap();
        assert_eq!(r.as_str(), format!("{}/plugins/x/file", s(&real_s)));
        let r = policy.resolve(&s(&link), &OsLinks, true).unwrap();
        assert!(r.is_root());
        assert_eq!(r.as_str(), s(&real_s));
        // A link from the real root to its sibling is refused.
        symlink("../../data", real.join("pods/up")).unwrap();
        let e = policy
            .resolve(&format!("{}/pods/up", s(&link)), &OsLinks, true)
            .unwrap_err();
        assert!(matches!(e, Error::PermissionDenied(_)), "{e}");
    }
}

#[cfg(windows)]
mod real_fs_windows {
    use super::*;

    fn s(p: &std::path::Path) -> String {
        p.to_str().unwrap().to_string()
    }

    #[test]
    fn os_links_basics() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("kubelet");
        std::fs::create_dir_all(root.join("pods")).unwrap();
        std::fs::write(root.join("pods").join("file"), b"x").unwrap();
        let p = |rest: &str| format!(r"{}\{rest}", s(&root));
        assert_eq!(OsLinks.read_link(&p("pods")).unwrap(), Link::NotALink);
        assert_eq!(OsLinks.read_link(&p("missing")).unwrap(), Link::NotFound);
        assert_eq!(OsLinks.read_link(&p(r"missing\x")).unwrap(), Link::NotFound);
        assert_eq!(OsLinks.read_link(&p(r"pods\file")).unwrap(), Link::NotALink);
        let policy = PathPolicy::new(Flavor::Windows, [s(&root)]).unwrap();
        let r = policy.resolve(&p(r"pods\new\x"), &OsLinks, true).unwrap();
        assert_eq!(
            r.as_str().to_ascii_lowercase(),
            p(r"pods\new\x").to_ascii_lowercase()
        );

        // Symlinks need a privilege on real Windows; skip that part if missing.
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        // (wine's CreateSymbolicLinkW reports success and creates nothing.)
        let evil = root.join("pods").join("evil");
        if std::os::windows::fs::symlink_dir(&outside, &evil).is_ok()
            && std::fs::symlink_metadata(&evil).is_ok()
        {
            match OsLinks.read_link(&p(r"pods\evil")).unwrap() {
                Link::Symlink(t) => assert!(t.eq_ignore_ascii_case(&s(&outside)), "{t}"),
                other => panic!("{other:?}"),
            }
            let e = policy
                .resolve(&p(r"pods\evil\x"), &OsLinks, false)
                .unwrap_err();
            assert!(matches!(e, Error::PermissionDenied(_)), "{e}");
        }
    }
}
