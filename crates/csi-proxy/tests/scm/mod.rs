//! Services of the SCM tiers (Windows build; under wine, services.exe is
//! the SCM): a copy of `csi-proxy.exe` installed by its own
//! `install-service` ([`Installed`]), throwaway services created through
//! the SCM API with dependencies between them ([`Throwaway`]), and waiting
//! for a service state. Both are stopped and deleted on drop.
//!
//! Service and pipe names carry the test process's id: other test runs may
//! use the same wine prefix at the same time.
#![allow(dead_code)]

pub mod system;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};
use windows_service::service::{
    Service, ServiceAccess, ServiceActionType, ServiceDependency, ServiceErrorControl,
    ServiceFailureResetPeriod, ServiceInfo, ServiceStartType, ServiceState, ServiceStatus,
    ServiceType,
};
use windows_service::service_manager::{ServiceManager, ServiceManagerAccess};

/// Wine's SCM tells a starting service process which control pipe is its
/// own through machine-wide state, so two service starts (or a
/// `-windows-service` process outside the SCM) at the same time can swap
/// connections. The tests of one file take turns.
static SCM: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    SCM.lock().unwrap_or_else(|p| p.into_inner())
}

/// The local SCM, connect rights only.
pub fn manager() -> ServiceManager {
    ServiceManager::local_computer(None::<&str>, ServiceManagerAccess::CONNECT).unwrap()
}

