//! What changes a disk's layout on Linux: a GPT partition table, a
//! filesystem on a volume, a volume's size.

use super::devices::{self, DiskTable};
use super::format_record::FormatRecord;
use super::scan;
use super::sys::{self, Access};
use super::{
    ensure_online, filesystem_lags, from_io, random_guid, read_content, read_scanned, tools, Found,
    FsType, LinuxStorage,
};
use crate::storage::content;
use crate::storage::parse::gpt;
use crate::storage::{
    not_initialized, plan_resize, DiskLayout, PartitionStep as Step, ResizePlan, ResizeTarget,
    VolumeId,
};
use crate::{Error, Result};

/// The name of the partition PartitionDisk creates (as Windows names it).
const PARTITION_NAME: &str = "Basic data partition";

/// Whether `table` is a partition table and holds a data partition (any
/// but Microsoft reserved ones).
fn layout_of(table: &gpt::Table) -> DiskLayout {
    match table {
        gpt::Table::Gpt(g) => DiskLayout {
            initialized: true,
            has_data: g
                .partitions
                .iter()
                .any(|p| p.type_guid != gpt::Guid::MICROSOFT_RESERVED),
        },
        gpt::Table::Mbr { partitions, .. } => DiskLayout {
            initialized: true,
            has_data: !partitions.is_empty(),
        },
        gpt::Table::Raw => DiskLayout::default(),
    }
}

impl LinuxStorage {
    /// Whether `disk` has a partition table and a data partition.
    pub(super) fn layout(&self, disk: u32) -> Result<DiskLayout> {
        let d = self.disk(disk)?;
        let name = d.name.clone();
        self.read_bounded(&name, move |dev| {
            let (_, fd) = devices::open(dev, &d.name, d.major, d.minor, d.number, Access::Read)?;
            Ok(layout_of(&devices::table(&d, &fd)?.table))
        })
    }

    /// Completes a fresh table of ours that a killed PartitionDisk or
    /// InitializeDisk left half-written on `d` (see [`gpt::resume_fresh`]);
    /// whether there was one.
    fn complete_partial_table(&self, d: &super::BlockDisk) -> Result<bool> {
        // The first read of PartitionDisk: bounded (see `read_bounded`).
        let dd = d.clone();
        let has_table = self.read_bounded(&d.name, move |dev| {
            let (_, fd) =
                devices::open(dev, &dd.name, dd.major, dd.minor, dd.number, Access::Read)?;
            Ok(matches!(devices::table(&dd, &fd), Ok(t) if !matches!(t.table, gpt::Table::Raw)))
        })?;
        if has_table {
            return Ok(false);
        }
        let (_, fd) = self.open_disk(d, Access::Read)?;
        let c = read_content(&fd, &d.name)?;
        let ss = sys::sector_size(&fd).map_err(|e| from_io("BLKSSZGET", &d.name, e))?;
        let Some(writes) = gpt::resume_fresh(
            &c.device(),
            ss,
            c.size / u64::from(ss),
            gpt::Guid::BASIC_DATA,
            PARTITION_NAME,
            random_guid()?,
        ) else {
            return Ok(false);
        };
        drop(fd);
        tracing::info!(
            disk = d.name,
            "completing a partition table of ours left half-written"
        );
        let (path, fd) = self.open_disk(d, Access::Exclusive)?;
        let shown = path.display().to_string();
        for w in &writes {
            sys::write_at(&fd, w.offset, &w.bytes).map_err(|e| from_io("write", &shown, e))?;
        }
        sys::fsync(&fd).map_err(|e| from_io("fsync", &shown, e))?;
        devices::same_disk(&fd, d.number, &shown, true)?;
        self.inventory.touch(d.name.clone());
        self.sync_partitions(d, &fd)?;
        Ok(true)
    }

