//! A recording in-memory System backend for the tests of the layers above:
//! services with states and dependents, a BIOS serial, and the list of
//! calls that reached the backend (a refused request never does).

use super::plan::{self, Plan, UnitDeps};
use super::protect::Op;
use super::validate::ServiceName;
use super::{DependentGuard, GetServiceResponse, ServiceStatus, StartType, SystemBackend};
use crate::{Error, Result};
use std::collections::BTreeMap;
use std::sync::Mutex;

/// One fake service.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FakeService {
    pub display_name: String,
    pub start_type: StartType,
    pub status: ServiceStatus,
    /// Services that depend on this one (stopped first with `force`).
    pub dependents: Vec<String>,
}

/// A call that reached the backend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Call {
    BiosSerial,
    Get(String),
    Start(String),
    Stop(String, bool),
    /// The dependencies of the own service were read.
    Dependencies(String),
}

/// The recording fake.
#[derive(Debug, Default)]
pub struct RecordingSystem {
    pub serial: Mutex<Option<String>>,
    pub services: Mutex<BTreeMap<String, FakeService>>,
    pub calls: Mutex<Vec<Call>>,
}

impl RecordingSystem {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a stopped manual service.
    pub fn with_service(self, name: &str, dependents: &[&str]) -> Self {
        self.services.lock().unwrap().insert(
            name.to_string(),
            FakeService {
                display_name: format!("{name} (fake)"),
                start_type: StartType::Manual,
                status: ServiceStatus::Stopped,
                dependents: dependents.iter().map(|s| s.to_string()).collect(),
            },
        );
        self
    }

    /// The calls so far.
    pub fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }

    fn record(&self, c: Call) {
        self.calls.lock().unwrap().push(c);
    }

    fn missing(name: &str) -> Error {
        Error::NotFound(format!("service {name:?} does not exist"))
    }
}

impl SystemBackend for RecordingSystem {
    fn bios_serial(&self) -> Result<String> {
        self.record(Call::BiosSerial);
        self.serial
            .lock()
            .unwrap()
            .clone()
            .ok_or_else(|| Error::NotFound("no BIOS serial number (fake)".into()))
    }

    fn get_service(&self, name: &ServiceName) -> Result<GetServiceResponse> {
        self.record(Call::Get(name.os_name().into()));
        let s = self.services.lock().unwrap();
        let svc = s
            .get(name.os_name())
            .ok_or_else(|| Self::missing(name.as_str()))?;
        Ok(GetServiceResponse {
            display_name: svc.display_name.clone(),
            start_type: svc.start_type,
            status: svc.status,
        })
    }

    fn start_service(&self, name: &ServiceName) -> Result<()> {
        self.record(Call::Start(name.os_name().into()));
        let mut s = self.services.lock().unwrap();
        let svc = s
            .get_mut(name.os_name())
            .ok_or_else(|| Self::missing(name.as_str()))?;
        if svc.start_type == StartType::Disabled {
            return Err(Error::FailedPrecondition(format!(
                "service {name} is disabled"
            )));
        }
        svc.status = ServiceStatus::Running;
        Ok(())
    }

    fn stop_service(&self, name: &ServiceName, force: bool, guard: DependentGuard) -> Result<()> {
        self.record(Call::Stop(name.os_name().into(), force));
        let mut s = self.services.lock().unwrap();
        let deps = s
            .get(name.os_name())
            .ok_or_else(|| Self::missing(name.as_str()))?
            .dependents
            .clone();
        let running: Vec<String> = deps
            .iter()
            .filter(|d| {
                s.get(*d)
                    .is_some_and(|x| x.status != ServiceStatus::Stopped)
            })
            .cloned()
            .collect();
        if !running.is_empty() && !force {
            return Err(Error::FailedPrecondition(format!(
                "service {name} has running dependent services: {}",
                running.join(", ")
            )));
        }
        for d in &running {
            guard(d)?;
        }
        for d in running {
            if let Some(x) = s.get_mut(&d) {
                x.status = ServiceStatus::Stopped;
            }
        }
        s.get_mut(name.os_name()).expect("checked").status = ServiceStatus::Stopped;
        Ok(())
    }

