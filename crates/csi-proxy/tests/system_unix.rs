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

fn proxy_on(bus: &str, extra: &[&str]) -> Proxy {
    let bus = bus.to_string();
    Proxy::start_with(extra, move |c| {
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
