//! When and where a caller is identified: never in the accept loop, never
//! on an async worker.
//!
//! The accept loop takes only the [`Peer`]: the kernel's credentials of the
//! socket (`SO_PEERCRED`) or the pipe client's pid, and a duplicate of the
//! socket (no I/O). The connection's own task then runs the rest (reading
//! `/proc`, opening the process) on the blocking pool, and waits for it at
//! most [`IDENTIFY_WITHIN`]. The executable's digest is computed on a
//! thread of its own and waited for without a thread or a slot
//! (`digest::exe_digest`). A caller not
//! identified in time keeps only its kernel credentials and is marked
//! incomplete ([`Caller::incomplete`]): a policy rule on any other field
//! refuses it, and its audit lines say why. The job itself goes on (a
//! digest it computes is cached for the next connection).
//!
//! Jobs are bounded ([`super::slots`]): at most 4 per uid and 64 in all
//! hold a thread, so a caller that connects in a loop spends its own slots
//! and no one else's (the uid's slot is taken first: a connection waiting
//! for it holds no global slot); a connection waiting for a slot waits on its task
//! (no thread), within the same time bound.

use super::Caller;
use std::time::{Duration, Instant};

/// How long a connection waits for its caller's identity.
pub const IDENTIFY_WITHIN: Duration = Duration::from_secs(2);

/// The audit text of a caller not identified in time.
pub const TIMED_OUT: &str = "not identified in time: only the kernel credentials are known";

/// What is taken of a connection when it is accepted.
pub struct Peer {
    /// pid, uid, gid from the kernel (what is known at once).
    creds: Caller,
    /// A duplicate of the socket.
    #[cfg(target_os = "linux")]
    source: Option<std::os::fd::OwnedFd>,
    /// When it was accepted, in clock ticks since boot (`super::started`).
    #[cfg(target_os = "linux")]
    accepted: Option<u64>,
    /// The client process as found at accept: its start time
    /// (`super::started`).
    #[cfg(windows)]
    process: super::windows::Accepted,
}

impl Peer {
    /// The kernel credentials only.
    pub fn credentials(&self) -> Caller {
        self.creds.clone()
    }
}

/// The peer of a Unix-socket connection: its credentials and a duplicate
/// of the socket (for the pidfd and `/proc` reads later).
#[cfg(unix)]
pub fn of_unix_stream(stream: &tokio::net::UnixStream) -> Peer {
    let creds = match stream.peer_cred() {
        Ok(c) => Caller {
            pid: c
                .pid()
                .and_then(|p| u32::try_from(p).ok())
                .filter(|p| *p > 0),
            uid: Some(c.uid()),
            gid: Some(c.gid()),
            ..Caller::default()
        },
        Err(_) => Caller::default(),
    };
    Peer {
        creds,
        #[cfg(target_os = "linux")]
        source: {
            use std::os::fd::AsFd;
            stream.as_fd().try_clone_to_owned().ok()
        },
        #[cfg(target_os = "linux")]
        accepted: super::linux::boot_ticks(),
    }
}

/// The peer of a named-pipe connection: the client's pid, and its
/// process's creation time through a handle opened here (two system calls,
/// no I/O).
#[cfg(windows)]
pub fn of_pipe(pipe: &tokio::net::windows::named_pipe::NamedPipeServer) -> Peer {
    let pid = super::windows::client_pid(pipe);
    Peer {
        creds: Caller {
            pid,
            ..Caller::default()
        },
        process: super::windows::accepted(pid),
    }
}

/// The whole identity of `peer`, read on the blocking pool within
/// [`IDENTIFY_WITHIN`].
pub async fn identify(peer: Peer) -> Caller {
    let until = Instant::now() + IDENTIFY_WITHIN;
    let creds = peer.creds.clone();
    match tokio::time::timeout_at(until.into(), read(peer, until)).await {
        Ok(Some(c)) => c,
        _ => {
            tracing::debug!(pid = ?creds.pid, uid = ?creds.uid, "caller not identified in time");
            Caller {
                incomplete: Some(TIMED_OUT),
                ..creds
            }
        }
    }
}

/// The identity, with its blocking parts in slots.
async fn read(peer: Peer, until: Instant) -> Option<Caller> {
    let uid = peer.creds.uid;
    #[cfg(target_os = "linux")]
    {
        match peer.source {
            Some(fd) => super::linux::identify(fd, until, peer.accepted, uid).await,
            None => Some(peer.creds),
        }
    }
    #[cfg(windows)]
    {
        let _ = until;
        match peer.creds.pid {
            Some(pid) => {
                let process = peer.process;
                super::slots::blocking(uid, move || super::windows::identify_pid(pid, &process))
                    .await
            }
            None => Some(peer.creds),
        }
    }
    #[cfg(not(any(target_os = "linux", windows)))]
    {
        let _ = (until, uid);
        Some(peer.creds)
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_socket_pair_is_identified_off_the_worker() {
        let (a, _b) = tokio::net::UnixStream::pair().unwrap();
        let peer = of_unix_stream(&a);
        assert_eq!(peer.credentials().pid, Some(std::process::id()));
        let c = identify(peer).await;
        assert_eq!(c.incomplete, None);
        let exe = std::env::current_exe().unwrap();
        assert_eq!(c.exe.as_deref(), Some(exe.to_str().unwrap()));
    }
}
