//! Pure parsers and encoders of on-disk structures and of what the Windows
//! backend receives (IOCTL output buffers, WMI property strings); no I/O.
//!
//! Nothing here calls the OS, so everything is compiled and tested on every
//! platform. Rules shared by all parsers:
//!
//! * every parser returns a `Result` and never panics, whatever the input:
//!   all reads are bounds-checked, all offset arithmetic is checked, and every
//!   loop is bounded by the length of the buffer;
//! * Windows binary layouts are those of 64-bit Windows (little-endian,
//!   natural alignment), with the offsets written out as constants and
//!   checked against the `windows-sys` definitions by a Windows-only test;
//! * a buffer longer than the structure is fine (IOCTL output buffers are
//!   usually oversized); a shorter one is an error.

mod bytes;
pub mod cim;
pub mod content;
pub(crate) mod crc;
pub mod device_id;
pub mod error;
pub mod ext;
pub mod extents;
pub mod free_space;
pub mod gpt;
pub mod grow;
pub mod guid;
pub mod layout;
pub mod location;
pub mod mountinfo;
pub mod msft;
pub mod multi_sz;
pub mod nvme;

#[cfg(test)]
pub(crate) mod fixtures;
#[cfg(all(test, windows))]
mod windows_abi;

pub use error::ParseError;
