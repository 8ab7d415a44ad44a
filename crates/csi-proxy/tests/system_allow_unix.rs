//! The allow-list of the System API (`-allowed-services`) and the plan
//! checks behind it, over the real binary's System socket and a private
//! `systemd --user` (`tests/systemd`).
//!
//! Every case measured against the previous design is here, each on a
//! fresh manager and each twice: with the unit on the allow-list (the plan
//! refuses it) and with the default list (the list refuses it). Each
//! checks that the manager still runs and that nothing changed state.
#![cfg(target_os = "linux")]

mod common;
mod systemd;

use common::Proxy;
use csi_proxy_api::system::v1alpha1::{self as sys, system_client::SystemClient};
use systemd::Systemd;
use tonic::Code;

type Client = SystemClient<csi_proxy_client::ProxyChannel>;

fn proxy_on(sd: &Systemd, extra: &[&str]) -> Proxy {
    let bus = sd.address();
    Proxy::start_with(extra, move |c| {
        c.env("DBUS_SYSTEM_BUS_ADDRESS", &bus);
    })
}

async fn client(p: &Proxy) -> Client {
    SystemClient::new(p.channel("system-v1alpha1").await)
}

async fn start(c: &mut Client, name: &str) -> Result<(), tonic::Status> {
    c.start_service(sys::StartServiceRequest { name: name.into() })
        .await
        .map(|_| ())
}

async fn stop(c: &mut Client, name: &str) -> Result<(), tonic::Status> {
    c.stop_service(sys::StopServiceRequest {
        name: name.into(),
        force: false,
    })
    .await
    .map(|_| ())
}

const RUNNING: i32 = sys::ServiceStatus::Running as i32;
const STOPPED: i32 = sys::ServiceStatus::Stopped as i32;

async fn state(c: &mut Client, name: &str) -> i32 {
    c.get_service(sys::GetServiceRequest { name: name.into() })
        .await
        .unwrap_or_else(|e| panic!("get {name}: {e}"))
        .into_inner()
        .status
}

fn need_root() -> bool {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: needs root (a private mount namespace for systemd --user)");
        return false;
    }
    true
}

