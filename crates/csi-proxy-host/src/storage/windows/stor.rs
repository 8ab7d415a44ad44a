//! The operations Windows offers only through the Storage Management API
//! (`root\Microsoft\Windows\Storage`, `MSFT_*` classes): disk locations,
//! initialise and partition, rescan, format, resize. Each runs as one job
//! on the WMI worker thread.
//!
//! Query text holds constant class and property names, numbers we hold as
//! integers, object paths WMI itself returned, and volume ids only through
//! [`cim::wql_string_literal`].

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::wmi::{Object, Value, Wmi, WmiWorker};
use crate::disk::DiskLocation;
use crate::storage::parse::guid::Guid;
use crate::storage::parse::layout::{BASIC_DATA, MICROSOFT_RESERVED};
use crate::storage::parse::{cim, location, msft};
use crate::storage::{
    not_initialized, plan_resize, DiskLayout, PartitionStep, ResizePlan, ResizeTarget, VolumeId,
};
use crate::{Error, Result};

/// MBR type of an NTFS/exFAT ("IFS") partition.
const MBR_TYPE_IFS: u32 = 7;
/// `MSFT_Disk.PartitionStyle`: 0 unknown (raw), 1 MBR, 2 GPT.
const STYLE_RAW: u32 = 0;
const STYLE_MBR: u32 = 1;
const STYLE_GPT: u32 = 2;
/// How long a storage job may run before we give up waiting.
const JOB_TIMEOUT: Duration = Duration::from_secs(600);
const JOB_POLL: Duration = Duration::from_millis(250);

/// Calls an `MSFT_*` method and checks its `ReturnValue`: 0 (or one of
/// `also_ok`) is success, 4096 means a storage job was started and is
/// waited for, anything else is an error with the provider's extended
/// status ([`msft::method_error`]).
pub fn call_storage_method(
    wmi: &Wmi,
    object_path: &str,
    class: &str,
    method: &str,
    args: &[(&str, Value)],
    subject: &str,
    also_ok: &[u32],
) -> Result<Object> {
    let out = wmi.exec_method(object_path, class, method, args)?;
    let what = format!("{class}.{method}");
    let code = out
        .u32("ReturnValue")?
        .ok_or_else(|| Error::Internal(format!("{what} on {subject} returned no ReturnValue")))?;
    if code == msft::SUCCESS || also_ok.contains(&code) {
        return Ok(out);
    }
    if code == msft::JOB_STARTED {
        wait_for_job(wmi, &out, &what, subject)?;
        return Ok(out);
    }
    Err(msft::method_error(
        &what,
        subject,
        code,
        extended_status(&out).as_deref(),
    ))
}

/// The text of the `ExtendedStatus` out-parameter
/// (`MSFT_StorageExtendedStatus`, embedded object or its text).
fn extended_status(out: &Object) -> Option<String> {
    let v = out.get("ExtendedStatus").ok()?;
    if let Some(s) = v.as_string() {
        return Some(s);
    }
    let obj = out.object("ExtendedStatus").ok()??;
    obj.string("Message")
        .ok()
        .flatten()
        .or_else(|| Some(obj.text()))
}

/// Waits (bounded) for the `MSFT_StorageJob` a method started.
fn wait_for_job(wmi: &Wmi, out: &Object, what: &str, subject: &str) -> Result<()> {
    let job_path = match out.string("CreatedStorageJob") {
        Ok(Some(p)) => p,
        _ => match out.object("CreatedStorageJob")? {
            Some(job) => job.path()?,
            None => {
                return Err(Error::Internal(format!(
                    "{what} on {subject} started a storage job but returned no reference to it"
                )))
            }
        },
    };
    let deadline = Instant::now() + JOB_TIMEOUT;
    loop {
        let job = wmi.get_object(&job_path)?;
        let state = job.u32("JobState")?.unwrap_or(0);
        if msft::job_finished(state) {
            return msft::job_result(
                what,
                subject,
                state,
                job.u32("ErrorCode")?.unwrap_or(0),
                job.string("ErrorDescription")?.as_deref(),
            );
        }
        if Instant::now() >= deadline {
            return Err(Error::Internal(format!(
                "{what} on {subject}: the storage job did not finish within {} s (JobState {state})",
                JOB_TIMEOUT.as_secs()
            )));
        }
        std::thread::sleep(JOB_POLL);
    }
}

