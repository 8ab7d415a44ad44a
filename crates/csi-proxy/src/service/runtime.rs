//! Running under the Service Control Manager (`-windows-service`).
//!
//! The process hands its main thread to the SCM's dispatcher
//! ([`run`]); the SCM calls `service_main` on a thread of its own, which
//! registers the control handler, reports StartPending, binds every
//! endpoint, reports Running only then, serves, and on Stop or Shutdown
//! reports StopPending with a wait hint covering `-shutdown-timeout`,
//! drains exactly as on Ctrl-C, and reports Stopped with the exit code:
//! 0, or a service-specific code ([`EXIT_START_FAILED`],
//! [`EXIT_SERVE_FAILED`]) after a fatal error, logged with its reason.

use crate::cli::Cli;
use crate::run::{serve, Lifecycle};
use anyhow::{Context, Result};
use std::ffi::OsString;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use windows_service::service::{
    ServiceControl, ServiceControlAccept, ServiceExitCode, ServiceState, ServiceStatus, ServiceType,
};
use windows_service::service_control_handler::{self, ServiceControlHandlerResult};
use windows_service::{define_windows_service, service_dispatcher};

/// Service-specific exit code: the proxy could not start (e.g. another
/// proxy owns the pipes, a bad flag, the metrics port is taken).
pub const EXIT_START_FAILED: u32 = 1;
/// Service-specific exit code: serving failed after start.
pub const EXIT_SERVE_FAILED: u32 = 2;

/// Time the SCM should allow for start-up.
const START_WAIT_HINT: Duration = Duration::from_secs(30);

/// The command line, for `service_main` (the dispatcher takes a plain fn).
static CLI: OnceLock<Cli> = OnceLock::new();
/// Service-specific exit code of the run, 0 for success.
static EXIT: AtomicU32 = AtomicU32::new(0);

define_windows_service!(ffi_service_main, service_main);

/// Hand the main thread to the service dispatcher until the service has
/// stopped. Fails at once when the process was not started by the SCM.
pub fn run(cli: Cli) -> Result<u32> {
    let name = cli.service_name.clone();
    let _ = CLI.set(cli);
    service_dispatcher::start(&name, ffi_service_main).with_context(|| {
        format!(
            "cannot connect to the Service Control Manager as service {name:?}: \
             -windows-service is for processes the SCM starts (see install-service)"
        )
    })?;
    Ok(EXIT.load(Ordering::SeqCst))
}

fn service_main(_arguments: Vec<OsString>) {
    let Some(cli) = CLI.get() else {
        return;
    };
    let code = match run_service(cli) {
        Ok(code) => code,
        Err(e) => {
            tracing::error!("service {:?}: {e:#}", cli.service_name);
            EXIT_START_FAILED
        }
    };
    EXIT.store(code, Ordering::SeqCst);
}

fn status(
    state: ServiceState,
    accept: ServiceControlAccept,
    exit: u32,
    hint: Duration,
) -> ServiceStatus {
    ServiceStatus {
        service_type: ServiceType::OWN_PROCESS,
        current_state: state,
        controls_accepted: accept,
        exit_code: if exit == 0 {
            ServiceExitCode::Win32(0)
        } else {
            ServiceExitCode::ServiceSpecific(exit)
        },
        checkpoint: 0,
        wait_hint: hint,
        process_id: None,
    }
}

/// Serve as the service; returns the service-specific exit code (0 if
/// all went well). Errors only if the SCM cannot be talked to.
fn run_service(cli: &Cli) -> Result<u32> {
    let token = CancellationToken::new();
    let stop = token.clone();
    let handler = move |control| match control {
        ServiceControl::Stop | ServiceControl::Shutdown => {
            tracing::info!(control = ?control, "the Service Control Manager asks to stop: draining in-flight calls");
            stop.cancel();
            ServiceControlHandlerResult::NoError
        }
        ServiceControl::Interrogate => ServiceControlHandlerResult::NoError,
        _ => ServiceControlHandlerResult::NotImplemented,
    };
    let handle = service_control_handler::register(&cli.service_name, handler)
        .context("cannot register the service control handler")?;
    let handle = Arc::new(Mutex::new(handle));
    let set = {
        let handle = handle.clone();
        move |s: ServiceStatus| {
            let h = handle.lock().unwrap_or_else(|p| p.into_inner());
            if let Err(e) = h.set_service_status(s) {
                tracing::warn!(error = %e, "cannot report the service status");
            }
        }
    };
    set(status(
        ServiceState::StartPending,
        ServiceControlAccept::empty(),
        0,
        START_WAIT_HINT,
    ));
    let ready = Arc::new(AtomicBool::new(false));
    let drain_hint = cli.shutdown_timeout + Duration::from_secs(5);
    let lifecycle = Lifecycle {
        ready: {
            let set = set.clone();
            let ready = ready.clone();
            Box::new(move || {
                ready.store(true, Ordering::SeqCst);
                set(status(
                    ServiceState::Running,
                    ServiceControlAccept::STOP | ServiceControlAccept::SHUTDOWN,
                    0,
                    Duration::ZERO,
                ));
                tracing::info!("service running");
            })
        },
        stopping: {
            let set = set.clone();
            Box::new(move || {
                set(status(
                    ServiceState::StopPending,
                    ServiceControlAccept::empty(),
                    0,
                    drain_hint,
                ))
            })
        },
        handle_signals: false,
    };
    let code = match serve(cli, token, lifecycle) {
        Ok(()) => 0,
        Err(e) => {
            let code = if ready.load(Ordering::SeqCst) {
                EXIT_SERVE_FAILED
            } else {
                EXIT_START_FAILED
            };
            tracing::error!(
                exit_code = code,
                "service {:?} failed: {e:#}",
                cli.service_name
            );
            code
        }
    };
    tracing::info!(exit_code = code, "service stopped");
    set(status(
        ServiceState::Stopped,
        ServiceControlAccept::empty(),
        code,
        Duration::ZERO,
    ));
    Ok(code)
}
