//! Binding every endpoint, serving, and graceful shutdown.

use crate::dispatch::VersionedService;
use crate::groups;
use crate::transport::Listener;
use csi_proxy_api::ApiVersion;
use csi_proxy_host::Host;
use csi_proxy_http2 as http2;
use std::time::Duration;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// Where the endpoints live.
#[derive(Clone, Debug)]
pub enum Transport {
    /// Unix sockets `<dir>/csi-proxy-<group>-<version>.sock` with file mode `mode`.
    #[cfg(unix)]
    UnixSockets { dir: std::path::PathBuf, mode: u32 },
    /// Named pipes `\\.\pipe\csi-proxy-<group>-<version>` with security descriptor `sddl`.
    #[cfg(windows)]
    NamedPipes { sddl: String },
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
}

/// A start-up or serving failure.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot bind endpoint {endpoint}: {source}")]
    Bind {
        endpoint: String,
        #[source]
        source: std::io::Error,
    },
    #[error("endpoint {endpoint} stopped unexpectedly: {reason}")]
    Stopped { endpoint: String, reason: String },
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
}

struct Endpoint {
    address: String,
    service: VersionedService,
    listener: PlatformListener,
}

/// Every endpoint bound and ready to serve.
pub struct BoundServer {
    endpoints: Vec<Endpoint>,
    timing: Timing,
}

/// Bind every endpoint of `config` (all or nothing: the first failure is
/// returned and endpoints bound so far are released).
pub fn bind(config: &Config, host: &Host) -> Result<BoundServer, ServeError> {
    #[cfg(windows)]
    let sd = match &config.transport {
        Transport::NamedPipes { sddl } => std::sync::Arc::new(
            crate::transport::windows::SecurityDescriptor::from_sddl(sddl).map_err(|source| {
                ServeError::Bind {
                    endpoint: format!("pipe security descriptor {sddl:?}"),
                    source,
                }
            })?,
        ),
    };
    #[cfg(unix)]
    {
        let Transport::UnixSockets { dir, .. } = &config.transport;
        crate::transport::unix::prepare_dir(dir).map_err(|source| ServeError::Bind {
            endpoint: dir.display().to_string(),
            source,
        })?;
    }
    let mut endpoints = Vec::with_capacity(config.versions.len());
    for &version in &config.versions {
        let (address, listener) = match &config.transport {
            #[cfg(unix)]
            Transport::UnixSockets { dir, mode } => {
                let path = crate::transport::unix::socket_path(dir, &version.endpoint_name());
                let address = path.display().to_string();
                let l = PlatformListener::bind(&path, *mode);
                (address, l)
            }
            #[cfg(windows)]
            Transport::NamedPipes { .. } => {
                let address = version.pipe_name();
                let l = PlatformListener::bind(&address, sd.clone());
                (address, l)
            }
        };
        let listener = listener.map_err(|source| ServeError::Bind {
            endpoint: address.clone(),
            source,
        })?;
        let service = groups::service(host, version, config.log_requests);
        endpoints.push(Endpoint {
            address,
            service,
            listener,
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
        },
    })
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
            let address = ep.address.clone();
            let options = options.clone();
            set.spawn(async move {
                accept_loop(
                    &ep.address,
                    ep.listener,
                    ep.service,
                    token,
                    t.drain,
                    options,
                )
                .await;
                address
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
    shutdown: CancellationToken,
    drain: Duration,
    options: http2::Options,
) where
    L::Io: http2::Io,
{
    let mut connections = JoinSet::new();
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
                let options = options.clone();
                connections.spawn(http2::serve(io, service.clone(), options, shutdown.clone()));
            }
            Err(e) => {
                // E.g. out of file descriptors: keep serving, but do not spin.
                tracing::warn!(endpoint = address, error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    // Stop accepting (the listener goes away first); every connection has
    // seen the cancellation, sends GOAWAY and ends once its calls are
    // answered.
    drop(listener);
    let drained = tokio::time::timeout(drain, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            endpoint = address,
            timeout = ?drain,
            "in-flight calls did not finish in time; closing their connections"
        );
        connections.shutdown().await;
    }
}
