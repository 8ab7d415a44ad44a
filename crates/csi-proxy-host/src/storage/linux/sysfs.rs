//! The block devices the kernel knows, read from sysfs (`/sys/block`).
//!
//! A disk's number is its `diskseq`: a counter the kernel assigns when a disk
//! appears (and again when a loop device is re-attached) and never reuses
//! during a boot, so a number cannot silently come to name another disk.
//!
//! Attributes are read with one `open`, one `read` into a stack buffer and
//! one `close` each (no `statx`, no second read, no allocation); a disk of
//! size 0 (a detached loop device) is skipped after its first read. Every
//! read is counted ([`reads`]), so tests and benchmarks can show what a call
//! costs.

use nix::fcntl::OFlag;
use nix::sys::stat::Mode;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

static READS: AtomicU64 = AtomicU64::new(0);

/// How many sysfs files, directories and links this process has read.
pub fn reads() -> u64 {
    READS.load(Ordering::Relaxed)
}

fn counted() {
    READS.fetch_add(1, Ordering::Relaxed);
}

/// One whole disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockDisk {
    /// Kernel name (`sda`, `loop3`, `nvme0n1`).
    pub name: String,
    /// The disk number (`diskseq`).
    pub number: u32,
    pub major: u32,
    pub minor: u32,
    /// Size in bytes.
    pub size: u64,
    /// The block layer's read-only flag (our "offline").
    pub read_only: bool,
    /// Whether the kernel scans this disk for partitions.
    pub partscan: bool,
    pub partitions: Vec<BlockPartition>,
}

/// One partition of a disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockPartition {
    /// Kernel name (`sda1`, `loop3p1`).
    pub name: String,
    /// Partition number (1-based, as in the partition table).
    pub number: u32,
    pub major: u32,
    pub minor: u32,
    /// Start and size in bytes.
    pub start: u64,
    pub size: u64,
}

/// Reads `/sys/block`.
#[derive(Clone, Debug)]
pub struct Sysfs {
    root: PathBuf,
}

/// Room for any attribute read here (numbers, `major:minor`).
const ATTR_MAX: usize = 64;

/// A small attribute, trimmed: one open, one read, one close.
fn read_attr<'b>(path: &Path, buf: &'b mut [u8; ATTR_MAX]) -> io::Result<&'b str> {
    counted();
    let fd = nix::fcntl::open(path, OFlag::O_RDONLY | OFlag::O_CLOEXEC, Mode::empty())
        .map_err(io::Error::from)?;
    let n = nix::unistd::read(&fd, buf).map_err(io::Error::from)?;
    if n == buf.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{path:?}: longer than {ATTR_MAX} bytes"),
        ));
    }
    std::str::from_utf8(&buf[..n])
        .map(str::trim)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, format!("{path:?}: not text")))
}

fn read_u64(path: &Path) -> io::Result<u64> {
    let mut buf = [0; ATTR_MAX];
    let s = read_attr(path, &mut buf)?;
    s.parse()
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, format!("{path:?}: {s:?}")))
}

fn read_dev(path: &Path) -> io::Result<(u32, u32)> {
    let mut buf = [0; ATTR_MAX];
    parse_dev(read_attr(path, &mut buf)?)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, format!("{path:?}: bad dev")))
}

