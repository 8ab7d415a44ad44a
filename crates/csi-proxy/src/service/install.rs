//! `csi-proxy install-service [flags...]` and `csi-proxy uninstall-service
//! [-service-name=NAME]`, through the SCM API (never `sc.exe`).
//!
//! The service starts automatically, runs this executable with
//! `-windows-service` and the given flags (the SCM API quotes the path and
//! every argument, so paths with spaces work), restarts 10 s after each of
//! its first three failures in a day (also after a fatal error that
//! reported Stopped with a non-zero exit code), and carries a description.

use crate::cli::Cli;
use anyhow::{bail, Context, Result};
use std::ffi::{OsStr, OsString};
use std::time::{Duration, Instant};
use windows_service::service::{
    ServiceAccess, ServiceAction, ServiceActionType, ServiceErrorControl, ServiceFailureActions,
    ServiceFailureResetPeriod, ServiceInfo, ServiceStartType, ServiceState, ServiceType,
};
use windows_service::service_manager::{ServiceManager, ServiceManagerAccess};

/// Shown by the Services console.
pub const DESCRIPTION: &str = "CSI Proxy: performs privileged storage operations (disks, \
    volumes, filesystem, SMB, iSCSI, services) for Kubernetes CSI node plugins over named pipes.";
/// Restart delay after a failure, as upstream's `sc.exe failure` line.
pub const RESTART_DELAY: Duration = Duration::from_secs(10);
/// Failures counted before the count resets.
pub const RESET_PERIOD: Duration = Duration::from_secs(24 * 3600);

const ERROR_ACCESS_DENIED: i32 = 5;
const ERROR_SERVICE_DOES_NOT_EXIST: i32 = 1060;
const ERROR_SERVICE_EXISTS: i32 = 1073;
const ERROR_SERVICE_NOT_ACTIVE: i32 = 1062;
const ERROR_INVALID_LEVEL: i32 = 124;

/// The OS error code inside a windows-service error.
fn os_code(e: &windows_service::Error) -> Option<i32> {
    match e {
        windows_service::Error::Winapi(io) => io.raw_os_error(),
        _ => None,
    }
}

/// An SCM error with advice for the common cases.
fn explain(e: windows_service::Error, what: &str, name: &str) -> anyhow::Error {
    let advice = match os_code(&e) {
        Some(ERROR_ACCESS_DENIED) => {
            " (access denied: run from an elevated prompt, as an Administrator)"
        }
        Some(ERROR_SERVICE_EXISTS) => {
            " (the service exists: run uninstall-service first, or pick -service-name)"
        }
        Some(ERROR_SERVICE_DOES_NOT_EXIST) => " (no such service)",
        _ => "",
    };
    anyhow::Error::new(e).context(format!("{what} service {name:?}{advice}"))
}

/// The arguments the service is started with: `-windows-service` and the
/// flags given to install-service, in order.
pub fn launch_arguments(flags: &[OsString]) -> Vec<OsString> {
    let mut args = vec![OsString::from("-windows-service")];
    args.extend(
        flags
            .iter()
            .filter(|f| !is_windows_service_flag(f))
            .cloned(),
    );
    args
}

fn is_windows_service_flag(arg: &OsStr) -> bool {
    let Some(s) = arg.to_str() else { return false };
    let name = s.trim_start_matches('-');
    (s.starts_with('-') && name == "windows-service") || name.starts_with("windows-service=")
}

/// Parse `flags` as the service will (so mistakes fail now, not at boot).
fn parse(flags: &[OsString]) -> Result<Cli> {
    let mut argv = vec![OsString::from("csi-proxy")];
    argv.extend(launch_arguments(flags));
    Cli::try_parse_args(argv).map_err(|e| anyhow::anyhow!("{e}"))
}

