//! Endpoints: Unix sockets on Linux, named pipes on Windows. One endpoint
//! per API group/version, named `csi-proxy-<group>-<version>`.

#[cfg(unix)]
pub mod activation;
#[cfg(unix)]
mod socket_dir;
#[cfg(unix)]
pub mod unix;
#[cfg(windows)]
pub mod windows;

use crate::caller::Caller;
use std::future::Future;
use std::io;
use tokio::io::{AsyncRead, AsyncWrite};

/// Something that accepts client connections.
pub trait Listener: Send + 'static {
    type Io: AsyncRead + AsyncWrite + Send + Unpin + 'static;
    /// Wait for the next client.
    fn accept(&mut self) -> impl Future<Output = io::Result<Self::Io>> + Send;
    /// Who is at the other end of an accepted connection.
    fn caller(io: &Self::Io) -> Caller;
}

#[cfg(unix)]
impl Listener for unix::UnixEndpoint {
    type Io = tokio::net::UnixStream;
    fn accept(&mut self) -> impl Future<Output = io::Result<Self::Io>> + Send {
        unix::UnixEndpoint::accept(self)
    }
    fn caller(io: &Self::Io) -> Caller {
        crate::caller::of_unix_stream(io)
    }
}

#[cfg(windows)]
impl Listener for windows::PipeListener {
    type Io = tokio::net::windows::named_pipe::NamedPipeServer;
    fn accept(&mut self) -> impl Future<Output = io::Result<Self::Io>> + Send {
        windows::PipeListener::accept(self)
    }
    fn caller(io: &Self::Io) -> Caller {
        crate::caller::of_pipe(io)
    }
}
