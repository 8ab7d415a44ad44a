//! Disk operations over I/O controls on `\\.\PhysicalDriveN` (no WMI).

use std::io;

use windows_sys::Win32::System::Ioctl::{
    PropertyStandardQuery, StorageDeviceIdProperty, StorageDeviceProperty, CREATE_DISK,
    CREATE_DISK_0, CREATE_DISK_GPT, IOCTL_DISK_CREATE_DISK, IOCTL_DISK_GET_DISK_ATTRIBUTES,
    IOCTL_DISK_GET_DRIVE_GEOMETRY_EX, IOCTL_DISK_GET_DRIVE_LAYOUT_EX,
    IOCTL_DISK_SET_DISK_ATTRIBUTES, IOCTL_DISK_UPDATE_PROPERTIES, IOCTL_STORAGE_GET_DEVICE_NUMBER,
    IOCTL_STORAGE_QUERY_PROPERTY, PARTITION_STYLE_GPT, SET_DISK_ATTRIBUTES, STORAGE_PROPERTY_QUERY,
};

use super::errors::{self, win32};
use super::win32::{self as w, Handle, GENERIC_READ};
use crate::disk::DiskIds;
use crate::storage::identity::{self, DiskIdentity, Seen};
use crate::storage::parse::grow::{self, GrowError};
use crate::storage::parse::nvme::{self, Identify, ScsiAddress};
use crate::storage::parse::{device_id, extents, free_space, layout, ParseError};
use crate::{Error, Result};

/// Disk numbers probed past the last one found before giving up, when the
/// disks are found by trying `\\.\PhysicalDriveN` (numbers can have gaps
/// after disks are removed).
const PROBE_GAP: u32 = 32;
/// Never probe beyond this disk number.
const PROBE_LIMIT: u32 = 4096;

/// `\\.\PhysicalDriveN`.
pub fn disk_path(disk: u32) -> String {
    format!(r"\\.\PhysicalDrive{disk}")
}

fn subject(disk: u32) -> String {
    format!("disk {disk} ({})", disk_path(disk))
}

/// Opens disk `disk`; an unknown number is [`Error::NotFound`].
pub fn open_disk(disk: u32, access: u32) -> Result<Handle> {
    w::open_device(&disk_path(disk), access).map_err(|e| {
        errors::win32_or_missing(
            "CreateFileW",
            &subject(disk),
            e,
            &format!("disk {disk} does not exist"),
        )
    })
}

/// A parse failure of an OS answer: our bug or a driver's, never the
/// client's.
pub fn bad_answer(op: &str, subject: &str, e: ParseError) -> Error {
    Error::Internal(format!("{op} on {subject}: unexpected answer: {e}"))
}

/// Whether an error means "this device does not answer this query".
fn not_supported(e: &io::Error) -> bool {
    // ERROR_INVALID_FUNCTION, ERROR_NOT_SUPPORTED
    matches!(w::code(e), Some(1 | 50))
}

/// `IOCTL_SCSI_GET_ADDRESS` (ntddscsi.h; `windows-sys` has it only with
/// its iSCSI feature, and the value is checked in `parse::windows_abi`).
pub const IOCTL_SCSI_GET_ADDRESS: u32 = 0x0004_1018;

/// `IOCTL_STORAGE_GET_DEVICE_NUMBER` on an open disk or volume handle.
pub fn device_number(h: &Handle, subject: &str) -> Result<extents::StorageDeviceNumber> {
    let out = w::ioctl::<()>(h, IOCTL_STORAGE_GET_DEVICE_NUMBER, None, 64)
        .map_err(|e| win32("IOCTL_STORAGE_GET_DEVICE_NUMBER", subject, e))?;
    extents::parse_storage_device_number(&out)
        .map_err(|e| bad_answer("IOCTL_STORAGE_GET_DEVICE_NUMBER", subject, e))
}

