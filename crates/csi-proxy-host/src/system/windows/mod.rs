//! The Windows System backend: services through the Service Control
//! Manager API (no `sc.exe`, no PowerShell, no WMI), the BIOS serial from
//! `Win32_BIOS` over the group's own WMI worker.

mod registry;
mod scm;
#[cfg(test)]
mod tests;

use super::codes;
use super::plan::{self, Plan, Unit, UnitDeps};
use super::protect::Op;
use super::scm_rules;
use super::validate::ServiceName;
use super::wait::{wait_for, Progress, DEFAULT_LIMIT};
use super::{DependentGuard, GetServiceResponse, ServiceStatus, SystemBackend};
use crate::win::errors;
use crate::win::wmi::{WmiWorker, CIMV2_NAMESPACE};
use crate::wmi_schema::{names::bios, queries};
use crate::{Error, Result};
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};
use windows_service::service::{Service, ServiceAccess};
use windows_service::service_manager::ServiceManager;

/// How long the state before a start or stop may still show.
const GRACE: Duration = Duration::from_secs(3);

/// The SCM-backed System backend.
pub struct WindowsSystem {
    wmi: Arc<WmiWorker>,
    limit: Duration,
}

impl WindowsSystem {
    /// Services through the SCM; WMI queries on `wmi` (started on first
    /// use).
    pub fn new(wmi: Arc<WmiWorker>) -> Self {
        WindowsSystem {
            wmi,
            limit: DEFAULT_LIMIT,
        }
    }

    /// The overall limit of StartService and StopService.
    pub fn with_limit(mut self, limit: Duration) -> Self {
        self.limit = limit;
        self
    }
}

fn scm_err(op: &str, name: &str, e: io::Error) -> Error {
    if let Some(code) = e.raw_os_error() {
        if let Some(err) = codes::service_error(code, op, name, &e.to_string()) {
            return err;
        }
    }
    errors::win32(op, &format!("service {name:?}"), e)
}

fn open(name: &str, access: ServiceAccess, op: &str) -> Result<Service> {
    let manager = scm::open_manager().map_err(|e| errors::win32("OpenSCManagerW", "", e))?;
    scm::open_service(&manager, name, access).map_err(|e| scm_err(op, name, e))
}

fn progress(svc: &Service, name: &str, op: &str) -> Result<Progress> {
    let (state, checkpoint, wait_hint_ms) = scm::status(svc).map_err(|e| scm_err(op, name, e))?;
    Ok(Progress {
        state: codes::state(state)?,
        checkpoint,
        wait_hint_ms,
    })
}

fn wait(svc: &Service, name: &str, op: &str, target: ServiceStatus, limit: Duration) -> Result<()> {
    let pending = if target == ServiceStatus::Running {
        ServiceStatus::StartPending
    } else {
        ServiceStatus::StopPending
    };
    // The state before the request may still show for a moment after the
    // control was accepted (the service reports the pending state itself):
    // it counts as pending for a short grace period.
    let before = if target == ServiceStatus::Running {
        ServiceStatus::Stopped
    } else {
        ServiceStatus::Running
    };
    let start = Instant::now();
    wait_for(
        &format!("{op} service {}", name),
        target,
        pending,
        limit,
        || {
            let mut p = progress(svc, name, op)?;
            if p.state == before && start.elapsed() < GRACE {
                p.state = pending;
            }
            Ok(p)
        },
        || start.elapsed(),
        std::thread::sleep,
    )
}

/// Stop one service (no dependents check) and wait until it is stopped.
fn stop_one(name: &str, limit: Duration) -> Result<()> {
    let op = "stop";
    let svc = open(name, ServiceAccess::STOP | ServiceAccess::QUERY_STATUS, op)?;
    match scm::stop(&svc) {
        Ok(()) => {}
        Err(e)
            if e.raw_os_error()
                .is_some_and(|c| codes::already_done(c, false)) =>
        {
            return Ok(())
        }
        // Starting or stopping already: wait for the outcome below.
        Err(e) if e.raw_os_error() == Some(codes::CANNOT_ACCEPT_CTRL) => {
            if progress(&svc, name, op)?.state == ServiceStatus::StartPending {
                wait(&svc, name, op, ServiceStatus::Running, limit)?;
                scm::stop(&svc).map_err(|e| scm_err(op, name, e))?;
            }
        }
        Err(e) => return Err(scm_err(op, name, e)),
    }
    wait(&svc, name, op, ServiceStatus::Stopped, limit)
}

/// The running services that depend on `name`, directly or not, found by
/// reading every service's dependency list; dependents of dependents come
/// first (the order to stop them in).
fn scanned_dependents(name: &str) -> Result<Vec<String>> {
    Ok(scanned_all_dependents(name)?
        .into_iter()
        .filter(|(_, running)| *running)
        .map(|(s, _)| s)
        .collect())
}

