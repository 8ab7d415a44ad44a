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
//! Jobs are bounded: at most [`PER_UID`] per uid and [`AT_ONCE`] in all
//! hold a thread, so a caller that connects in a loop spends its own slots
//! and no one else's (the uid's slot is taken first: a connection waiting
//! for it holds no global slot); a connection waiting for a slot waits on its task
//! (no thread), within the same time bound.

use super::Caller;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// How long a connection waits for its caller's identity.
pub const IDENTIFY_WITHIN: Duration = Duration::from_secs(2);

/// Identification jobs holding a thread, per uid.
pub const PER_UID: usize = 4;

/// Identification jobs holding a thread, in all.
pub const AT_ONCE: usize = 64;

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

/// `f` on the blocking pool, in a slot of `uid`'s and one of the
/// process's; `None`: the pool or the slots are gone.
pub(super) async fn blocking<R: Send + 'static>(
    uid: Option<u32>,
    f: impl FnOnce() -> R + Send + 'static,
) -> Option<R> {
    let (all, own) = take_slots(uid).await?;
    tokio::task::spawn_blocking(move || {
        let _slots = (all, own);
        f()
    })
    .await
    .ok()
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
                blocking(uid, move || super::windows::identify_pid(pid, &process)).await
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

/// A slot of `uid`'s, then one of the process's: the uid's first, so a
/// connection waiting for its uid's slot holds nothing of anyone else's,
/// and one uid holds at most [`PER_UID`] of the [`AT_ONCE`] global slots
/// however many connections it opens.
async fn take_slots(
    uid: Option<u32>,
) -> Option<(
    tokio::sync::OwnedSemaphorePermit,
    tokio::sync::OwnedSemaphorePermit,
)> {
    let own = uid_slots(uid).acquire_owned().await.ok()?;
    let all = slots().clone().acquire_owned().await.ok()?;
    Some((all, own))
}

fn slots() -> &'static Arc<Semaphore> {
    static ALL: OnceLock<Arc<Semaphore>> = OnceLock::new();
    ALL.get_or_init(|| Arc::new(Semaphore::new(AT_ONCE)))
}

/// The slots of one uid (callers without credentials share one set).
fn uid_slots(uid: Option<u32>) -> Arc<Semaphore> {
    static BY_UID: Mutex<Option<HashMap<Option<u32>, Arc<Semaphore>>>> = Mutex::new(None);
    let mut g = BY_UID.lock().unwrap_or_else(|p| p.into_inner());
    let map = g.get_or_insert_with(HashMap::new);
    if map.len() >= 1024 {
        // Sets nobody holds or waits for.
        map.retain(|_, s| Arc::strong_count(s) > 1 || s.available_permits() < PER_UID);
    }
    map.entry(uid)
        .or_insert_with(|| Arc::new(Semaphore::new(PER_UID)))
        .clone()
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[tokio::test]
    async fn one_uid_cannot_hold_every_global_slot() {
        // One uid opens many more connections than there are global
        // slots, and none of its jobs ends (a hash that takes long).
        let hog = Some(3_999_999_001);
        let (tx, _) = tokio::sync::broadcast::channel::<()>(1);
        let mut held = Vec::new();
        for _ in 0..(AT_ONCE + 16) {
            let mut stop = tx.subscribe();
            held.push(tokio::spawn(async move {
                let _slots = take_slots(hog).await;
                let _ = stop.recv().await;
            }));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        // Another uid still gets its slots at once.
        let other = tokio::time::timeout(Duration::from_secs(1), take_slots(Some(3_999_999_002)))
            .await
            .expect("another uid's identification waited for the hog's slots");
        assert!(other.is_some());
        drop(other);
        tx.send(()).unwrap();
        for h in held {
            h.await.unwrap();
        }
    }

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