    /// `step` of partitioning `disk`.
    pub(super) fn partition(&self, disk: u32, step: Step) -> Result<()> {
        let _g = self.lock_disk(disk)?;
        let mut d = self.disk(disk)?;
        if d.read_only {
            return Err(Error::FailedPrecondition(format!("disk {disk} is offline")));
        }
        if self.complete_partial_table(&d)? {
            d = self.disk(disk)?;
        }
        // Look first without claiming the disk: a partitioned disk (perhaps
        // with mounted volumes) keeps its table; the kernel is only told
        // about partitions it does not know yet.
        {
            let (_, fd) = self.open_disk(&d, Access::Read)?;
            let layout = layout_of(&self.table(&d, &fd)?.table);
            if step == Step::Partition && !layout.initialized {
                return Err(not_initialized(disk));
            }
            let done = match step {
                Step::Initialize => layout.initialized,
                Step::Partition | Step::Both => layout.has_data,
            };
            if done {
                self.inventory.touch(d.name.clone());
                self.sync_partitions(&d, &fd)?;
                return Ok(());
            }
        }
        let (path, fd) = self.open_disk(&d, Access::Exclusive)?;
        let shown = path.display().to_string();
        let DiskTable {
            table,
            sector_size: ss,
            sectors,
            ..
        } = self.table(&d, &fd)?;
        let name = PARTITION_NAME;
        let writes = match table {
            gpt::Table::Gpt(_) if step == Step::Initialize => return Ok(()),
            gpt::Table::Gpt(g) => {
                self.check_new_partition(
                    disk,
                    &fd,
                    &shown,
                    ss,
                    gpt::single_partition_extent(&g, ss, sectors),
                )?;
                gpt::add_single_partition(
                    &g,
                    ss,
                    sectors,
                    random_guid()?,
                    gpt::Guid::BASIC_DATA,
                    name,
                )
            }
            gpt::Table::Mbr { .. } if step == Step::Initialize => return Ok(()),
            gpt::Table::Raw if step == Step::Partition => return Err(not_initialized(disk)),
            gpt::Table::Raw | gpt::Table::Mbr { .. } => {
                // Written over: the first and the last MiB. Only zeros, or
                // the empty MBR being replaced, may be there.
                let c = read_content(&fd, &shown)?;
                let empty_mbr = matches!(table, gpt::Table::Mbr { .. });
                content::check_partition(disk, &c, empty_mbr, self.overwrite)?;
                if step != Step::Initialize {
                    self.check_new_partition(
                        disk,
                        &fd,
                        &shown,
                        ss,
                        gpt::fresh_partition_extent(ss, sectors),
                    )?;
                }
                if step == Step::Initialize {
                    gpt::create_empty(ss, sectors, random_guid()?)
                } else {
                    gpt::create_single_partition(
                        ss,
                        sectors,
                        random_guid()?,
                        random_guid()?,
                        gpt::Guid::BASIC_DATA,
                        name,
                    )
                }
            }
        }
        .map_err(|e| Error::FailedPrecondition(format!("disk {disk}: {e}")))?;
        for w in &writes {
            sys::write_at(&fd, w.offset, &w.bytes).map_err(|e| from_io("write", &shown, e))?;
        }
        sys::fsync(&fd).map_err(|e| from_io("fsync", &shown, e))?;
        devices::same_disk(&fd, d.number, &shown, true)?;
        self.inventory.touch(d.name.clone());
        let now = self.sync_partitions(&d, &fd)?;
        if step != Step::Initialize && now.partitions.is_empty() {
            return Err(Error::Internal(format!(
                "disk {disk}: the kernel shows no partition after writing the partition table"
            )));
        }
        Ok(())
    }

    /// The check of the region `extent` (first and last LBA) that a
    /// partition PartitionDisk creates will cover, whatever the table
    /// (see [`content::check_new_partition`]); a layout error is left to
    /// the table's own writer to report.
    fn check_new_partition(
        &self,
        disk: u32,
        fd: &std::os::fd::OwnedFd,
        shown: &str,
        ss: u32,
        extent: std::result::Result<(u64, u64), gpt::GptError>,
    ) -> Result<()> {
        let Ok((first, last)) = extent else {
            return Ok(());
        };
        let (start, end) = (first * u64::from(ss), (last + 1) * u64::from(ss));
        let c = read_scanned(fd, shown, start, end - start)?;
        content::check_new_partition(disk, start, &c, self.overwrite)
    }

    pub(super) fn format_volume(&self, volume: &VolumeId) -> Result<()> {
        let _g = self.lock_volume(volume)?;
        let f = self.find(volume)?;
        ensure_online(&f, volume)?;
        self.refuse_if_in_use(
            &f.part.name,
            f.part.major,
            f.part.minor,
            &format!("format volume {volume}"),
        )?;
        // Read through a handle of our own before mkfs opens the device: a
        // filesystem may be replaced, anything else identified is refused.
        // What a format of ours cut short left (no superblock yet) is ours
        // to format over.
        let (node, fd) = self.open_part(&f.disk, &f.part, Access::Read)?;
        let record = self.format_record(&f)?;
        let allow = content::Overwrite {
            unidentified: self.overwrite.unidentified || self.intents.pending(volume, &record),
        };
        let size = sys::size_bytes(&fd).map_err(|e| from_io("BLKGETSIZE64", &f.part.name, e))?;
        let c = read_scanned(&fd, &f.part.name, 0, size)?;
        content::check_format(volume, &c, allow)?;
        // `fd` stays open until mkfs is done: the partition's disk cannot be
        // detached and re-attached meanwhile (a loop device in use is only
        // cleared on its last close), and the fd says after the write
        // which disk mkfs reached.
        let node = node
            .to_str()
            .ok_or_else(|| Error::Internal("device path".into()))?;
        let intent = self.intents.begin(volume, &record);
        match self.fs_type {
            FsType::Xfs => tools::run("mkfs.xfs", &["-f", "-q", node], &[]),
            t => tools::run(&format!("mkfs.{}", t.name()), &["-F", "-q", node], &[]),
        }?;
        devices::same_disk(&fd, f.disk.number, &f.part.name, true)?;
        intent.finished();
        Ok(())
    }

