//! Node-critical services over the real binary's System socket: the
//! protected set refuses StopService (StartService for remote access) by
//! name before any lookup, keeps running services running, never stops a
//! protected dependent through a forced stop, protects the proxy's own
//! service (`-service-name` and the unit of its cgroup) and what it
//! depends on, follows `-protected-services` / `-unprotect-services`, and
//! refuses to stop the iSCSI daemon while sessions are logged in.
//!
//! The services live in a private `systemd --user` manager on a private
//! bus (`tests/systemd`), so a unit named `kubelet` there is a throwaway
//! one, never the host's.
#![cfg(target_os = "linux")]

mod common;
mod systemd;

use common::Proxy;
use csi_proxy_api::system::v1alpha1::{self as sys, system_client::SystemClient};
use std::ffi::CString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use systemd::Systemd;
use tonic::Code;

type Client = SystemClient<csi_proxy_client::ProxyChannel>;

const NO_BUS: &str = "unix:path=/nonexistent/csi-proxy-test-bus";

/// A proxy on `bus`; unless `extra` sets `-allowed-services`, every
/// service is allowed (`*`): these tests act on throwaway units.
fn proxy_on(bus: &str, extra: &[&str]) -> Proxy {
    let bus = bus.to_string();
    let mut args = extra.to_vec();
    if !extra.iter().any(|a| a.starts_with("-allowed-services")) {
        args.push("-allowed-services=*");
    }
    Proxy::start_with(&args, move |c| {
        c.env("DBUS_SYSTEM_BUS_ADDRESS", &bus);
    })
}

async fn client(p: &Proxy) -> Client {
    SystemClient::new(p.channel("system-v1alpha1").await)
}

async fn stop(c: &mut Client, name: &str, force: bool) -> Result<(), tonic::Status> {
    c.stop_service(sys::StopServiceRequest {
        name: name.into(),
        force,
    })
    .await
    .map(|_| ())
}

async fn start(c: &mut Client, name: &str) -> Result<(), tonic::Status> {
    c.start_service(sys::StartServiceRequest { name: name.into() })
        .await
        .map(|_| ())
}

async fn state(c: &mut Client, name: &str) -> i32 {
    c.get_service(sys::GetServiceRequest { name: name.into() })
        .await
        .unwrap_or_else(|e| panic!("get {name}: {e}"))
        .into_inner()
        .status
}

const RUNNING: i32 = sys::ServiceStatus::Running as i32;
const STOPPED: i32 = sys::ServiceStatus::Stopped as i32;

fn assert_denied(r: Result<(), tonic::Status>, what: &str) -> String {
    let e = r.expect_err(what);
    assert_eq!(e.code(), Code::PermissionDenied, "{what}: {}", e.message());
    assert!(e.message().contains("protected"), "{what}: {}", e.message());
    e.message().to_string()
}

/// Every built-in Linux name, with and without `.service`, and names that
/// the `systemd-*` entry covers; none of them exists on the (absent) bus.
const BUILTIN: &[&str] = &[
    "kubelet",
    "kube-proxy",
    "containerd",
    "containerd.service",
    "docker",
    "cri-docker",
    "crio",
    "flanneld",
    "dbus",
    "dbus-broker",
    "systemd-journald",
    "systemd-udevd.service",
    "systemd-logind",
    "systemd-no-such-unit",
    "sshd",
    "ssh",
    "NetworkManager",
    "networking",
    "firewalld",
    "nftables",
    "ufw",
    "chrony",
    "chronyd",
    "auditd",
];

/// Services that shut down, reboot, halt, kexec, suspend or exit the
/// manager, or isolate it.
const MANAGER_ENDING: &[&str] = &[
    "systemd-reboot",
    "systemd-poweroff",
    "systemd-halt",
    "systemd-kexec",
    "systemd-exit",
    "systemd-exit.service",
    "systemd-soft-reboot",
    "systemd-suspend",
    "systemd-hibernate",
    "rescue",
    "emergency",
];

