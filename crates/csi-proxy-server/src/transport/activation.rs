//! Sockets handed over by systemd (socket activation, `sd_listen_fds(3)`).
//!
//! A `.socket` unit holds an endpoint's listening socket while the proxy
//! restarts: clients that connect meanwhile wait in its backlog instead of
//! finding no socket. systemd passes the sockets as descriptors 3, 4, ...
//! with `LISTEN_PID` (the process they are for), `LISTEN_FDS` (how many)
//! and `LISTEN_FDNAMES` (each one's `FileDescriptorName=`, colon-separated).
//! The name of a socket is the name of the endpoint it serves,
//! `csi-proxy-<group>-<version>`.
//!
//! Taken once, before any thread starts: the variables are removed (a
//! child must not take descriptors meant for us) and every descriptor is
//! marked close-on-exec. Each one must be a listening Unix stream socket
//! bound to a path; anything else is refused at start-up, and so is a name
//! that is no endpoint of this proxy.

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

/// The first descriptor systemd passes (`SD_LISTEN_FDS_START`).
const FIRST_FD: RawFd = 3;
/// More than any proxy has endpoints: a larger count is a broken
/// environment, not a configuration.
const MAX_FDS: usize = 1024;

/// One socket handed over: its name (`FileDescriptorName=`), the listening
/// socket and the path it is bound to.
#[derive(Debug)]
pub struct HandedSocket {
    pub name: String,
    pub fd: OwnedFd,
    pub path: PathBuf,
}

/// The sockets handed over to this process, by name (empty without socket
/// activation).
#[derive(Debug, Default)]
pub struct Handed {
    sockets: Vec<HandedSocket>,
    /// `LISTEN_PID` named this other process: its sockets were left alone.
    pub other_pid: Option<u32>,
}

impl Handed {
    /// No socket handed over: every endpoint binds its own.
    pub fn none() -> Handed {
        Handed::default()
    }

    pub fn is_empty(&self) -> bool {
        self.sockets.is_empty()
    }

    /// The names, in the order systemd passed them.
    pub fn names(&self) -> Vec<String> {
        self.sockets.iter().map(|s| s.name.clone()).collect()
    }

    pub fn sockets(&self) -> &[HandedSocket] {
        &self.sockets
    }

    /// Take the socket named `name`, if one was handed over.
    pub fn take(&mut self, name: &str) -> Option<HandedSocket> {
        let i = self.sockets.iter().position(|s| s.name == name)?;
        Some(self.sockets.remove(i))
    }
}

/// Why the handed-over sockets cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("socket activation: {0}")]
pub struct ActivationError(pub String);

static TAKEN: AtomicBool = AtomicBool::new(false);

/// Take the sockets systemd handed to this process and remove
/// `LISTEN_PID`, `LISTEN_FDS` and `LISTEN_FDNAMES` from the environment.
/// Call it once, first thing in `main`, before any thread starts (the
/// environment is changed); later calls find nothing.
pub fn take_from_env() -> Result<Handed, ActivationError> {
    if TAKEN.swap(true, Ordering::SeqCst) {
        return Ok(Handed::none());
    }
    let pid = std::env::var_os("LISTEN_PID");
    let fds = std::env::var_os("LISTEN_FDS");
    let names = std::env::var_os("LISTEN_FDNAMES");
    for var in ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"] {
        std::env::remove_var(var);
    }
    let text =
        |v: &Option<std::ffi::OsString>| v.as_deref().map(|s| s.to_string_lossy().into_owned());
    let names = match parse(
        text(&pid).as_deref(),
        text(&fds).as_deref(),
        text(&names).as_deref(),
        std::process::id(),
    )? {
        Listen::Nothing => return Ok(Handed::none()),
        Listen::OtherPid(pid) => {
            return Ok(Handed {
                other_pid: Some(pid),
                ..Handed::none()
            })
        }
        Listen::Names(names) => names,
    };
    // Own every descriptor first, so that all of them are closed if one is
    // refused.
    let owned: Vec<(String, OwnedFd)> = names
        .into_iter()
        .zip(FIRST_FD..)
        .map(|(name, raw)| {
            // SAFETY: LISTEN_PID names this process, so systemd passed us
            // descriptors FIRST_FD.. (one per name); nothing else in the
            // process owns them, and the variables are gone and TAKEN set,
            // so they are wrapped only once.
            let fd = unsafe { OwnedFd::from_raw_fd(raw) };
            (name, fd)
        })
        .collect();
    let mut sockets = Vec::with_capacity(owned.len());
    for (name, fd) in owned {
        set_cloexec(&fd).map_err(|e| {
            ActivationError(format!(
                "descriptor {} ({name}): set close-on-exec: {e}",
                fd.as_raw_fd()
            ))
        })?;
        let path = listening_unix_path(fd.as_fd()).map_err(|e| {
            ActivationError(format!(
                "descriptor {} named {name:?} is refused: {e}",
                fd.as_raw_fd()
            ))
        })?;
        sockets.push(HandedSocket { name, fd, path });
    }
    Ok(Handed {
        sockets,
        other_pid: None,
    })
}

