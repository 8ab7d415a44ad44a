//! Binding every endpoint, serving, and graceful shutdown.

use crate::accept::{Backoff, Cap};
use crate::caller::pending::identify;
use crate::dispatch::VersionedService;
use crate::guard::Guard;
use crate::metrics::{ConnectionGauge, Metrics};
use crate::routes;
use crate::transport::Listener;
use csi_proxy_api::ApiVersion;
use csi_proxy_host::Host;
use csi_proxy_http2 as http2;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// Where the endpoints live.
#[derive(Clone, Debug)]
pub enum Transport {
    /// Unix sockets `<dir>/csi-proxy-<group>-<version>.sock` with file mode `mode`.
    #[cfg(unix)]
    UnixSockets { dir: std::path::PathBuf, mode: u32 },
    /// Named pipes `<prefix><group>-<version>` (by default
    /// `\\.\pipe\csi-proxy-<group>-<version>`) with security descriptor `sddl`.
    /// `service_sid` (the service's own, `NT SERVICE\<name>`) may be
    /// granted what the pipe rule refuses others (`transport::dacl`).
    #[cfg(windows)]
    NamedPipes {
        sddl: String,
        prefix: String,
        service_sid: Option<String>,
    },
}

/// What to serve, and how.
#[derive(Clone, Debug)]
pub struct Config {
    pub versions: Vec<ApiVersion>,
    pub transport: Transport,
    /// How long in-flight calls may finish after shutdown was requested.
    pub shutdown_timeout: Duration,
    /// Log one line per request (method, duration, status code).
    pub log_requests: bool,
    /// How long a connection may stay open without sending the HTTP/2
    /// preface (grpc-go opens one such connection to probe a pipe).
    pub preface_timeout: Duration,
    /// After the preface, how long a connection may have no call open
    /// before it is sent GOAWAY and closed (zero: never).
    pub idle_timeout: Duration,
    /// Ping a client not heard from for this long (zero: never), and close
    /// its connection if it stays silent for `keepalive_timeout` more.
    pub keepalive_time: Duration,
    pub keepalive_timeout: Duration,
    /// At most this many open connections per endpoint; past it a new
    /// connection is closed as soon as it is accepted (see `accept.rs`).
    pub max_connections_per_endpoint: usize,
    /// Record calls and connections here (`-metrics-bind-address`).
    pub metrics: Option<Arc<Metrics>>,
    /// The audit log and caller policy (`-audit-log`, `-caller-policy`).
    pub guard: Option<Arc<Guard>>,
}

impl Config {
    /// The default preface timeout: generous, since an idle connection costs
    /// only a parked task.
    pub const DEFAULT_PREFACE_TIMEOUT: Duration = http2::Options::DEFAULT_PREFACE_TIMEOUT;
    /// The default idle timeout: grpc-go clients keep a connection idle for
    /// hours and reconnect transparently after GOAWAY.
    pub const DEFAULT_IDLE_TIMEOUT: Duration = http2::Options::DEFAULT_IDLE_TIMEOUT;
    /// The default keepalive: grpc-go servers' own defaults.
    pub const DEFAULT_KEEPALIVE_TIME: Duration = http2::Options::DEFAULT_KEEPALIVE_TIME;
    pub const DEFAULT_KEEPALIVE_TIMEOUT: Duration = http2::Options::DEFAULT_KEEPALIVE_TIMEOUT;
    /// The default connection cap per endpoint: far above what kubelet and
    /// a node plugin use (a few connections each), low enough that 23
    /// endpoints fit a common 64Ki descriptor limit.
    pub const DEFAULT_MAX_CONNECTIONS_PER_ENDPOINT: usize = 1024;
}

/// A start-up or serving failure.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot use the socket directory")]
    SocketDir {
        #[source]
        source: std::io::Error,
    },
    #[error("cannot bind endpoint {endpoint}: {source}")]
    Bind {
        endpoint: String,
        #[source]
        source: std::io::Error,
    },
    #[error("endpoint {endpoint} stopped unexpectedly: {reason}")]
    Stopped { endpoint: String, reason: String },
    /// A socket handed over by systemd cannot serve (see
    /// [`crate::transport::activation`]).
    #[cfg(unix)]
    #[error(transparent)]
    Activation(#[from] crate::transport::activation::ActivationError),
}

#[cfg(unix)]
type PlatformListener = crate::transport::unix::UnixEndpoint;
#[cfg(windows)]
type PlatformListener = crate::transport::windows::PipeListener;

#[derive(Clone, Copy)]
struct Timing {
    drain: Duration,
    preface: Duration,
    idle: Duration,
    keepalive_time: Duration,
    keepalive_timeout: Duration,
    max_connections: usize,
}

struct Endpoint {
    address: String,
    service: VersionedService,
    listener: PlatformListener,
    connections: Option<ConnectionGauge>,
}

/// Every endpoint bound and ready to serve.
pub struct BoundServer {
    endpoints: Vec<Endpoint>,
    timing: Timing,
}

