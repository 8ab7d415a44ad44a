//! The gRPC layer of csi-proxy.
//!
//! - [`dispatch`]: the one mechanism that serves every versioned service over
//!   the version-free host API;
//! - `groups`: per group, the routing table and the message conversions;
//! - [`wire`]: the conversion trait and table macros;
//! - [`status`]: host errors → gRPC status, in one place;
//! - [`http2`]: our own HTTP/2 server for unary gRPC (accepts the
//!   `:authority` values real clients send);
//! - [`transport`]: Unix sockets and named pipes;
//! - [`server`]: binding every endpoint, serving, graceful shutdown;
//! - `accept`: the per-endpoint connection cap and the accept back-off.

mod accept;
pub mod dispatch;
mod groups;
pub mod http2;
pub mod server;
pub mod status;
pub mod transport;
pub mod wire;

pub use groups::service;
pub use server::{bind, BoundServer, Config, ServeError, Transport};
