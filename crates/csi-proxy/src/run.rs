//! Start-up, serving and shutdown of the csi-proxy process.

use crate::cli::Cli;
use anyhow::{bail, Context, Result};
use csi_proxy_api::{ApiVersion, Group, API_VERSIONS};
use csi_proxy_host::path::{Flavor, PathPolicy};
use csi_proxy_host::{Host, HostOptions};
use csi_proxy_server::{Config, Transport};
use tokio_util::sync::CancellationToken;

/// The API versions selected by `-api-groups` (items `group` or
/// `group-version`); all of them when the flag is absent.
pub fn select_versions(items: Option<Vec<String>>) -> Result<Vec<ApiVersion>> {
    let Some(items) = items else {
        return Ok(API_VERSIONS.to_vec());
    };
    let mut chosen = Vec::new();
    for item in items.iter().filter(|i| !i.is_empty()) {
        let (group, version) = match item.split_once('-') {
            Some((g, v)) => (g, Some(v)),
            None => (item.as_str(), None),
        };
        let Some(group) = Group::parse(group) else {
            bail!(
                "-api-groups: unknown API group {group:?} (known: {})",
                Group::ALL.map(|g| g.as_str()).join(", ")
            );
        };
        let matching: Vec<ApiVersion> = API_VERSIONS
            .iter()
            .copied()
            .filter(|v| v.group == group && version.is_none_or(|want| v.version == want))
            .collect();
        if matching.is_empty() {
            let known: Vec<&str> = API_VERSIONS
                .iter()
                .filter(|v| v.group == group)
                .map(|v| v.version)
                .collect();
            bail!(
                "-api-groups: {item:?}: {} has no version {:?} (known: {})",
                group.as_str(),
                version.unwrap_or_default(),
                known.join(", ")
            );
        }
        for v in matching {
            if !chosen.contains(&v) {
                chosen.push(v);
            }
        }
    }
    if chosen.is_empty() {
        bail!("-api-groups selects no API version");
    }
    Ok(chosen)
}

fn transport(cli: &Cli) -> Result<Transport> {
    #[cfg(unix)]
    {
        let dir = cli
            .socket_dir
            .clone()
            .unwrap_or_else(csi_proxy_server::transport::unix::default_socket_dir);
        Ok(Transport::UnixSockets {
            dir,
            mode: cli.socket_mode,
        })
    }
    #[cfg(windows)]
    {
        Ok(Transport::NamedPipes {
            sddl: cli.pipe_sddl.clone(),
        })
    }
}

/// Every client connection is a descriptor, and idle probe connections
/// count too: raise the soft RLIMIT_NOFILE to the hard limit, as Go
/// programs (upstream included) do at start-up.
#[cfg(unix)]
fn raise_fd_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes only the struct we pass.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0
        || lim.rlim_cur >= lim.rlim_max
    {
        return;
    }
    let old = lim.rlim_cur;
    lim.rlim_cur = lim.rlim_max;
    // SAFETY: setrlimit reads only the struct we pass.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } == 0 {
        tracing::debug!(from = old, to = lim.rlim_cur, "raised the open-file limit");
    }
}

