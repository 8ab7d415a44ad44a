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

use common::Proxy;
use csi_proxy_api::system::v1alpha1::{self as sys, system_client::SystemClient};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tonic::Code;

const SYSTEMD: &str = "/lib/systemd/systemd";

/// A private bus with a systemd user manager on it.
struct Systemd {
    dir: tempfile::TempDir,
    dbus: Child,
    systemd: Child,
    prefix: String,
}

impl Systemd {
    fn address(&self) -> String {
        format!("unix:path={}", self.dir.path().join("run/bus").display())
    }

    fn unit(&self, name: &str) -> String {
        format!("{}-{name}", self.prefix)
    }

    fn start() -> Systemd {
        assert!(
            Path::new(SYSTEMD).exists(),
            "{SYSTEMD} is missing: scripts/setup.sh installs systemd"
        );
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        let units = dir.path().join("conf/systemd/user");
        std::fs::create_dir_all(&run).unwrap();
        std::fs::create_dir_all(&units).unwrap();
        let prefix = format!("csi-test-{}", std::process::id());
        let unit = |name: &str, body: &str| {
            std::fs::write(units.join(format!("{prefix}-{name}.service")), body).unwrap();
        };
        unit(
            "base",
            "[Unit]\nDescription=csi-proxy test base service\n[Service]\nExecStart=/bin/sleep 1000\n",
        );
        unit(
            "dep",
            &format!(
                "[Unit]\nDescription=csi-proxy test dependent service\nRequires={prefix}-base.service\nAfter={prefix}-base.service\n[Service]\nExecStart=/bin/sleep 1000\n"
            ),
        );
        unit(
            "broken",
            "[Unit]\nDescription=csi-proxy test broken service\n[Service]\nType=exec\nExecStart=/nonexistent/csi-proxy-test-binary\n",
        );
        let dbus = start_bus(dir.path(), &run.join("bus"));
        let address = format!("unix:path={}", run.join("bus").display());
        let systemd = Command::new("unshare")
            .args(["--mount", "--propagation", "private", "sh", "-c"])
            .arg(format!(
                "mkdir -p /run/systemd && mount -t tmpfs csi-proxy-test /run/systemd && mkdir /run/systemd/system && exec {SYSTEMD} --user"
            ))
            .env("XDG_RUNTIME_DIR", &run)
            .env("XDG_CONFIG_HOME", dir.path().join("conf"))
            .env("DBUS_SESSION_BUS_ADDRESS", &address)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("systemd.log")).unwrap())
            .spawn()
            .expect("unshare");
        let s = Systemd {
            dir,
            dbus,
            systemd,
            prefix,
        };
        let addr = s.address();
        wait_for(
            || {
                Command::new("busctl")
                    .arg(format!("--address={addr}"))
                    .args(["status", "org.freedesktop.systemd1"])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success())
            },
            "systemd --user on the private bus",
        );
        s
    }
}

impl Drop for Systemd {
    fn drop(&mut self) {
        // SAFETY: kill(2) with pids of children we own.
        unsafe { libc::kill(self.systemd.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.systemd.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.systemd.kill();
        let _ = self.systemd.wait();
        let _ = self.dbus.kill();
        let _ = self.dbus.wait();
    }
}

/// A dbus-daemon with a minimal configuration: no service activation (a
/// session bus would try to start `systemd --user` itself), everything
/// allowed, listening on `socket`.
fn start_bus(dir: &Path, socket: &Path) -> Child {
    let config = dir.join("bus.conf");
    std::fs::write(
        &config,
        format!(
            r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN" "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path={}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"#,
            socket.display()
        ),
    )
    .unwrap();
    let child = Command::new("dbus-daemon")
        .arg(format!("--config-file={}", config.display()))
        .arg("--nofork")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("dbus.log")).unwrap())
        .spawn()
        .expect("dbus-daemon (package dbus-daemon)");
    wait_for(|| socket.exists(), "the bus socket");
    child
}

fn wait_for(mut ok: impl FnMut() -> bool, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

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
        code(stop(&mut c, "kubelet", false).await),
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

impl Systemd {
    /// Only a bus (no systemd): (the daemon, its address).
    fn bus_only() -> (BusOnly, String) {
        let s = Systemd::start_bus_only();
        let a = format!("unix:path={}", s.0.path().join("bus").display());
        (s, a)
    }

    fn start_bus_only() -> BusOnly {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("bus");
        let child = start_bus(dir.path(), &sock);
        BusOnly(dir, child)
    }
}

struct BusOnly(tempfile::TempDir, Child);

impl Drop for BusOnly {
    fn drop(&mut self) {
        let _ = self.1.kill();
        let _ = self.1.wait();
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
