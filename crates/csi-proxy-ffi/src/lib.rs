//! Library mode of csi-proxy: the host operations behind a C ABI
//! (`csi_proxy.dll` on Windows, `libcsi_proxy.so` on Linux), for programs
//! that run on the node themselves (Windows HostProcess containers,
//! KEP-3636) instead of calling the proxy over a pipe.
//!
//! A call names a group and a method and carries the protobuf-encoded
//! request of the group's newest API version; it runs through the server's
//! own dispatch (`csi_proxy_server::service`) without a transport, so the
//! library is exactly as strict as the pipe: the same decoding, path
//! confinement, validation, secret handling and error codes. See
//! `include/csi_proxy.h` and `docs/library-mode.md`.
//!
//! - [`abi`]: the extern "C" functions and `#[repr(C)]` types;
//! - [`library`]: the safe core (options → host, group/method → reply);
//! - [`extras`]: the operations beyond the proto methods (upstream's
//!   library host API's finer steps).

#![deny(unsafe_op_in_unsafe_fn)]

pub mod abi;
pub mod extras;
pub mod library;

pub use abi::*;

// The unit tests share tests/ffi (written against the crate's external name).
#[cfg(test)]
extern crate self as csi_proxy;
#[cfg(test)]
mod tests;