/// Every service that depends on `name`, directly or not, and whether it
/// is running (see [`scanned_dependents`]).
fn scanned_all_dependents(name: &str) -> Result<Vec<(String, bool)>> {
    let manager = scm::open_manager().map_err(|e| errors::win32("OpenSCManagerW", "", e))?;
    let all = scm::Enumerator::open()
        .map_err(|e| errors::win32("OpenSCManagerW", "", e))?
        .all_services()
        .map_err(|e| errors::win32("EnumServicesStatusExW", "", e))?;
    // service -> the services it depends on
    let mut deps: Vec<(String, Vec<String>)> = Vec::new();
    for s in &all {
        let Ok(h) = scm::open_service(
            &manager,
            s,
            ServiceAccess::QUERY_CONFIG | ServiceAccess::QUERY_STATUS,
        ) else {
            continue;
        };
        let mut d = scm::config(&h).map(|(_, _, d)| d).unwrap_or_default();
        for r in registry::dependencies(s) {
            if !d.iter().any(|x| x.eq_ignore_ascii_case(&r)) {
                d.push(r);
            }
        }
        if !d.is_empty() {
            deps.push((s.clone(), d));
        }
    }
    let mut order = Vec::new();
    collect_dependents(name, &deps, &mut order, 0);
    Ok(order
        .into_iter()
        .map(|s| {
            let r = is_running(&manager, &s);
            (s, r)
        })
        .collect())
}

fn is_running(manager: &ServiceManager, name: &str) -> bool {
    scm::open_service(manager, name, ServiceAccess::QUERY_STATUS)
        .and_then(|h| scm::status(&h))
        .is_ok_and(|(state, _, _)| state != 1)
}

/// Post-order walk: the dependents of `name`'s dependents before them.
fn collect_dependents(
    name: &str,
    deps: &[(String, Vec<String>)],
    out: &mut Vec<String>,
    depth: usize,
) {
    if depth > 32 {
        return;
    }
    for (svc, on) in deps {
        if on.iter().any(|d| d.eq_ignore_ascii_case(name))
            && !out.iter().any(|o: &String| o.eq_ignore_ascii_case(svc))
        {
            collect_dependents(svc, deps, out, depth + 1);
            if !out.iter().any(|o: &String| o.eq_ignore_ascii_case(svc)) {
                out.push(svc.clone());
            }
        }
    }
}

impl SystemBackend for WindowsSystem {
    fn bios_serial(&self) -> Result<String> {
        let rows = self.wmi.call(|w| {
            let rows = w.query_in(CIMV2_NAMESPACE, &queries::bios_serial())?;
            rows.iter()
                .map(|r| r.read(&bios::SERIAL_NUMBER))
                .collect::<Result<Vec<_>>>()
        })?;
        rows.into_iter()
            .next()
            .map(|s| s.unwrap_or_default().trim().to_string())
            .ok_or_else(|| {
                Error::NotFound(format!(
                    "{} has no instance: no BIOS serial number",
                    bios::CLASS.name
                ))
            })
    }

    fn get_service(&self, name: &ServiceName) -> Result<GetServiceResponse> {
        let op = "get";
        let svc = open(
            name.os_name(),
            ServiceAccess::QUERY_CONFIG | ServiceAccess::QUERY_STATUS,
            op,
        )?;
        let (start_type, display_name, _) =
            scm::config(&svc).map_err(|e| scm_err(op, name.as_str(), e))?;
        let status = progress(&svc, name.os_name(), op)?.state;
        Ok(GetServiceResponse {
            display_name,
            start_type: codes::start_type(start_type)?,
            status,
        })
    }

    fn start_service(&self, name: &ServiceName) -> Result<()> {
        let op = "start";
        let svc = open(
            name.os_name(),
            ServiceAccess::START | ServiceAccess::QUERY_STATUS,
            op,
        )?;
        match scm::start(&svc) {
            Ok(()) => {}
            Err(e)
                if e.raw_os_error()
                    .is_some_and(|c| codes::already_done(c, true)) => {}
            Err(e) => return Err(scm_err(op, name.as_str(), e)),
        }
        wait(&svc, name.os_name(), op, ServiceStatus::Running, self.limit)
    }

