//! Services as systemd units over systemd's D-Bus API (`LoadUnit`,
//! `Properties.GetAll`, `StartUnit`, `StopUnit` of
//! `org.freedesktop.systemd1`, through zbus and zbus_systemd), and the
//! mapping of unit states onto the Windows service model of the API.

use super::bus::{Bus, Link};
use super::dbus_error::{call_error, remote_name};
use super::job::{job_result, Jobs, Until};
use crate::system::plan::{self, Plan, UnitDeps};
use crate::system::protect::Op;
use crate::system::validate::ServiceName;
use crate::system::{DependentGuard, GetServiceResponse, ServiceStatus, StartType};
use crate::{Error, Result};
use std::time::Duration;
use zbus::{DeserializeDict, OwnedObjectPath, Type};

const DEST: &str = "org.freedesktop.systemd1";
const UNIT: &str = "org.freedesktop.systemd1.Unit";
const PROPERTIES: &str = "org.freedesktop.DBus.Properties";
const MANAGER: &str = "org.freedesktop.systemd1.Manager";

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

/// The unit properties the API needs, as `Properties.GetAll` gives them
/// (any other property is skipped).
#[derive(Debug, Default, DeserializeDict, Type)]
#[zbus(signature = "a{sv}", rename_all = "PascalCase")]
struct Properties {
    id: Option<String>,
    description: Option<String>,
    load_state: Option<String>,
    active_state: Option<String>,
    sub_state: Option<String>,
    unit_file_state: Option<String>,
    names: Option<Vec<String>>,
    required_by: Option<Vec<String>>,
    requisite_of: Option<Vec<String>>,
    bound_by: Option<Vec<String>>,
    consists_of: Option<Vec<String>>,
    propagates_stop_to: Option<Vec<String>>,
    requires: Option<Vec<String>>,
    requisite: Option<Vec<String>>,
    binds_to: Option<Vec<String>>,
    wants: Option<Vec<String>>,
    upholds: Option<Vec<String>>,
    conflicts: Option<Vec<String>>,
    conflicted_by: Option<Vec<String>>,
    on_success: Option<Vec<String>>,
    on_failure: Option<Vec<String>>,
    job: Option<(u32, OwnedObjectPath)>,
    stop_when_unneeded: Option<bool>,
    success_action: Option<String>,
    failure_action: Option<String>,
    start_limit_action: Option<String>,
    job_timeout_action: Option<String>,
    on_success_job_mode: Option<String>,
    on_failure_job_mode: Option<String>,
    allow_isolate: Option<bool>,
}

/// The unit settings that make the manager itself act (exit, reboot,
/// power off...) when the unit succeeds, fails, hits its start limit or
/// its job times out.
const ACTIONS: [&str; 4] = [
    "SuccessAction",
    "FailureAction",
    "StartLimitAction",
    "JobTimeoutAction",
];

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
    /// Id and object path of the pending job (0: none).
    pub job: (u32, String),
    /// `StopWhenUnneeded=yes`.
    pub stop_when_unneeded: bool,
    /// Every setting of [`ACTIONS`] that is not `none`, as `Name=value`.
    pub actions: Vec<String>,
    /// Why the plan cannot follow this unit ([`unmodelled`]).
    pub unmodelled: Vec<String>,
}

/// The unit types a plan follows: services, and targets and slices, which
/// only group units (what they pull in, stop or order is in the
/// properties the walk reads). Any other type does what the walk cannot
/// see: a `.path`, `.timer`, `.socket` or `.automount` starts its
/// `Triggers=` unit later on a condition; a `.mount`, `.swap` or
/// `.automount` changes the node's file systems; a `.device` or `.scope`
/// is not the manager's to start.
const FOLLOWED_TYPES: [&str; 3] = [".service", ".target", ".slice"];