/// Bind every endpoint of `config` (all or nothing: the first failure is
/// returned and endpoints bound so far are released).
pub fn bind(config: &Config, host: &Host) -> Result<BoundServer, ServeError> {
    bind_endpoints(
        config,
        host,
        #[cfg(unix)]
        crate::transport::activation::Handed::none(),
    )
}

/// [`bind`], with the sockets systemd handed over: an endpoint whose name
/// was handed over serves that socket, the others bind their own. A handed
/// name that is no endpoint of `config`, or a socket bound elsewhere than
/// the endpoint's path in the socket directory, is an error (nothing would
/// serve it, or clients would not find it).
#[cfg(unix)]
pub fn bind_activated(
    config: &Config,
    host: &Host,
    handed: crate::transport::activation::Handed,
) -> Result<BoundServer, ServeError> {
    bind_endpoints(config, host, handed)
}

/// Refuse handed-over sockets that no endpoint of `config` would serve
/// where clients look for it.
#[cfg(unix)]
fn check_handed(
    config: &Config,
    handed: &crate::transport::activation::Handed,
) -> Result<(), ServeError> {
    use crate::transport::activation::ActivationError;
    let Transport::UnixSockets { dir, .. } = &config.transport;
    for name in handed.names() {
        if !config.versions.iter().any(|v| v.endpoint_name() == name) {
            let known = csi_proxy_api::API_VERSIONS
                .iter()
                .any(|v| v.endpoint_name() == name);
            let why = match known {
                true => "an endpoint this proxy does not serve (-api-groups)",
                false => "no endpoint's name (names are csi-proxy-<group>-<version>)",
            };
            return Err(ActivationError(format!(
                "a socket was handed over as {name:?} (FileDescriptorName=), {why}"
            ))
            .into());
        }
    }
    for s in handed.sockets() {
        let want = crate::transport::unix::socket_path(dir, &s.name);
        // The same directory under another spelling (a symlink such as
        // /var/run, a relative -socket-dir) is the same place.
        let same_dir = |a: &std::path::Path, b: &std::path::Path| {
            a == b || matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
        };
        let same = s.path == want
            || (s.path.file_name() == want.file_name()
                && s.path
                    .parent()
                    .zip(want.parent())
                    .is_some_and(|(a, b)| same_dir(a, b)));
        if !same {
            return Err(ActivationError(format!(
                "the socket handed over as {:?} is bound at {}, but clients of -socket-dir={} \
                 look for it at {}: make ListenStream= and -socket-dir agree",
                s.name,
                s.path.display(),
                dir.display(),
                want.display()
            ))
            .into());
        }
    }
    Ok(())
}

fn bind_endpoints(
    config: &Config,
    host: &Host,
    #[cfg(unix)] mut handed: crate::transport::activation::Handed,
) -> Result<BoundServer, ServeError> {
    #[cfg(windows)]
    let sd = match &config.transport {
        Transport::NamedPipes {
            sddl, service_sid, ..
        } => std::sync::Arc::new(
            crate::transport::windows::SecurityDescriptor::for_pipes(sddl, service_sid.as_deref())
                .map_err(|source| ServeError::Bind {
                    endpoint: format!("pipe security descriptor {sddl:?}"),
                    source,
                })?,
        ),
    };
    #[cfg(unix)]
    {
        let Transport::UnixSockets { dir, .. } = &config.transport;
        check_handed(config, &handed)?;
        crate::transport::unix::prepare_dir(dir)
            .map_err(|source| ServeError::SocketDir { source })?;
    }
    let mut endpoints = Vec::with_capacity(config.versions.len());
    for &version in &config.versions {
        let (address, listener) = match &config.transport {
            #[cfg(unix)]
            Transport::UnixSockets { dir, mode } => {
                let name = version.endpoint_name();
                let path = crate::transport::unix::socket_path(dir, &name);
                let address = path.display().to_string();
                let l = match handed.take(&name) {
                    Some(s) => {
                        warn_on_mode(&path, *mode);
                        tracing::info!(endpoint = %address, "serving the socket handed over by systemd");
                        PlatformListener::from_handed(s.fd, &path)
                    }
                    None => PlatformListener::bind(&path, *mode),
                };
                (address, l)
            }
            #[cfg(windows)]
            Transport::NamedPipes { prefix, .. } => {
                let address = format!("{prefix}{}-{}", version.group.as_str(), version.version);
                let l = PlatformListener::bind(&address, sd.clone());
                (address, l)
            }
        };
        let listener = listener.map_err(|source| ServeError::Bind {
            endpoint: address.clone(),
            source,
        })?;
        let mut service = routes::service(host, version, config.log_requests);
        let mut connections = None;
        if let Some(m) = &config.metrics {
            service = service.with_metrics(m);
            connections = Some(m.connections(&format!("{}-{}", version.group, version.version)));
        }
        if let Some(g) = &config.guard {
            service = service.with_guard(g.clone());
        }
        endpoints.push(Endpoint {
            address,
            service,
            listener,
            connections,
        });
    }
    Ok(BoundServer {
        endpoints,
        timing: Timing {
            drain: config.shutdown_timeout,
            preface: config.preface_timeout,
            idle: config.idle_timeout,
            keepalive_time: config.keepalive_time,
            keepalive_timeout: config.keepalive_timeout,
            max_connections: config.max_connections_per_endpoint,
        },
    })
}

