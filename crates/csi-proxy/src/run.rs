//! Start-up, serving and shutdown of the csi-proxy process.

use crate::cli::Cli;
use anyhow::{bail, Context, Result};
use csi_proxy_api::{ApiVersion, Group, API_VERSIONS};
use csi_proxy_host::path::{Flavor, PathPolicy};
use csi_proxy_host::{Host, HostOptions};
use csi_proxy_server::metrics::Metrics;
use csi_proxy_server::{Config, Transport};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// What the caller learns while the proxy runs: `ready` once every
/// endpoint (and the metrics listener) is bound, `stopping` once shutdown
/// was requested and draining starts. The foreground run tells systemd
/// (`sd_notify`); the Windows service tells the Service Control Manager.
pub struct Lifecycle {
    pub ready: Box<dyn FnOnce() + Send>,
    pub stopping: Box<dyn FnOnce() + Send>,
    /// Stop on SIGTERM/SIGINT (Ctrl-C on Windows).
    pub handle_signals: bool,
}

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
            prefix: cli.pipe_prefix.clone(),
            service_sid: Some(csi_proxy_server::transport::dacl::service_sid(
                &cli.service_name,
            )),
        })
    }
}

/// The sockets systemd handed over (socket activation), taken by
/// [`take_activation`] first thing in `main` and used by [`serve`].
#[cfg(unix)]
static ACTIVATION: std::sync::Mutex<
    Option<
        Result<
            csi_proxy_server::transport::activation::Handed,
            csi_proxy_server::transport::activation::ActivationError,
        >,
    >,
> = std::sync::Mutex::new(None);

/// Take the sockets systemd handed over and clear `LISTEN_*` (see
/// `csi_proxy_server::transport::activation`). Call before any thread
/// starts.
#[cfg(unix)]
pub fn take_activation() {
    let taken = csi_proxy_server::transport::activation::take_from_env();
    *ACTIVATION.lock().unwrap_or_else(|e| e.into_inner()) = Some(taken);
}

/// The sockets taken by [`take_activation`] (none if it was not called).
#[cfg(unix)]
fn handed_sockets() -> Result<csi_proxy_server::transport::activation::Handed> {
    use csi_proxy_server::transport::activation::Handed;
    let taken = ACTIVATION
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
        .unwrap_or_else(|| Ok(Handed::none()))?;
    if let Some(pid) = taken.other_pid {
        tracing::warn!(
            listen_pid = pid,
            "LISTEN_PID names another process: the sockets passed with it are not ours and are left alone"
        );
    }
    if !taken.is_empty() {
        tracing::info!(
            sockets = taken.names().join(","),
            "socket activation: serving the sockets systemd handed over"
        );
    }
    Ok(taken)
}

/// Every client connection is a descriptor, and idle probe connections
/// count too: raise the soft RLIMIT_NOFILE to the hard limit, as Go
/// programs (upstream included) do at start-up. Returns the soft limit in
/// force afterwards, if it could be read.
#[cfg(unix)]
fn raise_fd_limit() -> Option<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes only the struct we pass.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        let err = std::io::Error::last_os_error();
        tracing::warn!(error = %err, "cannot read the open-file limit (RLIMIT_NOFILE)");
        return None;
    }
    // rlim_t is 32-bit on 32-bit targets.
    #[allow(clippy::unnecessary_cast)]
    let (soft, hard) = (lim.rlim_cur as u64, lim.rlim_max as u64);
    if soft >= hard {
        tracing::info!(
            soft,
            hard,
            "open-file limit (RLIMIT_NOFILE) already at its hard limit"
        );
        return Some(soft);
    }
    lim.rlim_cur = lim.rlim_max;
    // SAFETY: setrlimit reads only the struct we pass.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } == 0 {
        tracing::info!(
            from = soft,
            to = hard,
            "raised the open-file limit (RLIMIT_NOFILE) to its hard limit"
        );
        Some(hard)
    } else {
        let err = std::io::Error::last_os_error();
        tracing::warn!(soft, hard, error = %err, "cannot raise the open-file limit (RLIMIT_NOFILE)");
        Some(soft)
    }
}