pub fn install(flags: &[OsString]) -> Result<()> {
    let cli = parse(flags)?;
    if cli.logtostderr && cli.log_file.is_none() && cli.log_dir.is_none() {
        eprintln!(
            "csi-proxy install-service: note: a service has no console; add \
             -logtostderr=false -log_file=<file> to keep its log"
        );
    }
    let name = cli.service_name.clone();
    let exe = std::env::current_exe().context("cannot find this executable's path")?;
    let manager = ServiceManager::local_computer(
        None::<&str>,
        ServiceManagerAccess::CONNECT | ServiceManagerAccess::CREATE_SERVICE,
    )
    .map_err(|e| {
        explain(
            e,
            "connect to the Service Control Manager to install",
            &name,
        )
    })?;
    let info = ServiceInfo {
        name: OsString::from(&name),
        display_name: OsString::from(format!("CSI Proxy ({name})")),
        service_type: ServiceType::OWN_PROCESS,
        start_type: ServiceStartType::AutoStart,
        error_control: ServiceErrorControl::Normal,
        executable_path: exe.clone(),
        launch_arguments: launch_arguments(flags),
        dependencies: vec![],
        account_name: None, // LocalSystem
        account_password: None,
    };
    let service = manager
        .create_service(
            &info,
            ServiceAccess::CHANGE_CONFIG | ServiceAccess::QUERY_CONFIG | ServiceAccess::DELETE,
        )
        .map_err(|e| explain(e, "create", &name))?;
    let restart = ServiceAction {
        action_type: ServiceActionType::Restart,
        delay: RESTART_DELAY,
    };
    let steps: [(&str, &dyn Fn() -> windows_service::Result<()>); 3] = [
        ("description", &|| service.set_description(DESCRIPTION)),
        (
            "failure actions (restart after 10 s, 3 times a day)",
            &|| {
                service.update_failure_actions(ServiceFailureActions {
                    reset_period: ServiceFailureResetPeriod::After(RESET_PERIOD),
                    reboot_msg: None,
                    command: None,
                    actions: Some(vec![restart.clone(), restart.clone(), restart.clone()]),
                })
            },
        ),
        // Also restart after a fatal error reported with a non-zero exit code.
        ("failure actions on non-crash failures", &|| {
            service.set_failure_actions_on_non_crash_failures(true)
        }),
    ];
    for (what, step) in steps {
        match step() {
            Ok(()) => {}
            // Windows supports every setting; an SCM that does not (wine)
            // answers "invalid level": go on without it, and say so.
            Err(e) if os_code(&e) == Some(ERROR_INVALID_LEVEL) => {
                eprintln!(
                    "csi-proxy install-service: warning: this Service Control Manager cannot \
                     store the {what}; the service is installed without it"
                );
            }
            Err(e) => {
                let _ = service.delete();
                return Err(explain(
                    e,
                    &format!("set the {what} of (service removed again)"),
                    &name,
                ));
            }
        }
    }
    println!(
        "installed service {name:?}: {} {}",
        exe.display(),
        info.launch_arguments
            .iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!("start it with the Services console, `net start {name}` or `sc.exe start {name}`");
    Ok(())
}

pub fn uninstall(flags: &[OsString]) -> Result<()> {
    let name = parse(flags)?.service_name;
    let manager = ServiceManager::local_computer(None::<&str>, ServiceManagerAccess::CONNECT)
        .map_err(|e| {
            explain(
                e,
                "connect to the Service Control Manager to uninstall",
                &name,
            )
        })?;
    let service = manager
        .open_service(
            &name,
            ServiceAccess::QUERY_STATUS | ServiceAccess::STOP | ServiceAccess::DELETE,
        )
        .map_err(|e| explain(e, "open", &name))?;
    let status = service
        .query_status()
        .map_err(|e| explain(e, "query", &name))?;
    if status.current_state != ServiceState::Stopped {
        match service.stop() {
            Ok(_) => {}
            Err(e) if os_code(&e) == Some(ERROR_SERVICE_NOT_ACTIVE) => {}
            Err(e) => return Err(explain(e, "stop", &name)),
        }
        // The service drains in-flight calls first (-shutdown-timeout).
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let s = service
                .query_status()
                .map_err(|e| explain(e, "query", &name))?;
            if s.current_state == ServiceState::Stopped {
                break;
            }
            if Instant::now() > deadline {
                bail!("service {name:?} did not stop within 120 s; not deleted");
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    service.delete().map_err(|e| explain(e, "delete", &name))?;
    println!("uninstalled service {name:?}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn launch_arguments_start_with_windows_service_once() {
        assert_eq!(
            launch_arguments(&os(&[
                "-v=2",
                "-windows-service",
                "--windows-service=true",
                "-log_file=C:\\a b\\l.log"
            ])),
            os(&["-windows-service", "-v=2", "-log_file=C:\\a b\\l.log"])
        );
        assert_eq!(launch_arguments(&[]), os(&["-windows-service"]));
    }

    #[test]
    fn bad_flags_fail_at_install_time() {
        assert!(parse(&os(&["-bogus"])).is_err());
        assert!(parse(&os(&["-shutdown-timeout=10"])).is_err());
        let cli = parse(&os(&["-service-name=other", "-v=3"])).unwrap();
        assert!(cli.windows_service);
        assert_eq!(cli.service_name, "other");
    }

    #[test]
    fn access_denied_says_to_elevate() {
        let e = windows_service::Error::Winapi(std::io::Error::from_raw_os_error(5));
        let msg = format!("{:#}", explain(e, "create", "csiproxy"));
        assert!(msg.contains("elevated prompt"), "{msg}");
        let e = windows_service::Error::Winapi(std::io::Error::from_raw_os_error(1073));
        assert!(format!("{:#}", explain(e, "create", "x")).contains("uninstall-service first"));
    }
}