/// The numbers of the disks of this host, ascending. SetupDi over the disk
/// device interface first; when it finds nothing (wine, or a failure), the
/// `\\.\PhysicalDriveN` names are probed until [`PROBE_GAP`] numbers in a
/// row do not exist.
pub fn disk_numbers() -> Result<Vec<u32>> {
    let mut found = Vec::new();
    match w::disk_interface_paths() {
        Ok(paths) => {
            for p in paths {
                // A disk that went away meanwhile is skipped.
                let Ok(h) = w::open_device(&p, 0) else {
                    continue;
                };
                if let Ok(n) = device_number(&h, &p) {
                    found.push(n.device_number);
                }
            }
        }
        Err(e) => tracing::debug!("SetupDi disk enumeration failed, probing instead: {e}"),
    }
    if found.is_empty() {
        let mut missing = 0;
        let mut n = 0;
        while missing < PROBE_GAP && n < PROBE_LIMIT {
            match w::open_device(&disk_path(n), 0) {
                Ok(_) => {
                    found.push(n);
                    missing = 0;
                }
                // FILE_NOT_FOUND, PATH_NOT_FOUND: no such disk.
                Err(e) if matches!(w::code(&e), Some(2 | 3)) => missing += 1,
                // Any other answer (e.g. access denied) means it exists.
                Err(_) => {
                    found.push(n);
                    missing = 0;
                }
            }
            n += 1;
        }
    }
    found.sort_unstable();
    found.dedup();
    Ok(found)
}

/// Size in bytes and logical sector size of the disk open as `h`
/// (`IOCTL_DISK_GET_DRIVE_GEOMETRY_EX`).
pub fn geometry(h: &Handle, subject: &str) -> Result<(u64, u32)> {
    const IOCTL: &str = "IOCTL_DISK_GET_DRIVE_GEOMETRY_EX";
    let geo = w::ioctl::<()>(h, IOCTL_DISK_GET_DRIVE_GEOMETRY_EX, None, 256)
        .map_err(|e| win32(IOCTL, subject, e))?;
    let size = extents::parse_disk_geometry_ex_size(&geo)
        .map_err(|e| bad_answer(IOCTL, subject, e))? as u64;
    let ss = extents::parse_disk_geometry_ex_sector_size(&geo)
        .map_err(|e| bad_answer(IOCTL, subject, e))?;
    Ok((size, ss))
}

/// The largest size partition `partition` of disk `number` can grow to,
/// from the disk's layout (`IOCTL_DISK_GET_DRIVE_LAYOUT_EX`) and geometry:
/// what ResizeVolume needs, without `MSFT_Partition.GetSupportedSize` and
/// the defragsvc service behind it.
pub fn max_partition_size(number: u32, partition: u32) -> Result<u64> {
    let s = subject(number);
    let h = open_disk(number, GENERIC_READ)?;
    let (size, ss) = geometry(&h, &s)?;
    let out = w::ioctl::<()>(&h, IOCTL_DISK_GET_DRIVE_LAYOUT_EX, None, 4096)
        .map_err(|e| win32("IOCTL_DISK_GET_DRIVE_LAYOUT_EX", &s, e))?;
    let layout = layout::parse_drive_layout_ex(&out)
        .map_err(|e| bad_answer("IOCTL_DISK_GET_DRIVE_LAYOUT_EX", &s, e))?;
    free_space::max_partition_size(&layout, partition, size, u64::from(ss))
        .ok_or_else(|| Error::NotFound(format!("{s} has no partition {partition}")))
}

/// Size in bytes (`IOCTL_DISK_GET_DRIVE_GEOMETRY_EX`, which needs no access
/// rights, unlike `IOCTL_DISK_GET_LENGTH_INFO`).
pub fn disk_size(disk: u32) -> Result<u64> {
    let s = subject(disk);
    let h = open_disk(disk, 0)?;
    let out = w::ioctl::<()>(&h, IOCTL_DISK_GET_DRIVE_GEOMETRY_EX, None, 256)
        .map_err(|e| win32("IOCTL_DISK_GET_DRIVE_GEOMETRY_EX", &s, e))?;
    let size = extents::parse_disk_geometry_ex_size(&out)
        .map_err(|e| bad_answer("IOCTL_DISK_GET_DRIVE_GEOMETRY_EX", &s, e))?;
    u64::try_from(size).map_err(|_| {
        Error::Internal(format!(
            "IOCTL_DISK_GET_DRIVE_GEOMETRY_EX on {s}: negative size {size}"
        ))
    })
}

