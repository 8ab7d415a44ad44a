//! The validating System API: every name is checked (protection first,
//! then the allow-list) before the backend sees it.

use super::plan::Plan;
use super::protect::{Op, Protection, Verdict};
use super::validate::{ServiceName, ServicePolicy};
use super::{
    GetBiosSerialNumberRequest, GetBiosSerialNumberResponse, GetServiceRequest, GetServiceResponse,
    StartServiceRequest, StartServiceResponse, StopServiceRequest, StopServiceResponse, SystemApi,
};
use crate::path::Flavor;
use crate::{Error, Result};
use std::sync::{Arc, Mutex};

/// Asked before a forced stop stops a running dependent (by its OS name):
/// an error refuses the whole call before anything is stopped.
pub type DependentGuard<'a> = &'a dyn Fn(&str) -> Result<()>;

/// The iSCSI sessions logged in on this node (target and portal of each),
/// asked before the iSCSI daemon is stopped.
pub type IscsiSessions = Arc<dyn Fn() -> Vec<String> + Send + Sync>;

/// What a host must provide for the System API; every name it gets has
/// passed [`ServiceName::parse`], the protection and the allow-list.
pub trait SystemBackend: Send + Sync {
    /// The BIOS (SMBIOS system) serial number.
    fn bios_serial(&self) -> Result<String>;
    /// Display name, start type and state of a service (`NotFound` if it
    /// does not exist).
    fn get_service(&self, name: &ServiceName) -> Result<GetServiceResponse>;
    /// Start a service and wait (bounded) until it runs; already running is
    /// success.
    fn start_service(&self, name: &ServiceName) -> Result<()>;
    /// Stop a service and wait (bounded) until it stopped; already stopped
    /// is success. Running dependent services are stopped first with
    /// `force`, after `guard` accepted every one of them, and make the call
    /// fail (`FailedPrecondition`) without.
    fn stop_service(&self, name: &ServiceName, force: bool, guard: DependentGuard) -> Result<()>;
    /// The services `name` (an OS name) depends on directly, by OS name;
    /// `NotFound` when it does not exist.
    fn dependencies(&self, name: &str) -> Result<Vec<String>>;
    /// What starting or stopping `name` would do, as the service manager
    /// describes it now: the service's own names (resolved: the systemd
    /// unit id and aliases, the Windows service key name) and every unit
    /// started or stopped with it, transitively ([`super::plan`]).
    /// `NotFound` when the service does not exist.
    fn plan(&self, name: &ServiceName, op: Op) -> Result<Plan>;
    /// [`SystemBackend::start_service`] once `plan` was admitted: a backend
    /// that can tell refuses when the manager's configuration changed
    /// since the plan was made ([`Plan::generation`]).
    fn start_planned(&self, name: &ServiceName, plan: &Plan) -> Result<()> {
        let _ = plan;
        self.start_service(name)
    }
    /// [`SystemBackend::stop_service`] once `plan` was admitted (see
    /// [`SystemBackend::start_planned`]).
    fn stop_planned(
        &self,
        name: &ServiceName,
        force: bool,
        guard: DependentGuard,
        plan: &Plan,
    ) -> Result<()> {
        let _ = plan;
        self.stop_service(name, force, guard)
    }
}

/// Most services whose dependencies are followed (the own service's
/// dependency closure).
const MAX_DEPENDENCIES: usize = 256;

/// The System API over a backend.
pub struct System<B> {
    backend: B,
    policy: ServicePolicy,
    flavor: Flavor,
    /// The protected set; the own service's dependencies are added once
    /// they have been read (`deps_read`).
    protection: Mutex<Protection>,
    deps_read: std::sync::atomic::AtomicBool,
    iscsi_sessions: Option<IscsiSessions>,
}

