//! Pure parsers and encoders of on-disk and IOCTL structures; no I/O.

pub mod msft;
