//! The kernel's uevent stream: a `NETLINK_KOBJECT_UEVENT` socket bound to
//! multicast group 1 (the kernel's own messages, not udev's), non-blocking.
//!
//! The kernel queues a uevent on every listening socket before the call
//! that caused it returns (`losetup`'s attach ioctl, `BLKPG`, a SCSI scan),
//! so draining the queue at the start of a call sees every change made
//! before the call. When the queue overflows, the next receive fails with
//! `ENOBUFS`: the events are lost and the inventory scans everything.
//!
//! The socket calls are nix's safe wrappers over an [`OwnedFd`].

use super::{uevent, EventSource, Pending};
use nix::errno::Errno;
use nix::sys::socket::{
    self, sockopt, AddressFamily, NetlinkAddr, SockFlag, SockProtocol, SockType,
};
use std::collections::BTreeSet;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

/// The receive buffer asked for by default: room for thousands of events
/// between two calls.
pub const DEFAULT_BUFFER: usize = 4 << 20;

/// Largest uevent message: the kernel's `UEVENT_BUFFER_SIZE` (2048) plus
/// the `ACTION@DEVPATH` header.
const MESSAGE_MAX: usize = 8192;

/// The multicast group of the kernel's own uevents.
const KERNEL_GROUP: u32 = 1;

/// A listening uevent socket.
pub struct Uevents {
    fd: OwnedFd,
    buf: Vec<u8>,
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
        let fd = socket::socket(
            AddressFamily::Netlink,
            SockType::Datagram,
            SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
            SockProtocol::NetlinkKObjectUEvent,
        )?;
        // The option is an int.
        let size = buffer.min(libc::c_int::MAX as usize);
        if socket::setsockopt(&fd, sockopt::RcvBufForce, &size).is_err() {
            socket::setsockopt(&fd, sockopt::RcvBuf, &size)?;
        }
        // Port id 0: the kernel assigns one.
        socket::bind(fd.as_raw_fd(), &NetlinkAddr::new(0, KERNEL_GROUP))?;
        Ok(Uevents {
            fd,
            buf: vec![0; MESSAGE_MAX],
        })
    }

    /// One queued message: its length and whether the kernel sent it
    /// (port id 0); `Ok(None)` when the queue is empty.
    fn receive(&mut self) -> io::Result<Option<(usize, bool)>> {
        loop {
            // The socket is non-blocking: an empty queue is EAGAIN. The
            // kernel always gives the sender's address on netlink.
            match socket::recvfrom::<NetlinkAddr>(self.fd.as_raw_fd(), &mut self.buf) {
                Ok((n, from)) => return Ok(Some((n, from.is_some_and(|a| a.pid() == 0)))),
                Err(Errno::EINTR) => continue,
                Err(Errno::EAGAIN) => return Ok(None),
                Err(e) => return Err(e.into()),
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
