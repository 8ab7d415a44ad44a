//! A real systemd on a private D-Bus bus, for the System API tests and
//! benchmark: `dbus-daemon` with a minimal configuration plus
//! `systemd --user` in a private mount namespace (where
//! `/run/systemd/system` exists, so systemd agrees to run; nothing of the
//! host's is touched), with throwaway units written here. Needs root.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const SYSTEMD: &str = "/lib/systemd/systemd";

/// One manager per test process at a time: they all run in the cgroup of
/// the test process, and one shutting down was seen to take another one
/// off its bus with it (parallel tests failing with "no owner of
/// org.freedesktop.systemd1").
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A private bus with a systemd user manager on it.
pub struct Systemd {
    /// Held until the manager is gone (fields drop after `Drop::drop`).
    _one: std::sync::MutexGuard<'static, ()>,
    dir: tempfile::TempDir,
    dbus: Child,
    systemd: Child,
    prefix: String,
}

impl Systemd {
    pub fn address(&self) -> String {
        format!("unix:path={}", self.dir.path().join("run/bus").display())
    }

    pub fn unit(&self, name: &str) -> String {
        format!("{}-{name}", self.prefix)
    }

    /// Where the manager reads its unit files.
    pub fn unit_dir(&self) -> std::path::PathBuf {
        self.dir.path().join("conf/systemd/user")
    }

    pub fn start() -> Systemd {
        Self::start_with_units(&[])
    }

    /// [`Systemd::start`] with more units, named exactly (`name` without
    /// `.service`, or with another unit type's suffix such as `.socket`; `{prefix}` in
    /// a name or body becomes this run's unit prefix). The manager is private: a unit named `kubelet` here is
    /// not the host's.
    pub fn start_with_units(extra: &[(&str, &str)]) -> Systemd {
        Self::start_with_aliases(extra, &[])
    }

    /// [`Systemd::start_with_units`], plus aliases: `(alias, unit)` makes
    /// `<alias>.service` a link to `<unit>.service` in the unit directory,
    /// which systemd reads as another name of that unit.
    pub fn start_with_aliases(extra: &[(&str, &str)], aliases: &[(&str, &str)]) -> Systemd {
        assert!(
            Path::new(SYSTEMD).exists(),
            "{SYSTEMD} is missing: scripts/setup.sh installs systemd"
        );
        let one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
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
        for (name, body) in extra {
            let name = name.replace("{prefix}", &prefix);
            let typed = [
                ".service",
                ".socket",
                ".path",
                ".timer",
                ".target",
                ".mount",
                ".automount",
                ".swap",
            ]
            .iter()
            .any(|t| name.ends_with(t));
            let file = match typed {
                true => name,
                false => format!("{name}.service"),
            };
            std::fs::write(units.join(file), body.replace("{prefix}", &prefix)).unwrap();
        }
        for (alias, unit) in aliases {
            std::os::unix::fs::symlink(
                format!("{}.service", unit.replace("{prefix}", &prefix)),
                units.join(format!("{}.service", alias.replace("{prefix}", &prefix))),
            )
            .unwrap();
        }
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
            _one: one,
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

impl Systemd {
    /// `systemctl --user ARGS` against this manager.
    pub fn systemctl(&self, args: &[&str]) -> std::process::Output {
        Command::new("systemctl")
            .arg("--user")
            .args(args)
            .env("XDG_RUNTIME_DIR", self.dir.path().join("run"))
            .env("DBUS_SESSION_BUS_ADDRESS", self.address())
            .stdin(Stdio::null())
            .output()
            .expect("systemctl")
    }

    /// The manager's own log (units' output goes here unless redirected).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("systemd.log")).unwrap_or_default()
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
pub fn start_bus(dir: &Path, socket: &Path) -> Child {
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
    // The socket file exists from bind(2) on; wait for listen(2) too (a
    // first call in between was refused: "Connection refused").
    wait_for(
        || std::os::unix::net::UnixStream::connect(socket).is_ok(),
        "the bus socket",
    );
    child
}

pub fn wait_for(mut ok: impl FnMut() -> bool, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Systemd {
    /// Only a bus (no systemd): (the daemon, its address).
    pub fn bus_only() -> (BusOnly, String) {
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

pub struct BusOnly(tempfile::TempDir, Child);

impl BusOnly {
    /// Stop the bus and start a new one at the same address (what a
    /// restart of the system bus looks like to its clients).
    pub fn restart(&mut self) {
        let _ = self.1.kill();
        let _ = self.1.wait();
        let sock = self.0.path().join("bus");
        let _ = std::fs::remove_file(&sock);
        self.1 = start_bus(self.0.path(), &sock);
        // The socket file exists from bind(2) on; wait for listen(2) too.
        wait_for(
            || std::os::unix::net::UnixStream::connect(&sock).is_ok(),
            "the restarted bus",
        );
    }
}

impl Drop for BusOnly {
    fn drop(&mut self) {
        let _ = self.1.kill();
        let _ = self.1.wait();
    }
}
