//! Endpoints: Unix sockets on Linux, named pipes on Windows. One endpoint
//! per API group/version, named `csi-proxy-<group>-<version>`.

#[cfg(unix)]
mod socket_dir;
#[cfg(unix)]
pub mod unix;
#[cfg(windows)]
pub mod windows;

use std::future::Future;
use std::io;
use tokio::io::{AsyncRead, AsyncWrite};

/// Something that accepts client connections.
pub trait Listener: Send + 'static {
    type Io: AsyncRead + AsyncWrite + Send + Unpin + 'static;
    /// Wait for the next client.
    fn accept(&mut self) -> impl Future<Output = io::Result<Self::Io>> + Send;
}

#[cfg(unix)]
impl Listener for unix::UnixEndpoint {
    type Io = tokio::net::UnixStream;
    fn accept(&mut self) -> impl Future<Output = io::Result<Self::Io>> + Send {
        unix::UnixEndpoint::accept(self)
    }
}

#[cfg(windows)]
impl Listener for windows::PipeListener {
    type Io = tokio::net::windows::named_pipe::NamedPipeServer;
    fn accept(&mut self) -> impl Future<Output = io::Result<Self::Io>> + Send {
        windows::PipeListener::accept(self)
    }
}