#[tokio::test]
async fn protected_names_are_refused_before_systemd_is_asked() {
    // No bus at all: a name that got as far as a lookup would answer
    // FailedPrecondition ("systemd is not reachable"), so PermissionDenied
    // proves the refusal came first, existing or not.
    let p = proxy_on(
        NO_BUS,
        &[
            "-service-name=my-node-agent",
            "-protected-services=vendor-agent,vendor-*",
        ],
    );
    let mut c = client(&p).await;
    for n in BUILTIN
        .iter()
        .copied()
        .chain(["my-node-agent", "vendor-agent", "vendor-other"])
    {
        for force in [false, true] {
            assert_denied(stop(&mut c, n, force).await, n);
        }
    }
    for n in ["sshd", "ssh"] {
        assert_denied(start(&mut c, n).await, n);
    }
    // Units that end or isolate the manager: refused a start by name,
    // before any lookup, existing or not.
    for n in MANAGER_ENDING {
        let e = start(&mut c, n).await.unwrap_err();
        assert_eq!(e.code(), Code::PermissionDenied, "{n}: {}", e.message());
        assert!(e.message().contains("shut down"), "{n}: {}", e.message());
    }
    // Not protected: these reach the (absent) service manager.
    for n in ["Kubelet", "app", "systemd", "my-systemd-x"] {
        let e = stop(&mut c, n, false).await.unwrap_err();
        assert_eq!(e.code(), Code::FailedPrecondition, "{n}: {}", e.message());
        assert!(e.message().contains("systemd is not reachable"), "{n}");
    }
    let e = start(&mut c, "kubelet").await.unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{}", e.message());
}

#[tokio::test]
async fn unprotect_services_takes_names_out_and_is_logged() {
    let p = proxy_on(NO_BUS, &["-unprotect-services=kubelet,systemd-*"]);
    assert!(
        p.log().contains("-unprotect-services") && p.log().contains("kubelet"),
        "{}",
        p.log()
    );
    let mut c = client(&p).await;
    for n in ["kubelet", "systemd-journald"] {
        let e = stop(&mut c, n, false).await.unwrap_err();
        assert_eq!(e.code(), Code::FailedPrecondition, "{n}: {}", e.message());
    }
    assert_denied(stop(&mut c, "containerd", false).await, "containerd");
}

#[test]
fn bad_protection_flags_stop_the_start_up() {
    let dir = tempfile::tempdir().unwrap();
    for flag in [
        "-protected-services=a;b",
        "-unprotect-services=../x",
        "-protected-services=*",
    ] {
        let out = std::process::Command::new(common::bin())
            .arg(format!("-kubelet-path={}", dir.path().display()))
            .arg(format!(
                "--socket-dir={}",
                dir.path().join("sock").display()
            ))
            .arg(flag)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{flag}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("-protected-services") || err.contains("-unprotect-services"),
            "{flag}: {err}"
        );
    }
}

/// Units of the private manager: protected names, a throwaway pair, a
/// base the private `kubelet` needs, and the proxy's own unit with what
/// it needs.
const UNITS: &[(&str, &str)] = &[
    (
        "kubelet",
        "[Unit]\nDescription=private kubelet\nRequires={prefix}-kbase.service\nAfter={prefix}-kbase.service\n[Service]\nExecStart=/bin/sleep 1000\n",
    ),
    (
        "{prefix}-kbase",
        "[Unit]\nDescription=what the private kubelet needs\n[Service]\nExecStart=/bin/sleep 1000\n",
    ),
    (
        "containerd",
        "[Unit]\nDescription=private containerd\n[Service]\nExecStart=/bin/sleep 1000\n",
    ),
    (
        "sshd",
        "[Unit]\nDescription=private sshd\n[Service]\nExecStart=/bin/sleep 1000\n",
    ),
    (
        "iscsid",
        "[Unit]\nDescription=private iscsid\n[Service]\nExecStart=/bin/sleep 1000\n",
    ),
    (
        "{prefix}-self",
        "[Unit]\nDescription=the proxy's own unit\nRequires={prefix}-needed.service\n[Service]\nExecStart=/bin/sleep 1000\n",
    ),
    (
        "{prefix}-needed",
        "[Unit]\nDescription=what the proxy's unit needs\n[Service]\nExecStart=/bin/sleep 1000\n",
    ),
];

/// The private managers of this file's tests run units of the same
/// names, and unit cgroups are named after their units: one manager at a
/// time, or one test's stop kills another's unit.
static ONE_MANAGER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn need_root() -> bool {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: needs root (a private mount namespace for systemd --user)");
        return false;
    }
    true
}