/// Warn when the connection caps of all endpoints together allow more
/// connections than there are descriptors: the caps then do not keep a
/// flood from exhausting them (the accept loops back off and keep serving
/// what is open, but new clients wait).
#[cfg(unix)]
fn check_fd_budget(limit: u64, endpoints: usize, cap: usize) {
    // Descriptors the process needs besides connections (listeners, logs,
    // the runtime, host operations), generously.
    const RESERVE: u64 = 256;
    let wanted = (endpoints as u64)
        .saturating_mul(cap as u64)
        .saturating_add(RESERVE);
    if wanted > limit {
        tracing::warn!(
            open_file_limit = limit,
            endpoints,
            max_connections_per_endpoint = cap,
            "the connection caps allow more connections than the open-file limit: a flood of \
             connections can exhaust descriptors before the caps (raise LimitNOFILE or lower \
             -max-connections-per-endpoint)"
        );
    }
}

/// Run the proxy in the foreground until SIGTERM/SIGINT (Ctrl-C on
/// Windows), telling systemd when it is ready and when it stops (a no-op
/// outside a `Type=notify` unit).
pub fn run(cli: Cli) -> Result<()> {
    let lifecycle = Lifecycle {
        ready: Box::new(|| notify_systemd(true)),
        stopping: Box::new(|| notify_systemd(false)),
        handle_signals: true,
    };
    serve(&cli, CancellationToken::new(), lifecycle)
}

#[cfg(unix)]
fn notify_systemd(ready: bool) {
    let state = if ready {
        sd_notify::NotifyState::Ready
    } else {
        sd_notify::NotifyState::Stopping
    };
    if let Err(e) = sd_notify::notify(&[state]) {
        tracing::warn!(error = %e, "cannot notify systemd");
    }
}

#[cfg(not(unix))]
fn notify_systemd(_ready: bool) {}

