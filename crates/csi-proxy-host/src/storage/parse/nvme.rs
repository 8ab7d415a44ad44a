//! NVMe disks: where they hang and what identifies them, from the buffers
//! Windows answers and the text Linux's sysfs holds.
//!
//! Windows (stornvme), every layout checked against the mingw-w64 SDK
//! headers (`winioctl.h`, `ntddscsi.h`, `nvme.h`; see
//! docs/windows-storage.md, "NVMe") and, on Windows targets, `windows-sys`:
//!
//! * `STORAGE_DEVICE_DESCRIPTOR.BusType` (u32 @28) is `BusTypeNvme` (0x11)
//!   for an NVMe namespace.
//! * `SCSI_ADDRESS` (`IOCTL_SCSI_GET_ADDRESS`, 8 bytes): `Length` u32 @0,
//!   `PortNumber` @4, `PathId` @5, `TargetId` @6, `Lun` @7 (u8 each).
//!   stornvme answers it for its namespaces; its `Lun` is the last part of
//!   the disk's instance path, from which azuredisk-csi-driver derives the
//!   Azure LUN (`Lun` − 1).
//! * Identify data through `IOCTL_STORAGE_QUERY_PROPERTY`: the input is a
//!   `STORAGE_PROPERTY_QUERY` (`PropertyId` u32 @0, `QueryType` u32 @4)
//!   whose `AdditionalParameters` (@8) is a `STORAGE_PROTOCOL_SPECIFIC_DATA`
//!   (40 bytes: `ProtocolType` @0, `DataType` @4,
//!   `ProtocolDataRequestValue` @8, `ProtocolDataRequestSubValue` @12,
//!   `ProtocolDataOffset` @16, `ProtocolDataLength` @20, then four u32s);
//!   the answer is a `STORAGE_PROTOCOL_DATA_DESCRIPTOR` (`Version` @0,
//!   `Size` @4, both 48, the echoed `STORAGE_PROTOCOL_SPECIFIC_DATA` @8)
//!   whose data starts `ProtocolDataOffset` bytes after the start of that
//!   `STORAGE_PROTOCOL_SPECIFIC_DATA`, i.e. at 8 + `ProtocolDataOffset`.
//!   `ProtocolDataRequestValue` is the CNS (0 = the namespace named by
//!   `ProtocolDataRequestSubValue`, asked with
//!   `StorageDeviceProtocolSpecificProperty`; 1 = the controller, asked with
//!   `StorageAdapterProtocolSpecificProperty`).
//! * Identify Namespace (4096 bytes): `NGUID` bytes 104..120, `EUI64`
//!   bytes 120..128. Identify Controller: `SN` bytes 4..24 (ASCII, padded
//!   with spaces).
//!
//! Linux: `/sys/block/nvmeXnY/nguid` (`%pU`, the 16 bytes in order with
//! dashes), `eui` (`%8ph`, 8 bytes in hex separated by spaces).
//!
//! Both OSes give the same page-83 string for one namespace
//! ([`NamespaceIds::page83`]): the lower-case hex of the NGUID, or of the
//! EUI-64 when the NGUID is zero (the spec's "not reported"); the form
//! [`super::device_id::page83_id`] gives a binary EUI-64 / NAA designator.

use super::bytes::{self, u32_le, u8_at};
use super::error::ParseError;
use super::location::Location;
use std::collections::BTreeMap;