#[tokio::test]
async fn running_protected_services_keep_running() {
    if !need_root() {
        return;
    }
    let _one = ONE_MANAGER.lock().await;
    let sd = Systemd::start_with_units(UNITS);
    let kbase = sd.unit("kbase");
    let p = proxy_on(&sd.address(), &[]);
    let mut c = client(&p).await;
    for n in ["kubelet", "containerd", "iscsid"] {
        start(&mut c, n).await.unwrap();
    }
    for n in ["kubelet", &kbase, "containerd"] {
        assert_eq!(state(&mut c, n).await, RUNNING, "{n}");
    }
    for force in [false, true] {
        assert_denied(stop(&mut c, "kubelet", force).await, "kubelet");
        assert_denied(stop(&mut c, "containerd", force).await, "containerd");
    }
    // Not protected itself, but a forced stop would stop the kubelet that
    // needs it: refused, and nothing stopped.
    for force in [true, false] {
        let m = assert_denied(stop(&mut c, &kbase, force).await, &kbase);
        assert!(m.contains("kubelet") && m.contains("as a dependent"), "{m}");
    }
    // Starting a remote-access service is refused.
    assert_denied(start(&mut c, "sshd").await, "sshd");
    for (n, want) in [
        ("kubelet", RUNNING),
        (kbase.as_str(), RUNNING),
        ("containerd", RUNNING),
        ("sshd", STOPPED),
    ] {
        assert_eq!(state(&mut c, n).await, want, "{n} changed");
    }
    // The iSCSI daemon stops when no session is logged in (this machine
    // has none: no iscsi_tcp).
    if std::fs::read_dir("/sys/class/iscsi_session").map_or(true, |mut d| d.next().is_none()) {
        stop(&mut c, "iscsid", false).await.unwrap();
        assert_eq!(state(&mut c, "iscsid").await, STOPPED);
    }
    // Throwaway services still start and stop.
    let base = sd.unit("base");
    let dep = sd.unit("dep");
    start(&mut c, &dep).await.unwrap();
    stop(&mut c, &base, true).await.unwrap();
    for n in [&base, &dep] {
        assert_eq!(state(&mut c, n).await, STOPPED, "{n}");
    }

    // The operator's flags: an added name is refused, a removed one stops.
    let add = format!("-protected-services={base}");
    let p2 = proxy_on(&sd.address(), &[&add, "-unprotect-services=containerd"]);
    let mut c2 = client(&p2).await;
    start(&mut c2, &base).await.unwrap();
    let m = assert_denied(stop(&mut c2, &base, false).await, &base);
    assert!(m.contains("-protected-services"), "{m}");
    assert_eq!(state(&mut c2, &base).await, RUNNING);
    stop(&mut c2, "containerd", false).await.unwrap();
    assert_eq!(state(&mut c2, "containerd").await, STOPPED);
    // -allowed-services is still checked after protection.
    let p3 = proxy_on(&sd.address(), &["-allowed-services=kubelet"]);
    let mut c3 = client(&p3).await;
    assert_denied(stop(&mut c3, "kubelet", false).await, "kubelet");
    assert_eq!(state(&mut c3, "kubelet").await, RUNNING);
}

/// A cgroup named like a systemd service unit
/// (`csi-proxy-test-<pid>.slice/<unit>`, apart from the cgroups of the
/// private manager's units), in the hierarchy the proxy reads its unit
/// from; removed on drop (once the proxy has exited).
struct UnitCgroup {
    slice: PathBuf,
    unit: PathBuf,
}

impl UnitCgroup {
    fn create(unit: &str) -> Option<UnitCgroup> {
        let root = [
            "/sys/fs/cgroup/systemd",
            "/sys/fs/cgroup/unified",
            "/sys/fs/cgroup",
        ]
        .into_iter()
        .map(Path::new)
        .find(|p| p.join("cgroup.procs").exists())?;
        let slice = root.join(format!("csi-proxy-test-{}.slice", std::process::id()));
        std::fs::create_dir(&slice).ok()?;
        let cg = UnitCgroup {
            unit: slice.join(unit),
            slice,
        };
        std::fs::create_dir(&cg.unit).ok()?;
        Some(cg)
    }
}