/// A handed-over socket's file mode is its `.socket` unit's `SocketMode=`:
/// say so when it is not `-socket-mode`.
#[cfg(unix)]
fn warn_on_mode(path: &std::path::Path, mode: u32) {
    use std::os::unix::fs::MetadataExt;
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.mode() & 0o7777 != mode => tracing::warn!(
            socket = %path.display(),
            mode = format!("{:04o}", m.mode() & 0o7777),
            socket_mode = format!("{mode:04o}"),
            "the socket handed over by systemd has another mode than -socket-mode: set SocketMode= in its .socket unit"
        ),
        Ok(_) => {}
        Err(e) => {
            tracing::warn!(socket = %path.display(), error = %e, "cannot read the handed-over socket's mode")
        }
    }
}

impl BoundServer {
    /// The bound addresses (socket paths or pipe names), in config order.
    pub fn addresses(&self) -> Vec<String> {
        self.endpoints.iter().map(|e| e.address.clone()).collect()
    }

    /// Serve until `shutdown` is cancelled, then stop accepting, let
    /// in-flight calls finish (bounded by the shutdown timeout) and return.
    /// If any endpoint fails, all are stopped and the failure is returned.
    pub async fn serve(self, shutdown: CancellationToken) -> Result<(), ServeError> {
        let mut set = JoinSet::new();
        // One set of connection options, so one request-byte budget, for
        // the whole process.
        let t = self.timing;
        let options = http2::Options {
            preface_timeout: t.preface,
            idle_timeout: t.idle,
            keepalive_time: t.keepalive_time,
            keepalive_timeout: t.keepalive_timeout,
            ..http2::Options::default()
        };
        for ep in self.endpoints {
            let token = shutdown.clone();
            let timing = self.timing;
            let name = ep.address.clone();
            let options = options.clone();
            set.spawn(async move {
                let Endpoint {
                    address,
                    service,
                    listener,
                    connections,
                } = ep;
                accept_loop(
                    &address,
                    listener,
                    service,
                    connections,
                    token,
                    timing,
                    options,
                )
                .await;
                name
            });
        }
        let mut result = Ok(());
        while let Some(joined) = set.join_next().await {
            if let Err(e) = joined {
                // An accept loop only ends early by panicking.
                shutdown.cancel();
                if result.is_ok() {
                    result = Err(ServeError::Stopped {
                        endpoint: "(accept loop)".into(),
                        reason: e.to_string(),
                    });
                }
            } else if !shutdown.is_cancelled() {
                shutdown.cancel();
            }
        }
        result
    }
}

async fn accept_loop<L: Listener>(
    address: &str,
    mut listener: L,
    service: VersionedService,
    gauge: Option<ConnectionGauge>,
    shutdown: CancellationToken,
    timing: Timing,
    options: http2::Options,
) where
    L::Io: http2::Io,
{
    let mut connections = JoinSet::new();
    let mut cap = Cap::new(timing.max_connections);
    let mut backoff = Backoff::default();
    loop {
        let io = tokio::select! {
            biased;
            _ = shutdown.cancelled() => break,
            // Reap finished connections as we go.
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            accepted = listener.accept() => accepted,
        };
        match io {
            Ok(io) => {
                backoff.succeeded(address);
                // Over the cap the connection is closed at once (dropped).
                if let Some(slot) = cap.admit(address) {
                    let open = gauge.as_ref().map(ConnectionGauge::open);
                    // Only what the kernel tells at once here; the rest of
                    // the identity in the connection's own task, off the
                    // async workers and bounded in time (caller::pending):
                    // when something uses it (audit log, caller policy),
                    // and on Linux always, for the pod: a caller's budgets
                    // are its pod's (red team 43mount: without a guard
                    // every root pod and host root were one caller).
                    let peer = L::peer(&io);
                    let (service, options, shutdown) =
                        (service.clone(), options.clone(), shutdown.clone());
                    connections.spawn(async move {
                        let caller = match cfg!(target_os = "linux") || service.needs_caller() {
                            true => identify(peer).await,
                            false => peer.credentials(),
                        };
                        let conn = service.for_caller(Arc::new(caller));
                        http2::serve(io, conn, options, shutdown).await;
                        drop(open);
                        drop(slot);
                    });
                }
            }
            Err(e) => {
                // E.g. out of file descriptors: keep serving the open
                // connections, pause (bounded, growing) and try again.
                let delay = backoff.failed(address, &e);
                tokio::select! {
                    biased;
                    _ = shutdown.cancelled() => break,
                    _ = tokio::time::sleep(delay) => {}
                }
            }
        }
    }
    // Stop accepting (the listener goes away first); every connection has
    // seen the cancellation, sends GOAWAY and ends once its calls are
    // answered.
    drop(listener);
    let drained = tokio::time::timeout(timing.drain, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            endpoint = address,
            timeout = ?timing.drain,
            "in-flight calls did not finish in time; closing their connections"
        );
        connections.shutdown().await;
    }
}
