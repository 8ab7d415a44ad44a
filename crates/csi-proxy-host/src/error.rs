//! The one error type of the host library.
//!
//! Variants name the *kind* of failure; the gRPC layer maps each kind to a
//! status code in exactly one place (`csi_proxy_server::status`).

use std::io;

/// Result of every host operation.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A failed host operation.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request itself is malformed (bad path syntax, bad id, bad number).
    #[error("{0}")]
    InvalidArgument(String),
    /// The request is well-formed but not allowed (outside the allowed roots,
    /// escapes through a link, touches an allowed root itself).
    #[error("{0}")]
    PermissionDenied(String),
    /// A named object (path, disk, volume, service) does not exist.
    #[error("{0}")]
    NotFound(String),
    /// The object to create exists already and is not what was asked for.
    #[error("{0}")]
    AlreadyExists(String),
    /// The host is not in a state where the operation can be done.
    #[error("{0}")]
    FailedPrecondition(String),
    /// The operation is not available (no backend on this OS, or not yet built).
    #[error("{0}")]
    Unimplemented(String),
    /// An unexpected failure of the host.
    #[error("{0}")]
    Internal(String),
    /// An OS call failed; `op` names the operation, `path` its subject.
    #[error("{op} {path:?}: {source}")]
    Io {
        op: &'static str,
        path: String,
        #[source]
        source: io::Error,
    },
}

impl Error {
    /// An [`Error::Io`] for `op` on `path`.
    pub fn io(op: &'static str, path: impl Into<String>, source: io::Error) -> Self {
        Error::Io {
            op,
            path: path.into(),
            source,
        }
    }

    /// The operation is not implemented by this host backend.
    pub fn unimplemented(group: &str, method: &str) -> Self {
        Error::Unimplemented(format!(
            "{group} API: {method} is not implemented by this csi-proxy host backend yet"
        ))
    }
}