impl Drop for UnitCgroup {
    fn drop(&mut self) {
        for dir in [&self.unit, &self.slice] {
            for _ in 0..100 {
                if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        }
    }
}

#[tokio::test]
async fn the_proxys_own_unit_and_what_it_needs_are_protected() {
    if !need_root() {
        return;
    }
    let _one = ONE_MANAGER.lock().await;
    let sd = Systemd::start_with_units(UNITS);
    let own = sd.unit("self");
    let needed = sd.unit("needed");
    let Some(cg) = UnitCgroup::create(&format!("{own}.service")) else {
        eprintln!("skipped: no writable cgroup hierarchy to run the proxy in a unit's cgroup");
        return;
    };
    let procs = CString::new(cg.unit.join("cgroup.procs").to_str().unwrap()).unwrap();
    let bus = sd.address();
    let p = Proxy::start_with(
        &["-service-name=my-node-agent", "-allowed-services=*"],
        move |cmd| {
            cmd.env("DBUS_SYSTEM_BUS_ADDRESS", &bus);
            // SAFETY: between fork and exec only open(2), write(2) and
            // close(2) on a path made before the fork.
            unsafe {
                cmd.pre_exec(move || {
                    let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                    if fd < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    let ok = libc::write(fd, b"0\n".as_ptr().cast(), 2) == 2;
                    libc::close(fd);
                    if ok {
                        Ok(())
                    } else {
                        Err(std::io::Error::last_os_error())
                    }
                });
            }
        },
    );
    let mut c = client(&p).await;
    // Starting the own unit would start what it needs, which is
    // protected: a protected unit never starts as a side effect.
    let m = assert_denied(start(&mut c, &own).await, &own);
    assert!(
        m.contains("it would start") && m.contains(&needed) && m.contains("depends on it"),
        "{m}"
    );
    assert_eq!(state(&mut c, &needed).await, STOPPED);
    let out = sd.systemctl(&["start", &format!("{own}.service")]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(state(&mut c, &needed).await, RUNNING);
    let m = assert_denied(stop(&mut c, &own, true).await, &own);
    assert!(m.contains("own service"), "{m}");
    let m = assert_denied(stop(&mut c, &needed, true).await, &needed);
    assert!(m.contains("depends on it"), "{m}");
    let m = assert_denied(stop(&mut c, "my-node-agent", false).await, "-service-name");
    assert!(m.contains("own service"), "{m}");
    for n in [&own, &needed] {
        assert_eq!(state(&mut c, n).await, RUNNING, "{n} changed");
    }
    drop(p);
    drop(cg);
}

#[tokio::test]
async fn the_iscsi_daemon_is_not_stopped_under_logged_in_sessions() {
    if !need_root() {
        return;
    }
    let _one = ONE_MANAGER.lock().await;
    let sd = Systemd::start_with_units(UNITS);
    // A /sys/class with one logged-in session, bound over the real one in
    // the proxy's own mount namespace.
    let class = tempfile::tempdir().unwrap();
    let session = class.path().join("iscsi_session/session7");
    let conn = class.path().join("iscsi_connection/connection7:0");
    std::fs::create_dir_all(&session).unwrap();
    std::fs::create_dir_all(&conn).unwrap();
    std::fs::write(session.join("targetname"), "iqn.2003-01.org.example:vol7\n").unwrap();
    std::fs::write(conn.join("persistent_address"), "192.0.2.7\n").unwrap();
    std::fs::write(conn.join("persistent_port"), "3260\n").unwrap();
    let source = CString::new(class.path().to_str().unwrap()).unwrap();
    let bus = sd.address();
    let p = Proxy::start_with(&[], move |cmd| {
        cmd.env("DBUS_SYSTEM_BUS_ADDRESS", &bus);
        // SAFETY: between fork and exec only unshare(2) and mount(2) with
        // strings made before the fork.
        unsafe {
            cmd.pre_exec(move || {
                let root = c"/";
                let target = c"/sys/class";
                if libc::unshare(libc::CLONE_NEWNS) != 0
                    || libc::mount(
                        std::ptr::null(),
                        root.as_ptr(),
                        std::ptr::null(),
                        libc::MS_REC | libc::MS_PRIVATE,
                        std::ptr::null(),
                    ) != 0
                    || libc::mount(
                        source.as_ptr(),
                        target.as_ptr(),
                        std::ptr::null(),
                        libc::MS_BIND,
                        std::ptr::null(),
                    ) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    });
    let mut c = client(&p).await;
    start(&mut c, "iscsid").await.unwrap();
    let e = stop(&mut c, "iscsid", true).await.unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{}", e.message());
    assert!(
        e.message()
            .contains("iqn.2003-01.org.example:vol7 at 192.0.2.7:3260"),
        "{}",
        e.message()
    );
    assert_eq!(state(&mut c, "iscsid").await, RUNNING);
    // Starting it is fine.
    start(&mut c, "iscsid").await.unwrap();
}

/// Units for every way a start or stop reaches a protected unit. Each
/// protected name here is a throwaway unit of the private manager.
const CHAINS: &[(&str, &str)] = &[
    // Requires=, two levels: containerd needs mid, mid needs low.
    (
        "containerd",
        "[Unit]\nRequires={prefix}-req-mid.service\nAfter={prefix}-req-mid.service\n[Service]\nExecStart=/bin/sleep 1000\n",
    ),
    (
        "{prefix}-req-mid",
        "[Unit]\nRequires={prefix}-req-low.service\nAfter={prefix}-req-low.service\n[Service]\nExecStart=/bin/sleep 1000\n",
    ),
    ("{prefix}-req-low", "[Service]\nExecStart=/bin/sleep 1000\n"),
    // BindsTo=
    (
        "crio",
        "[Unit]\nBindsTo={prefix}-bind.service\nAfter={prefix}-bind.service\n[Service]\nExecStart=/bin/sleep 1000\n",
    ),
    ("{prefix}-bind", "[Service]\nExecStart=/bin/sleep 1000\n"),
    // Requisite=
    (
        "docker",
        "[Unit]\nRequisite={prefix}-requisite.service\nAfter={prefix}-requisite.service\n[Service]\nExecStart=/bin/sleep 1000\n",
    ),
    ("{prefix}-requisite", "[Service]\nExecStart=/bin/sleep 1000\n"),
    // PartOf=
    (
        "cri-docker",
        "[Unit]\nPartOf={prefix}-part.service\n[Service]\nExecStart=/bin/sleep 1000\n",
    ),
    ("{prefix}-part", "[Service]\nExecStart=/bin/sleep 1000\n"),
    // PropagatesStopTo=
    (
        "{prefix}-prop",
        "[Unit]\nPropagatesStopTo=flanneld.service\n[Service]\nExecStart=/bin/sleep 1000\n",
    ),
    ("flanneld", "[Service]\nExecStart=/bin/sleep 1000\n"),
    // Conflicts= on start, directly, through what a start pulls in, and
    // through what stops with the unit in conflict.
    ("kube-proxy", "[Service]\nExecStart=/bin/sleep 1000\n"),
    (
        "{prefix}-conflict",
        "[Unit]\nConflicts=kube-proxy.service\n[Service]\nExecStart=/bin/sleep 1000\n",
    ),
    (
        "{prefix}-pulls-conflict",
        "[Unit]\nWants={prefix}-conflict.service\n[Service]\nExecStart=/bin/sleep 1000\n",
    ),
    (
        "{prefix}-conflict-low",
        "[Unit]\nConflicts={prefix}-req-low.service\n[Service]\nExecStart=/bin/sleep 1000\n",
    ),
    // Starting what pulls in a unit that ends the manager.
    (
        "{prefix}-wants-exit",
        "[Unit]\nWants=exit.target\n[Service]\nExecStart=/bin/sleep 1000\n",
    ),
    // A unit whose going down starts a unit that ends the manager.
    (
        "{prefix}-on-success",
        "[Unit]\nOnSuccess=systemd-exit.service\n[Service]\nExecStart=/bin/sleep 1000\n",
    ),
    // Aliased units (links in the unit directory): udev and logind.
    ("systemd-udevd", "[Service]\nExecStart=/bin/sleep 1000\n"),
    ("systemd-logind", "[Service]\nExecStart=/bin/sleep 1000\n"),
    ("{prefix}-target-of-alias", "[Service]\nExecStart=/bin/sleep 1000\n"),
];

const ALIASES: &[(&str, &str)] = &[
    ("udev", "systemd-udevd"),
    ("dbus-org.freedesktop.login1", "systemd-logind"),
    // An alias that is itself a protected name.
    ("containerd-alias-of-throwaway", "{prefix}-target-of-alias"),
];

/// Each bypass of issue 30 against a real systemd: stops through
/// Requires= (transitively), BindsTo=, Requisite=, PartOf= and
/// PropagatesStopTo=, forced or not; starts that stop a protected unit
/// through Conflicts= (directly, through what they pull in, and through
/// what stops with the unit in conflict); starts that pull in a unit that
/// ends the manager; aliases of protected units. Everything keeps running,
/// and the manager lives.
#[tokio::test]
async fn no_chain_and_no_alias_reaches_a_protected_unit() {
    if !need_root() {
        return;
    }
    let _one = ONE_MANAGER.lock().await;
    let sd = Systemd::start_with_aliases(CHAINS, ALIASES);
    let u = |n: &str| sd.unit(n);
    let p = proxy_on(&sd.address(), &[]);
    let mut c = client(&p).await;
    // Everything protected runs, with what it needs.
    for n in [
        u("req-low"),
        u("req-mid"),
        "containerd".into(),
        u("bind"),
        "crio".into(),
        u("requisite"),
        "docker".into(),
        u("part"),
        "cri-docker".into(),
        "flanneld".into(),
        u("prop"),
        "kube-proxy".into(),
        "systemd-udevd".into(),
        "systemd-logind".into(),
    ] {
        start(&mut c, &n)
            .await
            .unwrap_or_else(|e| panic!("start {n}: {e}"));
    }
    // Its own start is refused now (what it triggers ends the manager):
    // the manager starts it.
    let out = sd.systemctl(&["start", &format!("{}.service", u("on-success"))]);
    assert!(out.status.success(), "{out:?}");
    let protected = [
        "containerd",
        "crio",
        "docker",
        "cri-docker",
        "flanneld",
        "kube-proxy",
        "systemd-udevd",
        "systemd-logind",
    ];
    for (name, reaches) in [
        (u("req-low"), "containerd"),
        (u("req-mid"), "containerd"),
        (u("bind"), "crio"),
        (u("requisite"), "docker"),
        (u("part"), "cri-docker"),
        (u("prop"), "flanneld"),
    ] {
        for force in [true, false] {
            let m = assert_denied(stop(&mut c, &name, force).await, &name);
            assert!(
                m.contains(reaches) && m.contains("as a dependent"),
                "{name}: {m}"
            );
        }
    }
    // Stopping a unit whose OnSuccess= ends the manager.
    let name = u("on-success");
    for force in [true, false] {
        let m = assert_denied(stop(&mut c, &name, force).await, &name);
        assert!(m.contains("systemd-exit"), "{name}: {m}");
    }
    for (alias, unit) in [
        ("udev", "systemd-udevd"),
        ("dbus-org.freedesktop.login1", "systemd-logind"),
    ] {
        for force in [true, false] {
            let m = assert_denied(stop(&mut c, alias, force).await, alias);
            assert!(
                m.contains(unit) && m.contains("by another name"),
                "{alias}: {m}"
            );
        }
    }
    for (name, why) in [
        (u("conflict"), "conflict"),
        (u("pulls-conflict"), "conflict"),
        (u("conflict-low"), "conflict"),
        (u("wants-exit"), "exit.target"),
    ] {
        let m = assert_denied(start(&mut c, &name).await, &name);
        assert!(m.contains(why), "{name}: {m}");
    }
    for n in
        protected
            .iter()
            .copied()
            .chain([u("req-low").as_str(), u("prop").as_str(), name.as_str()])
    {
        assert_eq!(state(&mut c, n).await, RUNNING, "{n} changed");
    }
    // A throwaway unit reached by a protected name as its alias is
    // refused by that name too (the name check comes first), and by its
    // own name it stops.
    let t = u("target-of-alias");
    start(&mut c, &t).await.unwrap();
    // The manager-ending services exist here and were refused: it lives.
    for n in ["systemd-exit", "systemd-reboot", "systemd-poweroff"] {
        let e = start(&mut c, n).await.unwrap_err();
        assert_eq!(e.code(), Code::PermissionDenied, "{n}");
    }
    assert_eq!(state(&mut c, "containerd").await, RUNNING);
    stop(&mut c, &t, false).await.unwrap();
    assert_eq!(state(&mut c, &t).await, STOPPED);
    // Unprotected chains still stop with force.
    stop(&mut c, &u("conflict-low"), false).await.unwrap();
}
