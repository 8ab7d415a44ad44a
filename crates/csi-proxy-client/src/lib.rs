//! Typed Rust client for csi-proxy.
//!
//! csi-proxy serves every API group/version on its own endpoint: the Unix
//! socket `<socket-dir>/csi-proxy-<group>-<version>.sock` on Linux, the
//! named pipe `\\.\pipe\csi-proxy-<group>-<version>` on Windows. This crate
//! finds those endpoints, connects a tonic channel to them and hands out the
//! generated clients of [`csi_proxy_api`]:
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use csi_proxy_client::Client;
//! use csi_proxy_api::filesystem::v1::PathExistsRequest;
//!
//! let client = Client::builder()
//!     .timeout(std::time::Duration::from_secs(30)) // sent as grpc-timeout
//!     .build()?;
//! let mut fs = client.connect_filesystem_v1().await?;
//! let exists = fs
//!     .path_exists(PathExistsRequest { path: "/var/lib/kubelet/pods".into() })
//!     .await?
//!     .into_inner()
//!     .exists;
//! # Ok(()) }
//! ```
//!
//! One accessor exists per group/version (`connect_disk_v1`,
//! `connect_volume_v2alpha1`, ...), and one per group that picks the version
//! ([`Client::connect_filesystem`] returns an [`AnyFilesystemClient`]).
//!
//! # Version fallback
//!
//! [`Client::connect_newest`] tries the versions of a group in the order of
//! the client's [`VersionPreference`] and returns the first whose endpoint
//! exists and accepts a connection, with the version it picked. The default,
//! [`VersionPreference::Stable`], is Kubernetes' version priority: stable
//! before beta before alpha, so filesystem `v1` is preferred over the newer
//! `v2alpha1`; alpha versions are still used when nothing more stable is
//! served (iSCSI and System only have alpha versions). Opt in to
//! [`VersionPreference::Newest`] to prefer `v2alpha1`.
//!
//! # Deadlines
//!
//! [`Builder::timeout`] is a default deadline for every call, sent to the
//! proxy as the `grpc-timeout` header (see [`ProxyChannel`]). Note that
//! tonic's own `Endpoint::timeout` only limits the wait on the client side
//! and does not send the header, which is why this crate adds it.

#![warn(missing_docs)]

mod channel;
mod dial;
mod endpoint;
mod error;
#[cfg(windows)]
mod pipe_server;
mod status;
pub mod trust;
mod typed;

pub use channel::{grpc_timeout_value, ProxyChannel, ResponseFuture};
#[cfg(unix)]
pub use endpoint::default_socket_dir;
pub use endpoint::{pipe_path, socket_path, VersionPreference, DEFAULT_PIPE_PREFIX};
pub use error::{Error, Known, Result};
pub use trust::ServerTrust;
pub use typed::*;

pub use csi_proxy_api::{ApiVersion, Group};

use csi_proxy_api::{find, API_VERSIONS};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tonic::transport::Endpoint;

/// Default limit for opening a connection (including retries while a pipe
/// is busy).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Configures a [`Client`]; see [`Client::builder`].
#[derive(Clone, Debug)]
pub struct Builder {
    socket_dir: Option<PathBuf>,
    pipe_prefix: String,
    endpoints: Vec<(Group, String, PathBuf)>,
    connect_timeout: Duration,
    timeout: Option<Duration>,
    preference: VersionPreference,
    trust: ServerTrust,
}

impl Default for Builder {
    fn default() -> Builder {
        Builder {
            socket_dir: None,
            pipe_prefix: DEFAULT_PIPE_PREFIX.to_string(),
            endpoints: Vec::new(),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            timeout: None,
            preference: VersionPreference::default(),
            trust: ServerTrust::default(),
        }
    }
}

impl Builder {
    /// The directory of the proxy's Unix sockets (its `-socket-dir`).
    /// Default: [`default_socket_dir`]. Unix only; ignored on Windows.
    #[must_use]
    pub fn socket_dir(mut self, dir: impl Into<PathBuf>) -> Builder {
        self.socket_dir = Some(dir.into());
        self
    }

