//! The policy file and its reloads: on SIGHUP (Unix) and when the file
//! changes on disk (its size, modification time or, on Unix, inode differ;
//! looked at every [`POLL`]). A file that fails to parse on reload leaves
//! the current policy in force, and says why in the log.

use super::{Policy, PolicyError};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};
use tokio_util::sync::CancellationToken;

/// How often the file is looked at.
pub const POLL: Duration = Duration::from_secs(1);

/// Reading the policy file failed.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read the caller policy {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid caller policy {path}: {source}")]
    Invalid {
        path: String,
        #[source]
        source: PolicyError,
    },
}

/// What identifies one version of the file.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
    #[cfg(unix)]
    ino: u64,
}

fn stamp(path: &Path) -> Option<Stamp> {
    let m = std::fs::metadata(path).ok()?;
    Some(Stamp {
        len: m.len(),
        modified: m.modified().ok(),
        #[cfg(unix)]
        ino: std::os::unix::fs::MetadataExt::ino(&m),
    })
}

/// The policy file and the policy in force.
#[derive(Debug)]
pub struct PolicyFile {
    path: PathBuf,
    current: RwLock<Arc<Policy>>,
    seen: Mutex<Option<Stamp>>,
}

impl PolicyFile {
    /// Read and parse `path` (start-up: an error is fatal).
    pub fn load(path: &Path) -> Result<Arc<PolicyFile>, LoadError> {
        let seen = stamp(path);
        let policy = read(path)?;
        Ok(Arc::new(PolicyFile {
            path: path.to_path_buf(),
            current: RwLock::new(Arc::new(policy)),
            seen: Mutex::new(seen),
        }))
    }

    /// The policy in force.
    pub fn current(&self) -> Arc<Policy> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Re-read the file (`why` goes in the log). On error the policy in
    /// force stays, and the error is returned.
    pub fn reload(&self, why: &str) -> Result<(), LoadError> {
        *self.seen.lock().unwrap_or_else(|p| p.into_inner()) = stamp(&self.path);
        match read(&self.path) {
            Ok(p) => {
                tracing::info!(path = %self.path.display(), reason = why, entries = p.len(), "caller policy reloaded");
                *self.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(p);
                Ok(())
            }
            Err(e) => {
                tracing::error!(path = %self.path.display(), reason = why, error = %e, "caller policy NOT reloaded; the previous policy stays in force");
                Err(e)
            }
        }
    }

    /// Reload if the file changed since it was last read.
    pub fn reload_if_changed(&self) {
        let now = stamp(&self.path);
        let changed = *self.seen.lock().unwrap_or_else(|p| p.into_inner()) != now;
        if changed {
            let _ = self.reload("file changed");
        }
    }
}

fn read(path: &Path) -> Result<Policy, LoadError> {
    let text = std::fs::read_to_string(path).map_err(|source| LoadError::Read {
        path: path.display().to_string(),
        source,
    })?;
    Policy::parse(&text).map_err(|source| LoadError::Invalid {
        path: path.display().to_string(),
        source,
    })
}

/// Reload `file` on SIGHUP (Unix) and when it changes, until `token` is
/// cancelled. The SIGHUP handler is installed before this returns its
/// future, so a SIGHUP sent once the proxy said it is ready is not lost.
pub fn watch(
    file: Arc<PolicyFile>,
    token: CancellationToken,
) -> std::io::Result<impl std::future::Future<Output = ()> + Send> {
    #[cfg(unix)]
    let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;
    Ok(async move {
        let mut tick = tokio::time::interval(POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            #[cfg(unix)]
            let hangup = hup.recv();
            #[cfg(not(unix))]
            let hangup = std::future::pending::<Option<()>>();
            tokio::select! {
                _ = token.cancelled() => break,
                _ = hangup => {
                    let f = file.clone();
                    let _ = tokio::task::spawn_blocking(move || f.reload("SIGHUP")).await;
                }
                _ = tick.tick() => {
                    let f = file.clone();
                    let _ = tokio::task::spawn_blocking(move || f.reload_if_changed()).await;
                }
            }
        }
    })
}