/// The manager still answers on its bus.
fn alive(sd: &Systemd) -> bool {
    std::process::Command::new("busctl")
        .arg(format!("--address={}", sd.address()))
        .args(["status", "org.freedesktop.systemd1"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Call {
    Start,
    Stop,
}

/// One measured case: its units, what is started before the call (by the
/// manager itself), the call, and the units whose state must not change.
struct Case {
    what: &'static str,
    units: &'static [(&'static str, &'static str)],
    running: &'static [&'static str],
    call: Call,
    target: &'static str,
    unchanged: &'static [&'static str],
}

const SLEEP: &str = "[Service]\nExecStart=/bin/sleep 1000\n";

const CASES: &[Case] = &[
    Case {
        what: "a oneshot unit with OnSuccess=systemd-exit.service",
        units: &[(
            "{prefix}-x",
            "[Unit]\nOnSuccess=systemd-exit.service\n[Service]\nType=oneshot\nExecStart=/bin/true\n",
        )],
        running: &[],
        call: Call::Start,
        target: "x",
        unchanged: &[],
    },
    Case {
        what: "a failing unit with OnFailure=systemd-exit.service",
        units: &[(
            "{prefix}-x",
            "[Unit]\nOnFailure=systemd-exit.service\n[Service]\nType=oneshot\nExecStart=/bin/false\n",
        )],
        running: &[],
        call: Call::Start,
        target: "x",
        unchanged: &[],
    },
    Case {
        what: "the stop of a running unit with SuccessAction=exit",
        units: &[(
            "{prefix}-x",
            "[Unit]\nSuccessAction=exit\n[Service]\nExecStart=/bin/sleep 1000\n",
        )],
        running: &["x"],
        call: Call::Stop,
        target: "x",
        unchanged: &["x"],
    },
    Case {
        what: "a failing unit with FailureAction=exit",
        units: &[(
            "{prefix}-x",
            "[Unit]\nFailureAction=exit\n[Service]\nType=oneshot\nExecStart=/bin/false\n",
        )],
        running: &[],
        call: Call::Start,
        target: "x",
        unchanged: &[],
    },
    Case {
        what: "a unit in conflict with a running one whose OnSuccess= is systemd-exit",
        units: &[
            (
                "{prefix}-x",
                "[Unit]\nConflicts={prefix}-y.service\n[Service]\nExecStart=/bin/sleep 1000\n",
            ),
            (
                "{prefix}-y",
                "[Unit]\nOnSuccess=systemd-exit.service\n[Service]\nExecStart=/bin/sleep 1000\n",
            ),
        ],
        running: &["y"],
        call: Call::Start,
        target: "x",
        unchanged: &["x", "y"],
    },
    Case {
        what: "the stop of the only unit that wants a protected kubelet with StopWhenUnneeded=yes",
        units: &[
            (
                "kubelet",
                "[Unit]\nStopWhenUnneeded=yes\n[Service]\nExecStart=/bin/sleep 1000\n",
            ),
            (
                "{prefix}-x",
                "[Unit]\nWants=kubelet.service\n[Service]\nExecStart=/bin/sleep 1000\n",
            ),
        ],
        running: &["x"],
        call: Call::Stop,
        target: "x",
        unchanged: &["x", "kubelet"],
    },
    Case {
        what: "the stop of a running unit whose OnSuccess= is systemd-exit",
        units: &[(
            "{prefix}-x",
            "[Unit]\nOnSuccess=systemd-exit.service\n[Service]\nExecStart=/bin/sleep 1000\n",
        )],
        running: &["x"],
        call: Call::Stop,
        target: "x",
        unchanged: &["x"],
    },
    // Found by the red-team of issue 40 (`/work/redteam-40`): units the
    // plan cannot follow are refused (default-deny), whatever they do.
    Case {
        what: "a start wanting a .path unit whose condition holds (Unit=systemd-exit.service)",
        units: &[
            (
                "{prefix}-x",
                "[Unit]\nWants={prefix}-p.path\n[Service]\nExecStart=/bin/sleep 1000\n",
            ),
            (
                "{prefix}-p.path",
                "[Path]\nPathExists=/\nUnit=systemd-exit.service\n",
            ),
        ],
        running: &[],
        call: Call::Start,
        target: "x",
        unchanged: &["p.path"],
    },
    Case {
        what: "a start wanting a .timer unit (OnActiveSec=1, Unit=systemd-exit.service)",
        units: &[
            (
                "{prefix}-x",
                "[Unit]\nWants={prefix}-t.timer\n[Service]\nExecStart=/bin/sleep 1000\n",
            ),
            (
                "{prefix}-t.timer",
                "[Timer]\nOnActiveSec=1\nUnit=systemd-exit.service\n",
            ),
        ],
        running: &[],
        call: Call::Start,
        target: "x",
        unchanged: &["t.timer"],
    },
    Case {
        what: "a start wanting a .socket unit (Service=systemd-exit.service)",
        units: &[
            (
                "{prefix}-x",
                "[Unit]\nWants={prefix}-s.socket\n[Service]\nExecStart=/bin/sleep 1000\n",
            ),
            (
                "{prefix}-s.socket",
                "[Socket]\nListenStream=%t/{prefix}-s.sock\nService=systemd-exit.service\n",
            ),
        ],
        running: &[],
        call: Call::Start,
        target: "x",
        unchanged: &["s.socket"],
    },
    Case {
        what: "the stop of a running unit whose OnSuccess= is a .path unit (Unit=systemd-exit.service)",
        units: &[
            (
                "{prefix}-x",
                "[Unit]\nOnSuccess={prefix}-p.path\n[Service]\nExecStart=/bin/sleep 1000\n",
            ),
            (
                "{prefix}-p.path",
                "[Path]\nPathExists=/\nUnit=systemd-exit.service\n",
            ),
        ],
        running: &["x"],
        call: Call::Stop,
        target: "x",
        unchanged: &["x", "p.path"],
    },
    Case {
        what: "a oneshot with OnSuccess= a target and OnSuccessJobMode=isolate",
        units: &[
            (
                "{prefix}-x",
                "[Unit]\nOnSuccess={prefix}-i.target\nOnSuccessJobMode=isolate\n[Service]\nType=oneshot\nExecStart=/bin/true\n",
            ),
            ("{prefix}-i.target", "[Unit]\nAllowIsolate=yes\n"),
            ("{prefix}-y", SLEEP),
        ],
        running: &["y"],
        call: Call::Start,
        target: "x",
        unchanged: &["y"],
    },
    Case {
        what: "a failing unit with OnFailure= a target and OnFailureJobMode=isolate",
        units: &[
            (
                "{prefix}-x",
                "[Unit]\nOnFailure={prefix}-i.target\nOnFailureJobMode=isolate\n[Service]\nType=oneshot\nExecStart=/bin/false\n",
            ),
            ("{prefix}-i.target", "[Unit]\nAllowIsolate=yes\n"),
            ("{prefix}-y", SLEEP),
        ],
        running: &["y"],
        call: Call::Start,
        target: "x",
        unchanged: &["y"],
    },
    Case {
        what: "the stop of a running unit with OnSuccess= a target and OnSuccessJobMode=isolate",
        units: &[
            (
                "{prefix}-x",
                "[Unit]\nOnSuccess={prefix}-i.target\nOnSuccessJobMode=isolate\n[Service]\nExecStart=/bin/sleep 1000\n",
            ),
            ("{prefix}-i.target", "[Unit]\nAllowIsolate=yes\n"),
            ("{prefix}-y", SLEEP),
        ],
        running: &["x", "y"],
        call: Call::Stop,
        target: "x",
        unchanged: &["x", "y"],
    },
    Case {
        what: "a start in conflict with a listening .socket unit",
        units: &[
            (
                "{prefix}-x",
                "[Unit]\nConflicts={prefix}-s.socket\n[Service]\nExecStart=/bin/sleep 1000\n",
            ),
            (
                "{prefix}-s.socket",
                "[Socket]\nListenStream=%t/{prefix}-s.sock\n",
            ),
            ("{prefix}-s", SLEEP),
        ],
        running: &["s.socket"],
        call: Call::Start,
        target: "x",
        unchanged: &["s.socket"],
    },
    Case {
        what: "a start wanting a stopped protected kubelet",
        units: &[
            ("kubelet", SLEEP),
            (
                "{prefix}-x",
                "[Unit]\nWants=kubelet.service\n[Service]\nExecStart=/bin/sleep 1000\n",
            ),
        ],
        running: &[],
        call: Call::Start,
        target: "x",
        unchanged: &["kubelet"],
    },
    Case {
        what: "a start in conflict with a running protected kubelet",
        units: &[
            ("kubelet", SLEEP),
            (
                "{prefix}-x",
                "[Unit]\nConflicts=kubelet.service\n[Service]\nExecStart=/bin/sleep 1000\n",
            ),
        ],
        running: &["kubelet"],
        call: Call::Start,
        target: "x",
        unchanged: &["kubelet"],
    },
];

/// The full unit name of a case's name (`x` is `{prefix}-x.service`,
/// `p.path` is `{prefix}-p.path`, `kubelet` is `kubelet.service`).
fn full_name(sd: &Systemd, n: &str) -> String {
    if n.contains('.') {
        sd.unit(n)
    } else {
        format!("{}.service", unit_name(sd, n))
    }
}

/// `systemctl is-active` of a unit of any type.
fn is_active(sd: &Systemd, unit: &str) -> String {
    let out = sd.systemctl(&["is-active", unit]);
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A name of a case (`x` is the run's `{prefix}-x`; `kubelet` itself).
fn unit_name(sd: &Systemd, n: &str) -> String {
    if n == "kubelet" {
        n.to_string()
    } else {
        sd.unit(n)
    }
}

async fn run_case(case: &Case) {
    let sd = Systemd::start_with_units(case.units);
    for r in case.running {
        let u = full_name(&sd, r);
        let out = sd.systemctl(&["start", &u]);
        assert!(out.status.success(), "{}: start {u}: {out:?}", case.what);
    }
    let target = unit_name(&sd, case.target);
    let allowed = format!("-allowed-services={target}");
    for (flags, by_list) in [(&[allowed.as_str()][..], false), (&[][..], true)] {
        let p = proxy_on(&sd, flags);
        let mut c = client(&p).await;
        let before: Vec<String> = case
            .unchanged
            .iter()
            .map(|u| is_active(&sd, &full_name(&sd, u)))
            .collect();
        let r = match case.call {
            Call::Start => start(&mut c, &target).await,
            Call::Stop => stop(&mut c, &target).await,
        };
        let e = r.expect_err(case.what);
        let m = e.message();
        assert_eq!(e.code(), Code::PermissionDenied, "{}: {m}", case.what);
        let verb = match case.call {
            Call::Start => "start service",
            Call::Stop => "stop service",
        };
        // The operation and the service asked for lead the message.
        assert!(
            m.starts_with(&format!("{verb} \"{target}\"")),
            "{}: names another operation or service first: {m}",
            case.what
        );
        let list_refusal = m.contains("not in this csi-proxy's -allowed-services list");
        assert_eq!(list_refusal, by_list, "{} (list {by_list}): {m}", case.what);
        // Give a manager that would exit the time to do it.
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        assert!(
            alive(&sd),
            "{}: the manager exited\n{}",
            case.what,
            sd.log()
        );
        for (u, was) in case.unchanged.iter().zip(before) {
            let now = is_active(&sd, &full_name(&sd, u));
            assert_eq!(now, was, "{}: {u} changed", case.what);
        }
        if case.call == Call::Start {
            assert_eq!(state(&mut c, &target).await, STOPPED, "{}", case.what);
        } else {
            assert_eq!(state(&mut c, &target).await, RUNNING, "{}", case.what);
        }
    }
}

#[tokio::test]
async fn every_measured_case_is_refused_by_the_plan_and_by_the_list() {
    if !need_root() {
        return;
    }
    // Every case runs; the failures are listed together.
    let mut failed = Vec::new();
    for case in CASES {
        let one = tokio::task::spawn_blocking(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(run_case(case))
        });
        if one.await.is_err() {
            failed.push(case.what);
        }
    }
    assert!(failed.is_empty(), "failed cases: {failed:#?}");
}

/// The default list is the storage services; an alias counts for the unit
/// it names; `*` allows every service that is not protected.
#[tokio::test]
async fn the_default_list_the_flag_and_aliases() {
    if !need_root() {
        return;
    }
    let sd = Systemd::start_with_aliases(
        &[
            ("multipathd", SLEEP),
            ("iscsid", SLEEP),
            ("{prefix}-evil", SLEEP),
        ],
        &[
            // An allowed name that is an alias of another unit, and an
            // alias of an allowed unit.
            ("open-iscsi", "{prefix}-evil"),
            ("multipath-tools", "multipathd"),
        ],
    );
    let evil = sd.unit("evil");
    let base = sd.unit("base");
    let p = proxy_on(&sd, &[]);
    assert!(
        p.log()
            .contains("iscsid.service,multipathd.service,open-iscsi.service"),
        "{}",
        p.log()
    );
    let mut c = client(&p).await;
    // On the default list: they start and stop.
    for n in ["multipathd", "iscsid"] {
        start(&mut c, n).await.unwrap();
        assert_eq!(state(&mut c, n).await, RUNNING, "{n}");
        stop(&mut c, n).await.unwrap();
        assert_eq!(state(&mut c, n).await, STOPPED, "{n}");
    }
    // Through an alias of an allowed unit.
    start(&mut c, "multipath-tools").await.unwrap();
    assert_eq!(state(&mut c, "multipathd").await, RUNNING);
    // An allowed name that resolves to another unit is refused, naming it.
    let e = start(&mut c, "open-iscsi").await.unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{}", e.message());
    assert!(e.message().contains("-allowed-services"), "{}", e.message());
    assert!(e.message().contains(&evil), "{}", e.message());
    // Anything else: refused naming the flag, existing or not; GetService
    // stays open.
    for n in [base.as_str(), "no-such-unit-csi-proxy"] {
        for r in [start(&mut c, n).await, stop(&mut c, n).await] {
            let e = r.unwrap_err();
            assert_eq!(e.code(), Code::PermissionDenied, "{n}: {}", e.message());
            assert!(e.message().contains("-allowed-services"), "{}", e.message());
        }
    }
    for n in [&base, &evil] {
        assert_eq!(state(&mut c, n).await, STOPPED, "{n}");
    }

    // The flag replaces the list; `*` allows every unprotected service.
    let flag = format!("-allowed-services={base}");
    let p2 = proxy_on(&sd, &[&flag]);
    let mut c2 = client(&p2).await;
    start(&mut c2, &base).await.unwrap();
    stop(&mut c2, &base).await.unwrap();
    let e = start(&mut c2, "iscsid").await.unwrap_err();
    assert!(e.message().contains("-allowed-services"), "{}", e.message());
    let p3 = proxy_on(&sd, &["-allowed-services=*"]);
    assert!(p3.log().contains("-allowed-services=*"), "{}", p3.log());
    let mut c3 = client(&p3).await;
    start(&mut c3, &evil).await.unwrap();
    stop(&mut c3, &evil).await.unwrap();
    // Protected whatever the list says.
    let p4 = proxy_on(&sd, &["-allowed-services=kubelet,containerd"]);
    let mut c4 = client(&p4).await;
    let e = stop(&mut c4, "kubelet").await.unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{}", e.message());
    assert!(e.message().contains("protected"), "{}", e.message());
}

/// A caller-policy `"system/services"` rule narrows the list for a caller
/// (this test process: its uid), and never widens `-allowed-services`.
#[tokio::test]
async fn a_caller_policy_rule_narrows_the_list() {
    if !need_root() {
        return;
    }
    let sd = Systemd::start_with_units(&[("multipathd", SLEEP), ("iscsid", SLEEP)]);
    let base = sd.unit("base");
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.json");
    let uid = nix::unistd::geteuid().as_raw();
    std::fs::write(
        &policy,
        format!(
            r#"{{"system": [{{"uid": {uid}}}],
                "system/services": [{{"uid": {uid}, "services": ["iscsid", "{base}"]}}]}}"#
        ),
    )
    .unwrap();
    let flag = format!("-caller-policy={}", policy.display());
    let p = proxy_on(&sd, &[&flag]);
    let mut c = client(&p).await;
    start(&mut c, "iscsid").await.unwrap();
    stop(&mut c, "iscsid").await.unwrap();
    // On -allowed-services (the default), not on the caller's list.
    let e = start(&mut c, "multipathd").await.unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{}", e.message());
    assert!(e.message().contains("caller policy"), "{}", e.message());
    // On the caller's list, not on -allowed-services.
    let e = start(&mut c, &base).await.unwrap_err();
    assert!(e.message().contains("-allowed-services"), "{}", e.message());
    for n in ["multipathd", base.as_str()] {
        assert_eq!(state(&mut c, n).await, STOPPED, "{n}");
    }
    // GetService is not narrowed.
    state(&mut c, "multipathd").await;
}