/// `STORAGE_BUS_TYPE` `BusTypeNvme`.
pub const BUS_TYPE_NVME: u32 = 0x11;
/// `STORAGE_PROPERTY_ID` `StorageAdapterProtocolSpecificProperty`.
pub const ADAPTER_PROTOCOL_SPECIFIC_PROPERTY: u32 = 49;
/// `STORAGE_PROPERTY_ID` `StorageDeviceProtocolSpecificProperty`.
pub const DEVICE_PROTOCOL_SPECIFIC_PROPERTY: u32 = 50;
/// `STORAGE_PROTOCOL_TYPE` `ProtocolTypeNvme`.
pub const PROTOCOL_TYPE_NVME: u32 = 3;
/// `STORAGE_PROTOCOL_NVME_DATA_TYPE` `NVMeDataTypeIdentify`.
pub const NVME_DATA_TYPE_IDENTIFY: u32 = 1;
/// `NVME_IDENTIFY_CNS_SPECIFIC_NAMESPACE`.
pub const CNS_NAMESPACE: u32 = 0;
/// `NVME_IDENTIFY_CNS_CONTROLLER`.
pub const CNS_CONTROLLER: u32 = 1;

/// `offsetof(STORAGE_PROPERTY_QUERY, AdditionalParameters)`.
pub const PROPERTY_QUERY_HEADER: usize = 8;
/// `sizeof(STORAGE_PROTOCOL_SPECIFIC_DATA)`.
pub const PROTOCOL_SPECIFIC_DATA_SIZE: usize = 40;
/// `sizeof(STORAGE_PROTOCOL_DATA_DESCRIPTOR)`.
pub const PROTOCOL_DATA_DESCRIPTOR_SIZE: usize = 48;
/// `offsetof(STORAGE_PROTOCOL_DATA_DESCRIPTOR, ProtocolSpecificData)`.
pub const PROTOCOL_DATA_DESCRIPTOR_DATA: usize = 8;
/// `NVME_MAX_LOG_SIZE`: the size of an identify data structure.
pub const IDENTIFY_SIZE: usize = 4096;
/// The query buffer: the query, its protocol-specific data, and room for
/// the identify data right after it (the layout of Microsoft's example).
pub const IDENTIFY_QUERY_SIZE: usize =
    PROPERTY_QUERY_HEADER + PROTOCOL_SPECIFIC_DATA_SIZE + IDENTIFY_SIZE;

/// Offsets inside `STORAGE_PROTOCOL_SPECIFIC_DATA`.
pub mod protocol_offset {
    pub const PROTOCOL_TYPE: usize = 0;
    pub const DATA_TYPE: usize = 4;
    pub const REQUEST_VALUE: usize = 8;
    pub const REQUEST_SUB_VALUE: usize = 12;
    pub const DATA_OFFSET: usize = 16;
    pub const DATA_LENGTH: usize = 20;
}

/// `offsetof(STORAGE_DEVICE_DESCRIPTOR, BusType)`.
pub const DEVICE_DESCRIPTOR_BUS_TYPE: usize = 28;
/// `sizeof(SCSI_ADDRESS)`.
pub const SCSI_ADDRESS_SIZE: usize = 8;
/// Identify Namespace `NGUID`, Identify Namespace `EUI64`, Identify
/// Controller `SN`: offset and length.
pub const NGUID: (usize, usize) = (104, 16);
pub const EUI64: (usize, usize) = (120, 8);
pub const SERIAL: (usize, usize) = (4, 20);

/// Which identify data structure to ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Identify {
    /// CNS 0 for namespace `nsid`, on the disk (device property).
    Namespace(u32),
    /// CNS 1, on the disk's adapter (adapter property).
    Controller,
}

impl Identify {
    /// The `STORAGE_PROPERTY_ID` to ask with.
    pub fn property(self) -> u32 {
        match self {
            Identify::Namespace(_) => DEVICE_PROTOCOL_SPECIFIC_PROPERTY,
            Identify::Controller => ADAPTER_PROTOCOL_SPECIFIC_PROPERTY,
        }
    }
}

fn put_u32(buf: &mut [u8], at: usize, v: u32) {
    if let Some(dst) = buf.get_mut(at..at + 4) {
        dst.copy_from_slice(&v.to_le_bytes());
    }
}

