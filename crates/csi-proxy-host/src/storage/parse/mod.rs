//! Pure parsers and encoders of on-disk and IOCTL structures; no I/O.

mod crc32;
pub mod fs_probe;
pub mod gpt;
