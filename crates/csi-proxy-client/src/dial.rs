//! Opening one raw connection to an endpoint: a Unix socket or a named pipe.

use hyper_util::rt::TokioIo;
use std::io;
use std::path::Path;
use std::time::Duration;

/// Why a raw connection could not be opened.
#[derive(Debug)]
pub(crate) enum DialError {
    /// The operating system's error (not found, refused, denied, ...).
    Io(io::Error),
    /// Every pipe instance stayed busy for `waited` (Windows only).
    #[cfg_attr(not(windows), allow(dead_code))]
    Busy { waited: Duration, attempts: u32 },
}

impl From<DialError> for io::Error {
    fn from(e: DialError) -> io::Error {
        match e {
            DialError::Io(e) => e,
            DialError::Busy { waited, attempts } => io::Error::new(
                io::ErrorKind::ResourceBusy,
                format!("every pipe instance stayed busy for {waited:?} ({attempts} attempts)"),
            ),
        }
    }
}

/// A connected Unix socket.
#[cfg(unix)]
pub(crate) type Io = TokioIo<tokio::net::UnixStream>;

/// Connect to the Unix socket at `path`. `_busy_wait` and `_trust` are for
/// pipes only.
#[cfg(unix)]
pub(crate) async fn dial(
    path: &Path,
    _busy_wait: Duration,
    _trust: &crate::trust::ServerTrust,
) -> Result<Io, DialError> {
    tokio::net::UnixStream::connect(path)
        .await
        .map(TokioIo::new)
        .map_err(DialError::Io)
}

/// A connected named pipe client.
#[cfg(windows)]
pub(crate) type Io = TokioIo<tokio::net::windows::named_pipe::NamedPipeClient>;

/// Pause between two attempts to open a busy pipe.
#[cfg(windows)]
pub(crate) const PIPE_BUSY_RETRY_DELAY: Duration = Duration::from_millis(10);

/// At most this many attempts to open a busy pipe, however long `busy_wait`.
#[cfg(windows)]
pub(crate) const PIPE_BUSY_MAX_ATTEMPTS: u32 = 1000;

/// Open the named pipe `path`. While every instance of the pipe is
/// connected to other clients (`ERROR_PIPE_BUSY`) retry, pausing
/// [`PIPE_BUSY_RETRY_DELAY`] in between, for up to `busy_wait` and at most
/// [`PIPE_BUSY_MAX_ATTEMPTS`] attempts. (The server creates its next
/// instance right after a client connects, so busy spells are short.)
///
/// Before it is handed out, the pipe's server process is checked against
/// `trust` (`crate::trust`): nothing is sent to a pipe served by anyone else.
#[cfg(windows)]
pub(crate) async fn dial(
    path: &Path,
    busy_wait: Duration,
    trust: &crate::trust::ServerTrust,
) -> Result<Io, DialError> {
    use tokio::net::windows::named_pipe::ClientOptions;
    use windows_sys::Win32::Foundation::ERROR_PIPE_BUSY;

    let start = tokio::time::Instant::now();
    let mut attempts = 0;
    loop {
        attempts += 1;
        match ClientOptions::new().open(path) {
            Ok(client) => {
                crate::pipe_server::check(&client, trust).map_err(DialError::Io)?;
                return Ok(TokioIo::new(client));
            }
            Err(e) if e.raw_os_error() == Some(ERROR_PIPE_BUSY as i32) => {
                let waited = start.elapsed();
                if waited >= busy_wait || attempts >= PIPE_BUSY_MAX_ATTEMPTS {
                    return Err(DialError::Busy { waited, attempts });
                }
                tokio::time::sleep(PIPE_BUSY_RETRY_DELAY.min(busy_wait - waited)).await;
            }
            Err(e) => return Err(DialError::Io(e)),
        }
    }
}