/// Why a plan cannot tell what starting or stopping unit `id` does
/// (default-deny): a unit type the walk does not follow
/// ([`FOLLOWED_TYPES`]); a job mode for `OnSuccess=`/`OnFailure=` other
/// than `replace` or `fail` (`isolate` stops every unit the target does
/// not need, `flush` cancels every queued job, `replace-irreversibly`,
/// `ignore-*` change how the transaction is built); a target that may be
/// isolated (`AllowIsolate=yes`).
fn unmodelled(id: &str, p: &Properties) -> Vec<String> {
    let mut why = Vec::new();
    if !FOLLOWED_TYPES.iter().any(|t| id.ends_with(t)) {
        why.push(format!(
            "{id} is not a service, target or slice unit: a path, timer, socket or automount unit starts other units on its own, a mount, swap or automount unit changes the node's file systems"
        ));
    }
    for (name, v) in [
        ("OnSuccessJobMode", &p.on_success_job_mode),
        ("OnFailureJobMode", &p.on_failure_job_mode),
    ] {
        match v.as_deref() {
            None | Some("") | Some("replace") | Some("fail") => {}
            Some(mode) => why.push(format!("{name}={mode}")),
        }
    }
    if p.allow_isolate == Some(true) {
        why.push("AllowIsolate=yes".to_string());
    }
    why
}

impl From<Properties> for UnitState {
    fn from(p: Properties) -> UnitState {
        fn all(lists: Vec<Option<Vec<String>>>) -> Vec<String> {
            let mut to: Vec<String> = Vec::new();
            for d in lists.into_iter().flatten().flatten() {
                if !to.contains(&d) {
                    to.push(d);
                }
            }
            to
        }
        let actions = [
            &p.success_action,
            &p.failure_action,
            &p.start_limit_action,
            &p.job_timeout_action,
        ]
        .into_iter()
        .zip(ACTIONS)
        .filter_map(|(v, name)| match v.as_deref() {
            None | Some("") | Some("none") => None,
            Some(v) => Some(format!("{name}={v}")),
        })
        .collect();
        let unmodelled = unmodelled(p.id.as_deref().unwrap_or_default(), &p);
        let needs = [&p.requires, &p.requisite, &p.binds_to, &p.wants];
        let needs: Vec<_> = needs.into_iter().cloned().collect();
        UnitState {
            id: p.id.unwrap_or_default(),
            description: p.description.unwrap_or_default(),
            load_state: p.load_state.unwrap_or_default(),
            active_state: p.active_state.unwrap_or_default(),
            sub_state: p.sub_state.unwrap_or_default(),
            unit_file_state: p.unit_file_state.unwrap_or_default(),
            names: all(vec![p.names]),
            dependents: all(vec![
                p.required_by,
                p.requisite_of,
                p.bound_by,
                p.consists_of,
                p.propagates_stop_to,
            ]),
            dependencies: all(needs.clone()),
            pulls: all(needs.into_iter().chain([p.upholds]).collect()),
            conflicts: all(vec![p.conflicts, p.conflicted_by]),
            triggers: all(vec![p.on_success, p.on_failure]),
            job: p
                .job
                .map(|(id, path)| (id, path.to_string()))
                .unwrap_or_default(),
            stop_when_unneeded: p.stop_when_unneeded.unwrap_or(false),
            actions,
            unmodelled,
        }
    }
}

impl UnitState {
    fn status(&self) -> ServiceStatus {
        service_status(&self.active_state)
    }

    fn has_job(&self) -> bool {
        self.job.0 != 0
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
            active: self.has_job() || !matches!(self.active_state.as_str(), "inactive" | "failed"),
            stops: self.dependents,
            pulls: self.pulls,
            conflicts: self.conflicts,
            triggers: self.triggers,
            stop_when_unneeded: self.stop_when_unneeded,
            actions: self.actions,
            unmodelled: self.unmodelled,
            not_a_service: (!self.id.ends_with(".service"))
                .then(|| format!("{} is not a service unit", self.id)),
        }
    }

    fn exists(&self) -> bool {
        self.load_state != "not-found"
    }
}

/// The state of `unit` (loaded if needed).
async fn unit(link: &Link, what: &str, unit: &str) -> Result<UnitState> {
    let err = |e| call_error(&link.address, what, e);
    let path = link
        .manager
        .load_unit(unit.to_string())
        .await
        .map_err(err)?;
    let reply = link
        .conn
        .call_method(Some(DEST), &path, Some(PROPERTIES), "GetAll", &(UNIT,))
        .await
        .map_err(err)?;
    let props: Properties = reply.body().deserialize().map_err(err)?;
    let state = UnitState::from(props);
    if state.load_state.is_empty() {
        return Err(Error::Internal(format!(
            "{what}: systemd returned no LoadState for {unit}"
        )));
    }
    Ok(state)
}