/// The input buffer of `IOCTL_STORAGE_QUERY_PROPERTY` for `what`
/// (`PropertyStandardQuery`; the data is asked for right after the
/// protocol-specific data, 4096 bytes).
pub fn identify_query(what: Identify) -> [u8; IDENTIFY_QUERY_SIZE] {
    use protocol_offset as p;
    let mut q = [0u8; IDENTIFY_QUERY_SIZE];
    put_u32(&mut q, 0, what.property());
    put_u32(&mut q, 4, 0); // PropertyStandardQuery
    let at = PROPERTY_QUERY_HEADER;
    let (cns, nsid) = match what {
        Identify::Namespace(n) => (CNS_NAMESPACE, n),
        Identify::Controller => (CNS_CONTROLLER, 0),
    };
    put_u32(&mut q, at + p::PROTOCOL_TYPE, PROTOCOL_TYPE_NVME);
    put_u32(&mut q, at + p::DATA_TYPE, NVME_DATA_TYPE_IDENTIFY);
    put_u32(&mut q, at + p::REQUEST_VALUE, cns);
    put_u32(&mut q, at + p::REQUEST_SUB_VALUE, nsid);
    put_u32(
        &mut q,
        at + p::DATA_OFFSET,
        PROTOCOL_SPECIFIC_DATA_SIZE as u32,
    );
    put_u32(&mut q, at + p::DATA_LENGTH, IDENTIFY_SIZE as u32);
    q
}

/// The identify data (exactly [`IDENTIFY_SIZE`] bytes) in the answer to
/// [`identify_query`]. Rejected: a `Version` or `Size` other than
/// `sizeof(STORAGE_PROTOCOL_DATA_DESCRIPTOR)`, another protocol or data
/// type, a data offset inside the protocol-specific data, a length below
/// 4096; data beyond the buffer is truncated.
pub fn parse_identify_answer(buf: &[u8]) -> Result<&[u8], ParseError> {
    use protocol_offset as p;
    const WHAT: &str = "STORAGE_PROTOCOL_DATA_DESCRIPTOR";
    bytes::need(buf, PROTOCOL_DATA_DESCRIPTOR_SIZE, WHAT)?;
    let version = bytes::usize_from(u32_le(buf, 0, WHAT)?);
    let size = bytes::usize_from(u32_le(buf, 4, WHAT)?);
    if version != PROTOCOL_DATA_DESCRIPTOR_SIZE || size != PROTOCOL_DATA_DESCRIPTOR_SIZE {
        return Err(ParseError::invalid(
            WHAT,
            format!("Version {version} / Size {size}, expected {PROTOCOL_DATA_DESCRIPTOR_SIZE}"),
        ));
    }
    let at = PROTOCOL_DATA_DESCRIPTOR_DATA;
    let ptype = u32_le(buf, at + p::PROTOCOL_TYPE, WHAT)?;
    let dtype = u32_le(buf, at + p::DATA_TYPE, WHAT)?;
    if ptype != PROTOCOL_TYPE_NVME || dtype != NVME_DATA_TYPE_IDENTIFY {
        return Err(ParseError::invalid(
            WHAT,
            format!("ProtocolType {ptype} / DataType {dtype}, expected NVMe identify"),
        ));
    }
    let offset = bytes::usize_from(u32_le(buf, at + p::DATA_OFFSET, WHAT)?);
    let length = bytes::usize_from(u32_le(buf, at + p::DATA_LENGTH, WHAT)?);
    if offset < PROTOCOL_SPECIFIC_DATA_SIZE || length < IDENTIFY_SIZE {
        return Err(ParseError::invalid(
            WHAT,
            format!("ProtocolDataOffset {offset} / ProtocolDataLength {length}"),
        ));
    }
    let start = offset
        .checked_add(at)
        .ok_or_else(|| ParseError::truncated(WHAT, usize::MAX, buf.len()))?;
    bytes::slice(buf, start, IDENTIFY_SIZE, WHAT)
}