    /// What a format record of the partition `f` names: its disk's
    /// identities as ListDiskIDs gives them (else this boot and the disk's
    /// diskseq) and its place on the disk.
    fn format_record(&self, f: &Found) -> Result<FormatRecord> {
        // Reading them may ask the device: on a bounded reader.
        let (sysfs, name) = (self.sysfs.clone(), f.disk.name.clone());
        let ids = self
            .inventory
            .read_disk(&f.disk.name, move || Ok(scan::ids(&sysfs, &name)))?;
        // Unreadable: a value no later run repeats, so the record never
        // matches after a restart (refused as content in doubt).
        let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .unwrap_or_else(|e| format!("unreadable ({e}), pid {}", std::process::id()));
        Ok(FormatRecord::new(
            &ids,
            (&boot, u64::from(f.disk.number)),
            f.part.start,
            f.part.size,
        ))
    }

    pub(super) fn resize_volume(&self, volume: &VolumeId, target: ResizeTarget) -> Result<()> {
        let _g = self.lock_volume(volume)?;
        let f = self.find(volume)?;
        ensure_online(&f, volume)?;
        let (disk_path, fd) = self.open_disk(&f.disk, Access::Write)?;
        let shown = disk_path.display().to_string();
        let DiskTable {
            table,
            sector_size: ss,
            sectors,
            head,
        } = self.table(&f.disk, &fd)?;
        let gpt::Table::Gpt(g) = table else {
            return Err(Error::FailedPrecondition(format!(
                "volume {volume} is on an MBR disk; only GPT partitions can be resized"
            )));
        };
        let entry = g
            .partitions
            .iter()
            .find(|e| e.number == f.part.number)
            .ok_or_else(|| Error::NotFound(format!("volume {volume}: partition entry is gone")))?;
        let ss64 = u64::from(ss);
        let max_end = gpt::max_partition_end(&g, ss, f.part.number, sectors)
            .map_err(|e| Error::FailedPrecondition(format!("volume {volume}: {e}")))?;
        let max_bytes = (max_end.saturating_sub(entry.first_lba) + 1).saturating_mul(ss64);
        let current = (entry.last_lba.saturating_sub(entry.first_lba) + 1).saturating_mul(ss64);
        let mounts = Self::mounts()?;
        // Held to the end: the disk stays the one checked (see format).
        let (node, _held) = self.open_part(&f.disk, &f.part, Access::Read)?;
        let c = self.content_bounded(&f.disk, &f.part)?;
        let (kind, fs_head) = (content::filesystem(&c.found), &c.head);
        match plan_resize(current, max_bytes, target)? {
            ResizePlan::Shrink(n) => Err(Error::FailedPrecondition(format!(
                "volume {volume} is {current} bytes; shrinking it to {n} bytes is not supported on Linux"
            ))),
            ResizePlan::Skip => {
                if filesystem_lags(fs_head, f.part.size) {
                    super::grow::grow_filesystem(&f.part, kind, &node, &mounts)?;
                }
                Ok(())
            }
            ResizePlan::Grow(n) => {
                let new_last = entry.first_lba + n / ss64 - 1;
                let plan = gpt::grow(&g, &head, ss, sectors, f.part.number, Some(new_last))
                    .map_err(|e| Error::FailedPrecondition(format!("volume {volume}: {e}")))?;
                for w in &plan.writes {
                    sys::write_at(&fd, w.offset, &w.bytes).map_err(|e| from_io("write", &shown, e))?;
                }
                sys::fsync(&fd).map_err(|e| from_io("fsync", &shown, e))?;
                devices::same_disk(&fd, f.disk.number, &shown, true)?;
                let len = (plan.new_last_lba - entry.first_lba + 1) * ss64;
                self.inventory.touch(f.disk.name.clone());
                sys::resize_partition(&fd, f.part.number, entry.first_lba * ss64, len)
                    .map_err(|e| from_io("BLKPG resize", &shown, e))?;
                super::grow::grow_filesystem(&f.part, kind, &node, &mounts)
            }
        }
    }
}