/// When the manager last loaded its units (`UnitsLoadTimestampMonotonic`:
/// set by every `daemon-reload` and re-exec); `None` from a manager
/// without the property, whose reloads cannot be told.
async fn generation(link: &Link, what: &str) -> Result<Option<u64>> {
    let reply = link
        .conn
        .call_method(
            Some(DEST),
            "/org/freedesktop/systemd1",
            Some(PROPERTIES),
            "Get",
            &(MANAGER, "UnitsLoadTimestampMonotonic"),
        )
        .await;
    let reply = match reply {
        Ok(r) => r,
        Err(e)
            if remote_name(&e).as_deref() == Some("org.freedesktop.DBus.Error.UnknownProperty") =>
        {
            return Ok(None)
        }
        Err(e) => return Err(call_error(&link.address, what, e)),
    };
    let v: zbus::OwnedVariant = reply
        .body()
        .deserialize()
        .map_err(|e| call_error(&link.address, what, e))?;
    u64::try_from(v).map(Some).map_err(|e| {
        Error::Internal(format!(
            "{what}: systemd's UnitsLoadTimestampMonotonic is not a number: {e}"
        ))
    })
}

/// `FailedPrecondition` when the manager's configuration is no longer the
/// one the plan was checked on (`planned`).
async fn same_generation(link: &Link, what: &str, planned: Option<u64>, when: &str) -> Result<()> {
    let Some(planned) = planned else {
        return Ok(());
    };
    match generation(link, what).await? {
        Some(now) if now == planned => Ok(()),
        _ => Err(Error::FailedPrecondition(format!(
            "{what}: refused, the service manager reloaded its configuration {when}: what the call would do now was not checked; retry"
        ))),
    }
}

/// Queue a start or stop of `name` and wait for the job's end, then (a
/// stop) for the jobs of the `dependents` it stops too. `planned`: the
/// configuration generation the plan was checked on; another one before
/// the job is queued refuses the call, after it cancels the job.
async fn run_job(
    link: &Link,
    what: &str,
    name: &str,
    op: Op,
    dependents: &[String],
    until: Until,
    planned: Option<u64>,
) -> Result<()> {
    let err = |e| call_error(&link.address, what, e);
    same_generation(link, what, planned, "since the call's plan was made").await?;
    // Subscribed before the job exists: its end cannot be missed.
    let mut jobs = Jobs::watch(link, what).await?;
    let r = async {
        // Mode "replace": a stop takes the units that require this one
        // down in the same transaction (the dependents, with force).
        let job = match op {
            Op::Start => {
                let call = link.manager.start_unit(name.into(), "replace".into());
                jobs.meanwhile(call).await
            }
            Op::Stop => {
                let call = link.manager.stop_unit(name.into(), "replace".into());
                jobs.meanwhile(call).await
            }
        }
        .map_err(err)?;
        // Wanted before anything else is awaited: its end may come meanwhile.
        jobs.want(job.as_str());
        // A reload between the check above and the job: the transaction
        // may hold what the plan did not check. Cancel what is queued.
        if let Err(e) = jobs
            .meanwhile(same_generation(
                link,
                what,
                planned,
                "just before the job was queued",
            ))
            .await
        {
            let _ = jobs
                .meanwhile(link.conn.call_method(
                    Some(DEST),
                    job.as_str(),
                    Some("org.freedesktop.systemd1.Job"),
                    "Cancel",
                    &(),
                ))
                .await;
            return Err(e);
        }
        // The transaction is in place once systemd answered: the jobs of
        // the dependents it stops exist now (or have ended already).
        let mut theirs = Vec::new();
        for d in dependents {
            let u = jobs.meanwhile(unit(link, what, d)).await?;
            if u.has_job() {
                jobs.want(&u.job.1);
                theirs.push((d, Some(u.job.1)));
            } else {
                theirs.push((d, None));
            }
        }
        let result = jobs.ended(what, name, job.as_str(), until).await?;
        job_result(what, name, &result)?;
        for (d, job) in theirs {
            match job {
                Some(job) => job_result(what, d, &jobs.ended(what, d, &job, until).await?)?,
                None => {
                    let u = jobs.meanwhile(unit(link, what, d)).await?;
                    if u.status() != ServiceStatus::Stopped {
                        return Err(Error::FailedPrecondition(format!(
                            "{what}: {d} is {}/{} after its stop",
                            u.active_state, u.sub_state
                        )));
                    }
                }
            }
        }
        Ok(())
    }
    .await;
    jobs.close(link).await;
    r
}

