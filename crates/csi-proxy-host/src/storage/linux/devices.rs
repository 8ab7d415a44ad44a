//! Device nodes and partition tables: what both the backend's operations
//! and the inventory's scans open and read.

use super::sys::{self, Access};
use super::sysfs::{BlockDisk, BlockPartition};
use super::{from_io, VolumeId};
use crate::storage::parse::gpt;
use crate::storage::parse::guid::Guid;
use crate::{Error, Result};
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

static OPENS: AtomicU64 = AtomicU64::new(0);

/// How many block devices this process's storage backend has opened.
pub fn opens() -> u64 {
    OPENS.load(Ordering::Relaxed)
}

/// The device node of `name` in `dev_dir`, created from sysfs if missing.
pub fn node(dev_dir: &Path, name: &str, major: u32, minor: u32) -> Result<PathBuf> {
    let path = dev_dir.join(name);
    match std::fs::symlink_metadata(&path) {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            tracing::info!(node = %path.display(), major, minor, "creating missing device node");
            match sys::mknod_block(&path, major, minor) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(from_io("mknod", &path.display().to_string(), e)),
            }
        }
        Err(e) => return Err(from_io("stat", &path.display().to_string(), e)),
    }
    Ok(path)
}

/// Opens a block device of disk `seq` (its `diskseq`, the disk number),
/// checking that the node really is `major:minor` and that the fd is a
/// device of disk `seq`: a name or a major:minor may be given to another
/// disk between the sysfs read and the open (a loop device re-attached
/// keeps both), a diskseq never is.
pub fn open(
    dev_dir: &Path,
    name: &str,
    major: u32,
    minor: u32,
    seq: u32,
    access: Access,
) -> Result<(PathBuf, OwnedFd)> {
    let path = node(dev_dir, name, major, minor)?;
    let shown = path.display().to_string();
    OPENS.fetch_add(1, Ordering::Relaxed);
    #[cfg(test)]
    hooks::opening(name);
    let fd = sys::open_block(&path, access).map_err(|e| from_io("open", &shown, e))?;
    let rdev = sys::block_rdev(&fd).map_err(|e| from_io("fstat", &shown, e))?;
    if rdev != libc::makedev(major, minor) {
        return Err(Error::Internal(format!(
            "device node {shown} is stale: it is {}:{}, sysfs says {major}:{minor}",
            libc::major(rdev),
            libc::minor(rdev)
        )));
    }
    same_disk(&fd, seq, &shown, false)?;
    Ok((path, fd))
}

/// Checks through `fd` that it is a device of disk `seq` (`BLKGETDISKSEQ`):
/// before a write (`written` false) the answer is a refusal that touched
/// nothing; after it (`written` true) an internal error, the write having
/// reached a disk that was not the one named.
pub fn same_disk(fd: &OwnedFd, seq: u32, shown: &str, written: bool) -> Result<()> {
    let now = sys::disk_seq(fd).map_err(|e| from_io("BLKGETDISKSEQ", shown, e))?;
    if now == u64::from(seq) {
        return Ok(());
    }
    if written {
        Err(Error::Internal(format!(
            "disk {seq} ({shown}) was replaced by disk {now} during the write, which may have reached disk {now}"
        )))
    } else {
        Err(Error::NotFound(format!(
            "disk {seq} is no longer the disk that was checked ({shown} is now disk {now}); nothing was written"
        )))
    }
}

/// A disk's partition table, its geometry, and the bytes it was parsed from.
pub struct DiskTable {
    pub table: gpt::Table,
    pub sector_size: u32,
    pub sectors: u64,
    pub head: Vec<u8>,
}

/// The partition table of disk `d`, open as `fd`.
pub fn table(d: &BlockDisk, fd: &OwnedFd) -> Result<DiskTable> {
    let ss = sys::sector_size(fd).map_err(|e| from_io("BLKSSZGET", &d.name, e))?;
    let size = sys::size_bytes(fd).map_err(|e| from_io("BLKGETSIZE64", &d.name, e))?;
    let sectors = size / u64::from(ss);
    let head = sys::read_at(fd, 0, gpt::head_len(ss)).map_err(|e| from_io("read", &d.name, e))?;
    let table = gpt::parse_table(&head, ss, sectors).map_err(|e| {
        Error::FailedPrecondition(format!(
            "disk {} ({}): partition table: {e}",
            d.number, d.name
        ))
    })?;
    Ok(DiskTable {
        table,
        sector_size: ss,
        sectors,
        head,
    })
}

/// The volume ids of a disk's partitions, from its partition table: the
/// GPT unique partition GUID, or for MBR a stable id derived from the disk
/// signature and the partition number.
pub fn volumes_of(dev_dir: &Path, d: &BlockDisk) -> Result<Vec<(BlockPartition, VolumeId)>> {
    if d.partitions.is_empty() {
        return Ok(Vec::new());
    }
    let (_, fd) = open(dev_dir, &d.name, d.major, d.minor, d.number, Access::Read)?;
    let table = table(d, &fd)?.table;
    let mut out = Vec::new();
    for p in &d.partitions {
        let guid = match &table {
            gpt::Table::Gpt(g) => g
                .partitions
                .iter()
                .find(|e| e.number == p.number)
                .map(|e| e.unique_guid),
            gpt::Table::Mbr { signature, .. } => Some(Guid::from_u128(
                (u128::from(*signature) << 96) | u128::from(p.number),
            )),
            gpt::Table::Raw => None,
        };
        if let Some(g) = guid {
            out.push((p.clone(), VolumeId::from_guid(g)));
        }
    }
    Ok(out)
}

/// Test hooks: code to run in the windows a race would use.
#[cfg(test)]
pub mod hooks {
    use std::sync::Mutex;

    type Hook = Box<dyn FnMut(&str) + Send>;
    static OPENED: Mutex<Option<Hook>> = Mutex::new(None);

    /// Runs `f` with the node's name before each open by name, after the
    /// disk was looked up (until [`clear`]).
    pub fn on_open(f: impl FnMut(&str) + Send + 'static) {
        *OPENED.lock().unwrap() = Some(Box::new(f));
    }

    pub fn clear() {
        *OPENED.lock().unwrap() = None;
    }

    pub(super) fn opening(name: &str) {
        if let Some(f) = OPENED.lock().unwrap().as_mut() {
            f(name);
        }
    }
}