    /// The prefix of the pipe names: the pipe of a group/version is
    /// `<prefix><group>-<version>`. Default: [`DEFAULT_PIPE_PREFIX`],
    /// `\\.\pipe\csi-proxy-`. Windows only; ignored on Unix.
    #[must_use]
    pub fn pipe_prefix(mut self, prefix: impl Into<String>) -> Builder {
        self.pipe_prefix = prefix.into();
        self
    }

    /// The endpoint of one group/version: a socket path on Unix, a pipe
    /// name on Windows. It replaces the one computed from the socket
    /// directory or pipe prefix. An unknown version makes
    /// [`Builder::build`] fail.
    #[must_use]
    pub fn endpoint_path(
        mut self,
        group: Group,
        version: impl Into<String>,
        path: impl Into<PathBuf>,
    ) -> Builder {
        self.endpoints.push((group, version.into(), path.into()));
        self
    }

    /// Limit for opening one connection, including retries while every
    /// instance of a pipe is busy. Default [`DEFAULT_CONNECT_TIMEOUT`].
    #[must_use]
    pub fn connect_timeout(mut self, timeout: Duration) -> Builder {
        self.connect_timeout = timeout;
        self
    }

    /// Default deadline of every call, sent as `grpc-timeout`. A call that
    /// sets its own deadline (`tonic::Request::set_timeout`) keeps it.
    /// Default: none.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Builder {
        self.timeout = Some(timeout);
        self
    }

    /// The order in which [`Client::connect_newest`] tries versions.
    /// Default: [`VersionPreference::Stable`].
    #[must_use]
    pub fn version_preference(mut self, preference: VersionPreference) -> Builder {
        self.preference = preference;
        self
    }

    /// Which processes may serve the pipes (Windows; ignored on Unix):
    /// by default SYSTEM and elevated administrators only
    /// ([`trust`](crate::trust)). A pipe served by another process fails to
    /// connect, naming its pid, before anything is sent.
    #[must_use]
    pub fn server_trust(mut self, trust: ServerTrust) -> Builder {
        self.trust = trust;
        self
    }

    /// The client. Fails if [`Builder::endpoint_path`] named a version that
    /// does not exist.
    pub fn build(self) -> Result<Client> {
        let mut endpoints = HashMap::new();
        for (group, version, path) in self.endpoints {
            let api = known(group, &version)?;
            endpoints.insert(api, path);
        }
        #[cfg(unix)]
        let socket_dir = self.socket_dir.unwrap_or_else(default_socket_dir);
        #[cfg(not(unix))]
        let socket_dir = self.socket_dir.unwrap_or_default();
        Ok(Client {
            socket_dir,
            pipe_prefix: self.pipe_prefix,
            endpoints,
            connect_timeout: self.connect_timeout,
            timeout: self.timeout,
            preference: self.preference,
            trust: self.trust,
        })
    }
}

/// The entry of `API_VERSIONS` for `group`/`version`, or
/// [`Error::UnknownVersion`].
fn known(group: Group, version: &str) -> Result<ApiVersion> {
    find(group, version).ok_or_else(|| Error::UnknownVersion {
        group,
        version: version.to_string(),
        known: Known(
            API_VERSIONS
                .iter()
                .filter(|a| a.group == group)
                .map(|a| a.version)
                .collect(),
        ),
    })
}

/// Where the proxy's endpoints are and how to call them. Cheap to clone;
/// it holds configuration only, each `connect_*` opens a new connection.
#[derive(Clone, Debug)]
pub struct Client {
    #[cfg_attr(not(unix), allow(dead_code))]
    socket_dir: PathBuf,
    #[cfg_attr(not(windows), allow(dead_code))]
    pipe_prefix: String,
    endpoints: HashMap<ApiVersion, PathBuf>,
    connect_timeout: Duration,
    timeout: Option<Duration>,
    preference: VersionPreference,
    #[cfg_attr(not(windows), allow(dead_code))]
    trust: ServerTrust,
}