    fn stop_service(&self, name: &ServiceName, force: bool, guard: DependentGuard) -> Result<()> {
        let op = "stop";
        let svc = open(
            name.os_name(),
            ServiceAccess::STOP | ServiceAccess::QUERY_STATUS | scm::ENUMERATE_DEPENDENTS,
            op,
        )?;
        if progress(&svc, name.os_name(), op)?.state == ServiceStatus::Stopped {
            return Ok(());
        }
        let mut dependents =
            scm::active_dependents(&svc).map_err(|e| scm_err(op, name.as_str(), e))?;
        let mut source = "EnumDependentServicesW";
        if dependents.is_empty() {
            // Wine's EnumDependentServicesW lists nothing: ask every service
            // what it depends on instead (StopService is no hot path).
            dependents = scanned_dependents(name.os_name())?;
            source = "the dependency scan";
        }
        if !dependents.is_empty() {
            tracing::debug!(
                service = name.as_str(),
                ?dependents,
                "running dependents found by {source}"
            );
        }
        if !dependents.is_empty() {
            if !force {
                return Err(Error::FailedPrecondition(format!(
                    "stop service {:?}: dependent services are running ({}); stop them first or set force",
                    name.as_str(),
                    dependents.join(", ")
                )));
            }
            for d in &dependents {
                guard(d)?;
            }
            // In the SCM's order: dependents of dependents come first.
            for d in &dependents {
                stop_one(d, self.limit)?;
            }
        }
        drop(svc);
        stop_one(name.os_name(), self.limit)
    }