/// `IOCTL_STORAGE_QUERY_PROPERTY` (standard query) for `property`, parsed
/// by `parse`; a descriptor larger than the buffer is asked for again with
/// more room. `None` when the device does not support the property.
fn query_property<T>(
    h: &Handle,
    subject: &str,
    property: i32,
    parse: impl Fn(&[u8]) -> std::result::Result<T, ParseError>,
) -> Result<Option<T>> {
    let query = STORAGE_PROPERTY_QUERY {
        PropertyId: property,
        QueryType: PropertyStandardQuery,
        AdditionalParameters: [0],
    };
    let ask = |size: usize| match w::ioctl(h, IOCTL_STORAGE_QUERY_PROPERTY, Some(&query), size) {
        Ok(out) => Ok(Some(out)),
        Err(e) if not_supported(&e) => Ok(None),
        Err(e) => Err(e),
    };
    // A descriptor larger than 1 KiB is asked for again with more room, up
    // to the 1 MiB limit (`parse::grow`, tested with a simulated device).
    grow::read_growing(1024, w::MAX_OUTPUT, ask, parse).map_err(|e| match e {
        GrowError::Ask(e) => win32("IOCTL_STORAGE_QUERY_PROPERTY", subject, e),
        GrowError::Parse(e) => bad_answer("IOCTL_STORAGE_QUERY_PROPERTY", subject, e),
    })
}

/// Page-0x83 id (first device-associated identifier, as upstream) and
/// serial number of a disk; a device that answers neither query gets empty
/// strings. An NVMe disk whose page 83 or serial is not answered gets the
/// identifiers NVMe defines instead: the NGUID (else the EUI-64) of its
/// namespace, the serial number of its controller ([`nvme_ids`]).
pub fn disk_ids(disk: u32) -> Result<DiskIds> {
    let s = subject(disk);
    let h = open_disk(disk, 0)?;
    let mut page83 = query_property(
        &h,
        &s,
        StorageDeviceIdProperty,
        device_id::parse_storage_device_id_descriptor,
    )?
    .and_then(|ids| device_id::page83_id(&ids))
    .unwrap_or_default();
    let (serial, bus) = device_descriptor(&h, &s)?.unwrap_or((None, 0));
    let mut serial_number = serial.unwrap_or_default();
    if bus == nvme::BUS_TYPE_NVME && (page83.is_empty() || serial_number.is_empty()) {
        let (ns, controller) = nvme_ids(&h, &s);
        if page83.is_empty() {
            page83 = ns.and_then(|n| n.page83()).unwrap_or_default();
        }
        if serial_number.is_empty() {
            serial_number = controller.unwrap_or_default();
        }
    }
    Ok(DiskIds {
        page83,
        serial_number,
    })
}

/// Serial number and `BusType` of the disk open as `h`, from its
/// `STORAGE_DEVICE_DESCRIPTOR`; `None` when the device has none.
fn device_descriptor(h: &Handle, s: &str) -> Result<Option<(Option<String>, u32)>> {
    query_property(h, s, StorageDeviceProperty, |b| {
        Ok((
            device_id::parse_storage_device_descriptor_serial(b)?,
            nvme::parse_device_bus_type(b)?,
        ))
    })
}

/// The disk's `SCSI_ADDRESS`; `None` where its driver does not answer.
pub fn scsi_address(h: &Handle, s: &str) -> Result<Option<ScsiAddress>> {
    const IOCTL: &str = "IOCTL_SCSI_GET_ADDRESS";
    match w::ioctl::<()>(h, IOCTL_SCSI_GET_ADDRESS, None, 64) {
        Ok(out) => nvme::parse_scsi_address(&out)
            .map(Some)
            .map_err(|e| bad_answer(IOCTL, s, e)),
        Err(e) if not_supported(&e) => Ok(None),
        Err(e) => Err(win32(IOCTL, s, e)),
    }
}

