//! Moving bytes: the readiness-based stream trait the driver needs (Unix
//! sockets and named pipes), reads into a per-thread buffer, writes from
//! the connection's output.

use super::State;
use crate::conn::Connection;
use crate::service::Service;
use std::cell::RefCell;
use std::future::Future;
use std::io;

/// A connected byte stream that can be used through a shared reference with
/// readiness notifications (Unix sockets and named pipes both can), so one
/// task can wait for "readable or writable" at once.
pub trait Io: Send + Sync + 'static {
    fn readable(&self) -> impl Future<Output = io::Result<()>> + Send;
    fn writable(&self) -> impl Future<Output = io::Result<()>> + Send;
    fn try_read(&self, buf: &mut [u8]) -> io::Result<usize>;
    fn try_write(&self, buf: &[u8]) -> io::Result<usize>;
}

macro_rules! impl_io {
    ($t:ty) => {
        impl Io for $t {
            fn readable(&self) -> impl Future<Output = io::Result<()>> + Send {
                <$t>::readable(self)
            }
            fn writable(&self) -> impl Future<Output = io::Result<()>> + Send {
                <$t>::writable(self)
            }
            fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
                <$t>::try_read(self, buf)
            }
            fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
                <$t>::try_write(self, buf)
            }
        }
    };
}

#[cfg(unix)]
impl_io!(tokio::net::UnixStream);
#[cfg(windows)]
impl_io!(tokio::net::windows::named_pipe::NamedPipeServer);

/// Read granularity.
const READ_CHUNK: usize = 32 << 10;

thread_local! {
    /// Reads land here and go straight to the state machine; only the bytes
    /// of an incomplete frame (or of frames left for the next batch) are
    /// copied into the connection's own buffer, so an idle connection holds
    /// no read buffer.
    static SCRATCH: RefCell<Box<[u8]>> = RefCell::new(vec![0; READ_CHUNK].into_boxed_slice());
}

/// What ended a read attempt.
pub(super) enum Read {
    Bytes,
    Eof,
    WouldBlock,
    Failed(io::Error),
}

/// Read once into the scratch buffer and feed the connection.
pub(super) fn read_into<I: Io, S: Service>(
    io: &I,
    conn: &mut Connection,
    state: &mut State<S>,
) -> Read {
    SCRATCH.with(|scratch| {
        let mut scratch = scratch.borrow_mut();
        match io.try_read(&mut scratch) {
            Ok(0) => Read::Eof,
            Ok(n) => {
                conn.advance_clock(std::time::Instant::now());
                state.take_in(conn, &scratch[..n]);
                Read::Bytes
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Read::WouldBlock,
            Err(e) => Read::Failed(e),
        }
    })
}

/// Write as much of the output as the peer takes now.
pub(super) fn write_some<I: Io>(io: &I, conn: &mut Connection) -> io::Result<()> {
    let out = conn.output();
    while !out.is_empty() {
        match io.try_write(out.pending()) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => out.consume(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