impl<B: SystemBackend> System<B> {
    /// Names follow the rules of `flavor`; `policy` limits Start/Stop; the
    /// built-in protected set of `flavor` applies (see
    /// [`System::with_protection`]).
    pub fn new(backend: B, policy: ServicePolicy, flavor: Flavor) -> Self {
        System {
            backend,
            policy,
            flavor,
            protection: Mutex::new(Protection::builtin(flavor)),
            deps_read: std::sync::atomic::AtomicBool::new(false),
            iscsi_sessions: None,
        }
    }

    /// Replace the protected set.
    pub fn with_protection(self, protection: Protection) -> Self {
        System {
            protection: Mutex::new(protection),
            ..self
        }
    }

    /// Where the logged-in iSCSI sessions are read from (the stop guard of
    /// the iSCSI daemon's entries); without it they are not guarded.
    pub fn with_iscsi_sessions(self, sessions: IscsiSessions) -> Self {
        System {
            iscsi_sessions: Some(sessions),
            ..self
        }
    }

    /// The backend (tests inspect fakes through it).
    pub fn backend(&self) -> &B {
        &self.backend
    }

    fn name(&self, name: &str) -> Result<ServiceName> {
        ServiceName::parse(name, self.flavor)
    }

    fn protection(&self) -> std::sync::MutexGuard<'_, Protection> {
        self.protection.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reads the own services' dependency closure from the service manager
    /// once (a failure is returned and read again next time: fail closed).
    fn read_dependencies(&self, name: &ServiceName, op: Op) -> Result<()> {
        use std::sync::atomic::Ordering;
        if self.deps_read.load(Ordering::Acquire) {
            return Ok(());
        }
        let own: Vec<String> = self.protection().own_keys().map(str::to_string).collect();
        let mut found: Vec<(String, String)> = Vec::new();
        for root in &own {
            let mut queue = vec![root.clone()];
            let mut seen = vec![root.to_ascii_lowercase()];
            while let Some(svc) = queue.pop() {
                let deps = match self.backend.dependencies(&svc) {
                    Ok(d) => d,
                    // The own service is not installed (a foreground run),
                    // or a dependency vanished: nothing to add.
                    Err(Error::NotFound(_)) => continue,
                    Err(e) => {
                        return Err(Error::FailedPrecondition(format!(
                            "{} service {}: refused, cannot read what this csi-proxy's own service {} depends on, so no service can be started or stopped: {e}",
                            op.verb(),
                            crate::path::shown(name.as_str()),
                            crate::path::shown(root)
                        )))
                    }
                };
                for d in deps {
                    if seen.iter().any(|s| s.eq_ignore_ascii_case(&d))
                        || seen.len() >= MAX_DEPENDENCIES
                    {
                        continue;
                    }
                    seen.push(d.to_ascii_lowercase());
                    found.push((d.clone(), root.clone()));
                    queue.push(d);
                }
            }
        }
        let mut p = self.protection();
        for (d, of) in &found {
            p.dependency(d, of);
        }
        self.deps_read.store(true, Ordering::Release);
        Ok(())
    }