    fn plan(&self, name: &ServiceName, op: Op) -> Result<Plan> {
        let s = self.services.lock().unwrap();
        if !s.contains_key(name.os_name()) {
            return Err(Self::missing(name.as_str()));
        }
        plan::plan(name.os_name(), op, |n| {
            Ok(UnitDeps {
                names: vec![n.to_string()],
                active: s.get(n).is_some_and(|x| x.status != ServiceStatus::Stopped),
                stops: s.get(n).map(|x| x.dependents.clone()).unwrap_or_default(),
                pulls: s
                    .iter()
                    .filter(|(_, x)| x.dependents.iter().any(|d| d == n))
                    .map(|(k, _)| k.clone())
                    .collect(),
                ..UnitDeps::default()
            })
        })
    }

    fn dependencies(&self, name: &str) -> Result<Vec<String>> {
        self.record(Call::Dependencies(name.into()));
        let s = self.services.lock().unwrap();
        if !s.contains_key(name) {
            return Err(Self::missing(name));
        }
        Ok(s.iter()
            .filter(|(_, svc)| svc.dependents.iter().any(|d| d == name))
            .map(|(n, _)| n.clone())
            .collect())
    }
}

impl SystemBackend for std::sync::Arc<RecordingSystem> {
    fn bios_serial(&self) -> Result<String> {
        (**self).bios_serial()
    }
    fn get_service(&self, name: &ServiceName) -> Result<GetServiceResponse> {
        (**self).get_service(name)
    }
    fn start_service(&self, name: &ServiceName) -> Result<()> {
        (**self).start_service(name)
    }
    fn stop_service(&self, name: &ServiceName, force: bool, guard: DependentGuard) -> Result<()> {
        (**self).stop_service(name, force, guard)
    }
    fn dependencies(&self, name: &str) -> Result<Vec<String>> {
        (**self).dependencies(name)
    }
    fn plan(&self, name: &ServiceName, op: Op) -> Result<Plan> {
        (**self).plan(name, op)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::Flavor;
    use crate::system::validate::ServicePolicy;
    use crate::system::{
        GetServiceRequest, StartServiceRequest, StopServiceRequest, System, SystemApi,
    };
    use std::sync::Arc;

    fn api(policy: ServicePolicy) -> (System<Arc<RecordingSystem>>, Arc<RecordingSystem>) {
        let fake = Arc::new(
            RecordingSystem::new()
                .with_service("base", &["dep"])
                .with_service("dep", &[]),
        );
        (System::new(fake.clone(), policy, Flavor::Windows), fake)
    }

    #[test]
    fn refused_names_never_reach_the_backend() {
        let (api, fake) = api(ServicePolicy::allow_all());
        for bad in ["", "a/b", "x;y", "\0"] {
            assert!(api
                .get_service(GetServiceRequest { name: bad.into() })
                .is_err());
            assert!(api
                .start_service(StartServiceRequest { name: bad.into() })
                .is_err());
            assert!(api
                .stop_service(StopServiceRequest {
                    name: bad.into(),
                    force: true
                })
                .is_err());
        }
        assert!(fake.calls().is_empty(), "{:?}", fake.calls());
    }

    #[test]
    fn allow_list_guards_start_and_stop_not_get() {
        let (api, fake) = api(ServicePolicy::allow_only(["dep"], Flavor::Windows).unwrap());
        let e = api
            .start_service(StartServiceRequest {
                name: "base".into(),
            })
            .unwrap_err();
        assert!(matches!(e, Error::PermissionDenied(_)), "{e}");
        api.get_service(GetServiceRequest {
            name: "base".into(),
        })
        .unwrap();
        api.start_service(StartServiceRequest { name: "dep".into() })
            .unwrap();
        assert_eq!(
            fake.calls(),
            vec![Call::Get("base".into()), Call::Start("dep".into())]
        );
    }

    #[test]
    fn stop_with_dependents_needs_force() {
        let (api, _fake) = api(ServicePolicy::allow_all());
        for n in ["base", "dep"] {
            api.start_service(StartServiceRequest { name: n.into() })
                .unwrap();
        }
        let e = api
            .stop_service(StopServiceRequest {
                name: "base".into(),
                force: false,
            })
            .unwrap_err();
        assert!(matches!(e, Error::FailedPrecondition(_)), "{e}");
        api.stop_service(StopServiceRequest {
            name: "base".into(),
            force: true,
        })
        .unwrap();
        for n in ["base", "dep"] {
            let s = api
                .get_service(GetServiceRequest { name: n.into() })
                .unwrap();
            assert_eq!(s.status, ServiceStatus::Stopped, "{n}");
        }
    }
}
