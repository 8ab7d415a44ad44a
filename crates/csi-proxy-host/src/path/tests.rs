//! Tests of the path gate: hostile and accept tables for both flavours,
//! property tests, and the classification of Windows reparse points.

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

/// A root with non-ASCII letters matches any case NTFS takes for the same
/// name; a name NTFS keeps apart (ß / SS, ı / I) stays outside.
#[test]
fn roots_beyond_ascii() {
    let p = PathPolicy::new(Flavor::Windows, [r"C:\Données\Журнал\kubelet"]).unwrap();
    assert_eq!(
        PathPolicy::new(
            Flavor::Windows,
            [r"C:\Données\Журнал\kubelet", r"c:\DONNÉES\журнал\KUBELET"]
        )
        .unwrap()
        .roots(),
        [r"C:\Données\Журнал\kubelet"],
        "one root, however it is spelled"
    );
    for ok in [
        r"C:\DONNÉES\ЖУРНАЛ\KUBELET\pods",
        r"c:\données\журнал\kubelet\Élan",
    ] {
        assert!(p.check(ok).is_ok(), "{ok}");
    }
    assert!(p.check(r"C:\DONNÉES\ЖУРНАЛ\KUBELET").unwrap().is_root());
    for outside in [
        r"C:\Donnees\Журнал\kubelet\x",
        r"C:\Données\Журнал\kubeletX",
        r"C:\Données\Журнал\kubelet\..\x",
    ] {
        assert!(p.check(outside).is_err(), "{outside}");
    }
    let s = PathPolicy::new(Flavor::Windows, [r"C:\Straße"]).unwrap();
    assert!(s.check(r"C:\STRASSE\x").is_err());
    let t = PathPolicy::new(Flavor::Windows, [r"C:\ıd"]).unwrap();
    assert!(t.check(r"C:\ID\x").is_err());
    assert!(t.check(r"C:\ıD\x").is_ok());
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
        // Located below the root it was built on, component by component.
        let l = crate::confined::locate(&policy, &input).unwrap();
        prop_assert_eq!(l.rel(), comps.iter().map(String::as_str).collect::<Vec<_>>());
        prop_assert_eq!(l.path(), want.as_str());
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
    }
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