/// The identify data `what` of the NVMe disk open as `h`
/// (`IOCTL_STORAGE_QUERY_PROPERTY` with the protocol-specific property);
/// `None` where the driver does not answer it (ERROR_INVALID_PARAMETER
/// included: older stornvme versions refuse unknown property ids so).
pub fn identify(h: &Handle, s: &str, what: Identify) -> Result<Option<Vec<u8>>> {
    const IOCTL: &str = "IOCTL_STORAGE_QUERY_PROPERTY (NVMe identify)";
    let query = nvme::identify_query(what);
    match w::ioctl(h, IOCTL_STORAGE_QUERY_PROPERTY, Some(&query), query.len()) {
        Ok(out) => nvme::parse_identify_answer(&out)
            .map(|d| Some(d.to_vec()))
            .map_err(|e| bad_answer(IOCTL, s, e)),
        Err(e) if not_supported(&e) || w::code(&e) == Some(87) => Ok(None),
        Err(e) => Err(win32(IOCTL, s, e)),
    }
}

/// The namespace identifiers (identify namespace for the namespace id of
/// the disk's SCSI address) and the controller's serial number (identify
/// controller) of an NVMe disk. What the driver does not answer is `None`;
/// a failed query or an answer that does not parse is logged and `None`
/// too: the disk is still listed, with what the other queries gave, and
/// one odd disk never fails the list of all.
pub fn nvme_ids(h: &Handle, s: &str) -> (Option<nvme::NamespaceIds>, Option<String>) {
    let ns = match scsi_address(h, s) {
        Ok(Some(a)) => match identify(h, s, Identify::Namespace(a.namespace_id())) {
            Ok(d) => d.and_then(|d| own_namespace(h, s, a.namespace_id(), &d)),
            Err(e) => warn(e),
        },
        Ok(None) => None,
        Err(e) => warn(e),
    };
    let controller = match identify(h, s, Identify::Controller) {
        Ok(d) => d.and_then(|d| {
            nvme::parse_identify_controller_serial(&d)
                .map_err(|e| bad_answer("NVMe identify controller", s, e))
                .unwrap_or_else(warn)
        }),
        Err(e) => warn(e),
    };
    (ns, controller)
}

/// The ids of identify namespace data `d`, if it describes the disk open
/// as `h`: a namespace whose size differs from the disk's is another one
/// (the namespace id was read wrong), and its ids are never reported.
fn own_namespace(h: &Handle, s: &str, nsid: u32, d: &[u8]) -> Option<nvme::NamespaceIds> {
    let parsed = nvme::parse_identify_namespace(d)
        .and_then(|ids| Ok((ids, nvme::identify_namespace_size(d)?)))
        .map_err(|e| bad_answer("NVMe identify namespace", s, e));
    let (ids, size) = parsed.map_or_else(warn, Some)?;
    let disk = geometry(h, s).map_or_else(warn, Some)?.0;
    if size != Some(disk) {
        tracing::warn!(
            "{s}: namespace {nsid} has {size:?} bytes, the disk {disk}: its identifiers are not used"
        );
        return None;
    }
    Some(ids)
}

/// An answer that did not parse, logged: the identifier stays empty.
fn warn<T>(e: Error) -> Option<T> {
    tracing::warn!("{e}");
    None
}

/// The SCSI address of an NVMe disk (`BusType` NVMe and an answer to
/// `IOCTL_SCSI_GET_ADDRESS`), which gives its location; `None` for any
/// other disk.
pub fn nvme_address(disk: u32) -> Result<Option<ScsiAddress>> {
    let s = subject(disk);
    let h = open_disk(disk, 0)?;
    match device_descriptor(&h, &s)? {
        Some((_, nvme::BUS_TYPE_NVME)) => scsi_address(&h, &s),
        _ => Ok(None),
    }
}

