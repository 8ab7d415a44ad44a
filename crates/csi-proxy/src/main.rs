//! csi-proxy: serves the CSI Proxy API groups on named pipes (Windows) or
//! Unix sockets (Linux). Thin: flags, logging, then the server library.

mod argv;
mod cli;
mod logging;
mod run;

use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = cli::Cli::parse_from_env();
    let _log = match logging::init(&cli) {
        Ok(guard) => guard,
        Err(e) => {
            eprintln!("csi-proxy: cannot set up logging: {e:#}");
            return ExitCode::from(2);
        }
    };
    match run::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            eprintln!("csi-proxy: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
