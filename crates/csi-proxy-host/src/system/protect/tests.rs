use super::*;

fn w(n: &str) -> ServiceName {
    ServiceName::parse(n, Flavor::Windows).unwrap()
}

fn u(n: &str) -> ServiceName {
    ServiceName::parse(n, Flavor::Unix).unwrap()
}

fn denied(r: Result<Verdict>) -> String {
    match r {
        Err(Error::PermissionDenied(m)) => m,
        other => panic!("expected PermissionDenied, got {other:?}"),
    }
}

#[test]
fn every_builtin_name_is_a_valid_service_name_with_a_reason() {
    for (flavor, table) in [(Flavor::Windows, WINDOWS), (Flavor::Unix, LINUX)] {
        for b in table {
            let (stem, _) = split_prefix(b.name);
            ServiceName::parse(stem, flavor)
                .unwrap_or_else(|e| panic!("{flavor:?} {}: {e}", b.name));
            assert!(b.why.len() > 10, "{}", b.name);
        }
    }
    assert!(WINDOWS.len() >= 25 && LINUX.len() >= 15);
}

#[test]
fn every_builtin_windows_name_refuses_stop_in_any_case() {
    let p = Protection::builtin(Flavor::Windows);
    for b in WINDOWS {
        for name in [
            b.name.to_string(),
            b.name.to_ascii_lowercase(),
            b.name.to_ascii_uppercase(),
        ] {
            let m = denied(p.check(&w(&name), Op::Stop));
            assert!(m.contains("protected"), "{m}");
            assert!(m.contains("node-critical"), "{m}");
            assert!(m.contains(b.why), "{m}");
            assert!(m.contains("-unprotect-services"), "{m}");
        }
    }
    // Not in the set.
    assert_eq!(p.check(&w("Spooler"), Op::Stop).unwrap(), Verdict::Allowed);
    assert_eq!(p.check(&w("kubeletx"), Op::Stop).unwrap(), Verdict::Allowed);
}

#[test]
fn remote_access_is_refused_a_start_too_others_start() {
    let p = Protection::builtin(Flavor::Windows);
    for n in [
        "WinRM",
        "TermService",
        "sshd",
        "RemoteRegistry",
        "RemoteAccess",
    ] {
        denied(p.check(&w(n), Op::Start));
    }
    for n in ["kubelet", "containerd", "Winmgmt", "MSiSCSI", "W32Time"] {
        assert_eq!(p.check(&w(n), Op::Start).unwrap(), Verdict::Allowed, "{n}");
    }
    let p = Protection::builtin(Flavor::Unix);
    for n in ["sshd", "ssh", "ssh.service"] {
        denied(p.check(&u(n), Op::Start));
    }
    assert_eq!(p.check(&u("kubelet"), Op::Start).unwrap(), Verdict::Allowed);
}

#[test]
fn linux_names_are_units_and_systemd_is_a_prefix() {
    let p = Protection::builtin(Flavor::Unix);
    for n in [
        "kubelet",
        "kubelet.service",
        "containerd",
        "docker",
        "crio",
        "dbus",
        "dbus-broker",
        "systemd-journald",
        "systemd-udevd.service",
        "systemd-logind",
        "sshd",
        "ssh",
    ] {
        denied(p.check(&u(n), Op::Stop));
    }
    // Exact unit names: no case folding on Linux.
    assert_eq!(p.check(&u("Kubelet"), Op::Stop).unwrap(), Verdict::Allowed);
    // `systemd-*` is a prefix of the unit's name, not of anything.
    assert_eq!(p.check(&u("systemd"), Op::Stop).unwrap(), Verdict::Allowed);
    assert_eq!(
        p.check(&u("my-systemd-x"), Op::Stop).unwrap(),
        Verdict::Allowed
    );
}

#[test]
fn iscsi_daemon_depends_on_sessions() {
    let p = Protection::builtin(Flavor::Unix);
    for n in ["iscsid", "open-iscsi"] {
        assert_eq!(
            p.check(&u(n), Op::Stop).unwrap(),
            Verdict::UnlessIscsiSessions
        );
        assert_eq!(p.check(&u(n), Op::Start).unwrap(), Verdict::Allowed);
    }
}