/// Bind every endpoint (and the metrics listener), report ready, serve
/// until `token` is cancelled, drain, and return. Errors before `ready`
/// are start-up failures.
pub fn serve(cli: &Cli, token: CancellationToken, lifecycle: Lifecycle) -> Result<()> {
    for flag in cli.ignored_flags() {
        tracing::info!(flag, "flag accepted for compatibility and ignored");
    }
    #[cfg(unix)]
    let fd_limit = raise_fd_limit();
    let versions = select_versions(cli.api_group_list())?;
    #[cfg(unix)]
    if let Some(limit) = fd_limit {
        check_fd_budget(limit, versions.len(), cli.max_connections_per_endpoint);
    }
    // Short (8.3) names expanded here already, so the ready line shows the
    // roots the host compares with (Host::os_with does it again, for
    // library mode).
    #[cfg(unix)]
    let handed = handed_sockets()?;
    let policy = PathPolicy::new(Flavor::NATIVE, cli.allowed_roots())
        .and_then(|p| p.with_os_long_roots())
        .context("invalid -kubelet-path or -working-dir")?;
    // The state dir is used on Linux only (format records): checked by
    // identity and opened once; the records are kept beneath this handle.
    #[cfg(unix)]
    let state_dir_handle = crate::state_dir::open(&cli.state_dir, &cli.allowed_roots())?
        .map(|f| csi_proxy_host::StateDirHandle(Arc::new(f)));
    #[cfg(not(unix))]
    let state_dir_handle = None;
    let metrics = (!cli.metrics_bind_address.is_empty())
        .then(|| Arc::new(Metrics::new(&crate::version::build_info())));
    let guarding = crate::guarding::Guarding::from_cli(cli, metrics.as_deref())?;
    let config = Config {
        versions,
        transport: transport(cli)?,
        shutdown_timeout: cli.shutdown_timeout,
        log_requests: crate::logging::verbosity() >= 2,
        preface_timeout: cli.preface_timeout,
        idle_timeout: cli.idle_timeout,
        keepalive_time: cli.keepalive_time,
        keepalive_timeout: cli.keepalive_timeout,
        max_connections_per_endpoint: cli.max_connections_per_endpoint,
        metrics: metrics.clone(),
        guard: guarding.guard(),
    };
    let host = Host::os_with(
        policy.clone(),
        &HostOptions {
            volume_fs_type: cli.volume_fs_type.clone(),
            allowed_services: names(&cli.allowed_services),
            require_privacy: cli.require_privacy,
            smb_allow_no_credentials: cli.smb_allow_no_credentials,
            protected_services: names(&cli.protected_services),
            unprotected_services: names(&cli.unprotect_services),
            service_name: Some(cli.service_name.clone()),
            overwrite_unidentified_content: cli.overwrite_unidentified_content,
            state_dir: (!cli.state_dir.as_os_str().is_empty()).then(|| cli.state_dir.clone()),
            state_dir_handle,
        },
    )
    .context(
        "invalid -volume-fs-type, -allowed-services, -protected-services, -unprotect-services or -service-name",
    )?;
    let allowed = csi_proxy_host::system::ServicePolicy::allow_only(
        names(&cli.allowed_services),
        csi_proxy_host::path::Flavor::NATIVE,
    )?;
    match allowed.names() {
        None => tracing::warn!(
            "-allowed-services=*: StartService and StopService may act on every service that is not protected"
        ),
        Some(n) => tracing::info!(
            services = n.collect::<Vec<_>>().join(","),
            "StartService and StopService act only on these services (-allowed-services)"
        ),
    }
    let unprotected = names(&cli.unprotect_services);
    if !unprotected.is_empty() {
        tracing::warn!(
            services = unprotected.join(","),
            "the operator took these services out of the protected node-critical set (-unprotect-services): StopService may stop them"
        );
    }

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("csi-proxy")
        .build()
        .context("cannot start the async runtime")?;
    let served = runtime.block_on(async move {
        let metrics_listener = match &metrics {
            Some(_) => Some(
                csi_proxy_server::metrics::http::bind(&cli.metrics_bind_address).with_context(
                    || {
                        format!(
                            "cannot listen on -metrics-bind-address={}",
                            cli.metrics_bind_address
                        )
                    },
                )?,
            ),
            None => None,
        };
        let metrics_address = metrics_listener
            .as_ref()
            .map(|l| l.local_addr().to_string());
        let signals = match lifecycle.handle_signals {
            true => Some(Signals::install()?),
            false => None,
        };
        guarding.watch_policy(&token)?;
        #[cfg(unix)]
        let server = csi_proxy_server::server::bind_activated(&config, &host, handed)?;
        #[cfg(not(unix))]
        let server = csi_proxy_server::bind(&config, &host)?;
        let addresses = server.addresses();
        if let (Some(listener), Some(m)) = (metrics_listener, metrics) {
            let token = token.clone();
            tokio::spawn(async move {
                if let Err(e) = listener.serve(m, token).await {
                    tracing::error!(error = %e, "the metrics endpoint stopped");
                }
            });
        }
        tracing::info!(
            version = crate::version::VERSION,
            commit = crate::version::COMMIT,
            tree = crate::version::TREE,
            target = crate::version::TARGET,
            endpoints = addresses.len(),
            transport = ?config.transport,
            roots = ?policy.roots(),
            metrics = metrics_address.as_deref().unwrap_or("off"),
            "csi-proxy ready"
        );
        for a in &addresses {
            tracing::debug!(endpoint = %a, "serving");
        }
        (lifecycle.ready)();
        let signals = signals.map(|s| tokio::spawn(s.wait(token.clone())));
        let stopping = lifecycle.stopping;
        let watch = token.clone();
        let stopping = tokio::spawn(async move {
            watch.cancelled().await;
            stopping();
        });
        let result = server.serve(token.clone()).await;
        // An endpoint failure ends serving too: report stopping either way.
        token.cancel();
        let _ = stopping.await;
        if let Some(s) = signals {
            s.abort();
        }
        guarding.close();
        result?;
        #[cfg(target_os = "linux")]
        tracing::info!(
            child_processes = csi_proxy_host::storage::linux::spawned_processes(),
            sysfs_reads = csi_proxy_host::storage::linux::sysfs_reads(),
            device_opens = csi_proxy_host::storage::linux::device_opens(),
            "storage tools run by this process (mkfs, resize2fs, ...) and what the storage backend read"
        );
        let inventory = csi_proxy_host::storage::inventory::counters();
        tracing::info!(
            full_scans = inventory.full_scans,
            disk_scans = inventory.disk_scans,
            events_lost = inventory.lost,
            calls = inventory.views,
            "disk and volume inventory"
        );
        tracing::info!("csi-proxy stopped");
        Ok(())
    });
    // Host operations still stuck in a disk or file system that does not
    // answer are not waited for (red team 40async: the process lived on
    // until a hung mount answered).
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    served
}

