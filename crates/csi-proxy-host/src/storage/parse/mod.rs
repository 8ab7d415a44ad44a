//! Pure parsers and encoders of on-disk and IOCTL structures; no I/O.
mod bytes;
mod crc32;
pub mod device_id;
pub mod error;
pub mod fs_probe;
pub mod gpt;