/// Run the proxy until SIGTERM/SIGINT (Ctrl-C on Windows).
pub fn run(cli: Cli) -> Result<()> {
    for flag in cli.ignored_flags() {
        tracing::info!(flag, "flag accepted for compatibility and ignored");
    }
    if cli.windows_service {
        tracing::warn!("-windows-service is not implemented yet: running in the foreground");
    }
    if !cli.metrics_bind_address.is_empty() {
        tracing::warn!(
            address = %cli.metrics_bind_address,
            "-metrics-bind-address is not implemented yet: no metrics are served"
        );
    }
    #[cfg(unix)]
    raise_fd_limit();
    let versions = select_versions(cli.api_group_list())?;
    let policy = PathPolicy::new(Flavor::NATIVE, cli.allowed_roots())
        .context("invalid -kubelet-path or -working-dir")?;
    let config = Config {
        versions,
        transport: transport(&cli)?,
        shutdown_timeout: cli.shutdown_timeout,
        log_requests: crate::logging::verbosity() >= 2,
        preface_timeout: cli.preface_timeout,
        idle_timeout: cli.idle_timeout,
        keepalive_time: cli.keepalive_time,
        keepalive_timeout: cli.keepalive_timeout,
    };
    let host = Host::os_with(
        policy.clone(),
        &HostOptions {
            volume_fs_type: cli.volume_fs_type.clone(),
        },
    )
    .context("invalid -volume-fs-type")?;

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("csi-proxy")
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let server = csi_proxy_server::bind(&config, &host)?;
        // Before "ready": a SIGTERM sent as soon as the proxy says it is
        // ready must shut it down cleanly, not kill it.
        let signals = Signals::install();
        let addresses = server.addresses();
        tracing::info!(
            version = env!("CARGO_PKG_VERSION"),
            endpoints = addresses.len(),
            transport = ?config.transport,
            roots = ?policy.roots(),
            "csi-proxy ready"
        );
        for a in &addresses {
            tracing::debug!(endpoint = %a, "serving");
        }
        let token = CancellationToken::new();
        let signals = tokio::spawn(signals.wait(token.clone()));
        let result = server.serve(token).await;
        signals.abort();
        result?;
        #[cfg(target_os = "linux")]
        tracing::info!(
            child_processes = csi_proxy_host::storage::linux::spawned_processes(),
            "storage tools run by this process (mkfs, resize2fs, ...)"
        );
        tracing::info!("csi-proxy stopped");
        Ok(())
    })
}

/// The shutdown signals, their handlers installed.
struct Signals {
    #[cfg(unix)]
    handlers: Option<(tokio::signal::unix::Signal, tokio::signal::unix::Signal)>,
}

impl Signals {
    fn install() -> Signals {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let handlers = match (
                signal(SignalKind::terminate()),
                signal(SignalKind::interrupt()),
            ) {
                (Ok(term), Ok(int)) => Some((term, int)),
                _ => {
                    tracing::error!("cannot install signal handlers");
                    None
                }
            };
            Signals { handlers }
        }
        #[cfg(windows)]
        Signals {}
    }

    /// Wait for SIGTERM/SIGINT (Ctrl-C on Windows), then cancel `token`.
    async fn wait(self, token: CancellationToken) {
        #[cfg(unix)]
        {
            let Some((mut term, mut int)) = self.handlers else {
                return;
            };
            let name = tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = int.recv() => "SIGINT",
            };
            tracing::info!(signal = name, "shutting down: draining in-flight calls");
        }
        #[cfg(windows)]
        {
            if tokio::signal::ctrl_c().await.is_err() {
                return;
            }
            tracing::info!("Ctrl-C: shutting down, draining in-flight calls");
        }
        token.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sel(s: &str) -> Result<Vec<String>> {
        select_versions(Some(s.split(',').map(String::from).collect()))
            .map(|v| v.iter().map(|v| v.endpoint_name()).collect())
    }

    #[test]
    fn all_versions_by_default() {
        assert_eq!(select_versions(None).unwrap().len(), 23);
    }

    #[test]
    fn groups_and_versions_select_subsets() {
        assert_eq!(sel("filesystem").unwrap().len(), 5);
        assert_eq!(
            sel("filesystem-v1,disk-v1beta3").unwrap(),
            ["csi-proxy-filesystem-v1", "csi-proxy-disk-v1beta3"]
        );
        assert_eq!(sel("smb,smb-v1").unwrap().len(), 4);
    }

    #[test]
    fn unknown_names_are_errors() {
        assert!(sel("bogus")
            .unwrap_err()
            .to_string()
            .contains("unknown API group"));
        assert!(sel("disk-v9")
            .unwrap_err()
            .to_string()
            .contains("no version"));
        assert!(sel("").is_err());
    }
}
