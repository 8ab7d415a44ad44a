//! Services as systemd units over systemd's D-Bus API (`LoadUnit`,
//! `Properties.GetAll`, `StartUnit`, `StopUnit` of
//! `org.freedesktop.systemd1`), and the mapping of unit states onto the
//! Windows service model of the API.

use super::dbus::{CallError, Connection, Value};
use crate::system::plan::{self, Plan, UnitDeps};
use crate::system::protect::Op;
use crate::system::validate::ServiceName;
use crate::system::wait::{wait_for, Progress};
use crate::system::{DependentGuard, GetServiceResponse, ServiceStatus, StartType};
use crate::{Error, Result};
use std::time::{Duration, Instant};

const DEST: &str = "org.freedesktop.systemd1";
const MANAGER_PATH: &str = "/org/freedesktop/systemd1";
const MANAGER: &str = "org.freedesktop.systemd1.Manager";
const UNIT: &str = "org.freedesktop.systemd1.Unit";
const PROPERTIES: &str = "org.freedesktop.DBus.Properties";
/// How long one D-Bus round trip may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Polling interval while a start or stop job runs.
const POLL: Duration = Duration::from_millis(25);

/// `ActiveState` → the API's service status.
pub fn service_status(active_state: &str) -> ServiceStatus {
    match active_state {
        "active" | "reloading" | "refreshing" => ServiceStatus::Running,
        "inactive" | "failed" => ServiceStatus::Stopped,
        "activating" => ServiceStatus::StartPending,
        "deactivating" => ServiceStatus::StopPending,
        _ => ServiceStatus::Unknown,
    }
}

/// `UnitFileState` → the API's start type: enabled units start at boot
/// (Automatic), masked ones cannot start (Disabled), the rest start when
/// asked (Manual).
pub fn start_type(unit_file_state: &str) -> StartType {
    match unit_file_state {
        "enabled" | "enabled-runtime" | "linked" | "linked-runtime" | "alias" => {
            StartType::Automatic
        }
        "masked" | "masked-runtime" => StartType::Disabled,
        _ => StartType::Manual,
    }
}

/// The unit properties the API needs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UnitState {
    pub id: String,
    pub description: String,
    pub load_state: String,
    pub active_state: String,
    pub sub_state: String,
    pub unit_file_state: String,
    /// Every name of the unit (`Names`: the id and its aliases).
    pub names: Vec<String>,
    /// Units stopped with this one (inverse Requires=, Requisite=,
    /// BindsTo=, PartOf=, and its own PropagatesStopTo=).
    pub dependents: Vec<String>,
    /// Units this one needs (Requires=, Requisite=, BindsTo=, Wants=).
    pub dependencies: Vec<String>,
    /// Units started with this one (Requires=, Requisite=, Wants=,
    /// BindsTo=, Upholds=).
    pub pulls: Vec<String>,
    /// Units stopped when this one starts (Conflicts= either way).
    pub conflicts: Vec<String>,
    /// Units started when this one stops or fails (OnSuccess=,
    /// OnFailure=).
    pub triggers: Vec<String>,
    /// Id of the pending job (0: none).
    pub job: u32,
}

impl UnitState {
    /// From the `a{sv}` of `Properties.GetAll`.
    pub fn from_properties(props: &Value) -> UnitState {
        fn add(to: &mut Vec<String>, v: &Value) {
            for d in v.as_strings() {
                if !to.contains(&d) {
                    to.push(d);
                }
            }
        }
        let mut u = UnitState::default();
        let Value::Array(entries) = props else {
            return u;
        };
        for e in entries {
            let Value::Entry(k, v) = e else { continue };
            let Some(k) = k.as_str() else { continue };
            let s = || v.as_str().unwrap_or_default().to_string();
            match k {
                "Id" => u.id = s(),
                "Description" => u.description = s(),
                "LoadState" => u.load_state = s(),
                "ActiveState" => u.active_state = s(),
                "SubState" => u.sub_state = s(),
                "UnitFileState" => u.unit_file_state = s(),
                "Names" => add(&mut u.names, v),
                "RequiredBy" | "RequisiteOf" | "BoundBy" | "ConsistsOf" | "PropagatesStopTo" => {
                    add(&mut u.dependents, v)
                }
                "Requires" | "Requisite" | "BindsTo" | "Wants" => {
                    add(&mut u.dependencies, v);
                    add(&mut u.pulls, v);
                }
                "Upholds" => add(&mut u.pulls, v),
                "Conflicts" | "ConflictedBy" => add(&mut u.conflicts, v),
                "OnSuccess" | "OnFailure" => add(&mut u.triggers, v),
                "Job" => {
                    if let Value::Struct(f) = v.inner() {
                        if let Some(Value::U32(id)) = f.first() {
                            u.job = *id;
                        }
                    }
                }
                _ => {}
            }
        }
        u
    }

