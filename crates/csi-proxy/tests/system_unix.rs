//! The System API (v1alpha1) over the real binary's Unix socket.
//!
//! Services: a real systemd answers on a private D-Bus bus started by the
//! test (`dbus-daemon` plus `systemd --user` in a private mount namespace,
//! where `/run/systemd/system` exists so systemd agrees to run; nothing of
//! the host's is touched), and csi-proxy is pointed at it with
//! `DBUS_SYSTEM_BUS_ADDRESS`. The units are throwaway ones written by the
//! test. Without any bus the calls answer FailedPrecondition.
#![cfg(target_os = "linux")]

mod common;
mod systemd;

use common::Proxy;
use csi_proxy_api::system::v1alpha1::{self as sys, system_client::SystemClient};
use systemd::Systemd;
use tonic::Code;

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

async fn client(p: &Proxy) -> SystemClient<csi_proxy_client::ProxyChannel> {
    SystemClient::new(p.channel("system-v1alpha1").await)
}

async fn get(
    c: &mut SystemClient<csi_proxy_client::ProxyChannel>,
    name: &str,
) -> Result<sys::GetServiceResponse, tonic::Status> {
    c.get_service(sys::GetServiceRequest { name: name.into() })
        .await
        .map(|r| r.into_inner())
}

async fn start(
    c: &mut SystemClient<csi_proxy_client::ProxyChannel>,
    name: &str,
) -> Result<(), tonic::Status> {
    c.start_service(sys::StartServiceRequest { name: name.into() })
        .await
        .map(|_| ())
}

async fn stop(
    c: &mut SystemClient<csi_proxy_client::ProxyChannel>,
    name: &str,
    force: bool,
) -> Result<(), tonic::Status> {
    c.stop_service(sys::StopServiceRequest {
        name: name.into(),
        force,
    })
    .await
    .map(|_| ())
}

fn code<T: std::fmt::Debug>(r: Result<T, tonic::Status>) -> (Code, String) {
    let e = r.expect_err("expected an error");
    (e.code(), e.message().to_string())
}

/// Names refused before anything is asked of systemd.
const HOSTILE: &[&str] = &[
    "",
    " ",
    "a/b",
    "..",
    "../../etc/passwd",
    "-H",
    "--help",
    "svc\0",
    "svc\nx",
    "svc;reboot",
    "svc|x",
    "svc&x",
    "$(reboot)",
    "`id`",
    "svc'x",
    "svc\"x",
    "svc*",
    "svc?",
    "svc<x",
    "svc>x",
    "sérvice",
    "svc\u{202e}x",
    "dbus.socket",
    "multi-user.target",
    "-.mount",
    "getty@.service",
    "x.timer",
    "user.slice",
    "my service",
    "C:\\Windows",
    "a\\b",
    ".hidden",
];

#[tokio::test]
async fn hostile_names_are_refused_before_systemd_is_asked() {
    // A bus that does not exist: a refused name never gets that far (the
    // answer is InvalidArgument, not FailedPrecondition).
    let p = proxy_on("unix:path=/nonexistent/csi-proxy-test-bus", &[]);
    let mut c = client(&p).await;
    let long = "a".repeat(257);
    let mut names: Vec<&str> = HOSTILE.to_vec();
    names.push(&long);
    assert!(names.len() >= 30);
    for n in names {
        for (what, r) in [
            ("get", get(&mut c, n).await.map(|_| ())),
            ("start", start(&mut c, n).await),
            ("stop", stop(&mut c, n, true).await),
        ] {
            let (k, m) = code(r);
            assert_eq!(k, Code::InvalidArgument, "{what} {n:?}: {m}");
            assert!(m.starts_with("service name "), "{what} {n:?}: {m}");
        }
    }
}

#[tokio::test]
async fn without_systemd_service_calls_fail_precondition() {
    let p = proxy_on("unix:path=/nonexistent/csi-proxy-test-bus", &[]);
    let mut c = client(&p).await;
    for (k, m) in [
        code(get(&mut c, "kubelet").await),
        code(start(&mut c, "kubelet").await),
        // (kubelet itself is protected: StopService is refused before
        // systemd is asked, tests/system_protect_unix.rs)
        code(stop(&mut c, "my-driver", false).await),
    ] {
        assert_eq!(k, Code::FailedPrecondition, "{m}");
        assert!(m.contains("systemd is not reachable"), "{m}");
    }
    // A bus without systemd on it: the same answer.
    let sd_less = Systemd::bus_only();
    let p = proxy_on(&sd_less.1, &[]);
    let mut c = client(&p).await;
    let (k, m) = code(get(&mut c, "kubelet").await);
    assert_eq!(k, Code::FailedPrecondition, "{m}");
    assert!(m.contains("systemd is not reachable"), "{m}");
    // Addresses that are not ones (a bad %-escape, no unix: entry): a
    // clear answer, and the proxy goes on serving.
    for bad in ["unix:path=/tmp/%aé", "tcp:host=localhost,port=1"] {
        let p = proxy_on(bad, &[]);
        let mut c = client(&p).await;
        for _ in 0..2 {
            let (k, m) = code(get(&mut c, "kubelet").await);
            assert_eq!(k, Code::FailedPrecondition, "{bad}: {m}");
            assert!(m.contains("is not a D-Bus address"), "{bad}: {m}");
        }
    }
}