    /// Protection (by name, before any lookup of `name`); then what the
    /// service manager says the start or stop would do ([`Plan`]): the
    /// service it resolves to must be on the allow-list
    /// (`-allowed-services`) and be a service (no driver, no other unit
    /// type); no unit of the plan may be protected
    /// ([`Protection::check_plan`]) or carry an action of the manager's own
    /// ([`Plan::refuse_actions`]); without `force` a stop that would stop
    /// running units is `FailedPrecondition`; then the iSCSI session guard.
    /// Every unit of the plan must be one the walk can follow
    /// ([`Plan::refuse_unmodelled`]). Returns the admitted plan.
    fn admit(&self, name: &ServiceName, op: Op, force: bool) -> Result<Plan> {
        let verdict = self.protection().check(name, op)?;
        self.read_dependencies(name, op)?;
        self.protection().check(name, op)?;
        let plan = match self.backend.plan(name, op) {
            Ok(p) => p,
            // A name that is neither on the list nor known: the list's
            // refusal, as for every other service not on it.
            Err(Error::NotFound(_)) if !self.policy.allows(name.os_name()) => {
                return Err(self.policy.refusal(name, op.verb(), ""))
            }
            Err(e) => return Err(e),
        };
        let resolved = plan.target.first().map_or(name.os_name(), String::as_str);
        self.policy.check(name, resolved, op.verb())?;
        if let Some(narrow) = super::narrow::current() {
            if !narrow.allows(resolved) {
                return Err(Error::PermissionDenied(format!(
                    "{} service {}: not among the services the caller policy lets this caller start or stop",
                    op.verb(),
                    crate::path::shown(name.as_str())
                )));
            }
        }
        if let Some(why) = &plan.not_a_service {
            return Err(Error::PermissionDenied(format!(
                "{} service {}: refused, {why}: StartService and StopService act on services only",
                op.verb(),
                crate::path::shown(name.as_str())
            )));
        }
        let planned = self.protection().check_plan(name, &plan, op)?;
        plan.refuse_actions(name.as_str(), op)?;
        plan.refuse_unmodelled(name.as_str(), op)?;
        if op == Op::Stop && !force {
            let running: Vec<&str> = plan
                .stopped
                .iter()
                .filter(|u| u.active)
                .map(|u| u.names[0].as_str())
                .collect();
            if !running.is_empty() {
                return Err(Error::FailedPrecondition(format!(
                    "stop service {}: dependent services are running ({}); stop them first or set force",
                    crate::path::shown(name.as_str()),
                    running.join(", ")
                )));
            }
        }
        if verdict == Verdict::UnlessIscsiSessions || planned == Verdict::UnlessIscsiSessions {
            if let Some(sessions) = &self.iscsi_sessions {
                let s = sessions();
                if !s.is_empty() {
                    return Err(Error::FailedPrecondition(format!(
                        "stop service {}: iSCSI sessions are logged in ({}); stopping it would cut their disks off: log them out first (DisconnectTarget)",
                        crate::path::shown(name.as_str()),
                        s.join(", ")
                    )));
                }
            }
        }
        Ok(plan)
    }
}

impl<B: SystemBackend> SystemApi for System<B> {
    fn get_bios_serial_number(
        &self,
        _: GetBiosSerialNumberRequest,
    ) -> Result<GetBiosSerialNumberResponse> {
        Ok(GetBiosSerialNumberResponse {
            serial_number: self.backend.bios_serial()?,
        })
    }

    fn start_service(&self, req: StartServiceRequest) -> Result<StartServiceResponse> {
        let name = self.name(&req.name)?;
        let plan = self.admit(&name, Op::Start, false)?;
        self.backend.start_planned(&name, &plan)?;
        Ok(StartServiceResponse {})
    }

    fn stop_service(&self, req: StopServiceRequest) -> Result<StopServiceResponse> {
        let name = self.name(&req.name)?;
        let plan = self.admit(&name, Op::Stop, req.force)?;
        // Default-deny: a dependent the admitted plan did not hold (installed
        // or changed since) was never checked for protection, actions or
        // what the plan cannot follow.
        let guard = |dependent: &str| {
            let known = plan
                .stopped
                .iter()
                .flat_map(|u| &u.names)
                .any(|n| match self.flavor {
                    Flavor::Windows => n.eq_ignore_ascii_case(dependent),
                    _ => n == dependent,
                });
            if !known {
                return Err(Error::PermissionDenied(format!(
                    "stop service {}: refused, it would stop {} as a dependent, which the checked plan did not hold (installed or changed since); retry",
                    crate::path::shown(name.as_str()),
                    crate::path::shown(dependent)
                )));
            }
            self.protection().check_os_name(dependent, Op::Stop)
        };
        self.backend.stop_planned(&name, req.force, &guard, &plan)?;
        Ok(StopServiceResponse {})
    }

    fn get_service(&self, req: GetServiceRequest) -> Result<GetServiceResponse> {
        let name = self.name(&req.name)?;
        self.backend.get_service(&name)
    }
}

#[cfg(test)]
mod tests;