    fn status(&self) -> ServiceStatus {
        service_status(&self.active_state)
    }

    /// The unit for [`plan::plan`]: its id first among its names.
    fn deps(self, asked: &str) -> UnitDeps {
        let mut names = Vec::new();
        for n in std::iter::once(&self.id)
            .chain(&self.names)
            .chain(std::iter::once(&asked.to_string()))
        {
            if !n.is_empty() && !names.contains(n) {
                names.push(n.clone());
            }
        }
        UnitDeps {
            names,
            active: self.job != 0 || !matches!(self.active_state.as_str(), "inactive" | "failed"),
            stops: self.dependents,
            pulls: self.pulls,
            conflicts: self.conflicts,
            triggers: self.triggers,
        }
    }

    fn exists(&self) -> bool {
        self.load_state != "not-found"
    }
}

/// One connection to systemd.
#[derive(Debug)]
pub struct Systemd {
    conn: Connection,
    address: String,
}

/// A D-Bus failure as a host error.
fn call_error(address: &str, what: &str, e: CallError) -> Error {
    match e {
        CallError::Remote { name, message } => match name.as_str() {
            n if n.starts_with("org.freedesktop.DBus.Error.Spawn.") => Error::FailedPrecondition(format!(
                "{what}: systemd is not reachable: the bus at {address} could not start org.freedesktop.systemd1 ({name}: {message})"
            )),
            "org.freedesktop.DBus.Error.ServiceUnknown"
            | "org.freedesktop.DBus.Error.NameHasNoOwner"
            | "org.freedesktop.DBus.Error.NoServer"
            | "org.freedesktop.DBus.Error.Disconnected" => Error::FailedPrecondition(format!(
                "{what}: systemd is not reachable: nothing answers as org.freedesktop.systemd1 on the D-Bus bus at {address} ({name}: {message})"
            )),
            "org.freedesktop.systemd1.NoSuchUnit" => {
                Error::NotFound(format!("{what}: {message}"))
            }
            "org.freedesktop.DBus.Error.AccessDenied"
            | "org.freedesktop.DBus.Error.InteractiveAuthorizationRequired" => {
                Error::PermissionDenied(format!("{what}: {name}: {message}"))
            }
            _ => Error::FailedPrecondition(format!("{what}: {name}: {message}")),
        },
        CallError::Io(e) => Error::Internal(format!(
            "{what}: the D-Bus connection to systemd at {address} failed: {e}"
        )),
        CallError::Protocol(m) => Error::Internal(format!("{what}: {m}")),
    }
}

impl Systemd {
    /// Connect to the bus at `address`; a bus that cannot be reached is
    /// `FailedPrecondition`.
    pub fn connect(address: &str) -> Result<Systemd> {
        let conn = Connection::open(address, CALL_TIMEOUT).map_err(|e| match e {
            CallError::Io(io) => Error::FailedPrecondition(format!(
                "systemd is not reachable: cannot connect to the D-Bus system bus at {address}: {io}"
            )),
            other => call_error(address, "connect to the D-Bus system bus", other),
        })?;
        Ok(Systemd {
            conn,
            address: address.to_string(),
        })
    }

    fn call(
        &mut self,
        what: &str,
        path: &str,
        interface: &str,
        member: &str,
        sig: &str,
        args: &[Value],
    ) -> Result<Vec<Value>> {
        self.conn
            .call(DEST, path, interface, member, sig, args)
            .map_err(|e| call_error(&self.address, what, e))
    }

    /// The state of `unit` (loaded if needed).
    pub fn unit(&mut self, what: &str, unit: &str) -> Result<UnitState> {
        let reply = self.call(
            what,
            MANAGER_PATH,
            MANAGER,
            "LoadUnit",
            "s",
            &[Value::Str(unit.into())],
        )?;
        let path = reply
            .first()
            .and_then(|v| v.as_str())
            .ok_or_else(|| Error::Internal(format!("{what}: LoadUnit returned no object path")))?
            .to_string();
        let props = self.call(
            what,
            &path,
            PROPERTIES,
            "GetAll",
            "s",
            &[Value::Str(UNIT.into())],
        )?;
        let state = UnitState::from_properties(props.first().unwrap_or(&Value::Array(vec![])));
        if state.load_state.is_empty() {
            return Err(Error::Internal(format!(
                "{what}: systemd returned no LoadState for {unit}"
            )));
        }
        Ok(state)
    }