#[tokio::test]
async fn bios_serial_is_the_smbios_serial_or_not_found() {
    let p = proxy_on("unix:path=/nonexistent/csi-proxy-test-bus", &[]);
    let mut c = client(&p).await;
    let r = c
        .get_bios_serial_number(sys::GetBiosSerialNumberRequest {})
        .await;
    match std::fs::read_to_string("/sys/class/dmi/id/product_serial") {
        Ok(s) => assert_eq!(r.unwrap().into_inner().serial_number, s.trim_end()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let (k, m) = code(r);
            assert_eq!(k, Code::NotFound, "{m}");
            assert!(m.contains("SMBIOS") || m.contains("serial"), "{m}");
        }
        Err(e) => panic!("{e}"),
    }
}

#[tokio::test]
async fn services_through_systemd_over_dbus() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: needs root (a private mount namespace for systemd --user)");
        return;
    }
    let sd = Systemd::start();
    let p = proxy_on(&sd.address(), &[]);
    let mut c = client(&p).await;
    let base = sd.unit("base");
    let dep = sd.unit("dep");

    let s = get(&mut c, &base).await.unwrap();
    assert_eq!(s.display_name, "csi-proxy test base service");
    assert_eq!(s.status, sys::ServiceStatus::Stopped as i32);
    assert_eq!(s.start_type, sys::StartType::Manual as i32);
    // The .service suffix is optional.
    assert_eq!(get(&mut c, &format!("{base}.service")).await.unwrap(), s);

    start(&mut c, &base).await.unwrap();
    assert_eq!(
        get(&mut c, &base).await.unwrap().status,
        sys::ServiceStatus::Running as i32
    );
    // Already running: success.
    start(&mut c, &base).await.unwrap();
    start(&mut c, &dep).await.unwrap();
    assert_eq!(
        get(&mut c, &dep).await.unwrap().status,
        sys::ServiceStatus::Running as i32
    );

    // A running dependent: refused without force, nothing stopped.
    let (k, m) = code(stop(&mut c, &base, false).await);
    assert_eq!(k, Code::FailedPrecondition, "{m}");
    assert!(m.contains(&dep), "{m}");
    for n in [&base, &dep] {
        assert_eq!(
            get(&mut c, n).await.unwrap().status,
            sys::ServiceStatus::Running as i32,
            "{n}"
        );
    }
    // With force, the dependent goes first.
    stop(&mut c, &base, true).await.unwrap();
    for n in [&base, &dep] {
        assert_eq!(
            get(&mut c, n).await.unwrap().status,
            sys::ServiceStatus::Stopped as i32,
            "{n}"
        );
    }
    // Already stopped: success.
    stop(&mut c, &base, false).await.unwrap();

    // A service that cannot start, and one that does not exist.
    let (k, m) = code(start(&mut c, &sd.unit("broken")).await);
    assert_eq!(k, Code::FailedPrecondition, "{m}");
    let (k, m) = code(get(&mut c, &sd.unit("nonexistent")).await);
    assert_eq!(k, Code::NotFound, "{m}");
    let (k, m) = code(start(&mut c, &sd.unit("nonexistent")).await);
    assert_eq!(k, Code::NotFound, "{m}");

    // The allow-list: only `dep` may be started or stopped.
    let allowed = format!("-allowed-services={dep}");
    let p2 = proxy_on(&sd.address(), &[&allowed]);
    let mut c2 = client(&p2).await;
    let (k, m) = code(start(&mut c2, &base).await);
    assert_eq!(k, Code::PermissionDenied, "{m}");
    assert_eq!(
        get(&mut c2, &base).await.unwrap().status,
        sys::ServiceStatus::Stopped as i32
    );
    start(&mut c2, &dep).await.unwrap();
    stop(&mut c2, &dep, false).await.unwrap();
}

