//! csi-proxy: serves the CSI Proxy API groups on named pipes (Windows) or
//! Unix sockets (Linux). Thin: flags, logging, then the server library;
//! `-windows-service` and the `install-service` / `uninstall-service`
//! subcommands go through [`service`].

mod cli;
mod guarding;
mod logging;
mod run;
mod service;
#[cfg(unix)]
mod state_dir;
mod version;

use std::process::ExitCode;

fn main() -> ExitCode {
    // Before any thread starts: it changes the environment.
    #[cfg(unix)]
    run::take_activation();
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let Some(code) = service::subcommand(&args) {
        return code;
    }
    let cli = cli::Cli::parse_from_env();
    let _log = match logging::init(&cli) {
        Ok(guard) => guard,
        Err(e) => {
            eprintln!("csi-proxy: cannot set up logging: {e:#}");
            return ExitCode::from(2);
        }
    };
    #[cfg(windows)]
    if cli.windows_service {
        return match service::runtime::run(cli) {
            Ok(0) => ExitCode::SUCCESS,
            Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
            Err(e) => {
                tracing::error!("{e:#}");
                eprintln!("csi-proxy: error: {e:#}");
                ExitCode::FAILURE
            }
        };
    }
    #[cfg(not(windows))]
    if cli.windows_service {
        tracing::warn!("-windows-service has no effect outside Windows: running in the foreground");
    }
    match run::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            eprintln!("csi-proxy: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