    fn existing(&mut self, what: &str, name: &ServiceName) -> Result<UnitState> {
        let u = self.unit(what, name.os_name())?;
        if !u.exists() {
            return Err(Error::NotFound(format!(
                "{what}: service {} does not exist (no unit {})",
                crate::path::shown(name.as_str()),
                name.os_name()
            )));
        }
        Ok(u)
    }

    pub fn get_service(&mut self, name: &ServiceName) -> Result<GetServiceResponse> {
        let u = self.existing("get service", name)?;
        let display_name = if u.description.is_empty() {
            u.id.clone()
        } else {
            u.description.clone()
        };
        Ok(GetServiceResponse {
            display_name,
            start_type: start_type(&u.unit_file_state),
            status: u.status(),
        })
    }

    pub fn start(&mut self, name: &ServiceName, limit: Duration) -> Result<()> {
        let what = format!("start service {}", name.as_str());
        let u = self.existing(&what, name)?;
        if u.status() == ServiceStatus::Running {
            return Ok(());
        }
        self.call(
            &what,
            MANAGER_PATH,
            MANAGER,
            "StartUnit",
            "ss",
            &[
                Value::Str(name.os_name().into()),
                Value::Str("replace".into()),
            ],
        )?;
        self.wait(&what, name.os_name(), ServiceStatus::Running, limit)
    }

    /// What starting or stopping `name` would do ([`plan::plan`]), every
    /// unit by its id and all its names; `NotFound` when it does not exist.
    pub fn plan(&mut self, name: &ServiceName, op: Op) -> Result<Plan> {
        let what = format!(
            "{} service {}",
            match op {
                Op::Start => "start",
                Op::Stop => "stop",
            },
            name.as_str()
        );
        let mut root = Some(self.existing(&what, name)?);
        plan::plan(name.os_name(), op, |n| {
            let u = match root.take() {
                Some(u) => u,
                None => self.unit(&what, n)?,
            };
            Ok(u.deps(n))
        })
    }

    /// The services `unit` needs (`.service` units only); `NotFound` when
    /// it does not exist.
    pub fn dependencies(&mut self, unit: &str) -> Result<Vec<String>> {
        let what = format!("read the dependencies of {unit}");
        let u = self.unit(&what, unit)?;
        if !u.exists() {
            return Err(Error::NotFound(format!("{what}: no unit {unit}")));
        }
        Ok(u.dependencies
            .into_iter()
            .filter(|d| d.ends_with(".service"))
            .collect())
    }

    pub fn stop(
        &mut self,
        name: &ServiceName,
        force: bool,
        limit: Duration,
        guard: DependentGuard,
    ) -> Result<()> {
        let what = format!("stop service {}", name.as_str());
        let u = self.existing(&what, name)?;
        if u.status() == ServiceStatus::Stopped && u.job == 0 {
            return Ok(());
        }
        let mut running = Vec::new();
        for d in &u.dependents {
            let s = self.unit(&what, d)?;
            if s.status() != ServiceStatus::Stopped {
                running.push(d.clone());
            }
        }
        if !running.is_empty() && !force {
            return Err(Error::FailedPrecondition(format!(
                "{what}: dependent services are running ({}); stop them first or set force",
                running.join(", ")
            )));
        }
        for d in &running {
            guard(d)?;
        }
        // Mode "replace": systemd stops the units that require this one in
        // the same transaction (the dependents, with force).
        self.call(
            &what,
            MANAGER_PATH,
            MANAGER,
            "StopUnit",
            "ss",
            &[
                Value::Str(name.os_name().into()),
                Value::Str("replace".into()),
            ],
        )?;
        self.wait(&what, name.os_name(), ServiceStatus::Stopped, limit)?;
        for d in running {
            self.wait(&what, &d, ServiceStatus::Stopped, limit)?;
        }
        Ok(())
    }

