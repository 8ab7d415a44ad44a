use super::*;

/// Hostile or malformed remote paths: every one is InvalidArgument.
pub(crate) const HOSTILE_REMOTE: &[&str] = &[
    "",
    "server",
    r"\\",
    r"\\server",
    r"\\server\",
    r"\server\share",
    r"C:\share",
    r"\\?\C:\Windows",
    r"\\?\UNC\server\share",
    r"\\.\PhysicalDrive0",
    r"\\.\pipe\csi-proxy-disk-v1",
    r"\\server\share\..\..\x",
    r"\\server\..",
    r"\\server\.",
    r"\\server\share\.",
    r"\\server\share\\x",
    r"\\server\\share",
    r"\\server\sha:re",
    r"\\server\share*",
    r"\\server\share?",
    r"\\server\sh<are",
    r"\\server\sh>are",
    r"\\server\sh|are",
    "\\\\server\\sh\"are",
    "\\\\server\\share\0",
    "\\\\server\\share\nx",
    "\\\\ser\tver\\share",
    r"\\server\share.",
    r"\\server\share ",
    r"\\-server\share",
    r"\\server-\share",
    r"\\ser_ver\share",
    r"\\ser ver\share",
    r"\\server;reboot\share",
    r"\\$(id)\share",
    r"\\`id`\share",
    r"\\server'\share",
    r"\\[::1]\share",
    r"\\fe80::1%eth0\share",
    r"\\1.2.3.999\share",
    r"\\1.2.3\share",
    r"\\a..b\share",
    r"\\sérver\share",
    "\\\\server\\share\u{202e}",
    r"\\server:445\share",
    r"\\user@server\share",
    r"//server/share/../../x",
];

#[test]
fn hostile_remote_paths_are_refused() {
    let long_label = format!(r"\\{}\share", "a".repeat(64));
    let long_host = format!(r"\\{}\share", ["a"; 130].join("."));
    let long_share = format!(r"\\server\{}", "s".repeat(81));
    let long_path = format!(r"\\server\share\{}", "x\\".repeat(600));
    let mut all: Vec<&str> = HOSTILE_REMOTE.to_vec();
    all.extend([
        long_label.as_str(),
        long_host.as_str(),
        long_share.as_str(),
        long_path.as_str(),
    ]);
    assert!(all.len() >= 30, "{}", all.len());
    for p in all {
        let e = RemotePath::parse(p).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{p:?}: {e:?}");
        assert!(e.to_string().starts_with("remote_path: "), "{p:?}: {e}");
    }
}

#[test]
fn good_remote_paths_reduce_to_their_root() {
    for (p, root, link) in [
        (
            r"\\Server\Share",
            r"\\server\Share",
            r"\\?\UNC\Server\Share\",
        ),
        (
            r"\\server\share\",
            r"\\server\share",
            r"\\?\UNC\server\share\",
        ),
        (
            r"\\srv.example.com\share\pvc-1\sub dir",
            r"\\srv.example.com\share",
            r"\\?\UNC\srv.example.com\share\pvc-1\sub dir\",
        ),
        (
            "//10.0.0.4/data/x",
            r"\\10.0.0.4\data",
            r"\\?\UNC\10.0.0.4\data\x\",
        ),
        (
            r"\\fd00::4\data",
            r"\\fd00::4\data",
            r"\\?\UNC\fd00::4\data\",
        ),
        (
            r"\\acct.file.core.windows.net\pvc-2c$",
            r"\\acct.file.core.windows.net\pvc-2c$",
            r"\\?\UNC\acct.file.core.windows.net\pvc-2c$\",
        ),
    ] {
        let r = RemotePath::parse(p).unwrap();
        assert_eq!(r.root().unc(), root, "{p}");
        assert_eq!(r.unc_link_target().as_str(), link, "{p}");
    }
    let r = RemotePath::parse(r"\\srv\share\a\b").unwrap();
    assert_eq!(r.root().slashed(), "//srv/share");
    assert_eq!(
        r.mounted_link_target("/run/csi-proxy-smb/srv/share/")
            .as_str(),
        "/run/csi-proxy-smb/srv/share/a/b"
    );
    assert_eq!(
        RemotePath::parse(r"\\10.1.2.3\s").unwrap().host(),
        &Host::V4("10.1.2.3".parse().unwrap())
    );
}

fn pw(s: &str) -> Zeroizing<String> {
    Zeroizing::new(s.to_string())
}

