//! The operations Windows offers only through the Storage Management API
//! (`root\Microsoft\Windows\Storage`, `MSFT_*` classes): disk locations,
//! initialise and partition, rescan, format, resize. Each runs as one job
//! on the WMI worker thread.
//!
//! Every class, property, method and parameter name comes from
//! [`crate::wmi_schema::names`] and every query from
//! [`crate::wmi_schema::queries`] (checked against the published schema):
//! numbers we hold as integers, object paths WMI itself returned, and
//! volume ids only through
//! [`crate::storage::parse::cim::wql_string_literal`].

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::wmi::{Object, Value, Wmi, WmiWorker};
use crate::disk::DiskLocation;
use crate::storage::identity::{self, DiskIdentity, Seen, TableId};
use crate::storage::parse::guid::Guid;
use crate::storage::parse::layout::{BASIC_DATA, MICROSOFT_RESERVED};
use crate::storage::parse::{location, msft};
use crate::storage::{plan_resize, DiskLayout, ResizePlan, ResizeTarget, VolumeId};
use crate::wmi_schema::names::{
    disk, partition, storage_extended_status, storage_job, storage_setting, volume,
    CREATED_STORAGE_JOB, EXTENDED_STATUS, RETURN_VALUE,
};
use crate::wmi_schema::{queries, Method};
use crate::{Error, Result};

/// MBR type of an NTFS/exFAT ("IFS") partition.
const MBR_TYPE_IFS: u16 = 7;
/// `MSFT_Disk.PartitionStyle`: 0 unknown (raw), 1 MBR, 2 GPT.
const STYLE_RAW: u16 = 0;
const STYLE_GPT: u16 = 2;
/// How long a storage job may run before we give up waiting.
const JOB_TIMEOUT: Duration = Duration::from_secs(600);
/// The bound of a host-changing storage call's WMI work (its storage job
/// included). Not the caller's deadline: the operation goes on past it and
/// `storage::ops` keeps its result for the retry.
const OPERATION_LIMIT: Duration = Duration::from_secs(660);
const JOB_POLL: Duration = Duration::from_millis(250);

/// Calls an `MSFT_*` method and checks its `ReturnValue`: 0 (or one of
/// `also_ok`) is success, 4096 means a storage job was started and is
/// waited for, anything else is an error with the provider's extended
/// status ([`msft::method_error`]).
pub fn call_storage_method(
    wmi: &Wmi,
    object_path: &str,
    method: Method,
    args: &[(&str, Value)],
    subject: &str,
    also_ok: &[u32],
) -> Result<Object> {
    let out = wmi.exec_method(object_path, method.class.name, method.name, args)?;
    let what = format!("{}.{}", method.class.name, method.name);
    let code = out
        .any_out(&RETURN_VALUE)?
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
    let v = out.embedded(&EXTENDED_STATUS).ok()?;
    if let Some(s) = v.as_string() {
        return Some(s);
    }
    let obj = out.embedded_object(&EXTENDED_STATUS).ok()??;
    obj.read(&storage_extended_status::MESSAGE)
        .ok()
        .flatten()
        .or_else(|| Some(obj.text()))
}