fn attributes(h: &Handle, s: &str) -> Result<extents::DiskAttributes> {
    let out = w::ioctl::<()>(h, IOCTL_DISK_GET_DISK_ATTRIBUTES, None, 64)
        .map_err(|e| win32("IOCTL_DISK_GET_DISK_ATTRIBUTES", s, e))?;
    extents::parse_disk_attributes(&out)
        .map_err(|e| bad_answer("IOCTL_DISK_GET_DISK_ATTRIBUTES", s, e))
}

/// Whether the disk is online (`DISK_ATTRIBUTE_OFFLINE` clear).
pub fn disk_online(disk: u32) -> Result<bool> {
    let s = subject(disk);
    let h = open_disk(disk, 0)?;
    Ok(!attributes(&h, &s)?.is_offline())
}

/// Brings the disk held as `pin` (open for reading and writing) online or
/// takes it offline, persistently
/// (`IOCTL_DISK_SET_DISK_ATTRIBUTES` with only the offline bit in the mask,
/// then `IOCTL_DISK_UPDATE_PROPERTIES`); nothing is changed if the disk is
/// already in that state.
pub fn set_disk_online(pin: &Pinned, online: bool) -> Result<()> {
    let (h, s) = (&pin.h, &pin.subject);
    if attributes(h, s)?.is_offline() != online {
        return Ok(());
    }
    let set = SET_DISK_ATTRIBUTES {
        Version: std::mem::size_of::<SET_DISK_ATTRIBUTES>() as u32,
        Persist: true,
        Reserved1: [0; 3],
        Attributes: if online {
            0
        } else {
            extents::DISK_ATTRIBUTE_OFFLINE
        },
        AttributesMask: extents::DISK_ATTRIBUTE_OFFLINE,
        Reserved2: [0; 4],
    };
    w::ioctl_no_output(h, IOCTL_DISK_SET_DISK_ATTRIBUTES, Some(&set))
        .map_err(|e| win32("IOCTL_DISK_SET_DISK_ATTRIBUTES", s, e))?;
    w::ioctl_no_output::<()>(h, IOCTL_DISK_UPDATE_PROPERTIES, None)
        .map_err(|e| win32("IOCTL_DISK_UPDATE_PROPERTIES", s, e))?;
    Ok(())
}

/// A disk held open since it was checked, with what identified it then:
/// every later step that names the disk by number compares against it
/// ([`crate::storage::identity`]), so a disk that took the number meanwhile
/// is never written.
pub struct Pinned {
    h: Handle,
    subject: String,
    /// What identified the disk when it was opened.
    pub identity: DiskIdentity,
    /// Test hook: later reads of the identity report this serial number
    /// (a disk replaced between check and write, which wine cannot stage).
    #[cfg(test)]
    pub replaced_by: Option<String>,
}

impl Pinned {
    /// Opens disk `disk` with `access` ([`GENERIC_READ`], with
    /// `GENERIC_WRITE` for a write through the handle; sharing read and
    /// write) and reads its identity through the handle.
    pub fn open(disk: u32, access: u32) -> Result<Pinned> {
        let h = open_disk(disk, access)?;
        let subject = subject(disk);
        let identity = identity_of(&h, &subject, disk)?;
        Ok(Pinned {
            h,
            subject,
            identity,
            #[cfg(test)]
            replaced_by: None,
        })
    }

    /// The held handle (open for reading).
    pub fn handle(&self) -> &Handle {
        &self.h
    }

    /// What identifies the held disk now, read again through its handle.
    pub fn now(&self) -> Result<DiskIdentity> {
        #[allow(unused_mut)]
        let mut now = identity_of(&self.h, &self.subject, self.identity.number)?;
        #[cfg(test)]
        if let Some(s) = &self.replaced_by {
            now.serial = s.clone();
        }
        Ok(now)
    }