/// A drop-in written and `daemon-reload`ed while the plan is walked (the
/// red-team's `09-toctou-reload.sh`): the call is refused, nothing of the
/// new configuration runs. The walk of 600 template instances takes
/// seconds; the reload comes 1 s into it.
#[tokio::test]
async fn a_reload_while_the_plan_is_made_refuses_the_call() {
    if !need_root() {
        return;
    }
    let wants: String = (0..600)
        .map(|i| format!("{{prefix}}-h@{i}.service "))
        .collect();
    let x = format!("[Unit]\nWants={wants}\n[Service]\nExecStart=/bin/sleep 1000\n");
    let x: &'static str = Box::leak(x.into_boxed_str());
    let sd = Systemd::start_with_units(&[
        ("{prefix}-x", x),
        (
            "{prefix}-h@",
            "[Service]\nType=oneshot\nExecStart=/bin/true\n",
        ),
    ]);
    let target = sd.unit("x");
    let late = sd.unit("late");
    let p = proxy_on(&sd, &[&format!("-allowed-services={target}")]);
    let mut c = client(&p).await;
    let call = {
        let mut c = c.clone();
        let target = target.clone();
        tokio::spawn(async move { start(&mut c, &target).await })
    };
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let dir = sd.unit_dir();
    std::fs::write(
        dir.join(format!("{late}.service")),
        "[Unit]\nSuccessAction=exit\n[Service]\nType=oneshot\nExecStart=/bin/true\n",
    )
    .unwrap();
    let dropin = dir.join(format!("{target}.service.d"));
    std::fs::create_dir_all(&dropin).unwrap();
    std::fs::write(
        dropin.join("late.conf"),
        format!("[Unit]\nWants={late}.service\n"),
    )
    .unwrap();
    let out = sd.systemctl(&["daemon-reload"]);
    assert!(out.status.success(), "{out:?}");
    let e = call.await.unwrap().expect_err("a reload during the plan");
    assert_eq!(e.code(), Code::FailedPrecondition, "{}", e.message());
    assert!(
        e.message().starts_with(&format!("start service {target}"))
            && e.message().contains("reloaded"),
        "{}",
        e.message()
    );
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(alive(&sd), "the manager exited\n{}", sd.log());
    assert_eq!(state(&mut c, &target).await, STOPPED);
    // The plan made on the new configuration refuses the call.
    let e = start(&mut c, &target).await.unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{}", e.message());
    assert!(
        e.message().contains("SuccessAction=exit"),
        "{}",
        e.message()
    );
}