/// Start and stop return once systemd's job for the unit ended (not
/// before: the state right after is the final one), with its result; a
/// call made meanwhile answers at once on the same shared connection.
#[tokio::test]
async fn start_and_stop_wait_for_the_job_and_report_its_result() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: needs root (a private mount namespace for systemd --user)");
        return;
    }
    let sd = Systemd::start_with_units(&[
        (
            "{prefix}-slow",
            "[Unit]\nDescription=slow to start and stop\n[Service]\nExecStartPre=/bin/sleep 2\nExecStart=/bin/sleep 1000\nExecStop=/bin/sleep 1\n",
        ),
        (
            "{prefix}-fails",
            "[Service]\nType=oneshot\nExecStartPre=/bin/sleep 1\nExecStart=/bin/false\n",
        ),
        ("{prefix}-lead", "[Service]\nExecStart=/bin/sleep 1000\n"),
        (
            // Stopped with the lead, in parallel (no ordering), slowly.
            "{prefix}-follower",
            "[Unit]\nRequires={prefix}-lead.service\n[Service]\nExecStart=/bin/sleep 1000\nExecStop=/bin/sleep 2\n",
        ),
        (
            "{prefix}-needs-fails",
            "[Unit]\nRequires={prefix}-fails.service\nAfter={prefix}-fails.service\n[Service]\nExecStart=/bin/sleep 1000\n",
        ),
    ]);
    let p = proxy_on(&sd.address(), &[]);
    let mut c = client(&p).await;
    let slow = sd.unit("slow");
    let status = |s: sys::GetServiceResponse| sys::ServiceStatus::try_from(s.status).unwrap();

    let t = std::time::Instant::now();
    let starting = {
        let mut c2 = client(&p).await;
        let slow = slow.clone();
        tokio::spawn(async move { start(&mut c2, &slow).await })
    };
    tokio::time::sleep(std::time::Duration::from_millis(700)).await;
    let s = get(&mut c, &slow).await.unwrap();
    assert_eq!(status(s), sys::ServiceStatus::StartPending);
    assert!(
        t.elapsed() < std::time::Duration::from_millis(1800),
        "GetService waited for the start: {:?}",
        t.elapsed()
    );
    starting.await.unwrap().unwrap();
    assert!(
        t.elapsed() >= std::time::Duration::from_secs(2),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(
        status(get(&mut c, &slow).await.unwrap()),
        sys::ServiceStatus::Running
    );

    let t = std::time::Instant::now();
    stop(&mut c, &slow, false).await.unwrap();
    assert!(
        t.elapsed() >= std::time::Duration::from_secs(1),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(
        status(get(&mut c, &slow).await.unwrap()),
        sys::ServiceStatus::Stopped
    );

    // A forced stop waits for the jobs of the dependents it stops too,
    // also one that ends after the service's own.
    let (lead, follower) = (sd.unit("lead"), sd.unit("follower"));
    start(&mut c, &follower).await.unwrap();
    assert_eq!(
        status(get(&mut c, &lead).await.unwrap()),
        sys::ServiceStatus::Running
    );
    let t = std::time::Instant::now();
    stop(&mut c, &lead, true).await.unwrap();
    assert!(
        t.elapsed() >= std::time::Duration::from_millis(1500),
        "{:?}",
        t.elapsed()
    );
    for n in [&lead, &follower] {
        assert_eq!(
            status(get(&mut c, n).await.unwrap()),
            sys::ServiceStatus::Stopped,
            "{n}"
        );
    }

    // The job fails after a while: the call waits for it and says so.
    let t = std::time::Instant::now();
    let (k, m) = code(start(&mut c, &sd.unit("fails")).await);
    assert!(
        t.elapsed() >= std::time::Duration::from_secs(1),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(k, Code::FailedPrecondition, "{m}");
    assert!(m.contains("ended with \"failed\""), "{m}");
    assert_eq!(
        status(get(&mut c, &sd.unit("fails")).await.unwrap()),
        sys::ServiceStatus::Stopped
    );
    // A unit whose requirement fails: its job's result is "dependency".
    let (k, m) = code(start(&mut c, &sd.unit("needs-fails")).await);
    assert_eq!(k, Code::FailedPrecondition, "{m}");
    assert!(m.contains("ended with \"dependency\""), "{m}");
    // The unit that cannot start at all (ExecStart= does not exist).
    let (k, m) = code(start(&mut c, &sd.unit("broken")).await);
    assert_eq!(k, Code::FailedPrecondition, "{m}");
    assert!(m.contains("ended with \"failed\""), "{m}");
}

/// The backend itself, called as the server's blocking threads call it.
mod backend {
    use super::Systemd;
    use csi_proxy_host::path::Flavor;
    use csi_proxy_host::system::linux::LinuxSystem;
    use csi_proxy_host::system::{ServiceName, ServiceStatus, SystemBackend};
    use csi_proxy_host::{deadline, Error};
    use std::time::{Duration, Instant};

    fn name(n: &str) -> ServiceName {
        ServiceName::parse(n, Flavor::Unix).unwrap()
    }

    #[test]
    fn the_shared_connection_is_made_again_after_the_bus_went_away() {
        let (mut bus, address) = Systemd::bus_only();
        let sys = LinuxSystem::new().with_bus(&address);
        let n = name("my-driver");
        for _ in 0..2 {
            let e = sys.get_service(&n).unwrap_err();
            assert!(
                matches!(&e, Error::FailedPrecondition(m) if m.contains("nothing answers as org.freedesktop.systemd1")),
                "{e}"
            );
            // The kept connection breaks; the next call makes a new one.
            bus.restart();
        }
    }

    #[test]
    fn a_job_is_waited_for_no_longer_than_the_calls_deadline_or_the_limit() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("skipped: needs root (a private mount namespace for systemd --user)");
            return;
        }
        let sd = Systemd::start_with_units(&[(
            "{prefix}-slower",
            "[Service]\nExecStartPre=/bin/sleep 3\nExecStart=/bin/sleep 1000\n",
        )]);
        let sys = LinuxSystem::new().with_bus(sd.address());
        let n = name(&sd.unit("slower"));
        let status = || sys.get_service(&n).unwrap().status;

        // The call's deadline: DeadlineExceeded then, the job goes on.
        let t = Instant::now();
        let e =
            deadline::run(Some(t + Duration::from_secs(1)), || sys.start_service(&n)).unwrap_err();
        assert!(matches!(e, Error::DeadlineExceeded(_)), "{e}");
        let took = t.elapsed();
        assert!(
            took >= Duration::from_secs(1) && took < Duration::from_millis(2500),
            "{took:?}"
        );
        assert_eq!(status(), ServiceStatus::StartPending);
        // Started meanwhile: the next start joins the job.
        sys.start_service(&n).unwrap();
        assert_eq!(status(), ServiceStatus::Running);
        sys.stop_service(&n, false, &|_| Ok(())).unwrap();

        // The overall limit.
        let limited = LinuxSystem::new()
            .with_bus(sd.address())
            .with_limit(Duration::from_secs(1));
        let e = limited.start_service(&n).unwrap_err();
        assert!(
            matches!(&e, Error::FailedPrecondition(m) if m.contains("still running after 1 s")),
            "{e}"
        );
        sys.start_service(&n).unwrap();
        sys.stop_service(&n, false, &|_| Ok(())).unwrap();

        // A caller already gone: nothing is queued.
        let e = deadline::run(Some(Instant::now()), || sys.start_service(&n)).unwrap_err();
        assert!(matches!(e, Error::DeadlineExceeded(_)), "{e}");
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(status(), ServiceStatus::Stopped);
    }

    /// zbus stops reading the connection while a signal stream's queue
    /// (64) is full: a call waiting for a job reads its stream whatever
    /// else it waits for, so hundreds of other jobs ending meanwhile stall
    /// neither it nor the calls of other threads on the shared connection.
    #[test]
    fn many_job_ends_meanwhile_stall_nothing() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("skipped: needs root (a private mount namespace for systemd --user)");
            return;
        }
        // The slow start goes on until the test has seen enough.
        let flag = tempfile::tempdir().unwrap();
        let go = flag.path().join("go");
        let slow_unit = format!(
            "[Service]\nExecStartPre=/bin/sh -c 'while [ ! -e {} ]; do sleep 0.05; done'\nExecStart=/bin/sleep 1000\n",
            go.display()
        );
        let sd = Systemd::start_with_units(&[
            ("{prefix}-slow", &slow_unit),
            (
                "{prefix}-tick",
                "[Service]\nType=oneshot\nExecStart=/bin/true\n",
            ),
        ]);
        let sys = std::sync::Arc::new(LinuxSystem::new().with_bus(sd.address()));
        let slow = name(&sd.unit("slow"));
        let tick = name(&sd.unit("tick"));
        let t = Instant::now();
        let starting = {
            let (sys, slow) = (sys.clone(), slow.clone());
            std::thread::spawn(move || sys.start_service(&slow))
        };
        while sys.get_service(&slow).unwrap().status != ServiceStatus::StartPending {
            assert!(
                t.elapsed() < Duration::from_secs(2),
                "the start was not queued"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut ticks = 0;
        while ticks < 100 {
            let c = Instant::now();
            sys.start_service(&tick).unwrap();
            assert_eq!(
                sys.get_service(&slow).unwrap().status,
                ServiceStatus::StartPending
            );
            // A stalled connection would take the 10 s method timeout.
            assert!(c.elapsed() < Duration::from_secs(5), "{:?}", c.elapsed());
            ticks += 1;
        }
        std::fs::write(&go, "").unwrap();
        starting.join().unwrap().unwrap();
        assert_eq!(
            sys.get_service(&slow).unwrap().status,
            ServiceStatus::Running
        );
        eprintln!("{ticks} other jobs ended while the start waited");
    }
}
