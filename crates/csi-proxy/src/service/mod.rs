//! Windows service mode: `-windows-service` runs under the Service Control
//! Manager ([`runtime`]); `install-service` / `uninstall-service` register
//! and remove the service through the SCM API ([`install`]). On other
//! systems the subcommands explain themselves and fail (Linux uses the
//! systemd unit in `deploy/linux/`).

#[cfg(windows)]
pub mod install;
#[cfg(windows)]
pub mod runtime;

use std::ffi::OsString;
use std::process::ExitCode;

/// The subcommands, recognised as the first argument.
pub const INSTALL: &str = "install-service";
pub const UNINSTALL: &str = "uninstall-service";

/// Run `install-service` or `uninstall-service` if `args[1]` names one;
/// `None` otherwise (the normal flag parsing follows).
pub fn subcommand(args: &[OsString]) -> Option<ExitCode> {
    let command = args.get(1)?.to_str()?;
    if command != INSTALL && command != UNINSTALL {
        return None;
    }
    #[cfg(windows)]
    {
        let rest = &args[2..];
        let result = if command == INSTALL {
            install::install(rest)
        } else {
            install::uninstall(rest)
        };
        Some(match result {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("csi-proxy {command}: {e:#}");
                ExitCode::FAILURE
            }
        })
    }
    #[cfg(not(windows))]
    {
        eprintln!(
            "csi-proxy {command}: Windows only; on Linux install deploy/linux/csi-proxy.service \
             (systemd) instead"
        );
        Some(ExitCode::from(2))
    }
}
