//! Ask a running csi-proxy whether a path exists, over the newest
//! filesystem version it serves.
//!
//! ```text
//! cargo run -p csi-proxy-client --example pathexists -- [--socket-dir DIR] [--newest] PATH
//! ```
//!
//! `--socket-dir` is the proxy's `-socket-dir` (Unix; default: the proxy's
//! default). `--newest` prefers alpha versions of a newer major version
//! (filesystem v2alpha1) over the stable v1. Exit status: 0 if the path
//! exists, 1 if not, 2 on errors.

use csi_proxy_api::filesystem::{v1, v1alpha1, v1beta1, v1beta2, v2alpha1};
use csi_proxy_client::{AnyFilesystemClient, Client, VersionPreference};
use std::process::ExitCode;
use std::time::Duration;

/// Calls PathExists with the request type of the client's version; the
/// old versions also take a path context, which the server ignores.
macro_rules! path_exists {
    ($client:expr, $version:ident, $path:expr) => {
        $client
            .path_exists($version::PathExistsRequest { path: $path })
            .await
            .map(|r| r.into_inner().exists)
    };
    ($client:expr, $version:ident, $path:expr, old) => {
        $client
            .path_exists($version::PathExistsRequest {
                path: $path,
                context: $version::PathContext::Plugin as i32,
            })
            .await
            .map(|r| r.into_inner().exists)
    };
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let mut builder = Client::builder().timeout(Duration::from_secs(10));
    let mut path = None;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--socket-dir" => match args.next() {
                Some(dir) => builder = builder.socket_dir(dir),
                None => return usage("--socket-dir needs a directory"),
            },
            "--newest" => builder = builder.version_preference(VersionPreference::Newest),
            "-h" | "--help" => return usage(""),
            _ if path.is_none() && !arg.starts_with("--") => path = Some(arg),
            _ => return usage(&format!("unexpected argument {arg:?}")),
        }
    }
    let Some(path) = path else {
        return usage("a path is required");
    };

    let client = match builder.build() {
        Ok(c) => c,
        Err(e) => return fail(&e),
    };
    let fs = match client.connect_filesystem().await {
        Ok(fs) => fs,
        Err(e) => return fail(&e),
    };
    println!(
        "using {} at {}",
        fs.api(),
        client.endpoint(fs.api()).display()
    );
    let result = match fs {
        AnyFilesystemClient::V1alpha1(mut c) => path_exists!(c, v1alpha1, path.clone(), old),
        AnyFilesystemClient::V1beta1(mut c) => path_exists!(c, v1beta1, path.clone(), old),
        AnyFilesystemClient::V1beta2(mut c) => path_exists!(c, v1beta2, path.clone()),
        AnyFilesystemClient::V1(mut c) => path_exists!(c, v1, path.clone()),
        AnyFilesystemClient::V2alpha1(mut c) => path_exists!(c, v2alpha1, path.clone()),
    };
    match result {
        Ok(true) => {
            println!("{path} exists");
            ExitCode::SUCCESS
        }
        Ok(false) => {
            println!("{path} does not exist");
            ExitCode::from(1)
        }
        Err(status) => {
            eprintln!(
                "PathExists failed: {:?}: {}",
                status.code(),
                status.message()
            );
            ExitCode::from(2)
        }
    }
}

fn fail(e: &dyn std::error::Error) -> ExitCode {
    eprintln!("error: {e}");
    ExitCode::from(2)
}

fn usage(problem: &str) -> ExitCode {
    if !problem.is_empty() {
        eprintln!("error: {problem}");
    }
    eprintln!("usage: pathexists [--socket-dir DIR] [--newest] PATH");
    ExitCode::from(2)
}