/// What the `LISTEN_*` variables say.
#[derive(Debug, PartialEq, Eq)]
pub enum Listen {
    /// No socket handed over.
    Nothing,
    /// Sockets for this other process (`LISTEN_PID`), not ours.
    OtherPid(u32),
    /// The names of descriptors 3, 4, ...
    Names(Vec<String>),
}

/// Read the `LISTEN_*` variables for the process `my_pid`.
/// `LISTEN_FDNAMES` must give one unique, non-empty name per descriptor.
pub fn parse(
    listen_pid: Option<&str>,
    listen_fds: Option<&str>,
    listen_fdnames: Option<&str>,
    my_pid: u32,
) -> Result<Listen, ActivationError> {
    let (Some(pid), Some(fds)) = (listen_pid, listen_fds) else {
        return Ok(Listen::Nothing);
    };
    let pid: u32 = pid
        .trim()
        .parse()
        .map_err(|_| ActivationError(format!("LISTEN_PID={pid:?} is not a process id")))?;
    if pid != my_pid {
        return Ok(Listen::OtherPid(pid));
    }
    let count: usize = fds
        .trim()
        .parse()
        .map_err(|_| ActivationError(format!("LISTEN_FDS={fds:?} is not a count")))?;
    if count == 0 {
        return Ok(Listen::Nothing);
    }
    if count > MAX_FDS {
        return Err(ActivationError(format!(
            "LISTEN_FDS={count} is more than {MAX_FDS} descriptors"
        )));
    }
    let Some(names) = listen_fdnames else {
        return Err(ActivationError(format!(
            "{count} socket(s) handed over without LISTEN_FDNAMES: give each .socket unit \
             FileDescriptorName=csi-proxy-<group>-<version>"
        )));
    };
    let names: Vec<String> = names.split(':').map(str::to_string).collect();
    if names.len() != count {
        return Err(ActivationError(format!(
            "LISTEN_FDS={count} but LISTEN_FDNAMES has {} name(s)",
            names.len()
        )));
    }
    for (i, name) in names.iter().enumerate() {
        if name.is_empty() {
            return Err(ActivationError(format!(
                "descriptor {} has an empty name in LISTEN_FDNAMES",
                FIRST_FD as usize + i
            )));
        }
        if names[..i].contains(name) {
            return Err(ActivationError(format!(
                "two sockets are named {name:?} (FileDescriptorName=): one endpoint, one socket"
            )));
        }
    }
    Ok(Listen::Names(names))
}

/// Mark `fd` close-on-exec (systemd passes it without the flag).
fn set_cloexec(fd: &OwnedFd) -> io::Result<()> {
    use nix::fcntl::{fcntl, FcntlArg, FdFlag};
    let flags = fcntl(fd, FcntlArg::F_GETFD).map_err(io::Error::from)?;
    let flags = FdFlag::from_bits_truncate(flags) | FdFlag::FD_CLOEXEC;
    fcntl(fd, FcntlArg::F_SETFD(flags)).map_err(io::Error::from)?;
    Ok(())
}

