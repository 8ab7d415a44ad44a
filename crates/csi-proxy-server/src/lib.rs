//! The gRPC layer of csi-proxy.
//!
//! - [`dispatch`]: the one mechanism that serves every versioned service over
//!   the version-free host API;
//! - [`catalog`]: the routing catalog, per group and version: each method,
//!   its version-free operation, read or write, placement and caching
//!   (a leaf: dispatch, routes, guard, policy and audit read it);
//! - `routes`: per group, the routes built from the catalog with their
//!   message conversions;
//! - [`wire`]: the conversion trait and table macros;
//! - [`status`]: host errors → gRPC status, in one place;
//! - [`time`]: UTC civil time and RFC 3339 (the audit log, the daemon's logs);
//! - `health`: `grpc.health.v1.Health/Check`, plain routes on every endpoint;
//! - [`metrics`]: Prometheus metrics and the `/metrics` endpoint;
//! - the HTTP/2 server for unary gRPC is the `csi-proxy-http2` crate; a
//!   [`dispatch::VersionedService`] is its [`csi_proxy_http2::Service`];
//! - [`transport`]: Unix sockets and named pipes;
//! - [`server`]: binding every endpoint, serving, graceful shutdown;
//! - `accept`: the per-endpoint connection cap and the accept back-off;
//! - [`caller`]: who is calling (per connection), [`audit`]: the audit
//!   log, [`policy`]: the caller policy, [`guard`]: both around every call
//!   (the [`dispatch::Hook`] the dispatcher runs).

mod accept;
pub mod audit;
pub mod caller;
pub mod catalog;
pub mod dispatch;
pub mod guard;
mod health;
pub mod metrics;
pub mod policy;
mod routes;
pub mod server;
pub mod status;
pub mod transport;
pub mod wire;

pub use routes::service;
pub use server::{bind, BoundServer, Config, ServeError, Transport};