#[test]
fn usernames_and_passwords() {
    for u in [
        r"DOMAIN\user",
        "user@example.com",
        "user",
        r"AZURE\acct123",
        "first.last",
    ] {
        let c = Credential::parse(u, pw("p@ss:w\\ord")).unwrap().unwrap();
        assert_eq!(c.user(), u);
        assert_eq!(c.password(), "p@ss:w\\ord");
    }
    let c = Credential::parse(r"DOM\u", pw("x")).unwrap().unwrap();
    assert_eq!(c.domain_and_user(), (Some("DOM"), "u"));
    let c = Credential::parse("u@dom.example", pw("x"))
        .unwrap()
        .unwrap();
    assert_eq!(c.domain_and_user(), (Some("dom.example"), "u"));
    assert!(Credential::parse("", pw("")).unwrap().is_none());
    let long_user = "u".repeat(MAX_USERNAME + 1);
    for u in [
        r"a\b\c",
        "a@b@c",
        r"a\b@c",
        "user:x",
        "us\"er",
        "us/er",
        "u;x",
        "u|x",
        "u\0",
        "u\nx",
        r"DOM\",
        r"\user",
        "@dom",
        "user@",
        " user",
        r"DO M\user",
        "u%PATH%",
        long_user.as_str(),
    ] {
        let e = Credential::parse(u, pw("secret-pw-1")).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{u:?}: {e}");
        assert!(!e.to_string().contains("secret-pw-1"), "{e}");
    }
    let long_pw = "p".repeat(MAX_PASSWORD + 1);
    for p in ["pass\0word-secret", "pass\nword-secret", long_pw.as_str()] {
        let e = Credential::parse("user", pw(p)).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        assert!(
            !e.to_string().contains("word-secret") && !e.to_string().contains("ppppp"),
            "{e}"
        );
    }
    let e = Credential::parse("", pw("orphan-secret")).unwrap_err();
    assert!(!e.to_string().contains("orphan-secret"), "{e}");
    let c = Credential::parse("user", pw("dbg-secret"))
        .unwrap()
        .unwrap();
    assert!(!format!("{c:?}").contains("dbg-secret"));
}

/// Red team 42smb F1: a user name with no visible character (or with an
/// invisible one anywhere, also as the user half of `DOMAIN\user` or
/// `user@domain`) is refused as an argument, never taken for a user.
#[test]
fn user_names_without_visible_characters_are_refused() {
    for inv in [
        "\u{200B}",
        "\u{200D}",
        "\u{FEFF}",
        "\u{2060}",
        "\u{202E}",
        "\u{061C}",
        "\u{115F}",
        "\u{1160}",
        "\u{3164}",
        "\u{FFA0}",
        "\u{2800}",
        "\u{180E}",
        "\u{034F}",
        "\u{00AD}",
        "\u{E0020}",
        "\u{1D173}",
        "\u{FE0F}",
        "\u{FFF9}",
    ] {
        for user in [
            inv.to_string(),
            format!("DOM\\{inv}"),
            format!("{inv}@dom"),
            format!("us{inv}er"),
        ] {
            let r = Credential::parse(&user, pw(""));
            assert!(
                matches!(r, Err(Error::InvalidArgument(_))),
                "{user:?}: {:?}",
                r.map(|c| c.map(|c| c.user().to_string()))
            );
        }
    }
    assert!(Credential::parse(r"DOM\user", pw("x")).unwrap().is_some());
}

/// Red team 42smb F5: every invisible character is refused in a remote path.
#[test]
fn remote_paths_with_invisible_characters_are_refused() {
    for inv in [
        "\u{061C}",
        "\u{00AD}",
        "\u{034F}",
        "\u{115F}",
        "\u{3164}",
        "\u{180E}",
        "\u{E0041}",
        "\u{FFF9}",
        "\u{FFFB}",
        "\u{2800}",
        "\u{FE00}",
    ] {
        for p in [format!(r"\\h\sh{inv}are"), format!(r"\\h\share\p{inv}vc")] {
            let r = RemotePath::parse(&p);
            assert!(matches!(r, Err(Error::InvalidArgument(_))), "{p:?}: {r:?}");
        }
    }
}

/// Red team 42smb F2: the root keeps the share's spelling (what the server
/// and the link get) and is compared by the NTFS rule: shares NTFS keeps
/// apart are two roots, spellings NTFS takes as one are one root.
#[test]
fn share_roots_keep_the_spelling_and_compare_as_ntfs() {
    let root = |p: &str| RemotePath::parse(p).unwrap().root();
    for (a, b) in [
        ("\\\\h\\\u{212A}", r"\\h\k"),
        ("\\\\h\\\u{2126}", "\\\\h\\\u{03C9}"),
        ("\\\\h\\\u{212B}", "\\\\h\\\u{00E5}"),
        ("\\\\h\\\u{0391}\u{03A3}", "\\\\h\\\u{03B1}\u{03C2}"),
        ("\\\\h\\\u{0130}", "\\\\h\\i\u{0307}"),
    ] {
        assert_ne!(root(a), root(b), "{a:?} {b:?}");
        assert_eq!(root(a).share(), &a[4..]);
        assert_eq!(root(a).unc(), a);
        assert!(!crate::path::case::eq_portable(a, b));
    }
    for (a, b) in [
        ("\\\\h\\\u{0391}\u{03A3}", "\\\\H\\\u{03B1}\u{03C3}"),
        (r"\\Srv\Share", r"\\srv\SHARE"),
        ("\\\\h\\\u{00C9}lan", "\\\\h\\\u{00E9}LAN"),
    ] {
        assert_eq!(root(a), root(b), "{a:?} {b:?}");
        assert_ne!(root(a).unc(), root(b).unc());
    }
}
