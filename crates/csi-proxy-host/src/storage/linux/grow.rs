//! Growing a filesystem to fill its partition: which tool, and whether
//! this process may.

use super::mountinfo::{self, Mount};
use super::sysfs::BlockPartition;
use super::tools;
use crate::storage::parse::ext;
use crate::{Error, Result};
use std::path::Path;

/// Is the ext filesystem whose first bytes are `head` at least
/// [`crate::storage::MIN_RESIZE_GROWTH`] smaller than its partition of
/// `partition_size` bytes (a grow that was interrupted)?
pub(super) fn filesystem_lags(head: &[u8], partition_size: u64) -> bool {
    ext::ext_usage(head).is_some_and(|u| {
        let fs = u.blocks_total.saturating_mul(u64::from(u.block_size));
        fs.saturating_add(crate::storage::MIN_RESIZE_GROWTH) <= partition_size
    })
}

/// Grows the filesystem `kind` (blkid's name) on `p` (none: nothing to
/// do) to fill the partition.
pub(super) fn grow_filesystem(
    p: &BlockPartition,
    kind: Option<&'static str>,
    node: &Path,
    mounts: &[Mount],
) -> Result<()> {
    let Some(kind) = kind else { return Ok(()) };
    let node_s = node
        .to_str()
        .ok_or_else(|| Error::Internal("device path".into()))?;
    let mounted = mountinfo::of_device(mounts, p.major, p.minor).next();
    match kind {
        "ext2" | "ext3" | "ext4" => {
            if mounted.is_none() {
                tools::run("e2fsck", &["-f", "-p", node_s], &[1])?;
            } else if !can_grow_mounted_ext() {
                return Err(Error::PermissionDenied(format!(
                    "growing the mounted {kind} filesystem on {} needs CAP_SYS_RESOURCE, which csi-proxy lacks; \
                     the partition has grown: unmount the volume and resize again, or grant the capability",
                    p.name
                )));
            }
            tools::run("resize2fs", &[node_s], &[])
        }
        "xfs" => match mounted {
            Some(m) => tools::run("xfs_growfs", &[m.path()], &[]),
            None => Err(Error::FailedPrecondition(format!(
                "the xfs filesystem on {} can only grow while mounted; mount it and resize again",
                p.name
            ))),
        },
        other => Err(Error::FailedPrecondition(format!(
            "cannot grow a {other} filesystem (supported: ext2/3/4, xfs)"
        ))),
    }
}

/// Can this process grow a mounted ext2/3/4? The kernel wants
/// CAP_SYS_RESOURCE for it, which some sandboxes withhold even from root.
pub fn can_grow_mounted_ext() -> bool {
    const CAP_SYS_RESOURCE: u32 = 24;
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .is_some_and(|eff| eff & (1 << CAP_SYS_RESOURCE) != 0)
}
