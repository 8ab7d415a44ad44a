//! Version-free host operations of csi-proxy.
//!
//! This crate is a plain library: every API group is a trait of synchronous
//! operations over plain request/response types, with a real implementation
//! per OS and a recording fake for tests. The gRPC server is a thin layer on
//! top of it; programs may also use it in-process (KEP-3636 library mode).

pub mod compat;
pub mod confined;
pub mod deadline;
pub mod disk;
pub mod effect;
pub mod error;
pub mod filesystem;
mod host;
pub mod inline;
pub mod invisible;
pub mod iscsi;
pub mod on_behalf;
pub mod path;
pub mod smb;
pub mod storage;
pub mod system;
pub mod time_format;
pub mod volume;
pub mod wide;
#[cfg(windows)]
pub mod win;
pub mod wmi_schema;

pub use error::{Error, Result};
pub use host::{Fakes, Host, HostOptions, StateDirHandle};
