use super::*;

/// Hostile or malformed target names.
pub(crate) const HOSTILE_IQNS: &[&str] = &[
    "",
    "target",
    "iqn",
    "iqn.",
    "iqn.2001",
    "iqn.2001-13.com.example",
    "iqn.2001-00.com.example",
    "iqn.20x1-01.com.example",
    "iqn.2001-01",
    "iqn.2001-01.",
    "iqn.2001-01..com",
    "iqn.2001-01.-com.example",
    "iqn.2001-01.com.example:t 1",
    "iqn.2001-01.com.example:t\n1",
    "iqn.2001-01.com.example:t\x001",
    "iqn.2001-01.com.example;reboot",
    "iqn.2001-01.com.example:$(id)",
    "iqn.2001-01.com.example:`id`",
    "iqn.2001-01.com.example:t'1",
    "iqn.2001-01.com.example:t\"1",
    "iqn.2001-01.com.example/../x",
    "iqn.2001-01.com.example:t|x",
    "iqn.2001-01.com.exämple",
    "eui.0123",
    "eui.0123456789ABCDEFG",
    "eui.0123456789abcdeg",
    "naa.0123",
    "naa.0123456789abcdef0",
    "naa.zz23456789abcdef",
    "-iqn.2001-01.com.example",
    "--help",
    "iqn.2001-01.com.example:a*",
];

/// Hostile portal addresses.
pub(crate) const HOSTILE_ADDRESSES: &[&str] = &[
    "",
    " ",
    "10.0.0.1:3260",
    "[::1]",
    "fe80::1%eth0",
    "10.0.0.256",
    "1.2.3",
    "host name",
    "host;reboot",
    "$(id)",
    "-p",
    "a..b",
    "-host.example",
    "host-.example",
    "höst.example",
    "host\n",
    "host\0",
    "host/x",
    "host,1",
];

fn portal(a: &str, p: u32) -> TargetPortal {
    TargetPortal {
        target_address: a.into(),
        target_port: p,
    }
}

#[test]
fn portals() {
    let p = Portal::parse(&portal("10.0.0.1", 0)).unwrap();
    assert_eq!(p.port(), 3260);
    assert_eq!(p.host_port(), "10.0.0.1:3260");
    assert_eq!(
        Portal::parse(&portal("fd00::1", 3261)).unwrap().host_port(),
        "[fd00::1]:3261"
    );
    Portal::parse(&portal("san.example.com", 65535)).unwrap();
    for port in [65536, 70000, u32::MAX] {
        let e = Portal::parse(&portal("10.0.0.1", port)).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    }
    let long = "a".repeat(254);
    let mut all: Vec<&str> = HOSTILE_ADDRESSES.to_vec();
    all.push(&long);
    for a in all {
        let e = Portal::parse(&portal(a, 3260)).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{a:?}: {e}");
    }
}

#[test]
fn target_names() {
    for (n, want) in [
        (
            "iqn.2001-04.com.example:storage:disk2.sys1.xyz",
            "iqn.2001-04.com.example:storage:disk2.sys1.xyz",
        ),
        (
            "iqn.1991-05.com.microsoft:win-8e2evaq9q-target",
            "iqn.1991-05.com.microsoft:win-8e2evaq9q-target",
        ),
        ("IQN.2026-01.IO.Example:T1", "iqn.2026-01.io.example:t1"),
        ("iqn.2026-01.io.example", "iqn.2026-01.io.example"),
        ("eui.02004567A425678D", "eui.02004567a425678d"),
        ("naa.52004567BA64678D", "naa.52004567ba64678d"),
        (
            "naa.62004567BA64678D0123456789ABCDEF",
            "naa.62004567ba64678d0123456789abcdef",
        ),
    ] {
        assert_eq!(Iqn::parse(n).unwrap().as_str(), want, "{n}");
    }
    let long = format!("iqn.2001-01.com.example:{}", "a".repeat(200));
    let mut all: Vec<&str> = HOSTILE_IQNS.to_vec();
    all.push(&long);
    assert!(all.len() >= 30);
    for n in all {
        let e = Iqn::parse(n).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{n:?}: {e}");
        assert!(e.to_string().starts_with("iqn "), "{e}");
    }
}

fn z(s: &str) -> Zeroizing<String> {
    Zeroizing::new(s.into())
}

#[test]
fn chap_rules() {
    use AuthenticationType::*;
    assert!(matches!(
        Auth::parse(None, "", z(""), Flavor::Windows).unwrap(),
        Auth::None
    ));
    let a = Auth::parse(OneWayChap, "user", z("0123456789ab"), Flavor::Windows).unwrap();
    assert_eq!(a.wmi_name(), "ONEWAYCHAP");
    assert!(!format!("{a:?}").contains("0123456789ab"));
    Auth::parse(MutualChap, "", z("0123456789abcdef"), Flavor::Windows).unwrap();
    Auth::parse(MutualChap, "u", z(&"s".repeat(100)), Flavor::Unix).unwrap();
    for (t, u, s, f) in [
        (None, "user", "", Flavor::Windows),
        (None, "", "leftover-secret", Flavor::Windows),
        (OneWayChap, "u", "", Flavor::Windows),
        (OneWayChap, "u", "short-sec", Flavor::Windows),
        (OneWayChap, "u", "seventeen-bytes-x", Flavor::Windows),
        (OneWayChap, "u", "secret\nsecret12", Flavor::Windows),
        (OneWayChap, "u", "secret\0secret12", Flavor::Unix),
        (OneWayChap, "u", "sécret-secret", Flavor::Unix),
        (MutualChap, "u ser", "0123456789ab", Flavor::Windows),
        (MutualChap, "u\nx", "0123456789ab", Flavor::Windows),
    ] {
        let e = Auth::parse(t, u, z(s), f).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{t:?} {u:?}: {e}");
        if !s.is_empty() {
            assert!(!e.to_string().contains(s), "{e}");
        }
    }
    let long = "u".repeat(MAX_CHAP_USER + 1);
    assert!(Auth::parse(OneWayChap, &long, z("0123456789ab"), Flavor::Unix).is_err());
    assert!(Secret::parse(z(&"x".repeat(256)), Flavor::Unix, "s").is_err());
}