/// `MSFT_Disk.Location` of every disk, parsed; disks whose location does
/// not have the adapter/target/LUN form (e.g. NVMe) are left out.
pub fn disk_locations(worker: &WmiWorker) -> Result<BTreeMap<u32, DiskLocation>> {
    worker.call(|wmi| {
        let mut out = BTreeMap::new();
        for row in wmi.query("SELECT Number, Location FROM MSFT_Disk")? {
            let (Some(number), Some(loc)) = (row.u32("Number")?, row.string("Location")?) else {
                continue;
            };
            match location::parse_location(&loc) {
                Ok(l) => {
                    out.insert(
                        number,
                        DiskLocation {
                            adapter: l.adapter,
                            bus: l.bus,
                            target: l.target,
                            lun_id: l.lun_id,
                        },
                    );
                }
                Err(e) => tracing::debug!("disk {number}: location {loc:?} skipped: {e}"),
            }
        }
        Ok(out)
    })
}

/// The `MSFT_Disk` of disk `number` ([`Error::NotFound`] when none).
/// `MSFT_Disk.Refresh`: re-reads the disk's state into the provider cache.
fn refresh_disk(wmi: &Wmi, disk: &Object, subject: &str) -> Result<()> {
    call_storage_method(
        wmi,
        &disk.path()?,
        "MSFT_Disk",
        "Refresh",
        &[],
        subject,
        &[],
    )
    .map(|_| ())
}

fn disk_object(wmi: &Wmi, number: u32) -> Result<Object> {
    // `number` is an integer: nothing of the client's text enters the query.
    wmi.query(&format!("SELECT * FROM MSFT_Disk WHERE Number = {number}"))?
        .into_iter()
        .next()
        .ok_or_else(|| {
            Error::NotFound(format!(
                "disk {number} does not exist (the Storage Management API has no MSFT_Disk {number})"
            ))
        })
}

/// Whether a `GptType` (`{GUID}`) is the Microsoft reserved partition's
/// (ignored when deciding whether a disk has partitions).
pub(super) fn is_msr(gpt_type: &str) -> bool {
    let g = gpt_type
        .trim()
        .trim_start_matches('{')
        .trim_end_matches('}');
    Guid::parse(g).is_ok_and(|g| g == MICROSOFT_RESERVED)
}

/// Whether a disk has a partition table and a partition other than the
/// Microsoft reserved one.
pub fn disk_layout(worker: &WmiWorker, number: u32) -> Result<DiskLayout> {
    worker.call(move |wmi| {
        let disk = disk_object(wmi, number)?;
        let style = disk.u32("PartitionStyle")?.unwrap_or(STYLE_RAW);
        if style == STYLE_RAW {
            return Ok(DiskLayout::default());
        }
        Ok(DiskLayout {
            initialized: true,
            has_data: has_data(wmi, number, style)?,
        })
    })
}

/// Whether disk `number` of partition style `style` has a partition other
/// than the Microsoft reserved one.
fn has_data(wmi: &Wmi, number: u32, style: u32) -> Result<bool> {
    let parts = wmi.query(&format!(
        "SELECT GptType, PartitionNumber FROM MSFT_Partition WHERE DiskNumber = {number}"
    ))?;
    let mut has_data = false;
    for p in &parts {
        match style {
            STYLE_GPT => {
                let t = p.string("GptType")?.unwrap_or_default();
                has_data |= !is_msr(&t);
            }
            _ => has_data = true,
        }
    }
    Ok(has_data)
}

/// `step` of partitioning: initialises a raw disk as GPT
/// ([`PartitionStep::Initialize`]), creates one basic data partition over
/// the whole disk unless it has a partition other than the Microsoft
/// reserved one ([`PartitionStep::Partition`]: a raw disk is refused), or
/// both. MBR disks are kept MBR (partition type IFS). Idempotent.
pub fn partition_disk(worker: &WmiWorker, number: u32, step: PartitionStep) -> Result<()> {
    worker.call(move |wmi| {
        let subject = format!("disk {number}");
        let mut disk = disk_object(wmi, number)?;
        if disk.bool("IsOffline")? == Some(true) {
            return Err(Error::FailedPrecondition(format!(
                "disk {number} is offline: bring it online (SetDiskState) before partitioning"
            )));
        }
        if disk.bool("IsReadOnly")? == Some(true) {
            return Err(Error::FailedPrecondition(format!(
                "disk {number} is read-only"
            )));
        }
        let mut style = disk.u32("PartitionStyle")?.unwrap_or(STYLE_RAW);
        if style == STYLE_RAW && step == PartitionStep::Partition {
            return Err(not_initialized(number));
        }
        if style == STYLE_RAW {
            call_storage_method(
                wmi,
                &disk.path()?,
                "MSFT_Disk",
                "Initialize",
                &[("PartitionStyle", Value::U32(STYLE_GPT))],
                &subject,
                &[msft::DISK_ALREADY_INITIALIZED],
            )?;
            disk = disk_object(wmi, number)?;
            style = disk.u32("PartitionStyle")?.unwrap_or(STYLE_GPT);
        }
        if step == PartitionStep::Initialize || has_data(wmi, number, style)? {
            return Ok(());
        }
        let mut args = vec![
            ("UseMaximumSize", Value::Bool(true)),
            ("AssignDriveLetter", Value::Bool(false)),
        ];
        match style {
            STYLE_GPT => args.push(("GptType", Value::Str(format!("{{{BASIC_DATA}}}")))),
            STYLE_MBR => args.push(("MbrType", Value::U32(MBR_TYPE_IFS))),
            other => {
                return Err(Error::FailedPrecondition(format!(
                    "disk {number} has an unknown partition style {other}"
                )))
            }
        }
        call_storage_method(
            wmi,
            &disk.path()?,
            "MSFT_Disk",
            "CreatePartition",
            &args,
            &subject,
            &[msft::ACCESS_PATH_IN_USE],
        )?;
        refresh_disk(wmi, &disk, &subject)?;
        // A SAN policy may leave the new partition offline.
        for p in wmi.query(&format!(
            "SELECT * FROM MSFT_Partition WHERE DiskNumber = {number} AND IsOffline = TRUE"
        ))? {
            call_storage_method(
                wmi,
                &p.path()?,
                "MSFT_Partition",
                "Online",
                &[],
                &subject,
                &[],
            )?;
        }
        Ok(())
    })
}