/// Polls `svc` until it reports `state` (60 s at most; the failure shows
/// `log()`).
pub fn wait_for(
    svc: &Service,
    state: ServiceState,
    what: &str,
    log: impl Fn() -> String,
) -> ServiceStatus {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let s = svc.query_status().unwrap();
        if s.current_state == state {
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: still {:?}; log:\n{}",
            s.current_state,
            log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// ERROR_INVALID_LEVEL: the SCM does not know this configuration level
/// (wine's, for failure actions).
pub fn invalid_level<T>(r: &windows_service::Result<T>) -> bool {
    matches!(r, Err(windows_service::Error::Winapi(e)) if e.raw_os_error() == Some(124))
}

/// Whether the SCM reports the failure actions `install-service` sets
/// (wine's answers ERROR_INVALID_LEVEL, and `install-service` then warned
/// in `warnings`); when it does, they must be exactly these: restart after
/// 10 s on each of the first three failures, the count reset after a day,
/// also after a non-crash failure (Stopped with a non-zero exit code).
pub fn restart_on_failure_reported(svc: &Service, warnings: &str) -> bool {
    let queried = svc.get_failure_actions();
    if warnings.contains("cannot store the failure actions (restart") || invalid_level(&queried) {
        return false;
    }
    let actions = queried.unwrap();
    let restarts = actions.actions.unwrap_or_default();
    assert_eq!(restarts.len(), 3, "{restarts:?}");
    for a in &restarts {
        assert_eq!(a.action_type, ServiceActionType::Restart);
        assert_eq!(a.delay, Duration::from_secs(10));
    }
    assert_eq!(
        actions.reset_period,
        ServiceFailureResetPeriod::After(Duration::from_secs(86400))
    );
    assert!(
        !warnings.contains("non-crash failures"),
        "failure actions stored, the non-crash flag not: {warnings}"
    );
    assert!(svc.get_failure_actions_on_non_crash_failures().unwrap());
    true
}

/// Stop `name` if it runs, wait (20 s at most), delete it. Best effort:
/// for drops after a failed test.
fn stop_and_delete(m: &ServiceManager, name: &str) {
    let Ok(s) = m.open_service(
        name,
        ServiceAccess::STOP | ServiceAccess::DELETE | ServiceAccess::QUERY_STATUS,
    ) else {
        return;
    };
    let _ = s.stop();
    let deadline = Instant::now() + Duration::from_secs(20);
    while s
        .query_status()
        .map(|x| x.current_state != ServiceState::Stopped)
        .unwrap_or(false)
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = s.delete();
}

/// A copy of csi-proxy.exe in `%TEMP%\csi proxy svc <tag> <pid>\bin dir\`
/// (a path with spaces), installed with [`Installed::install`].
pub struct Installed {
    pub root: PathBuf,
    pub exe: PathBuf,
    pub kubelet: PathBuf,
    pub log: PathBuf,
    /// The service name (`-service-name`).
    pub name: String,
    /// The service's `-pipe-prefix`.
    pub prefix: String,
}

impl Installed {
    /// The copy, not installed yet.
    pub fn new(tag: &str) -> Installed {
        let pid = std::process::id();
        let root = std::env::temp_dir().join(format!("csi proxy svc {tag} {pid}"));
        std::fs::create_dir_all(root.join("bin dir")).unwrap();
        std::fs::create_dir_all(root.join("kubelet")).unwrap();
        // Long: the proxy takes its root in the long form, and clients
        // name paths by it (%TEMP% may be spelled short).
        let root = crate::pipes::spelling::long_path(&root);
        let bin = root.join("bin dir");
        let kubelet = root.join("kubelet");
        let exe = bin.join("csi-proxy.exe");
        std::fs::copy(env!("CARGO_BIN_EXE_csi-proxy"), &exe).unwrap();
        Installed {
            log: root.join("csi-proxy.log"),
            root,
            exe,
            kubelet,
            name: format!("csiproxytest{tag}{pid}"),
            prefix: format!(r"\\.\pipe\csi-proxy-svc-{tag}-{pid}-"),
        }
    }

    /// Runs the copy with `args`.
    pub fn run(&self, args: &[String]) -> std::process::Output {
        Command::new(&self.exe).args(args).output().unwrap()
    }

    /// `install-service` serving `api_groups` under this copy's name,
    /// pipe prefix, kubelet dir and log file, plus `extra`; returns its
    /// warnings (stderr).
    pub fn install(&self, api_groups: &str, extra: &[&str]) -> String {
        let mut args = vec![
            "install-service".to_string(),
            format!("-service-name={}", self.name),
            format!("-pipe-prefix={}", self.prefix),
            format!("-kubelet-path={}", self.kubelet.display()),
            format!("-api-groups={api_groups}"),
            "-logtostderr=false".into(),
            format!("-log_file={}", self.log.display()),
            "-v=2".into(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        let out = self.run(&args);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            out.status.success(),
            "install-service: {}{err}",
            String::from_utf8_lossy(&out.stdout),
        );
        err
    }

    /// `uninstall-service` of this copy's name.
    pub fn uninstall(&self) -> std::process::Output {
        self.run(&[
            "uninstall-service".into(),
            format!("-service-name={}", self.name),
        ])
    }

    /// `uninstall-service`, which must succeed and leave no such service.
    pub fn uninstall_ok(&self) {
        let out = self.uninstall();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains("uninstalled service"));
        let gone = manager().open_service(&self.name, ServiceAccess::QUERY_STATUS);
        assert!(gone.is_err(), "the service still exists");
    }

    /// The installed service, opened with `access`.
    pub fn open(&self, access: ServiceAccess) -> Service {
        manager()
            .open_service(&self.name, access)
            .unwrap_or_else(|e| panic!("open service {}: {e}", self.name))
    }

    /// Starts the service and waits until it reports Running (its pipes
    /// are bound then); returns its status (with the process id).
    pub fn start(&self, svc: &Service) -> ServiceStatus {
        svc.start::<&str>(&[]).unwrap();
        let s = wait_for(svc, ServiceState::Running, "start", || self.log_text());
        assert!(self.log_text().contains("csi-proxy ready"));
        s
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Installed {
    /// Best effort: stop and delete the service if a test failed half-way.
    fn drop(&mut self) {
        if let Ok(m) = ServiceManager::local_computer(None::<&str>, ServiceManagerAccess::CONNECT) {
            stop_and_delete(&m, &self.name);
        }
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// Throwaway services (copies of csi-proxy.exe in service mode serving the
/// Filesystem API under pipe names of their own, started on demand),
/// created through the SCM API with dependencies between them; stopped and
/// deleted on drop.
pub struct Throwaway {
    root: PathBuf,
    /// `(role, service name)`, in creation order.
    names: Vec<(String, String)>,
}

impl Throwaway {
    /// One service per `(role, depends on roles)`, named
    /// `csiproxy<tag><role><pid>` (`tag` keeps the services of parallel
    /// tests apart); a role may only depend on roles listed before it.
    pub fn create(tag: &str, specs: &[(&str, &[&str])]) -> Throwaway {
        let pid = std::process::id();
        let root = std::env::temp_dir().join(format!("csi-proxy-system-svc-{tag}-{pid}"));
        std::fs::create_dir_all(root.join("kubelet")).unwrap();
        let root = crate::pipes::spelling::long_path(&root);
        let exe = root.join("csi-proxy.exe");
        std::fs::copy(env!("CARGO_BIN_EXE_csi-proxy"), &exe).unwrap();
        let mut t = Throwaway {
            root,
            names: Vec::new(),
        };
        let m = ServiceManager::local_computer(
            None::<&str>,
            ServiceManagerAccess::CONNECT | ServiceManagerAccess::CREATE_SERVICE,
        )
        .unwrap();
        for (role, deps) in specs {
            let name = format!("csiproxy{tag}{role}{pid}");
            let args: Vec<OsString> = vec![
                "-windows-service".into(),
                format!("-service-name={name}").into(),
                format!(r"-pipe-prefix=\\.\pipe\csi-proxy-{name}-").into(),
                "-api-groups=filesystem-v1".into(),
                format!("-kubelet-path={}", t.root.join("kubelet").display()).into(),
                "-logtostderr=false".into(),
                format!("-log_file={}", t.root.join(format!("{name}.log")).display()).into(),
            ];
            let info = ServiceInfo {
                name: name.clone().into(),
                display_name: format!("csi-proxy test {name}").into(),
                service_type: ServiceType::OWN_PROCESS,
                start_type: ServiceStartType::OnDemand,
                error_control: ServiceErrorControl::Normal,
                executable_path: exe.clone(),
                launch_arguments: args,
                dependencies: deps
                    .iter()
                    .map(|d| ServiceDependency::Service(t.name(d).into()))
                    .collect(),
                account_name: None,
                account_password: None,
            };
            m.create_service(&info, ServiceAccess::QUERY_STATUS)
                .unwrap_or_else(|e| panic!("create service {name}: {e}"));
            t.names.push((role.to_string(), name));
        }
        t
    }

    /// The service name of `role`.
    pub fn name(&self, role: &str) -> &str {
        self.names
            .iter()
            .find(|(r, _)| r == role)
            .map(|(_, n)| n.as_str())
            .unwrap_or_else(|| panic!("no throwaway service {role}"))
    }

    /// The SCM's state of service `name`.
    pub fn state(&self, name: &str) -> ServiceState {
        manager()
            .open_service(name, ServiceAccess::QUERY_STATUS)
            .unwrap()
            .query_status()
            .unwrap()
            .current_state
    }
}

impl Drop for Throwaway {
    /// Dependents (created later) first.
    fn drop(&mut self) {
        if let Ok(m) = ServiceManager::local_computer(None::<&str>, ServiceManagerAccess::CONNECT) {
            for (_, name) in self.names.iter().rev() {
                stop_and_delete(&m, name);
            }
        }
        let _ = std::fs::remove_dir_all(&self.root);
    }
}