/// systemd on a [`Bus`]: the synchronous calls of the backend.
pub struct Systemd<'a>(pub &'a Bus);

impl Systemd<'_> {
    /// The state of `unit` (loaded if needed).
    pub fn unit(&self, what: &str, name: &str) -> Result<UnitState> {
        self.0.run(async |link| unit(link, what, name).await)
    }

    fn existing(&self, what: &str, name: &ServiceName) -> Result<UnitState> {
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

    pub fn get_service(&self, name: &ServiceName) -> Result<GetServiceResponse> {
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

    /// The job's wait bound; nothing is queued once the caller is gone.
    fn until(what: &str, limit: Duration) -> Result<Until> {
        if crate::deadline::passed() {
            return Err(Error::DeadlineExceeded(format!(
                "{what}: the call's deadline passed before anything was asked of systemd"
            )));
        }
        Ok(Until::new(limit, crate::deadline::current()))
    }

    /// Start `name`; `planned`: see [`run_job`].
    pub fn start(&self, name: &ServiceName, limit: Duration, planned: Option<u64>) -> Result<()> {
        let what = format!("start service {}", name.as_str());
        let u = self.existing(&what, name)?;
        if u.status() == ServiceStatus::Running {
            return Ok(());
        }
        let until = Self::until(&what, limit)?;
        self.0.run(async |link| {
            run_job(link, &what, name.os_name(), Op::Start, &[], until, planned).await
        })
    }

    /// What starting or stopping `name` would do ([`plan::plan`]), every
    /// unit by its id and all its names; `NotFound` when it does not exist.
    pub fn plan(&self, name: &ServiceName, op: Op) -> Result<Plan> {
        let what = format!(
            "{} service {}",
            match op {
                Op::Start => "start",
                Op::Stop => "stop",
            },
            name.as_str()
        );
        let before = self.0.run(async |link| generation(link, &what).await)?;
        let mut root = Some(self.existing(&what, name)?);
        let mut p = plan::plan(name.os_name(), op, |n| {
            let u = match root.take() {
                Some(u) => u,
                None => self.unit(&what, n)?,
            };
            Ok(u.deps(n))
        })?;
        // A reload during the walk: the units were read from two
        // configurations.
        self.0.run(async |link| {
            same_generation(link, &what, before, "while the call's plan was made").await
        })?;
        p.generation = before;
        Ok(p)
    }

    /// The services `unit` needs (`.service` units only); `NotFound` when
    /// it does not exist.
    pub fn dependencies(&self, unit: &str) -> Result<Vec<String>> {
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
        &self,
        name: &ServiceName,
        force: bool,
        limit: Duration,
        guard: DependentGuard,
        planned: Option<u64>,
    ) -> Result<()> {
        let what = format!("stop service {}", name.as_str());
        let u = self.existing(&what, name)?;
        if u.status() == ServiceStatus::Stopped && !u.has_job() {
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
        let until = Self::until(&what, limit)?;
        self.0.run(async |link| {
            run_job(
                link,
                &what,
                name.os_name(),
                Op::Stop,
                &running,
                until,
                planned,
            )
            .await
        })
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

    /// What `Properties.GetAll` would answer, in `endian` byte order.
    fn get_all(endian: zbus::wire::Endian) -> Properties {
        use std::collections::HashMap;
        use zbus::wire::{serialized::Context, to_bytes, Variant};
        let list = |l: &[&str]| Variant::from(l.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        let job = (
            12u32,
            OwnedObjectPath::try_from("/org/freedesktop/systemd1/job/12").unwrap(),
        );
        let props: HashMap<&str, Variant<'_>> = HashMap::from([
            ("Id", Variant::from("a.service")),
            ("Description", Variant::from("The A")),
            ("LoadState", Variant::from("loaded")),
            ("ActiveState", Variant::from("active")),
            ("SubState", Variant::from("running")),
            ("UnitFileState", Variant::from("enabled")),
            ("RequiredBy", list(&["b.service"])),
            ("BoundBy", list(&["b.service", "c.service"])),
            ("ConsistsOf", list(&[])),
            ("Wants", list(&["w.service"])),
            ("Upholds", list(&["u.service"])),
            ("Job", Variant::from(zbus::wire::Structure::from(job))),
            ("Names", list(&["a.service", "alias.service"])),
            ("StopWhenUnneeded", Variant::from(true)),
            ("SuccessAction", Variant::from("exit")),
            ("FailureAction", Variant::from("none")),
            ("JobTimeoutAction", Variant::from("reboot-force")),
            // Properties the API does not read, of other types.
            ("CPUWeight", Variant::from(100u64)),
            (
                "Conditions",
                Variant::from(Vec::<(String, bool, bool, String, i32)>::new()),
            ),
            ("Transient", Variant::from(false)),
        ]);
        let data = to_bytes(Context::new(endian, 0), &props).unwrap();
        data.deserialize::<Properties>().unwrap().0
    }

    #[test]
    fn properties_are_read_from_get_all() {
        for endian in [zbus::wire::Endian::Little, zbus::wire::Endian::Big] {
            let u = UnitState::from(get_all(endian));
            assert_eq!(u.id, "a.service");
            assert_eq!(u.description, "The A");
            assert_eq!(u.names, ["a.service", "alias.service"]);
            assert_eq!(u.dependents, ["b.service", "c.service"]);
            assert_eq!(u.dependencies, ["w.service"]);
            assert_eq!(u.pulls, ["w.service", "u.service"]);
            assert_eq!(u.job, (12, "/org/freedesktop/systemd1/job/12".to_string()));
            assert_eq!(u.status(), ServiceStatus::Running);
            assert_eq!(start_type(&u.unit_file_state), StartType::Automatic);
            assert!(u.exists() && u.has_job());
            let d = u.deps("alias.service");
            assert_eq!(d.names, ["a.service", "alias.service"]);
            assert!(d.active);
            assert!(d.stop_when_unneeded);
            assert_eq!(
                d.actions,
                ["SuccessAction=exit", "JobTimeoutAction=reboot-force"]
            );
            assert_eq!(d.not_a_service, None);
        }
    }

    #[test]
    fn units_the_plan_cannot_follow() {
        let p = |f: fn(&mut Properties)| {
            let mut p = Properties::default();
            f(&mut p);
            p
        };
        for id in ["a.service", "b.target", "c.slice"] {
            assert!(unmodelled(id, &Properties::default()).is_empty(), "{id}");
        }
        for id in [
            "e.path",
            "e.timer",
            "e.socket",
            "e.automount",
            "e.mount",
            "e.swap",
            "e.device",
        ] {
            let w = unmodelled(id, &Properties::default());
            assert!(w.len() == 1 && w[0].contains(id), "{id}: {w:?}");
        }
        let w = unmodelled(
            "a.service",
            &p(|p| p.on_success_job_mode = Some("isolate".into())),
        );
        assert_eq!(w, ["OnSuccessJobMode=isolate"]);
        let w = unmodelled(
            "a.service",
            &p(|p| p.on_failure_job_mode = Some("flush".into())),
        );
        assert_eq!(w, ["OnFailureJobMode=flush"]);
        for mode in ["replace", "fail", ""] {
            let w = unmodelled(
                "a.service",
                &p(|p| p.on_failure_job_mode = Some("replace".into())),
            );
            assert!(w.is_empty(), "{mode}: {w:?}");
        }
        let w = unmodelled("t.target", &p(|p| p.allow_isolate = Some(true)));
        assert_eq!(w, ["AllowIsolate=yes"]);
    }
}