/// Refreshes the storage provider's cache of disks
/// (`MSFT_StorageSetting.UpdateHostStorageCache`, a static method).
pub fn rescan(worker: &WmiWorker) -> Result<()> {
    worker.call(|wmi| {
        call_storage_method(
            wmi,
            "MSFT_StorageSetting",
            "MSFT_StorageSetting",
            "UpdateHostStorageCache",
            &[],
            "the host",
            &[],
        )
        .map(drop)
    })
}

/// The `MSFT_Volume` of a volume id ([`Error::NotFound`] when none).
fn volume_object(wmi: &Wmi, v: &VolumeId) -> Result<Object> {
    let literal = cim::wql_string_literal(v.as_str())
        .map_err(|e| Error::InvalidArgument(format!("volume id {v}: {e}")))?;
    wmi.query(&format!(
        "SELECT * FROM MSFT_Volume WHERE UniqueId = {literal}"
    ))?
    .into_iter()
    .next()
    .ok_or_else(|| Error::NotFound(format!("volume {v} does not exist")))
}

/// Quick-formats the volume as NTFS (`MSFT_Volume.Format`, forced).
pub fn format(worker: &WmiWorker, v: &VolumeId) -> Result<()> {
    let v = v.clone();
    worker.call(move |wmi| {
        let vol = volume_object(wmi, &v)?;
        call_storage_method(
            wmi,
            &vol.path()?,
            "MSFT_Volume",
            "Format",
            &[
                ("FileSystem", Value::Str("NTFS".into())),
                ("Full", Value::Bool(false)),
                ("Force", Value::Bool(true)),
            ],
            &format!("volume {v}"),
            &[],
        )
        .map(drop)
    })
}

/// Resizes the volume's partition (and its filesystem) following
/// [`plan_resize`]: `MSFT_PartitionToVolume` gives the partition,
/// `GetSupportedSize` its maximum, `Resize` the change, then the disk is
/// refreshed.
pub fn resize(worker: &WmiWorker, v: &VolumeId, target: ResizeTarget) -> Result<()> {
    let v = v.clone();
    worker.call(move |wmi| {
        let subject = format!("the partition of volume {v}");
        let vol = volume_object(wmi, &v)?;
        let part = wmi
            .query(&format!(
                "ASSOCIATORS OF {{{}}} WHERE AssocClass = MSFT_PartitionToVolume",
                vol.path()?
            ))?
            .into_iter()
            .next()
            .ok_or_else(|| {
                Error::FailedPrecondition(format!("volume {v} has no partition to resize"))
            })?;
        let part_path = part.path()?;
        let current = part
            .u64("Size")?
            .ok_or_else(|| Error::Internal(format!("{subject}: no Size")))?;
        let sizes = call_storage_method(
            wmi,
            &part_path,
            "MSFT_Partition",
            "GetSupportedSize",
            &[],
            &subject,
            &[],
        )?;
        let max = sizes.u64("SizeMax")?.ok_or_else(|| {
            Error::Internal(format!("{subject}: GetSupportedSize gave no SizeMax"))
        })?;
        let size = match plan_resize(current, max, target)? {
            ResizePlan::Skip => return Ok(()),
            ResizePlan::Grow(n) | ResizePlan::Shrink(n) => n,
        };
        call_storage_method(
            wmi,
            &part_path,
            "MSFT_Partition",
            "Resize",
            &[("Size", Value::U64(size))],
            &subject,
            &[],
        )?;
        if let Some(number) = part.u32("DiskNumber")? {
            let disk = disk_object(wmi, number)?;
            refresh_disk(wmi, &disk, &format!("disk {number}"))?;
        }
        Ok(())
    })
}