/// The identifiers of one namespace; all-zero means "not reported".
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NamespaceIds {
    pub nguid: [u8; 16],
    pub eui64: [u8; 8],
}

/// Identify Namespace: `NSZE` (u64 @0, in logical blocks), `FLBAS` (@26:
/// the format in use, bits 0-3, and 5-6 above 16 formats), the LBA format
/// table (@128, 4 bytes each, `LBADS` = log2 of the block size @+2).
pub const NSZE: usize = 0;
pub const FLBAS: usize = 26;
pub const LBA_FORMATS: usize = 128;

/// The size in bytes of the namespace an Identify Namespace describes
/// (`NSZE` blocks of the format in use); `None` when it does not add up
/// (a block size below 512 bytes or above 2^31, or an overflow). Used to
/// check that the data is the disk's own namespace.
pub fn identify_namespace_size(data: &[u8]) -> Result<Option<u64>, ParseError> {
    const WHAT: &str = "NVME_IDENTIFY_NAMESPACE_DATA";
    bytes::need(data, IDENTIFY_SIZE, WHAT)?;
    let blocks = bytes::u64_le(data, NSZE, WHAT)?;
    let flbas = u8_at(data, FLBAS, WHAT)?;
    let format = usize::from((flbas & 0x0f) | ((flbas >> 1) & 0x30));
    let lbads = u8_at(data, LBA_FORMATS + 4 * format + 2, WHAT)?;
    if !(9..=31).contains(&lbads) {
        return Ok(None);
    }
    Ok(blocks.checked_mul(1u64 << lbads))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|b| format!("{b:02x}")).collect()
}

impl NamespaceIds {
    /// The NGUID in lower-case hex, else the EUI-64; `None` when neither is
    /// reported.
    pub fn page83(&self) -> Option<String> {
        if self.nguid.iter().any(|&b| b != 0) {
            Some(hex(&self.nguid))
        } else if self.eui64.iter().any(|&b| b != 0) {
            Some(hex(&self.eui64))
        } else {
            None
        }
    }
}

/// NGUID and EUI-64 of an Identify Namespace data structure.
pub fn parse_identify_namespace(data: &[u8]) -> Result<NamespaceIds, ParseError> {
    const WHAT: &str = "NVME_IDENTIFY_NAMESPACE_DATA";
    bytes::need(data, IDENTIFY_SIZE, WHAT)?;
    Ok(NamespaceIds {
        nguid: bytes::array(data, NGUID.0, WHAT)?,
        eui64: bytes::array(data, EUI64.0, WHAT)?,
    })
}

/// The serial number (`SN`) of an Identify Controller data structure,
/// without its padding; `None` when blank. Non-ASCII text is invalid.
pub fn parse_identify_controller_serial(data: &[u8]) -> Result<Option<String>, ParseError> {
    const WHAT: &str = "NVME_IDENTIFY_CONTROLLER_DATA";
    bytes::need(data, IDENTIFY_SIZE, WHAT)?;
    let sn = bytes::slice(data, SERIAL.0, SERIAL.1, WHAT)?;
    if !sn.is_ascii() {
        return Err(ParseError::invalid(WHAT, "SN is not ASCII"));
    }
    let text = String::from_utf8_lossy(sn);
    let text = text.trim_matches(|c| c == ' ' || c == '\0');
    if text.contains('\0') {
        return Err(ParseError::invalid(WHAT, "SN contains NUL"));
    }
    Ok((!text.is_empty()).then(|| text.to_string()))
}

/// `STORAGE_DEVICE_DESCRIPTOR.BusType`.
pub fn parse_device_bus_type(buf: &[u8]) -> Result<u32, ParseError> {
    u32_le(buf, DEVICE_DESCRIPTOR_BUS_TYPE, "STORAGE_DEVICE_DESCRIPTOR")
}

/// A disk's `SCSI_ADDRESS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScsiAddress {
    pub port: u8,
    pub path: u8,
    pub target: u8,
    pub lun: u8,
}