/// The path `fd` is bound to, if it is a listening Unix stream socket bound
/// to a path (not abstract, not unnamed); an error saying what it is
/// instead otherwise.
pub fn listening_unix_path(fd: BorrowedFd<'_>) -> Result<PathBuf, String> {
    use nix::sys::socket::{
        getsockname, getsockopt, sockopt, SockType, SockaddrLike, SockaddrStorage,
    };
    let kind = getsockopt(&fd, sockopt::SockType).map_err(|e| match e {
        nix::errno::Errno::ENOTSOCK => "not a socket".to_string(),
        e => format!("cannot read its socket type: {e}"),
    })?;
    if kind != SockType::Stream {
        return Err(format!(
            "a {kind:?} socket, not a stream socket (ListenStream=)"
        ));
    }
    let addr: SockaddrStorage =
        getsockname(fd.as_raw_fd()).map_err(|e| format!("cannot read its address: {e}"))?;
    let Some(unix) = addr.as_unix_addr() else {
        return Err(format!(
            "not a Unix socket (address family {:?}): the proxy serves Unix sockets only",
            addr.family()
        ));
    };
    let Some(path) = unix.path() else {
        return Err("a Unix socket not bound to a path (abstract or unnamed)".into());
    };
    if !getsockopt(&fd, sockopt::AcceptConn)
        .map_err(|e| format!("cannot read SO_ACCEPTCONN: {e}"))?
    {
        return Err(format!("{} is not listening", path.display()));
    }
    Ok(PathBuf::from(OsStr::from_bytes(
        path.as_os_str().as_bytes(),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(pid: Option<&str>, fds: Option<&str>, n: Option<&str>) -> Result<Listen, String> {
        parse(pid, fds, n, 42).map_err(|e| e.to_string())
    }

    #[test]
    fn names_in_order() {
        assert_eq!(
            names(
                Some("42"),
                Some("2"),
                Some("csi-proxy-filesystem-v1:csi-proxy-disk-v1")
            )
            .unwrap(),
            Listen::Names(vec![
                "csi-proxy-filesystem-v1".into(),
                "csi-proxy-disk-v1".into()
            ])
        );
    }

    #[test]
    fn nothing_for_us() {
        assert_eq!(names(None, None, None).unwrap(), Listen::Nothing);
        assert_eq!(names(Some("42"), None, None).unwrap(), Listen::Nothing);
        assert_eq!(
            names(Some("41"), Some("1"), Some("a")).unwrap(),
            Listen::OtherPid(41)
        );
        assert_eq!(
            names(Some("42"), Some("0"), Some("")).unwrap(),
            Listen::Nothing
        );
    }

    #[test]
    fn broken_environments_are_errors() {
        for (pid, fds, n, says) in [
            ("x", "1", Some("a"), "LISTEN_PID"),
            ("42", "-1", Some("a"), "LISTEN_FDS"),
            ("42", "1x", Some("a"), "LISTEN_FDS"),
            ("42", "5000", Some("a"), "more than"),
            ("42", "2", None, "without LISTEN_FDNAMES"),
            ("42", "2", Some("a"), "has 1 name"),
            ("42", "2", Some("a:b:c"), "has 3 name"),
            ("42", "2", Some("a:"), "empty name"),
            ("42", "2", Some("a:a"), "two sockets are named \"a\""),
        ] {
            let err = names(Some(pid), Some(fds), n).unwrap_err();
            assert!(err.contains(says), "{pid} {fds} {n:?}: {err}");
        }
    }

    #[test]
    fn only_listening_unix_stream_sockets_bound_to_a_path() {
        use std::os::fd::AsFd;
        use std::os::unix::net::{UnixDatagram, UnixListener, UnixStream};
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("ok.sock");
        let l = UnixListener::bind(&p).unwrap();
        assert_eq!(listening_unix_path(l.as_fd()).unwrap(), p);

        let file = std::fs::File::open("/dev/null").unwrap();
        assert!(listening_unix_path(file.as_fd())
            .unwrap_err()
            .contains("not a socket"));
        let d = UnixDatagram::bind(dir.path().join("d.sock")).unwrap();
        assert!(listening_unix_path(d.as_fd())
            .unwrap_err()
            .contains("not a stream"));
        let (a, _b) = UnixStream::pair().unwrap();
        assert!(listening_unix_path(a.as_fd())
            .unwrap_err()
            .contains("not bound to a path"));
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        assert!(listening_unix_path(tcp.as_fd())
            .unwrap_err()
            .contains("not a Unix socket"));
        let c = UnixStream::connect(&p).unwrap();
        let (accepted, _) = l.accept().unwrap();
        drop(c);
        // An accepted connection carries the listener's path but is no listener.
        assert!(listening_unix_path(accepted.as_fd())
            .unwrap_err()
            .contains("not listening"));
    }
}