    /// Wait until `unit` is in `target` and has no job left.
    fn wait(
        &mut self,
        what: &str,
        unit: &str,
        target: ServiceStatus,
        limit: Duration,
    ) -> Result<()> {
        let pending = match target {
            ServiceStatus::Running => ServiceStatus::StartPending,
            _ => ServiceStatus::StopPending,
        };
        let start = Instant::now();
        let mut polls = 0u32;
        wait_for(
            what,
            target,
            pending,
            limit,
            || {
                let u = self.unit(what, unit)?;
                polls += 1;
                // A queued or running job means "on its way", whatever the
                // state shows now; without a job the state is final.
                let state = if u.job == 0 { u.status() } else { pending };
                if state != target && state != pending {
                    return Err(Error::FailedPrecondition(format!(
                        "{what}: {unit} is {}/{} after its job finished",
                        u.active_state, u.sub_state
                    )));
                }
                Ok(Progress {
                    state,
                    checkpoint: polls,
                    wait_hint_ms: 0,
                })
            },
            || start.elapsed(),
            |_| std::thread::sleep(POLL),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_mapping() {
        for (s, want) in [
            ("active", ServiceStatus::Running),
            ("reloading", ServiceStatus::Running),
            ("inactive", ServiceStatus::Stopped),
            ("failed", ServiceStatus::Stopped),
            ("activating", ServiceStatus::StartPending),
            ("deactivating", ServiceStatus::StopPending),
            ("maintenance", ServiceStatus::Unknown),
            ("", ServiceStatus::Unknown),
        ] {
            assert_eq!(service_status(s), want, "{s}");
        }
        for (s, want) in [
            ("enabled", StartType::Automatic),
            ("enabled-runtime", StartType::Automatic),
            ("linked", StartType::Automatic),
            ("alias", StartType::Automatic),
            ("disabled", StartType::Manual),
            ("static", StartType::Manual),
            ("indirect", StartType::Manual),
            ("generated", StartType::Manual),
            ("transient", StartType::Manual),
            ("", StartType::Manual),
            ("masked", StartType::Disabled),
            ("masked-runtime", StartType::Disabled),
        ] {
            assert_eq!(start_type(s), want, "{s}");
        }
    }

    #[test]
    fn properties_are_read_from_get_all() {
        let e = |k: &str, v: Value| {
            Value::Entry(
                Box::new(Value::Str(k.into())),
                Box::new(Value::Variant(Box::new(v))),
            )
        };
        let props = Value::Array(vec![
            e("Id", Value::Str("a.service".into())),
            e("Description", Value::Str("The A".into())),
            e("LoadState", Value::Str("loaded".into())),
            e("ActiveState", Value::Str("active".into())),
            e("SubState", Value::Str("running".into())),
            e("UnitFileState", Value::Str("enabled".into())),
            e(
                "RequiredBy",
                Value::Array(vec![Value::Str("b.service".into())]),
            ),
            e(
                "BoundBy",
                Value::Array(vec![
                    Value::Str("b.service".into()),
                    Value::Str("c.service".into()),
                ]),
            ),
            e("ConsistsOf", Value::Array(vec![])),
            e(
                "Job",
                Value::Struct(vec![
                    Value::U32(12),
                    Value::Path("/org/freedesktop/systemd1/job/12".into()),
                ]),
            ),
            e("Names", Value::Array(vec![Value::Str("a.service".into())])),
        ]);
        let u = UnitState::from_properties(&props);
        assert_eq!(u.id, "a.service");
        assert_eq!(u.description, "The A");
        assert_eq!(
            u.dependents,
            vec!["b.service".to_string(), "c.service".to_string()]
        );
        assert_eq!(u.job, 12);
        assert_eq!(u.status(), ServiceStatus::Running);
        assert!(u.exists());
    }

    #[test]
    fn dbus_errors_map_to_kinds() {
        let r = |name: &str| CallError::Remote {
            name: name.into(),
            message: "m".into(),
        };
        let addr = "unix:path=/x";
        assert!(
            matches!(call_error(addr, "w", r("org.freedesktop.DBus.Error.ServiceUnknown")), Error::FailedPrecondition(m) if m.contains("systemd is not reachable"))
        );
        assert!(matches!(
            call_error(addr, "w", r("org.freedesktop.systemd1.NoSuchUnit")),
            Error::NotFound(_)
        ));
        assert!(matches!(
            call_error(addr, "w", r("org.freedesktop.DBus.Error.AccessDenied")),
            Error::PermissionDenied(_)
        ));
        assert!(matches!(
            call_error(addr, "w", r("org.freedesktop.systemd1.UnitMasked")),
            Error::FailedPrecondition(_)
        ));
        assert!(matches!(
            call_error(addr, "w", CallError::Protocol("x".into())),
            Error::Internal(_)
        ));
    }
}