impl ScsiAddress {
    /// The NVMe namespace id of a stornvme disk as identify is asked for
    /// it: `Lun` + 1 (docs/windows-storage.md, "NVMe").
    pub fn namespace_id(&self) -> u32 {
        u32::from(self.lun) + 1
    }

    /// The location ListDiskLocations reports for a stornvme disk: its
    /// address, with LUN = `Lun` − 1, the number azuredisk-csi-driver
    /// derives from the same disk's instance path ("namespace id − 1" in
    /// its words) and Azure's LUN of the data disk. `Lun` 0 (Azure's OS
    /// disk) has none (docs/windows-storage.md, "NVMe").
    pub fn nvme_location(&self) -> Option<Location> {
        let lun = self.lun.checked_sub(1)?;
        Some(Location {
            adapter: self.port.to_string(),
            bus: self.path.to_string(),
            target: self.target.to_string(),
            lun_id: lun.to_string(),
        })
    }
}

/// Parses `SCSI_ADDRESS`; a `Length` below its 8 bytes is invalid.
pub fn parse_scsi_address(buf: &[u8]) -> Result<ScsiAddress, ParseError> {
    const WHAT: &str = "SCSI_ADDRESS";
    bytes::need(buf, SCSI_ADDRESS_SIZE, WHAT)?;
    let length = bytes::usize_from(u32_le(buf, 0, WHAT)?);
    if length < SCSI_ADDRESS_SIZE {
        return Err(ParseError::invalid(WHAT, format!("Length {length}")));
    }
    Ok(ScsiAddress {
        port: u8_at(buf, 4, WHAT)?,
        path: u8_at(buf, 5, WHAT)?,
        target: u8_at(buf, 6, WHAT)?,
        lun: u8_at(buf, 7, WHAT)?,
    })
}

/// Adds the NVMe disks' locations to the ones read elsewhere (WMI): an
/// NVMe disk's own address replaces its entry, except where two disks
/// would claim one address (a driver matching it would pick either): then
/// each keeps what it had, and the clash is returned for the log.
pub fn merge_nvme_locations<L: PartialEq + Clone>(
    mut all: BTreeMap<u32, L>,
    nvme: &[(u32, L)],
) -> (BTreeMap<u32, L>, Vec<u32>) {
    let mut clashing = Vec::new();
    for (disk, loc) in nvme {
        let others = all.iter().filter(|(d, l)| *d != disk && *l == loc).count()
            + nvme.iter().filter(|(d, l)| d != disk && l == loc).count();
        if others > 0 {
            clashing.push(*disk);
        }
    }
    for (disk, loc) in nvme {
        if !clashing.contains(disk) {
            all.insert(*disk, loc.clone());
        }
    }
    (all, clashing)
}

/// Hex digits (separators `-`, `:`, whitespace ignored) into exactly `N`
/// bytes; anything else is `None`.
fn hex_bytes<const N: usize>(text: &str) -> Option<[u8; N]> {
    let digits: Vec<u8> = text
        .bytes()
        .filter(|c| !matches!(c, b'-' | b':') && !c.is_ascii_whitespace())
        .collect();
    if digits.len() != 2 * N || !digits.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    let mut out = [0u8; N];
    for (o, pair) in out.iter_mut().zip(digits.chunks_exact(2)) {
        let s = std::str::from_utf8(pair).ok()?;
        *o = u8::from_str_radix(s, 16).ok()?;
    }
    Some(out)
}

/// Linux's `nguid` (`01234567-89ab-cdef-0123-456789abcdef`).
pub fn parse_sysfs_nguid(text: &str) -> Option<[u8; 16]> {
    hex_bytes(text)
}

/// Linux's `eui` (`00 25 38 b5 71 b0 1a 2b`).
pub fn parse_sysfs_eui(text: &str) -> Option<[u8; 8]> {
    hex_bytes(text)
}

#[cfg(test)]
mod tests;