impl Default for Client {
    /// [`Client::new`].
    fn default() -> Client {
        Client::new()
    }
}

impl Client {
    /// A client for the default endpoints, without a default deadline.
    #[must_use]
    pub fn new() -> Client {
        Builder::default()
            .build()
            .expect("a builder without endpoint overrides cannot fail")
    }

    /// Configure a client.
    #[must_use]
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// The endpoint of `api`: its socket path on Unix, its pipe name on
    /// Windows (an [`Builder::endpoint_path`] override if there is one).
    #[must_use]
    pub fn endpoint(&self, api: ApiVersion) -> PathBuf {
        if let Some(p) = self.endpoints.get(&api) {
            return p.clone();
        }
        #[cfg(windows)]
        return pipe_path(&self.pipe_prefix, api);
        #[cfg(not(windows))]
        return socket_path(&self.socket_dir, api);
    }

    /// The socket directory (Unix).
    #[cfg(unix)]
    #[must_use]
    pub fn socket_dir(&self) -> &Path {
        &self.socket_dir
    }

    /// The default deadline of calls, if any.
    #[must_use]
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// The order in which [`Client::connect_newest`] tries versions.
    #[must_use]
    pub fn version_preference(&self) -> VersionPreference {
        self.preference
    }

    /// The versions of `group`, in the order [`Client::connect_newest`]
    /// tries them.
    #[must_use]
    pub fn versions(&self, group: Group) -> Vec<ApiVersion> {
        self.preference.order(group)
    }

    /// Connect to the endpoint of `api`.
    pub async fn connect(&self, api: ApiVersion) -> Result<ProxyChannel> {
        let api = known(api.group, api.version)?;
        let endpoint = self.endpoint(api);
        let channel = self.open(api, &endpoint).await?;
        Ok(ProxyChannel::new(channel, api, endpoint, self.timeout))
    }

    /// Connect to the endpoint of `group`/`version`, e.g.
    /// `connect_version(Group::Disk, "v1beta3")`.
    pub async fn connect_version(&self, group: Group, version: &str) -> Result<ProxyChannel> {
        self.connect(known(group, version)?).await
    }

    /// Version fallback: try the versions of `group` in the order of the
    /// client's [`VersionPreference`] and return the first version whose
    /// endpoint exists and accepts a connection, with that connection.
    /// Pass the channel to the generated client of the returned version (or
    /// use the per-group accessors such as [`Client::connect_filesystem`]).
    ///
    /// Fails with [`Error::NoVersionServed`], listing why each version
    /// failed, if none does.
    pub async fn connect_newest(&self, group: Group) -> Result<(ApiVersion, ProxyChannel)> {
        let mut attempts = Vec::new();
        for api in self.versions(group) {
            match self.connect(api).await {
                Ok(channel) => return Ok((api, channel)),
                Err(e) => attempts.push(e),
            }
        }
        Err(Error::NoVersionServed { group, attempts })
    }

