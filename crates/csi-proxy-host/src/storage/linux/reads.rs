//! Reads of what a device holds (signatures, the format check's spans),
//! through its open descriptor.

use super::{from_io, sys};
use crate::storage::parse::content::{self as identify, Regions, Scanned};
use crate::Result;
use std::io;
use std::os::fd::OwnedFd;

/// Fills `buf` from byte `offset` of `fd`; a short read (the device shrank)
/// is an error.
pub(super) fn read_exact_at(fd: &OwnedFd, offset: u64, buf: &mut [u8]) -> io::Result<()> {
    let got = sys::read_at(fd, offset, buf.len())?;
    if got.len() != buf.len() {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("short read at {offset}: the device shrank"),
        ));
    }
    buf.copy_from_slice(&got);
    Ok(())
}

/// What the device open as `fd` (named `shown` in errors) holds.
pub(super) fn read_content(fd: &OwnedFd, shown: &str) -> Result<Regions> {
    let size = sys::size_bytes(fd).map_err(|e| from_io("BLKGETSIZE64", shown, e))?;
    Regions::read(size, |offset, buf| read_exact_at(fd, offset, buf))
        .map_err(|e| from_io("read", shown, e))
}

/// What the device open as `fd` holds, as FormatVolume checks it (see
/// [`Scanned::read`]): `first` and `len` bound the region (the whole
/// device: 0 and its size).
pub(super) fn read_scanned(fd: &OwnedFd, shown: &str, first: u64, len: u64) -> Result<Scanned> {
    Scanned::read(len, |offset, buf| read_exact_at(fd, first + offset, buf))
        .map_err(|e| from_io("read", shown, e))
}

/// Whether anything is identified in the first bytes of the device open as
/// `fd` (see [`identify::quick_found`]).
pub(super) fn quick_found(fd: &OwnedFd, shown: &str) -> Result<bool> {
    let size = sys::size_bytes(fd).map_err(|e| from_io("BLKGETSIZE64", shown, e))?;
    identify::quick_found(size, |offset, buf| read_exact_at(fd, offset, buf))
        .map_err(|e| from_io("read", shown, e))
}