/// The stop signals, installed before the proxy says it is ready (a
/// signal sent right after "csi-proxy ready" must not kill the process).
struct Signals {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
    #[cfg(windows)]
    ctrl_c: tokio::signal::windows::CtrlC,
    /// What a container runtime sends to stop a Windows container's
    /// processes (CTRL_BREAK, CTRL_SHUTDOWN, CTRL_CLOSE): drained like
    /// Ctrl-C, within the pod's grace period.
    #[cfg(windows)]
    ctrl_break: tokio::signal::windows::CtrlBreak,
    #[cfg(windows)]
    ctrl_shutdown: tokio::signal::windows::CtrlShutdown,
    #[cfg(windows)]
    ctrl_close: tokio::signal::windows::CtrlClose,
}

impl Signals {
    fn install() -> Result<Signals> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            Ok(Signals {
                term: signal(SignalKind::terminate()).context("cannot handle SIGTERM")?,
                int: signal(SignalKind::interrupt()).context("cannot handle SIGINT")?,
            })
        }
        #[cfg(windows)]
        {
            Ok(Signals {
                ctrl_c: tokio::signal::windows::ctrl_c().context("cannot handle Ctrl-C")?,
                ctrl_break: tokio::signal::windows::ctrl_break()
                    .context("cannot handle Ctrl-Break")?,
                ctrl_shutdown: tokio::signal::windows::ctrl_shutdown()
                    .context("cannot handle CTRL_SHUTDOWN_EVENT")?,
                ctrl_close: tokio::signal::windows::ctrl_close()
                    .context("cannot handle CTRL_CLOSE_EVENT")?,
            })
        }
    }

    /// Wait for a signal, then cancel `token`.
    async fn wait(mut self, token: CancellationToken) {
        #[cfg(unix)]
        {
            let name = tokio::select! {
                _ = self.term.recv() => "SIGTERM",
                _ = self.int.recv() => "SIGINT",
            };
            tracing::info!(signal = name, "shutting down: draining in-flight calls");
        }
        #[cfg(windows)]
        {
            let event = tokio::select! {
                r = self.ctrl_c.recv() => r.map(|()| "Ctrl-C"),
                r = self.ctrl_break.recv() => r.map(|()| "Ctrl-Break"),
                r = self.ctrl_shutdown.recv() => r.map(|()| "CTRL_SHUTDOWN_EVENT"),
                r = self.ctrl_close.recv() => r.map(|()| "CTRL_CLOSE_EVENT"),
            };
            let Some(event) = event else { return };
            tracing::info!("{event}: shutting down, draining in-flight calls");
        }
        token.cancel();
    }
}

/// The non-empty names of a comma-separated list flag.
fn names(list: &[String]) -> Vec<String> {
    list.iter()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
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
