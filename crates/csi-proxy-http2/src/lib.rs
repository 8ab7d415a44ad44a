//! csi-proxy's own HTTP/2 server for unary gRPC.
//!
//! Why not hyper/h2: every existing CSI driver reaches csi-proxy through
//! grpc-go, which sends the pipe path (`\\.\pipe\csi-proxy-disk-v1`, raw or
//! percent-encoded) as `:authority`; h2 rejects such a stream with
//! RST_STREAM(PROTOCOL_ERROR). A unary-only server is also small enough to
//! answer a call with one read and one write on one task, which matters for
//! the calls kubelet and drivers poll.
//!
//! - [`service`]: the boundary with whoever answers calls ([`Service`],
//!   [`Reply`], [`Outcome`]);
//! - [`frame`]: frame layout, parsing and writing;
//! - [`hpack`]: header encoding (ours), grpc-message and grpc-timeout;
//! - [`fields`]: header block decoding with a size limit, and the RFC 9113
//!   §8 request checks;
//! - [`conn`]: the connection state machine, without I/O (fuzzed);
//! - [`budget`]: the process-wide budget of held request bytes;
//! - [`driver`]: the async loop over a socket or pipe (work budget,
//!   deadlines, keepalive, idle timeout);
//! - [`client`]: a minimal blocking client for tests and benchmarks;
//! - [`conformance`]: the h2spec cases this server once failed, as
//!   regression checks any transport can run.

pub mod budget;
pub mod buf;
pub mod client;
pub mod conformance;
pub mod conn;
pub mod driver;
pub mod fields;
pub mod frame;
pub mod hpack;
pub mod service;
#[cfg(test)]
mod tests;

pub use budget::BodyBudget;
pub use conn::{Connection, Limits, Request};
pub use driver::{serve, Io, Options};
pub use service::{refusal, refuse, Code, Job, Outcome, Reply, Service};
