//! csi-proxyctl, the operator CLI of csi-proxy.
//!
//! - `status`: every endpoint of the proxy: reachable, which group and
//!   version it serves, and its health (`grpc.health.v1.Health/Check`);
//! - one subcommand per RPC of the newest version of every group:
//!   `disk`, `fs`, `volume`, `smb`, `iscsi`, `system` (see [`cli`]).
//!
//! Output is a human-readable table or list by default and JSON with
//! `-o json`. Endpoints are found as `csi-proxy-client` finds them
//! (`--socket-dir` on Unix, `--pipe-prefix` on Windows).
//!
//! Exit codes ([`exit`]): 0 success; 1 any other failure; 2 usage error;
//! 3 the endpoint is not served or cannot be reached; 4 `status` found an
//! endpoint that is not reachable or not serving; 10 + N a call failed
//! with gRPC status code N (e.g. 13 InvalidArgument, 15 NotFound,
//! 17 PermissionDenied, 22 Unimplemented).
//!
//! [`run`] is the whole program with its arguments and output streams, so
//! tests can run it in-process against a real proxy.

pub mod cli;
mod commands;
mod render;
mod status;

use clap::Parser;
use std::ffi::OsString;
use std::io::Write;

/// Exit codes scripts can rely on.
pub mod exit {
    /// The command succeeded.
    pub const OK: u8 = 0;
    /// Any other failure (e.g. output could not be written).
    pub const FAILURE: u8 = 1;
    /// The command line is wrong.
    pub const USAGE: u8 = 2;
    /// The endpoint is not served or cannot be reached.
    pub const UNREACHABLE: u8 = 3;
    /// `status`: some endpoint is not reachable or not serving.
    pub const DEGRADED: u8 = 4;
    /// A call failed with gRPC status code N: the exit code is `RPC + N`.
    pub const RPC: u8 = 10;
}

/// Why a command failed.
#[derive(Debug)]
pub enum Failure {
    /// The endpoint could not be reached.
    Unreachable(String),
    /// The call returned an error status.
    Rpc { what: String, status: tonic::Status },
    /// Anything else.
    Other(String),
}

impl Failure {
    fn code(&self) -> u8 {
        match self {
            Failure::Unreachable(_) => exit::UNREACHABLE,
            Failure::Rpc { status, .. } => exit::RPC + status.code() as u8,
            Failure::Other(_) => exit::FAILURE,
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Unreachable(m) | Failure::Other(m) => f.write_str(m),
            Failure::Rpc { what, status } => {
                write!(f, "{what}: {:?}: {}", status.code(), status.message())
            }
        }
    }
}

/// Run csi-proxyctl with `args` (the first is the program name), writing
/// results to `out` and diagnostics to `err`; returns the exit code.
pub fn run(
    args: impl IntoIterator<Item = impl Into<OsString> + Clone>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> u8 {
    let cli = match cli::Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() {
                exit::USAGE
            } else {
                exit::OK
            };
            let text = e.render().to_string();
            let _ = if e.use_stderr() {
                write!(err, "{text}")
            } else {
                write!(out, "{text}")
            };
            return code;
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            let _ = writeln!(err, "csi-proxyctl: cannot start the async runtime: {e}");
            return exit::FAILURE;
        }
    };
    let client = match cli.client() {
        Ok(c) => c,
        Err(e) => {
            let _ = writeln!(err, "csi-proxyctl: {e}");
            return exit::USAGE;
        }
    };
    let result = runtime.block_on(async {
        match &cli.command {
            cli::Command::Status => status::status(&client)
                .await
                .map(|(value, healthy)| (value, if healthy { exit::OK } else { exit::DEGRADED })),
            other => commands::call(&client, other).await.map(|v| (v, exit::OK)),
        }
    });
    match result {
        Ok((value, code)) => {
            let written = match cli.output {
                cli::Output::Json => serde_json::to_writer_pretty(&mut *out, &value)
                    .map_err(std::io::Error::from)
                    .and_then(|()| writeln!(out)),
                cli::Output::Table => render::human(out, &value),
            };
            if let Err(e) = written {
                let _ = writeln!(err, "csi-proxyctl: cannot write the output: {e}");
                return exit::FAILURE;
            }
            code
        }
        Err(f) => {
            let _ = writeln!(err, "csi-proxyctl: {f}");
            f.code()
        }
    }
}
