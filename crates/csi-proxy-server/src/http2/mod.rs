//! csi-proxy's own HTTP/2 server for unary gRPC.
//!
//! Why not hyper/h2: every existing CSI driver reaches csi-proxy through
//! grpc-go, which sends the pipe path (`\\.\pipe\csi-proxy-disk-v1`, raw or
//! percent-encoded) as `:authority`; h2 rejects such a stream with
//! RST_STREAM(PROTOCOL_ERROR). A unary-only server is also small enough to
//! answer a call with one read and one write on one task, which matters for
//! the calls kubelet and drivers poll.
//!
//! - [`frame`]: frame layout, parsing and writing;
//! - [`hpack`]: header encoding (ours) and the request fields we read;
//! - [`conn`]: the connection state machine, without I/O (fuzzed);
//! - [`driver`]: the async loop over a socket or pipe;
//! - [`client`]: a minimal blocking client for tests and benchmarks.

pub mod client;
pub mod conn;
pub mod driver;
pub mod frame;
pub mod hpack;
#[cfg(test)]
mod tests;

pub use conn::{Connection, Limits, Request};
pub use driver::{serve, Io, Options};