/// Waits (bounded) for the `MSFT_StorageJob` a method started.
fn wait_for_job(wmi: &Wmi, out: &Object, what: &str, subject: &str) -> Result<()> {
    // A reference arrives as its path, an embedded object as an object.
    let job_path = match out.embedded(&CREATED_STORAGE_JOB).map(|v| v.as_string()) {
        Ok(Some(p)) => p,
        _ => match out.embedded_object(&CREATED_STORAGE_JOB)? {
            Some(job) => job.path()?,
            None => {
                return Err(Error::Internal(format!(
                    "{what} on {subject} started a storage job but returned no reference to it"
                )))
            }
        },
    };
    let started = Instant::now();
    let deadline = wmi.deadline().min(started + JOB_TIMEOUT);
    loop {
        let job = wmi.get_object(&job_path)?;
        let state = job.read(&storage_job::JOB_STATE)?.unwrap_or(0);
        if msft::job_finished(state) {
            return msft::job_result(
                what,
                subject,
                state,
                job.read(&storage_job::ERROR_CODE)?.unwrap_or(0),
                job.read(&storage_job::ERROR_DESCRIPTION)?.as_deref(),
            );
        }
        if Instant::now() >= deadline {
            return Err(Error::Internal(format!(
                "{what} on {subject}: the storage job did not finish within {} s (JobState {state})",
                started.elapsed().as_secs()
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
        for row in wmi.query(&queries::disk_locations())? {
            let (Some(number), Some(loc)) = (row.read(&disk::NUMBER)?, row.read(&disk::LOCATION)?)
            else {
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
    call_storage_method(wmi, &disk.path()?, disk::refresh::METHOD, &[], subject, &[]).map(|_| ())
}

fn disk_object(wmi: &Wmi, number: u32) -> Result<Object> {
    // `number` is an integer: nothing of the client's text enters the query.
    wmi.query(&queries::disk(number))?
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
        let style = disk.read(&disk::PARTITION_STYLE)?.unwrap_or(STYLE_RAW);
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
fn has_data(wmi: &Wmi, number: u32, style: u16) -> Result<bool> {
    let parts = wmi.query(&queries::partition_types(number))?;
    let mut has_data = false;
    for p in &parts {
        match style {
            STYLE_GPT => {
                let t = p.read(&partition::GPT_TYPE)?.unwrap_or_default();
                has_data |= !is_msr(&t);
            }
            _ => has_data = true,
        }
    }
    Ok(has_data)
}

/// What `MSFT_Disk` says identifies `disk` (number, size, serial). Page
/// 83 is not read from it (`UniqueId`'s spelling against the held
/// handle's page-83 text is not verified): the strong id compared on this
/// path is the partition table's ([`identity::TableId`]).
fn msft_identity(disk: &Object) -> Result<DiskIdentity> {
    Ok(DiskIdentity {
        number: disk.read(&disk::NUMBER)?.unwrap_or(u32::MAX),
        size: disk.read(&disk::SIZE)?.unwrap_or(0),
        serial: disk.read(&disk::SERIAL_NUMBER)?.unwrap_or_default(),
        page83: String::new(),
    })
}

/// The `MSFT_Disk` of disk `number`, refused unless it is the disk that
/// was `checked` (read through the handle held since the check): the same
/// number, size and serial number, and the table id `table` (the GPT disk
/// GUID, or MBR signature) read through that handle. A method of the
/// object returned acts on the disk this object is (its path names the
/// disk's device instance, not its number).
fn checked_disk_object(
    wmi: &Wmi,
    number: u32,
    checked: &DiskIdentity,
    table: TableId,
    what: &str,
) -> Result<Object> {
    let disk = disk_object(wmi, number)?;
    let checked = DiskIdentity {
        page83: String::new(),
        ..checked.clone()
    };
    identity::refuse_if_replaced(
        &checked,
        &msft_identity(&disk)?,
        Seen::From(disk::CLASS.name),
        what,
    )?;
    identity::refuse_unless_table(
        number,
        table,
        disk.read(&disk::GUID)?.as_deref(),
        disk.read(&disk::SIGNATURE)?,
        what,
    )?;
    Ok(disk)
}

/// Creates one basic data partition over the whole of disk `number` (GPT
/// type basic data; MBR type IFS), which the caller holds open and has
/// found initialised and without a data partition. Every `MSFT_Disk` a
/// method is called on is first compared with `checked` and `table`, read
/// through the caller's handle: after a refresh of the provider's cache
/// (a read), before `CreatePartition`, and before the refresh and the
/// partition onlining after it.
pub fn create_partition(
    worker: &WmiWorker,
    number: u32,
    checked: DiskIdentity,
    table: TableId,
) -> Result<()> {
    worker.call_within(OPERATION_LIMIT, move |wmi| {
        let subject = format!("disk {number}");
        let what = format!("partition disk {number}");
        // The provider caches disks: let it read the table we hold (a
        // refresh reads, it writes nothing to the disk).
        refresh_disk(wmi, &disk_object(wmi, number)?, &subject)?;
        let disk = checked_disk_object(wmi, number, &checked, table, &what)?;
        if disk.read(&disk::IS_READ_ONLY)? == Some(true) {
            return Err(Error::FailedPrecondition(format!(
                "disk {number} is read-only"
            )));
        }
        use disk::create_partition as create;
        let mut args = vec![
            create::USE_MAXIMUM_SIZE.value(true),
            create::ASSIGN_DRIVE_LETTER.value(false),
        ];
        match table {
            TableId::Gpt(_) => args.push(create::GPT_TYPE.value(format!("{{{BASIC_DATA}}}"))),
            TableId::Mbr(_) => args.push(create::MBR_TYPE.value(MBR_TYPE_IFS)),
        }
        call_storage_method(
            wmi,
            &disk.path()?,
            create::METHOD,
            &args,
            &subject,
            &[msft::ACCESS_PATH_IN_USE],
        )?;
        let disk = checked_disk_object(wmi, number, &checked, table, &what)?;
        refresh_disk(wmi, &disk, &subject)?;
        // A SAN policy may leave the new partition offline.
        checked_disk_object(wmi, number, &checked, table, &what)?;
        for p in wmi.query(&queries::offline_partitions(number))? {
            call_storage_method(
                wmi,
                &p.path()?,
                partition::online::METHOD,
                &[],
                &subject,
                &[],
            )?;
        }
        Ok(())
    })
}

/// The rescan out, if any: when it started. One at a time: a rescan that
/// hangs in the storage provider holds one WMI thread, and later Rescan
/// calls are answered `Unavailable` at once, naming it, instead of each
/// holding a thread of their own until their deadline.
#[derive(Debug, Default)]
pub struct Rescans(std::sync::Arc<std::sync::Mutex<Option<Instant>>>);

/// A rescan out; the gate opens again when its WMI job ends (or is
/// dropped without running), not when its caller stops waiting.
struct RescanOut(std::sync::Arc<std::sync::Mutex<Option<Instant>>>);

impl Drop for RescanOut {
    fn drop(&mut self) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }
}

impl Rescans {
    /// Refreshes the storage provider's cache of disks
    /// (`MSFT_StorageSetting.UpdateHostStorageCache`, a static method);
    /// `Unavailable` at once while an earlier rescan is still out.
    pub fn rescan(&self, worker: &WmiWorker) -> Result<()> {
        let out = {
            let mut g = self.0.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(since) = *g {
                return Err(Error::Unavailable(format!(
                    "a rescan is still running since {} s ago (the storage provider has not \
                     answered it); retry when it has finished",
                    since.elapsed().as_secs()
                )));
            }
            *g = Some(Instant::now());
            RescanOut(self.0.clone())
        };
        worker.call_within(OPERATION_LIMIT, move |wmi| {
            let _out = out;
            call_storage_method(
                wmi,
                storage_setting::CLASS.name,
                storage_setting::update_host_storage_cache::METHOD,
                &[],
                "the host",
                &[],
            )
            .map(drop)
        })
    }
}

/// The `MSFT_Volume` of a volume id ([`Error::NotFound`] when none).
fn volume_object(wmi: &Wmi, v: &VolumeId) -> Result<Object> {
    let query = queries::volume(v.as_str())
        .map_err(|e| Error::InvalidArgument(format!("volume id {v}: {e}")))?;
    wmi.query(&query)?
        .into_iter()
        .next()
        .ok_or_else(|| Error::NotFound(format!("volume {v} does not exist")))
}

/// Quick-formats the volume as NTFS (`MSFT_Volume.Format`, forced).
pub fn format(worker: &WmiWorker, v: &VolumeId) -> Result<()> {
    let v = v.clone();
    worker.call_within(OPERATION_LIMIT, move |wmi| {
        let vol = volume_object(wmi, &v)?;
        use volume::format as f;
        call_storage_method(
            wmi,
            &vol.path()?,
            f::METHOD,
            &[
                f::FILE_SYSTEM.value("NTFS".into()),
                f::FULL.value(false),
                f::FORCE.value(true),
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
    worker.call_within(OPERATION_LIMIT, move |wmi| {
        let subject = format!("the partition of volume {v}");
        let vol = volume_object(wmi, &v)?;
        let part = wmi
            .query(&queries::partition_of_volume(&vol.path()?))?
            .into_iter()
            .next()
            .ok_or_else(|| {
                Error::FailedPrecondition(format!("volume {v} has no partition to resize"))
            })?;
        let part_path = part.path()?;
        let current = part
            .read(&partition::SIZE)?
            .ok_or_else(|| Error::Internal(format!("{subject}: no Size")))?;
        // The maximum from the disk's layout, not GetSupportedSize: that
        // needs the defragsvc service, which nodes often have disabled.
        let (Some(disk_number), Some(partition_number)) = (
            part.read(&partition::DISK_NUMBER)?,
            part.read(&partition::PARTITION_NUMBER)?,
        ) else {
            return Err(Error::Internal(format!(
                "{subject}: no DiskNumber or PartitionNumber"
            )));
        };
        let max = super::disk::max_partition_size(disk_number, partition_number)?;
        let size = match plan_resize(current, max, target)? {
            ResizePlan::Skip => return Ok(()),
            ResizePlan::Grow(n) | ResizePlan::Shrink(n) => n,
        };
        call_storage_method(
            wmi,
            &part_path,
            partition::resize::METHOD,
            &[partition::resize::SIZE.value(size)],
            &subject,
            &[],
        )?;
        if let Some(number) = part.read(&partition::DISK_NUMBER)? {
            let disk = disk_object(wmi, number)?;
            refresh_disk(wmi, &disk, &format!("disk {number}"))?;
        }
        Ok(())
    })
}