    /// Open a raw connection and set up a tonic channel on it, within the
    /// connect timeout. Later reconnects (after the connection broke) dial
    /// again.
    async fn open(&self, api: ApiVersion, endpoint: &Path) -> Result<tonic::transport::Channel> {
        let start = tokio::time::Instant::now();
        let timeout = self.connect_timeout;
        // Dialing does not block: a Unix connect fails at once when nobody
        // listens or the backlog is full, and opening a pipe is bounded by
        // the busy wait.
        let busy_wait = timeout;
        let first = dial::dial(endpoint, busy_wait, &self.trust)
            .await
            .map_err(|e| match e {
                dial::DialError::Io(source) if source.kind() == std::io::ErrorKind::NotFound => {
                    Error::NotServed {
                        api,
                        endpoint: endpoint.to_path_buf(),
                    }
                }
                dial::DialError::Io(source) => Error::Connect {
                    api,
                    endpoint: endpoint.to_path_buf(),
                    source,
                },
                dial::DialError::Busy { waited, attempts } => Error::PipeBusy {
                    api,
                    endpoint: endpoint.to_path_buf(),
                    waited,
                    attempts,
                },
            })?;
        // The probe connection becomes the channel's first connection.
        let first = Arc::new(Mutex::new(Some(first)));
        let path = endpoint.to_path_buf();
        let trust = self.trust.clone();
        let connector = tower::service_fn(move |_: http::Uri| {
            let ready = first.lock().ok().and_then(|mut f| f.take());
            let path = path.clone();
            let trust = trust.clone();
            async move {
                match ready {
                    Some(io) => Ok::<_, std::io::Error>(io),
                    None => Ok(dial::dial(&path, busy_wait, &trust).await?),
                }
            }
        });
        let tonic_endpoint = Endpoint::from_static("http://localhost").connect_timeout(timeout);
        let setup = tonic_endpoint.connect_with_connector(connector);
        match tokio::time::timeout_at(start + timeout, setup).await {
            Ok(Ok(channel)) => Ok(channel),
            Ok(Err(source)) => Err(Error::Transport {
                api,
                endpoint: endpoint.to_path_buf(),
                source,
            }),
            Err(_) => Err(Error::ConnectTimeout {
                api,
                endpoint: endpoint.to_path_buf(),
                timeout,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(group: Group, version: &str) -> ApiVersion {
        find(group, version).unwrap()
    }

    #[cfg(unix)]
    #[test]
    fn unix_endpoints() {
        let c = Client::builder().socket_dir("/s").build().unwrap();
        assert_eq!(c.socket_dir(), Path::new("/s"));
        for a in API_VERSIONS {
            assert_eq!(
                c.endpoint(a),
                Path::new("/s").join(format!("csi-proxy-{}-{}.sock", a.group, a.version))
            );
        }
        let c = Client::new();
        assert_eq!(c.socket_dir(), default_socket_dir());
        assert_eq!(
            c.endpoint(api(Group::Smb, "v1")),
            default_socket_dir().join("csi-proxy-smb-v1.sock")
        );
        // The pipe prefix does not matter on Unix.
        let c = Client::builder()
            .socket_dir("/s")
            .pipe_prefix("x")
            .build()
            .unwrap();
        assert_eq!(
            c.endpoint(api(Group::Smb, "v1")),
            Path::new("/s/csi-proxy-smb-v1.sock")
        );
    }

    #[cfg(windows)]
    #[test]
    fn windows_endpoints() {
        let c = Client::new();
        for a in API_VERSIONS {
            assert_eq!(c.endpoint(a), PathBuf::from(a.pipe_name()));
        }
        let c = Client::builder()
            .pipe_prefix(r"\\.\pipe\other-")
            .socket_dir("C:\\ignored")
            .build()
            .unwrap();
        assert_eq!(
            c.endpoint(api(Group::Disk, "v1")),
            PathBuf::from(r"\\.\pipe\other-disk-v1")
        );
    }

    #[test]
    fn endpoint_overrides() {
        let c = Client::builder()
            .socket_dir("/s")
            .pipe_prefix(r"\\.\pipe\p-")
            .endpoint_path(Group::Filesystem, "v1", "/custom/fs.sock")
            .endpoint_path(Group::Disk, "v1beta3", r"\\.\pipe\mine")
            .build()
            .unwrap();
        assert_eq!(
            c.endpoint(api(Group::Filesystem, "v1")),
            Path::new("/custom/fs.sock")
        );
        assert_eq!(
            c.endpoint(api(Group::Disk, "v1beta3")),
            Path::new(r"\\.\pipe\mine")
        );
        let other = c.endpoint(api(Group::Filesystem, "v1beta2"));
        if cfg!(windows) {
            assert_eq!(other, Path::new(r"\\.\pipe\p-filesystem-v1beta2"));
        } else {
            assert_eq!(other, Path::new("/s/csi-proxy-filesystem-v1beta2.sock"));
        }
        // The last override of one version wins.
        let c = Client::builder()
            .endpoint_path(Group::Smb, "v1", "/a")
            .endpoint_path(Group::Smb, "v1", "/b")
            .build()
            .unwrap();
        assert_eq!(c.endpoint(api(Group::Smb, "v1")), Path::new("/b"));
    }

    #[test]
    fn unknown_versions_are_rejected() {
        let e = Client::builder()
            .endpoint_path(Group::System, "v1", "/x")
            .build()
            .unwrap_err();
        assert!(matches!(
            e,
            Error::UnknownVersion {
                group: Group::System,
                ..
            }
        ));
        assert_eq!(
            e.to_string(),
            "unknown API version system/v1: csi-proxy serves v1alpha1"
        );
        let e = known(Group::Filesystem, "V1").unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown API version filesystem/V1: csi-proxy serves v1alpha1, v1beta1, v1beta2, v1, v2alpha1"
        );
        assert!(!e.is_not_served());
    }

    #[tokio::test]
    async fn connecting_to_an_unknown_version_fails_before_dialing() {
        let c = Client::new();
        let bogus = ApiVersion {
            group: Group::Disk,
            version: "v9",
        };
        let e = c.connect(bogus).await.unwrap_err();
        assert!(matches!(e, Error::UnknownVersion { .. }), "{e}");
        let e = c.connect_version(Group::Disk, "v9").await.unwrap_err();
        assert!(matches!(e, Error::UnknownVersion { .. }), "{e}");
    }

    #[test]
    fn builder_settings() {
        let c = Client::builder()
            .timeout(Duration::from_millis(250))
            .connect_timeout(Duration::from_secs(1))
            .version_preference(VersionPreference::Newest)
            .build()
            .unwrap();
        assert_eq!(c.timeout(), Some(Duration::from_millis(250)));
        assert_eq!(c.connect_timeout, Duration::from_secs(1));
        assert_eq!(c.version_preference(), VersionPreference::Newest);
        assert_eq!(c.versions(Group::Filesystem)[0].version, "v2alpha1");
        let c = Client::default();
        assert_eq!(c.timeout(), None);
        assert_eq!(c.connect_timeout, DEFAULT_CONNECT_TIMEOUT);
        assert_eq!(c.versions(Group::Filesystem)[0].version, "v1");
    }

    #[test]
    fn error_messages() {
        let fs1 = api(Group::Filesystem, "v1");
        let nf = Error::NotServed {
            api: fs1,
            endpoint: PathBuf::from("/s/csi-proxy-filesystem-v1.sock"),
        };
        assert_eq!(
            nf.to_string(),
            "filesystem/v1 is not served: no endpoint /s/csi-proxy-filesystem-v1.sock"
        );
        assert!(nf.is_not_served());
        assert_eq!(nf.api(), Some(fs1));
        let refused = Error::Connect {
            api: fs1,
            endpoint: PathBuf::from("/s/x.sock"),
            source: std::io::Error::from(std::io::ErrorKind::ConnectionRefused),
        };
        assert!(!refused.is_not_served());
        let all = Error::NoVersionServed {
            group: Group::Filesystem,
            attempts: vec![nf],
        };
        assert!(all.is_not_served());
        assert_eq!(
            all.to_string(),
            "no filesystem endpoint of csi-proxy accepts connections: \
             filesystem/v1 is not served: no endpoint /s/csi-proxy-filesystem-v1.sock"
        );
        let Error::NoVersionServed { mut attempts, .. } = all else {
            unreachable!()
        };
        attempts.push(refused);
        let mixed = Error::NoVersionServed {
            group: Group::Filesystem,
            attempts,
        };
        assert!(!mixed.is_not_served());
        assert!(mixed
            .to_string()
            .contains("; cannot connect to filesystem/v1 at /s/x.sock"));
        assert_eq!(mixed.api(), None);
    }
}
