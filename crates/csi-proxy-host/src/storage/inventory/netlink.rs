//! The kernel's uevent stream: a `NETLINK_KOBJECT_UEVENT` socket bound to
//! multicast group 1 (the kernel's own messages, not udev's), non-blocking.
//!
//! The kernel queues a uevent on every listening socket before the call
//! that caused it returns (`losetup`'s attach ioctl, `BLKPG`, a SCSI scan),
//! so draining the queue at the start of a call sees every change made
//! before the call. When the queue overflows, the next receive fails with
//! `ENOBUFS`: the events are lost and the inventory scans everything.
//!
//! Every `unsafe` of the event source is here, on an [`OwnedFd`].

use super::{uevent, EventSource, Pending};
use std::collections::BTreeSet;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// The receive buffer asked for by default: room for thousands of events
/// between two calls.
pub const DEFAULT_BUFFER: usize = 4 << 20;

/// Largest uevent message: the kernel's `UEVENT_BUFFER_SIZE` (2048) plus
/// the `ACTION@DEVPATH` header.
const MESSAGE_MAX: usize = 8192;

/// A listening uevent socket.
pub struct Uevents {
    fd: OwnedFd,
    buf: Vec<u8>,
}

fn check(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn set_int_opt(fd: &OwnedFd, opt: libc::c_int, value: libc::c_int) -> io::Result<()> {
    // SAFETY: `fd` is an open socket; the option value is a live c_int
    // whose size is passed with it.
    check(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            opt,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// Whether this process's user namespace is the initial one: the kernel
/// delivers block uevents only to network namespaces owned by it, so in
/// another user namespace the socket would open and stay silent.
pub fn in_initial_user_namespace() -> bool {
    std::fs::read_to_string("/proc/self/uid_map").is_ok_and(|m| {
        let f: Vec<&str> = m.split_whitespace().collect();
        f == ["0", "0", "4294967295"]
    })
}

impl Uevents {
    /// Opens and binds the socket, asking for a receive buffer of `buffer`
    /// bytes (`SO_RCVBUFFORCE` as root, else `SO_RCVBUF`, which the kernel
    /// caps at `net.core.rmem_max`).
    pub fn open(buffer: usize) -> io::Result<Uevents> {
        // SAFETY: plain socket(2); the result is checked and owned at once.
        let raw = check(unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                libc::NETLINK_KOBJECT_UEVENT,
            )
        })?;
        // SAFETY: `raw` is a fresh descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let size = libc::c_int::try_from(buffer).unwrap_or(libc::c_int::MAX);
        if set_int_opt(&fd, libc::SO_RCVBUFFORCE, size).is_err() {
            set_int_opt(&fd, libc::SO_RCVBUF, size)?;
        }
        // SAFETY: sockaddr_nl is plain data; all-zero is a valid value.
        let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        addr.nl_pid = 0; // the kernel assigns the port id
        addr.nl_groups = 1; // kernel uevents
                            // SAFETY: `addr` is a live sockaddr_nl and its size is passed.
        check(unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        })?;
        Ok(Uevents {
            fd,
            buf: vec![0; MESSAGE_MAX],
        })
    }

    /// One queued message: its length and whether the kernel sent it
    /// (port id 0); `Ok(None)` when the queue is empty.
    fn receive(&mut self) -> io::Result<Option<(usize, bool)>> {
        loop {
            // SAFETY: sockaddr_nl is plain data; all-zero is a valid value.
            let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
            let mut addr_len = std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t;
            // SAFETY: recvfrom writes at most `addr_len` bytes of address and
            // `buf.len()` bytes of message, into buffers that live across
            // the call; the descriptor is open.
            let n = unsafe {
                libc::recvfrom(
                    self.fd.as_raw_fd(),
                    self.buf.as_mut_ptr().cast(),
                    self.buf.len(),
                    libc::MSG_DONTWAIT,
                    (&mut addr as *mut libc::sockaddr_nl).cast(),
                    &mut addr_len,
                )
            };
            if n >= 0 {
                return Ok(Some((n as usize, addr.nl_pid == 0)));
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EAGAIN) => return Ok(None),
                _ => return Err(e),
            }
        }
    }
}

impl EventSource for Uevents {
    type Key = String;

    fn drain(&mut self) -> Pending<String> {
        let mut keys = BTreeSet::new();
        let mut lost = None;
        loop {
            match self.receive() {
                Ok(None) => break,
                Ok(Some((_, false))) => {} // not from the kernel
                Ok(Some((n, true))) => {
                    if let Some(e) = uevent::parse(&self.buf[..n]) {
                        keys.insert(e.disk.to_string());
                        if let Some(old) = e.old_disk {
                            keys.insert(old.to_string());
                        }
                    }
                }
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                    // Lost; keep draining what is still queued.
                    lost = Some("the receive queue overflowed");
                }
                Err(e) => {
                    tracing::warn!(error = %e, "receiving device events failed");
                    return Pending::Lost("receive error");
                }
            }
        }
        match lost {
            Some(why) => Pending::Lost(why),
            None if keys.is_empty() => Pending::Nothing,
            None => Pending::Keys(keys),
        }
    }
}