/// A start in conflict with the mount unit of a directory (the kubelet's,
/// where pod volumes live; the red-team's `12-mount-conflict.sh`): the
/// mount is real in the manager's private mount namespace; refused, it
/// stays mounted.
#[tokio::test]
async fn a_start_in_conflict_with_a_mount_unit_is_refused() {
    if !need_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new("systemd-escape")
        .arg("--path")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let mount = format!("{}.mount", String::from_utf8_lossy(&out.stdout).trim());
    let body = format!(
        "[Mount]\nWhat=tmpfs\nWhere={}\nType=tmpfs\n",
        dir.path().display()
    );
    let x = format!("[Unit]\nConflicts={mount}\n[Service]\nExecStart=/bin/sleep 1000\n");
    let sd = Systemd::start_with_units(&[(mount.as_str(), body.as_str()), ("{prefix}-x", &x)]);
    let out = sd.systemctl(&["start", &mount]);
    assert!(out.status.success(), "{out:?}\n{}", sd.log());
    assert_eq!(is_active(&sd, &mount), "active");
    let target = sd.unit("x");
    let p = proxy_on(&sd, &[&format!("-allowed-services={target}")]);
    let mut c = client(&p).await;
    let e = start(&mut c, &target).await.unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{}", e.message());
    assert!(
        e.message()
            .starts_with(&format!("start service \"{target}\": refused"))
            && e.message().contains(&mount),
        "{}",
        e.message()
    );
    assert_eq!(is_active(&sd, &mount), "active");
    assert_eq!(state(&mut c, &target).await, STOPPED);
}
