//! The policy file and its reloads: on SIGHUP (Unix) and when the file
//! changes on disk (its size, modification time or, on Unix, inode differ;
//! looked at every [`POLL`]). A file that fails to parse on reload leaves
//! the current policy in force, and says why in the log.
//!
//! Only a regular file of at most [`MAX_BYTES`] is read (links to one are
//! followed, as a ConfigMap mount needs). It is opened without blocking
//! (`O_NONBLOCK`: a FIFO put in its place cannot hang the reloader) and
//! checked on the open handle before anything is read; a device or FIFO,
//! or a file past the cap, is refused and logged, and the policy in force
//! stays.

use super::{Policy, PolicyError};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};
use tokio_util::sync::CancellationToken;

/// How often the file is looked at.
pub const POLL: Duration = Duration::from_secs(1);
/// The largest policy file read.
pub const MAX_BYTES: u64 = 1 << 20;

/// Reading the policy file failed.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read the caller policy {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("refused to read the caller policy {path}: {why}")]
    Refused { path: String, why: String },
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
    let text = read_text(path)?;
    let policy = Policy::parse(&text).map_err(|source| LoadError::Invalid {
        path: path.display().to_string(),
        source,
    })?;
    crate::caller::set_hash_executables(policy.hashes_executables(), policy.digest_named());
    Ok(policy)
}

/// The file's text: a regular file of at most [`MAX_BYTES`], opened
/// without blocking and checked on its handle.
fn read_text(path: &Path) -> Result<String, LoadError> {
    use std::io::Read;
    let shown = || path.display().to_string();
    let io = |source| LoadError::Read {
        path: shown(),
        source,
    };
    let refused = |why: String| LoadError::Refused { path: shown(), why };
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(
        &mut options,
        libc::O_NONBLOCK | libc::O_NOCTTY,
    );
    let file = options.open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(refused(format!(
            "not a regular file ({})",
            kind_of(&meta.file_type())
        )));
    }
    if meta.len() > MAX_BYTES {
        return Err(refused(format!(
            "{} bytes, more than the {MAX_BYTES} a policy may have",
            meta.len()
        )));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(refused(format!(
            "grew past the {MAX_BYTES} bytes a policy may have while read"
        )));
    }
    String::from_utf8(bytes).map_err(|_| refused("not UTF-8 text".into()))
}

fn kind_of(t: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_char_device() || t.is_block_device() {
            return "a device";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    if t.is_dir() {
        "a directory"
    } else {
        "not a file"
    }
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