#[test]
fn operator_flags_add_and_remove_names() {
    let p = Protection::builtin(Flavor::Unix)
        .unprotect(["kubelet", "systemd-*"])
        .unwrap()
        .protect(["my-driver", "vendor-*"])
        .unwrap();
    assert_eq!(p.check(&u("kubelet"), Op::Stop).unwrap(), Verdict::Allowed);
    assert_eq!(
        p.check(&u("systemd-journald"), Op::Stop).unwrap(),
        Verdict::Allowed
    );
    denied(p.check(&u("containerd"), Op::Stop));
    let m = denied(p.check(&u("my-driver"), Op::Stop));
    assert!(m.contains("-protected-services"), "{m}");
    denied(p.check(&u("vendor-agent"), Op::Stop));
    assert_eq!(p.unprotected(), ["kubelet.service".to_string()]);

    // One name out of a prefix: the rest of the prefix stays.
    let p = Protection::builtin(Flavor::Unix)
        .unprotect(["systemd-timesyncd"])
        .unwrap();
    assert_eq!(
        p.check(&u("systemd-timesyncd"), Op::Stop).unwrap(),
        Verdict::Allowed
    );
    denied(p.check(&u("systemd-journald"), Op::Stop));

    // Windows compares without case, flags too.
    let p = Protection::builtin(Flavor::Windows)
        .unprotect(["W32TIME"])
        .unwrap()
        .protect(["VendorSvc"])
        .unwrap();
    assert_eq!(p.check(&w("w32time"), Op::Stop).unwrap(), Verdict::Allowed);
    denied(p.check(&w("vendorsvc"), Op::Stop));

    // Hostile flag values are refused at start-up.
    for bad in ["a;b", "", "x/y", "*"] {
        let e = Protection::builtin(Flavor::Unix)
            .protect([bad])
            .unwrap_err();
        assert!(e.to_string().contains("-protected-services"), "{e}");
        let e = Protection::builtin(Flavor::Unix)
            .unprotect([bad])
            .unwrap_err();
        assert!(e.to_string().contains("-unprotect-services"), "{e}");
    }
}

#[test]
fn own_service_and_dependencies_cannot_be_unprotected() {
    let mut p = Protection::builtin(Flavor::Windows)
        .own_service("mycsiproxy")
        .unwrap();
    p.dependency("NodeHelper", "mycsiproxy");
    p.dependency("+SomeGroup", "mycsiproxy"); // not a service name: ignored
    let p = p.unprotect(["mycsiproxy", "nodehelper"]).unwrap();
    let m = denied(p.check(&w("MyCsiProxy"), Op::Stop));
    assert!(m.contains("own service"), "{m}");
    let m = denied(p.check(&w("nodehelper"), Op::Stop));
    assert!(m.contains("depends on it"), "{m}");
    assert_eq!(p.own_keys().collect::<Vec<_>>(), ["mycsiproxy"]);
    // Starting the own service is harmless.
    assert_eq!(
        p.check(&w("mycsiproxy"), Op::Start).unwrap(),
        Verdict::Allowed
    );
}

#[test]
fn refusals_do_not_depend_on_existence_and_quote_the_name() {
    let p = Protection::builtin(Flavor::Windows);
    let a = denied(p.check(&w("kubelet"), Op::Stop));
    let b = denied(p.check(&w("KUBELET"), Op::Stop));
    assert_eq!(a, b.replace("KUBELET", "kubelet"));
    assert!(a.starts_with("stop service \"kubelet\": refused"), "{a}");
}

#[test]
fn forced_stop_guard_checks_dependents_by_os_name() {
    let p = Protection::builtin(Flavor::Unix);
    let e = p.check_os_name("kubelet.service", Op::Stop).unwrap_err();
    assert!(e.to_string().contains("as a dependent"), "{e}");
    p.check_os_name("multi-user.target", Op::Stop).unwrap();
    p.check_os_name("app.service", Op::Stop).unwrap();
}

#[test]
fn unit_of_cgroup_reads_v1_hybrid_and_v2() {
    // cgroup v2 only.
    assert_eq!(
        unit_of_cgroup("0::/system.slice/csi-proxy.service\n").as_deref(),
        Some("csi-proxy.service")
    );
    // A delegated sub-cgroup below the unit.
    assert_eq!(
        unit_of_cgroup("0::/system.slice/csi-proxy.service/payload\n").as_deref(),
        Some("csi-proxy.service")
    );
    // Hybrid: the name=systemd hierarchy wins.
    let hybrid = "12:memory:/system.slice/other.service\n1:name=systemd:/system.slice/csi.service\n0::/system.slice/unified.service\n";
    assert_eq!(unit_of_cgroup(hybrid).as_deref(), Some("csi.service"));
    // Outside any service: a scope, a slice, the root.
    for none in [
        "0::/\n",
        "0::/user.slice/user-0.slice/session-3.scope\n",
        "1:name=systemd:/\n0::/\n",
        "",
        "garbage",
        "0::/system.slice/.service\n",
        "0::/system.slice/bad;name.service\n",
    ] {
        assert_eq!(unit_of_cgroup(none), None, "{none:?}");
    }
    // Templates' instances are units too.
    assert_eq!(
        unit_of_cgroup("0::/system.slice/system-csi.slice/csi@node.service\n").as_deref(),
        Some("csi@node.service")
    );
}

#[test]
fn docs_security_lists_every_builtin_name() {
    let doc = include_str!("../../../../../docs/security.md");
    let section = &doc[doc
        .find("## Node-critical services")
        .expect("docs/security.md has the section")..];
    for b in WINDOWS.iter().chain(LINUX) {
        assert!(
            section.contains(&format!("`{}`", b.name)),
            "docs/security.md does not list {}",
            b.name
        );
    }
}

