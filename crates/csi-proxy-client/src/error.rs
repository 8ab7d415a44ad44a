//! The error type of this crate.

use csi_proxy_api::{ApiVersion, Group};
use std::fmt;
use std::io;
use std::path::PathBuf;
use std::time::Duration;

/// `Result` with this crate's [`enum@Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a connection to a csi-proxy endpoint could not be made.
///
/// Errors of the calls themselves are `tonic::Status` values returned by
/// the generated clients; this type covers configuration and connecting.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The group/version is not one of the 23 in
    /// [`csi_proxy_api::API_VERSIONS`].
    #[error("unknown API version {group}/{version}: csi-proxy serves {known}")]
    UnknownVersion {
        /// The group asked for.
        group: Group,
        /// The version asked for.
        version: String,
        /// The versions of `group` that exist, oldest first.
        known: Known,
    },

    /// The endpoint does not exist: the proxy is not running, serves other
    /// groups/versions (`-api-groups`), or uses another socket directory.
    #[error("{api} is not served: no endpoint {}", endpoint.display())]
    NotServed {
        /// The group/version.
        api: ApiVersion,
        /// The socket path or pipe name that does not exist.
        endpoint: PathBuf,
    },

    /// Every instance of the named pipe stayed busy (connected to other
    /// clients) while this client retried.
    #[error(
        "{api}: every instance of pipe {} stayed busy for {waited:?} ({attempts} attempts)",
        endpoint.display()
    )]
    PipeBusy {
        /// The group/version.
        api: ApiVersion,
        /// The pipe name.
        endpoint: PathBuf,
        /// How long this client retried.
        waited: Duration,
        /// How many times it tried to open the pipe.
        attempts: u32,
    },

    /// The endpoint exists but opening a connection to it failed, e.g. a
    /// stale socket nobody listens on (connection refused) or missing
    /// permissions.
    #[error("cannot connect to {api} at {}: {source}", endpoint.display())]
    Connect {
        /// The group/version.
        api: ApiVersion,
        /// The socket path or pipe name.
        endpoint: PathBuf,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },

    /// The connection was opened, but setting up gRPC on it failed.
    #[error("gRPC set-up with {api} at {} failed: {source}", endpoint.display())]
    Transport {
        /// The group/version.
        api: ApiVersion,
        /// The socket path or pipe name.
        endpoint: PathBuf,
        /// tonic's error.
        #[source]
        source: tonic::transport::Error,
    },

    /// Connecting took longer than the connect timeout.
    #[error(
        "connecting to {api} at {} timed out after {timeout:?}",
        endpoint.display()
    )]
    ConnectTimeout {
        /// The group/version.
        api: ApiVersion,
        /// The socket path or pipe name.
        endpoint: PathBuf,
        /// The connect timeout.
        timeout: Duration,
    },

    /// Version fallback found no version of the group that accepts a
    /// connection. `attempts` holds one error per version tried, in the
    /// order they were tried.
    #[error(
        "no {group} endpoint of csi-proxy accepts connections: {}",
        Attempts(attempts)
    )]
    NoVersionServed {
        /// The group.
        group: Group,
        /// Why each version failed, in the order they were tried.
        attempts: Vec<Error>,
    },
}

impl Error {
    /// Whether this error means "this endpoint is not served" (as opposed
    /// to an endpoint that exists but misbehaves). For
    /// [`Error::NoVersionServed`]: whether no version of the group is served.
    #[must_use]
    pub fn is_not_served(&self) -> bool {
        match self {
            Error::NotServed { .. } => true,
            Error::NoVersionServed { attempts, .. } => attempts.iter().all(Error::is_not_served),
            _ => false,
        }
    }

    /// The group/version this error is about, if it is about one.
    #[must_use]
    pub fn api(&self) -> Option<ApiVersion> {
        match self {
            Error::NotServed { api, .. }
            | Error::PipeBusy { api, .. }
            | Error::Connect { api, .. }
            | Error::Transport { api, .. }
            | Error::ConnectTimeout { api, .. } => Some(*api),
            Error::UnknownVersion { .. } | Error::NoVersionServed { .. } => None,
        }
    }
}

/// The known versions of a group, for [`Error::UnknownVersion`]'s message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Known(pub Vec<&'static str>);

impl fmt::Display for Known {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.join(", "))
    }
}

struct Attempts<'a>(&'a [Error]);

impl fmt::Display for Attempts<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("no version to try");
        }
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}