/// `"8:16"` → (8, 16).
pub fn parse_dev(s: &str) -> Option<(u32, u32)> {
    let (a, b) = s.trim().split_once(':')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// Disks that are never storage a driver attaches (RAM disks, compressed
/// swap, optical drives).
pub fn ignored(name: &str) -> bool {
    ["ram", "zram", "sr", "fd"].iter().any(|p| {
        name.strip_prefix(p)
            .is_some_and(|r| r.chars().all(|c| c.is_ascii_digit()))
    })
}

impl Default for Sysfs {
    fn default() -> Self {
        Sysfs {
            root: PathBuf::from("/sys"),
        }
    }
}

impl Sysfs {
    /// A sysfs tree at `root` instead of `/sys` (tests build one).
    pub fn at(root: impl Into<PathBuf>) -> Self {
        Sysfs { root: root.into() }
    }

    /// The directory of a disk.
    pub fn disk_dir(&self, name: &str) -> PathBuf {
        self.root.join("block").join(name)
    }

    /// The kernel names in `/sys/block`, without the ignored kinds.
    pub fn names(&self) -> io::Result<Vec<String>> {
        counted();
        let mut out = Vec::new();
        for entry in fs::read_dir(self.root.join("block"))? {
            if let Ok(name) = entry?.file_name().into_string() {
                if !ignored(&name) {
                    out.push(name);
                }
            }
        }
        Ok(out)
    }

    /// Every disk with a non-zero size (detached loop devices have size 0).
    pub fn disks(&self) -> io::Result<Vec<BlockDisk>> {
        let mut out = Vec::new();
        for name in self.names()? {
            let name = name.as_str();
            match self.disk(name) {
                Ok(Some(d)) => out.push(d),
                Ok(None) => {}
                // The disk went away while we read it.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => {
                    tracing::debug!(disk = name, error = %e, "skipping unreadable block device");
                }
            }
        }
        out.sort_by_key(|d| d.number);
        Ok(out)
    }

    /// One disk by kernel name; `None` if it has no size.
    pub fn disk(&self, name: &str) -> io::Result<Option<BlockDisk>> {
        let dir = self.disk_dir(name);
        let size = read_u64(&dir.join("size"))?.saturating_mul(512);
        if size == 0 {
            return Ok(None);
        }
        let seq = read_u64(&dir.join("diskseq"))?;
        let Ok(number) = u32::try_from(seq) else {
            tracing::warn!(
                disk = name,
                seq,
                "diskseq does not fit a disk number; skipped"
            );
            return Ok(None);
        };
        let (major, minor) = read_dev(&dir.join("dev"))?;
        let read_only = read_u64(&dir.join("ro"))? != 0;
        // Only loop devices have the attribute; the others always scan.
        let partscan =
            !name.starts_with("loop") || read_u64(&dir.join("partscan")).map_or(true, |v| v != 0);
        let mut partitions = Vec::new();
        counted();
        for entry in fs::read_dir(&dir)? {
            let entry = entry?;
            let pname = entry.file_name();
            let Some(pname) = pname.to_str() else {
                continue;
            };
            if !pname.starts_with(name) {
                continue;
            }
            let pdir = entry.path();
            let part = (|| -> io::Result<BlockPartition> {
                // Not a partition (no `partition` attribute): NotFound.
                let number = read_u64(&pdir.join("partition"))?;
                let (major, minor) = read_dev(&pdir.join("dev"))?;
                Ok(BlockPartition {
                    name: pname.to_string(),
                    number: u32::try_from(number)
                        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "partition"))?,
                    major,
                    minor,
                    start: read_u64(&pdir.join("start"))?.saturating_mul(512),
                    size: read_u64(&pdir.join("size"))?.saturating_mul(512),
                })
            })();
            match part {
                Ok(p) => partitions.push(p),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        partitions.sort_by_key(|p| p.number);
        Ok(Some(BlockDisk {
            name: name.to_string(),
            number,
            major,
            minor,
            size,
            read_only,
            partscan,
            partitions,
        }))
    }

    /// The block layer's read-only flag of a disk, read now (changing it
    /// with `BLKROSET` sends no event, so it is never answered from memory).
    pub fn read_only(&self, name: &str) -> io::Result<bool> {
        Ok(read_u64(&self.disk_dir(name).join("ro"))? != 0)
    }

    /// A file of the disk's directory (`device/vpd_pg83`, `serial`, ...).
    pub fn read_disk_file(&self, disk: &str, file: &str) -> Option<Vec<u8>> {
        counted();
        fs::read(self.disk_dir(disk).join(file)).ok()
    }

    /// The resolved `device` link of a disk (`.../host0/target0:0:1/0:0:1:0`).
    pub fn device_link(&self, disk: &str) -> Option<PathBuf> {
        counted();
        fs::canonicalize(self.disk_dir(disk).join("device")).ok()
    }

    /// The `/sys/class/<class>` entries (`scsi_host`, `nvme`).
    pub fn class_entries(&self, class: &str) -> Vec<PathBuf> {
        fs::read_dir(self.root.join("class").join(class))
            .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dev_numbers_and_ignored_names() {
        assert_eq!(parse_dev("8:16\n"), Some((8, 16)));
        assert_eq!(parse_dev("259:0"), Some((259, 0)));
        assert_eq!(parse_dev("8"), None);
        assert_eq!(parse_dev("a:b"), None);
        assert!(ignored("zram0") && ignored("ram15") && ignored("sr0"));
        assert!(!ignored("sda") && !ignored("loop0") && !ignored("srv") && !ignored("nvme0n1"));
    }

    #[test]
    fn the_hosts_disks_have_unique_numbers() {
        let Ok(disks) = Sysfs::default().disks() else {
            return;
        };
        let mut numbers: Vec<u32> = disks.iter().map(|d| d.number).collect();
        numbers.dedup();
        assert_eq!(numbers.len(), disks.len());
        for d in &disks {
            assert!(d.size > 0);
            for p in &d.partitions {
                assert!(p.name.starts_with(&d.name) && p.number > 0);
            }
        }
    }
}