/// The bypasses: StartService of the units that end or isolate the
/// manager, by name before any lookup, and aliases of protected units.
#[test]
fn units_that_end_the_manager_are_refused_a_start_by_name() {
    let p = Protection::builtin(Flavor::Unix);
    for n in [
        "systemd-reboot",
        "systemd-poweroff.service",
        "systemd-halt",
        "systemd-kexec",
        "systemd-exit",
        "systemd-soft-reboot",
        "systemd-suspend",
        "systemd-hibernate",
        "rescue",
        "emergency.service",
    ] {
        let m = denied(p.check(&u(n), Op::Start));
        assert!(m.contains("shut down"), "{n}: {m}");
    }
    // Not removable by the operator.
    let p = Protection::builtin(Flavor::Unix)
        .unprotect(["systemd-*", "systemd-reboot", "rescue"])
        .unwrap();
    denied(p.check(&u("systemd-reboot"), Op::Start));
    denied(p.check(&u("rescue"), Op::Start));
    // On Windows these are ordinary names.
    let p = Protection::builtin(Flavor::Windows);
    assert_eq!(p.check(&w("rescue"), Op::Start).unwrap(), Verdict::Allowed);
}

fn unit(names: &[&str], active: bool) -> crate::system::plan::Unit {
    crate::system::plan::Unit {
        names: names.iter().map(|s| s.to_string()).collect(),
        active,
        actions: Vec::new(),
        unmodelled: Vec::new(),
    }
}

#[test]
fn a_plan_is_checked_by_every_name_of_every_unit() {
    use crate::system::plan::Plan;
    let p = Protection::builtin(Flavor::Unix);
    // An alias of a protected unit.
    let plan = Plan {
        target: vec!["systemd-udevd.service".into(), "udev.service".into()],
        ..Plan::default()
    };
    let m = denied(p.check_plan(&u("udev"), &plan, Op::Stop));
    assert!(m.contains("by another name"), "{m}");
    let plan = Plan {
        target: vec![
            "systemd-logind.service".into(),
            "dbus-org.freedesktop.login1.service".into(),
        ],
        ..Plan::default()
    };
    denied(p.check_plan(&u("dbus-org.freedesktop.login1"), &plan, Op::Stop));
    // A stop reaching the kubelet, running or not.
    for active in [true, false] {
        let plan = Plan {
            target: vec!["low.service".into()],
            stopped: vec![
                unit(&["mid.service"], true),
                unit(&["kubelet.service"], active),
            ],
            ..Plan::default()
        };
        let m = denied(p.check_plan(&u("low"), &plan, Op::Stop));
        assert!(m.contains("as a dependent"), "{m}");
        assert!(m.starts_with("stop service \"low\": refused"), "{m}");
    }
    // A start pulling in a target that reboots, or sshd.
    for (pulled, why) in [
        ("reboot.target", "shuts down"),
        ("sshd.service", "it would start \"sshd.service\""),
        // A stopped protected unit is never started as a side effect
        // either, though only its stop is guarded when named.
        ("kubelet.service", "it would start \"kubelet.service\""),
        (
            "containerd.service",
            "it would start \"containerd.service\"",
        ),
    ] {
        let plan = Plan {
            target: vec!["x.service".into()],
            started: vec![unit(&["y.service"], false), unit(&[pulled], false)],
            ..Plan::default()
        };
        let m = denied(p.check_plan(&u("x"), &plan, Op::Start));
        assert!(m.contains(why), "{m}");
        // The refusal leads with the operation asked for.
        assert!(m.starts_with("start service \"x\": refused"), "{m}");
        // Already running: starting it again changes nothing.
        let running = Plan {
            started: vec![unit(&[pulled], true)],
            ..plan
        };
        assert_eq!(
            p.check_plan(&u("x"), &running, Op::Start).unwrap(),
            Verdict::Allowed
        );
    }
    // A start stopping the running kubelet through a conflict; a stopped
    // one is not stopped by it.
    let conflict = |active| Plan {
        target: vec!["x.service".into()],
        stopped: vec![unit(&["kubelet.service"], active)],
        ..Plan::default()
    };
    let m = denied(p.check_plan(&u("x"), &conflict(true), Op::Start));
    assert!(m.contains("conflict"), "{m}");
    assert!(m.starts_with("start service \"x\": refused"), "{m}");
    assert_eq!(
        p.check_plan(&u("x"), &conflict(false), Op::Start).unwrap(),
        Verdict::Allowed
    );
    // iscsid in a stop: allowed only without sessions.
    let plan = Plan {
        target: vec!["x.service".into()],
        stopped: vec![unit(&["iscsid.service"], true)],
        ..Plan::default()
    };
    assert_eq!(
        p.check_plan(&u("x"), &plan, Op::Stop).unwrap(),
        Verdict::UnlessIscsiSessions
    );
}