    /// The service key names the name may stand for (the name itself, and
    /// the key name `GetServiceKeyNameW` gives for it as a display name;
    /// the SCM compares names without case; those that open first), its
    /// type (a driver is no service) and failure actions, then for a stop
    /// every service depending on either (`EnumDependentServicesW` with
    /// `SERVICE_STATE_ALL`: dependents of dependents included; wine lists
    /// none, so the dependency scan then), for a start every service
    /// either depends on, transitively, `+Group` entries expanded to the
    /// group's members (the SCM starts them first); each with its failure
    /// actions.
    fn plan(&self, name: &ServiceName, op: Op) -> Result<Plan> {
        let verb = op.verb();
        let manager = scm::open_manager().map_err(|e| errors::win32("OpenSCManagerW", "", e))?;
        let mut candidates = vec![name.os_name().to_string()];
        if let Ok(key) = scm::key_name(&manager, name.os_name()) {
            if !key.is_empty() && !key.eq_ignore_ascii_case(name.os_name()) {
                candidates.push(key);
            }
        }
        let mut found = Vec::new();
        let mut first_err = None;
        for key in &candidates {
            match scm::open_service(
                &manager,
                key,
                ServiceAccess::QUERY_CONFIG
                    | ServiceAccess::QUERY_STATUS
                    | scm::ENUMERATE_DEPENDENTS,
            ) {
                Ok(svc) => found.push((key.clone(), svc)),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        if found.is_empty() {
            let e = first_err.unwrap_or_else(|| io::Error::other("no service"));
            return Err(scm_err(verb, name.as_str(), e));
        }
        // The names that open first: the first is the service acted on.
        let mut target: Vec<String> = found.iter().map(|(k, _)| k.clone()).collect();
        for c in candidates {
            if !target.iter().any(|t| t.eq_ignore_ascii_case(&c)) {
                target.push(c);
            }
        }
        let mut p = Plan {
            target,
            ..Plan::default()
        };
        let mut groups = Groups::default();
        for (i, (key, svc)) in found.into_iter().enumerate() {
            let cfg = scm::full_config(&svc).map_err(|e| scm_err(verb, name.as_str(), e))?;
            if i == 0 {
                // Its own trigger-start entries are the SCM acting on the
                // service asked for, not on another: not refused here.
                p.not_a_service = scm_rules::not_a_service(cfg.service_type);
            }
            p.target_actions.extend(node_actions(&manager, &key)?);
            match op {
                Op::Stop => {
                    let listed =
                        scm::all_dependents(&svc).map_err(|e| scm_err(verb, name.as_str(), e))?;
                    let stopped = if listed.is_empty() {
                        scanned_all_dependents(&key)?
                    } else {
                        listed
                            .into_iter()
                            .map(|d| {
                                let r = is_running(&manager, &d);
                                (d, r)
                            })
                            .collect()
                    };
                    for (d, active) in stopped {
                        let actions = node_actions(&manager, &d)?;
                        let unmodelled = unmodelled(&manager, &d)?;
                        p.stopped.push(Unit {
                            names: vec![d],
                            active,
                            actions,
                            unmodelled,
                        });
                    }
                }
                Op::Start => {
                    let started = plan::plan(&key, Op::Start, |n| {
                        let pulls = match dependencies_of(&manager, n, &mut groups) {
                            Ok(d) => d,
                            Err(Error::NotFound(_)) => Vec::new(),
                            Err(e) => return Err(e),
                        };
                        Ok(UnitDeps {
                            names: vec![n.to_string()],
                            active: is_running(&manager, n),
                            pulls,
                            actions: node_actions(&manager, n)?,
                            unmodelled: unmodelled(&manager, n)?,
                            ..UnitDeps::default()
                        })
                    })?;
                    p.started.extend(started.started);
                }
            }
        }
        Ok(p)
    }

    fn dependencies(&self, name: &str) -> Result<Vec<String>> {
        let manager = scm::open_manager().map_err(|e| errors::win32("OpenSCManagerW", "", e))?;
        dependencies_of(&manager, name, &mut Groups::default())
    }
}

/// The failure actions of `name` that act on the node (a reboot, a
/// command; [`scm_rules::node_actions`]); none for a service that is gone.
fn node_actions(manager: &ServiceManager, name: &str) -> Result<Vec<String>> {
    let what = "read the failure actions of";
    let svc = match scm::open_service(manager, name, ServiceAccess::QUERY_CONFIG) {
        Ok(s) => s,
        Err(e) if e.raw_os_error() == Some(codes::DOES_NOT_EXIST) => return Ok(Vec::new()),
        Err(e) => return Err(scm_err(what, name, e)),
    };
    let types = scm::failure_actions(&svc, name).map_err(|e| scm_err(what, name, e))?;
    Ok(scm_rules::node_actions(&types))
}

/// Why the plan cannot follow `name` ([`scm_rules::unmodelled`]: a
/// driver, a trigger-started service); nothing for a service that is gone.
fn unmodelled(manager: &ServiceManager, name: &str) -> Result<Vec<String>> {
    let what = "read the type and triggers of";
    let svc = match scm::open_service(manager, name, ServiceAccess::QUERY_CONFIG) {
        Ok(s) => s,
        Err(e) if e.raw_os_error() == Some(codes::DOES_NOT_EXIST) => return Ok(Vec::new()),
        Err(e) => return Err(scm_err(what, name, e)),
    };
    let cfg = scm::full_config(&svc).map_err(|e| scm_err(what, name, e))?;
    let triggers = scm::trigger_count(&svc).map_err(|e| scm_err(what, name, e))?;
    Ok(scm_rules::unmodelled(cfg.service_type, triggers))
}

/// The members of load-order groups, read once per plan.
#[derive(Default)]
struct Groups {
    /// Every service and driver with its group (`None`: not read yet).
    all: Option<Vec<(String, String)>>,
}

impl Groups {
    /// The services and drivers in `group` (compared without case).
    fn members(&mut self, manager: &ServiceManager, group: &str) -> Result<Vec<String>> {
        if self.all.is_none() {
            let names = scm::Enumerator::open()
                .map_err(|e| errors::win32("OpenSCManagerW", "", e))?
                .all_services_and_drivers()
                .map_err(|e| errors::win32("EnumServicesStatusExW", "", e))?;
            let mut all = Vec::new();
            for n in names {
                let mut g = scm::open_service(manager, &n, ServiceAccess::QUERY_CONFIG)
                    .and_then(|h| scm::full_config(&h))
                    .map(|c| c.group)
                    .unwrap_or_default();
                if g.is_empty() {
                    // Wine keeps the group in the registry only.
                    g = registry::group(&n);
                }
                if !g.is_empty() {
                    all.push((n, g));
                }
            }
            self.all = Some(all);
        }
        Ok(self
            .all
            .iter()
            .flatten()
            .filter(|(_, g)| g.eq_ignore_ascii_case(group))
            .map(|(n, _)| n.clone())
            .collect())
    }
}

/// The services `name` depends on directly: its service dependencies and
/// the members of the load-order groups it depends on (`+Group`: the SCM
/// starts every member), from `QueryServiceConfigW` and the registry
/// (wine's `QueryServiceConfigW` leaves `lpDependencies` empty).
fn dependencies_of(
    manager: &ServiceManager,
    name: &str,
    groups: &mut Groups,
) -> Result<Vec<String>> {
    let what = "read the dependencies of";
    let svc = scm::open_service(manager, name, ServiceAccess::QUERY_CONFIG)
        .map_err(|e| scm_err(what, name, e))?;
    let mut deps = scm::full_config(&svc)
        .map_err(|e| scm_err(what, name, e))?
        .dependencies;
    for r in registry::dependencies(name)
        .into_iter()
        .chain(registry::group_dependencies(name))
    {
        if !deps.iter().any(|d| d.eq_ignore_ascii_case(&r)) {
            deps.push(r);
        }
    }
    let mut failed = None;
    let out = scm_rules::expand_groups(&deps, |g| match groups.members(manager, g) {
        Ok(m) => m,
        Err(e) => {
            failed.get_or_insert(e);
            Vec::new()
        }
    });
    match failed {
        Some(e) => Err(e),
        None => Ok(out),
    }
}
