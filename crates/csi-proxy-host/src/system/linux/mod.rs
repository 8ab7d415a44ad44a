//! The Linux System backend: services are systemd units, reached through
//! systemd's D-Bus API (`org.freedesktop.systemd1` on the system bus, with
//! zbus; no `systemctl` is spawned), and the BIOS serial is the SMBIOS
//! system serial the kernel exposes in `/sys/class/dmi/id/product_serial`.
//!
//! - `bus`: the bus address and the one shared connection.
//! - `systemd`: unit properties, errors, the calls of the backend.
//! - `job`: waiting for a start or stop job's `JobRemoved`, and what its
//!   result means.

mod bus;
mod dbus_error;
mod job;
mod systemd;

use super::plan::Plan;
use super::protect::Op;
use super::validate::ServiceName;
use super::{DependentGuard, GetServiceResponse, SystemBackend};
use crate::{Error, Result};
use std::path::PathBuf;
use std::time::Duration;

pub use systemd::{service_status, start_type};

/// The systemd-backed System backend: one D-Bus connection shared by all
/// calls ([`bus::Bus`]).
#[derive(Debug)]
pub struct LinuxSystem {
    /// Where the DMI attributes are (`/sys/class/dmi/id`).
    dmi_dir: PathBuf,
    bus: bus::Bus,
    /// Overall limit of StartService/StopService.
    limit: Duration,
}

impl Default for LinuxSystem {
    fn default() -> Self {
        LinuxSystem {
            dmi_dir: PathBuf::from("/sys/class/dmi/id"),
            bus: bus::Bus::new(None),
            limit: super::wait::DEFAULT_LIMIT,
        }
    }
}

impl LinuxSystem {
    pub fn new() -> Self {
        Self::default()
    }

    /// Read DMI attributes from `dir` instead of `/sys/class/dmi/id`.
    pub fn with_dmi_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.dmi_dir = dir.into();
        self
    }

    /// Talk to the bus at `address` instead of the system bus.
    pub fn with_bus(mut self, address: impl Into<String>) -> Self {
        self.bus = bus::Bus::new(Some(address.into()));
        self
    }

    /// The overall limit of StartService and StopService.
    pub fn with_limit(mut self, limit: Duration) -> Self {
        self.limit = limit;
        self
    }

    fn systemd(&self) -> systemd::Systemd<'_> {
        systemd::Systemd(&self.bus)
    }
}

/// The SMBIOS system serial from a DMI directory.
pub fn bios_serial(dmi_dir: &std::path::Path) -> Result<String> {
    let file = dmi_dir.join("product_serial");
    match std::fs::read(&file) {
        Ok(bytes) => {
            let s = String::from_utf8_lossy(&bytes);
            Ok(s.trim_end_matches(['\n', '\0', ' ']).to_string())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if dmi_dir.exists() {
                Err(Error::NotFound(format!(
                    "the firmware reports no system serial number ({} does not exist)",
                    file.display()
                )))
            } else {
                Err(Error::NotFound(format!(
                    "this machine has no SMBIOS/DMI information ({} does not exist): no BIOS serial number",
                    dmi_dir.display()
                )))
            }
        }
        Err(e) => Err(Error::io("read", file.display().to_string(), e)),
    }
}

impl SystemBackend for LinuxSystem {
    fn bios_serial(&self) -> Result<String> {
        bios_serial(&self.dmi_dir)
    }

    fn get_service(&self, name: &ServiceName) -> Result<GetServiceResponse> {
        self.systemd().get_service(name)
    }

    fn start_service(&self, name: &ServiceName) -> Result<()> {
        self.systemd().start(name, self.limit, None)
    }

    fn stop_service(&self, name: &ServiceName, force: bool, guard: DependentGuard) -> Result<()> {
        self.systemd().stop(name, force, self.limit, guard, None)
    }

    fn dependencies(&self, name: &str) -> Result<Vec<String>> {
        self.systemd().dependencies(name)
    }

    fn plan(&self, name: &ServiceName, op: Op) -> Result<Plan> {
        self.systemd().plan(name, op)
    }

    fn start_planned(&self, name: &ServiceName, plan: &Plan) -> Result<()> {
        self.systemd().start(name, self.limit, plan.generation)
    }

    fn stop_planned(
        &self,
        name: &ServiceName,
        force: bool,
        guard: DependentGuard,
        plan: &Plan,
    ) -> Result<()> {
        self.systemd()
            .stop(name, force, self.limit, guard, plan.generation)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::Flavor;

    #[test]
    fn bios_serial_from_dmi() {
        let t = tempfile::tempdir().unwrap();
        let e = bios_serial(&t.path().join("none")).unwrap_err();
        assert!(matches!(e, Error::NotFound(_)), "{e}");
        assert!(e.to_string().contains("no SMBIOS/DMI"), "{e}");
        let e = bios_serial(t.path()).unwrap_err();
        assert!(e.to_string().contains("no system serial"), "{e}");
        std::fs::write(t.path().join("product_serial"), "VMware-56 4d 12\n").unwrap();
        assert_eq!(bios_serial(t.path()).unwrap(), "VMware-56 4d 12");
    }

    #[test]
    fn this_machine_answers_not_found_or_a_serial() {
        match bios_serial(std::path::Path::new("/sys/class/dmi/id")) {
            Ok(s) => assert!(!s.contains('\n')),
            Err(e) => assert!(
                matches!(
                    e,
                    Error::NotFound(_) | Error::PermissionDenied(_) | Error::Io { .. }
                ),
                "{e}"
            ),
        }
    }

    #[test]
    fn no_bus_is_failed_precondition() {
        let s = LinuxSystem::new().with_bus("unix:path=/nonexistent/csi-proxy-no-bus");
        let n = ServiceName::parse("kubelet", Flavor::Unix).unwrap();
        for e in [
            s.get_service(&n).unwrap_err(),
            s.start_service(&n).unwrap_err(),
            s.stop_service(&n, true, &|_| Ok(())).unwrap_err(),
        ] {
            assert!(matches!(e, Error::FailedPrecondition(_)), "{e}");
            assert!(e.to_string().contains("systemd is not reachable"), "{e}");
        }
    }
}
