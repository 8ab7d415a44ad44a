//! Endpoints: Unix sockets on Linux, named pipes on Windows. One endpoint
//! per API group/version, named `csi-proxy-<group>-<version>`.

#[cfg(unix)]
pub mod activation;
pub mod dacl;
#[cfg(unix)]
mod socket_dir;
#[cfg(unix)]
pub mod unix;
#[cfg(windows)]
pub mod windows;

use crate::caller::pending::Peer;
use std::future::Future;
use std::io;
use tokio::io::{AsyncRead, AsyncWrite};

/// Something that accepts client connections.
pub trait Listener: Send + 'static {
    type Io: AsyncRead + AsyncWrite + Send + Unpin + 'static;
    /// Wait for the next client.
    fn accept(&mut self) -> impl Future<Output = io::Result<Self::Io>> + Send;
    /// Who is at the other end of an accepted connection: what the kernel
    /// tells at once (no I/O; the rest is read later, off the accept loop,
    /// by [`crate::caller::pending::identify`]).
    fn peer(io: &Self::Io) -> Peer;
}

#[cfg(unix)]
impl Listener for unix::UnixEndpoint {
    type Io = tokio::net::UnixStream;
    fn accept(&mut self) -> impl Future<Output = io::Result<Self::Io>> + Send {
        unix::UnixEndpoint::accept(self)
    }
    fn peer(io: &Self::Io) -> Peer {
        crate::caller::pending::of_unix_stream(io)
    }
}

#[cfg(windows)]
impl Listener for windows::PipeListener {
    type Io = tokio::net::windows::named_pipe::NamedPipeServer;
    fn accept(&mut self) -> impl Future<Output = io::Result<Self::Io>> + Send {
        windows::PipeListener::accept(self)
    }
    fn peer(io: &Self::Io) -> Peer {
        crate::caller::pending::of_pipe(io)
    }
}