    /// The partition table of the held disk
    /// (`IOCTL_DISK_GET_DRIVE_LAYOUT_EX` through the handle).
    pub fn layout(&self) -> Result<layout::DriveLayout> {
        let out = w::ioctl::<()>(&self.h, IOCTL_DISK_GET_DRIVE_LAYOUT_EX, None, 4096)
            .map_err(|e| win32("IOCTL_DISK_GET_DRIVE_LAYOUT_EX", &self.subject, e))?;
        layout::parse_drive_layout_ex(&out)
            .map_err(|e| bad_answer("IOCTL_DISK_GET_DRIVE_LAYOUT_EX", &self.subject, e))
    }

    /// Whether the held disk is offline (`DISK_ATTRIBUTE_OFFLINE`).
    pub fn is_offline(&self) -> Result<bool> {
        Ok(attributes(&self.h, &self.subject)?.is_offline())
    }

    /// Writes an empty GPT with disk GUID `disk_id` (and room for 128
    /// partitions) through the held handle (open for reading and writing):
    /// `IOCTL_DISK_CREATE_DISK`, then `IOCTL_DISK_UPDATE_PROPERTIES` so
    /// Windows re-reads it. A disk removed since it was opened fails here;
    /// the write cannot reach a disk that took its number.
    pub fn create_gpt(&self, disk_id: crate::storage::parse::guid::Guid) -> Result<()> {
        let create = CREATE_DISK {
            PartitionStyle: PARTITION_STYLE_GPT,
            Anonymous: CREATE_DISK_0 {
                Gpt: CREATE_DISK_GPT {
                    DiskId: windows_sys::core::GUID::from_u128(disk_id.to_u128()),
                    MaxPartitionCount: 128,
                },
            },
        };
        w::ioctl_no_output(&self.h, IOCTL_DISK_CREATE_DISK, Some(&create))
            .map_err(|e| win32("IOCTL_DISK_CREATE_DISK", &self.subject, e))?;
        w::ioctl_no_output::<()>(&self.h, IOCTL_DISK_UPDATE_PROPERTIES, None)
            .map_err(|e| win32("IOCTL_DISK_UPDATE_PROPERTIES", &self.subject, e))
    }

    /// Refuses `what` unless the held handle still reaches the disk that
    /// was checked, under the same number.
    pub fn still_the_same(&self, what: &str) -> Result<()> {
        identity::refuse_if_replaced(&self.identity, &self.now()?, Seen::HeldHandle, what)
    }
}

/// Number (`IOCTL_STORAGE_GET_DEVICE_NUMBER`; where the driver does not
/// answer it, the number the disk was opened by), size, page-83 id and
/// serial number (`STORAGE_DEVICE_DESCRIPTOR`) of the disk open as `h`.
fn identity_of(h: &Handle, s: &str, opened_as: u32) -> Result<DiskIdentity> {
    let number = match w::ioctl::<()>(h, IOCTL_STORAGE_GET_DEVICE_NUMBER, None, 64) {
        Ok(out) => {
            extents::parse_storage_device_number(&out)
                .map_err(|e| bad_answer("IOCTL_STORAGE_GET_DEVICE_NUMBER", s, e))?
                .device_number
        }
        Err(e) if not_supported(&e) => opened_as,
        Err(e) => return Err(win32("IOCTL_STORAGE_GET_DEVICE_NUMBER", s, e)),
    };
    let (size, _) = geometry(h, s)?;
    // The device's own answers only (no NVMe fallbacks): what
    // `MSFT_Disk.SerialNumber` is read from too.
    let page83 = query_property(
        h,
        s,
        StorageDeviceIdProperty,
        device_id::parse_storage_device_id_descriptor,
    )?
    .and_then(|ids| device_id::page83_id(&ids))
    .unwrap_or_default();
    let serial = device_descriptor(h, s)?
        .and_then(|(serial, _)| serial)
        .unwrap_or_default();
    Ok(DiskIdentity {
        number,
        size,
        serial,
        page83,
    })
}
