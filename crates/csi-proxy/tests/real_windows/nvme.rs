//! NVMe facts read by the tests themselves with raw I/O controls (never
//! through the proxy's code or parsers): a disk's bus type, its namespace
//! and controller identify data, whether it answers page 0x83.

use std::io;

use windows_sys::Win32::System::Ioctl::{
    NVMeDataTypeIdentify, PropertyStandardQuery, ProtocolTypeNvme,
    StorageAdapterProtocolSpecificProperty, StorageDeviceIdProperty, StorageDeviceProperty,
    StorageDeviceProtocolSpecificProperty, IOCTL_STORAGE_QUERY_PROPERTY, STORAGE_DEVICE_DESCRIPTOR,
    STORAGE_PROPERTY_QUERY, STORAGE_PROTOCOL_DATA_DESCRIPTOR, STORAGE_PROTOCOL_SPECIFIC_DATA,
};

use super::disks::{ioctl, open_disk};

/// `BusTypeNvme`.
pub const BUS_TYPE_NVME: u32 = 0x11;

fn bytes(words: Vec<u64>) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

fn standard_query(property: i32) -> STORAGE_PROPERTY_QUERY {
    STORAGE_PROPERTY_QUERY {
        PropertyId: property,
        QueryType: PropertyStandardQuery,
        AdditionalParameters: [0],
    }
}

/// `STORAGE_DEVICE_DESCRIPTOR.BusType` of a disk.
pub fn bus_type(disk: u32) -> io::Result<u32> {
    let f = open_disk(disk, false)?;
    let q = standard_query(StorageDeviceProperty);
    let buf = ioctl(&f, IOCTL_STORAGE_QUERY_PROPERTY, Some(&q), 1024)?;
    // SAFETY: the buffer holds at least the fixed part of the descriptor
    // (1 KiB, 8-byte aligned; the driver filled it).
    let d: STORAGE_DEVICE_DESCRIPTOR = unsafe { std::ptr::read(buf.as_ptr().cast()) };
    Ok(d.BusType as u32)
}

/// How many identifiers the disk's `STORAGE_DEVICE_ID_DESCRIPTOR` holds
/// (0 where the query is not answered).
pub fn page83_identifiers(disk: u32) -> io::Result<u32> {
    let f = open_disk(disk, false)?;
    let q = standard_query(StorageDeviceIdProperty);
    match ioctl(&f, IOCTL_STORAGE_QUERY_PROPERTY, Some(&q), 4096) {
        Ok(buf) => Ok((buf[1] & 0xffff_ffff) as u32), // NumberOfIdentifiers @8
        Err(_) => Ok(0),
    }
}

/// The query and room for the answer, as Microsoft's example lays it out.
#[repr(C)]
struct IdentifyQuery {
    property: i32,
    query_type: i32,
    protocol: STORAGE_PROTOCOL_SPECIFIC_DATA,
    data: [u8; 4096],
}

/// Identify data: the namespace `nsid` (CNS 0, on the disk) or, with
/// `None`, the controller (CNS 1, on its adapter).
pub fn identify(disk: u32, nsid: Option<u32>) -> io::Result<Vec<u8>> {
    let f = open_disk(disk, false)?;
    let q = IdentifyQuery {
        property: if nsid.is_some() {
            StorageDeviceProtocolSpecificProperty
        } else {
            StorageAdapterProtocolSpecificProperty
        },
        query_type: PropertyStandardQuery,
        protocol: STORAGE_PROTOCOL_SPECIFIC_DATA {
            ProtocolType: ProtocolTypeNvme,
            DataType: NVMeDataTypeIdentify as u32,
            ProtocolDataRequestValue: if nsid.is_some() { 0 } else { 1 },
            ProtocolDataRequestSubValue: nsid.unwrap_or(0),
            ProtocolDataOffset: std::mem::size_of::<STORAGE_PROTOCOL_SPECIFIC_DATA>() as u32,
            ProtocolDataLength: 4096,
            FixedProtocolReturnData: 0,
            ProtocolDataRequestSubValue2: 0,
            ProtocolDataRequestSubValue3: 0,
            ProtocolDataRequestSubValue4: 0,
        },
        data: [0; 4096],
    };
    let buf = bytes(ioctl(
        &f,
        IOCTL_STORAGE_QUERY_PROPERTY,
        Some(&q),
        std::mem::size_of::<IdentifyQuery>(),
    )?);
    // SAFETY: the buffer is 8-byte aligned and larger than the descriptor.
    let d: STORAGE_PROTOCOL_DATA_DESCRIPTOR = unsafe { std::ptr::read(buf.as_ptr().cast()) };
    let start = std::mem::offset_of!(STORAGE_PROTOCOL_DATA_DESCRIPTOR, ProtocolSpecificData)
        + d.ProtocolSpecificData.ProtocolDataOffset as usize;
    buf.get(start..start + 4096)
        .map(<[u8]>::to_vec)
        .ok_or_else(|| io::Error::other(format!("identify data at {start} past the answer")))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|b| format!("{b:02x}")).collect()
}

/// The NGUID (bytes 104..120) and EUI-64 (120..128) of identify namespace
/// data, in hex; all-zero ones are `None`.
pub fn namespace_ids(data: &[u8]) -> (Option<String>, Option<String>) {
    let f = |b: &[u8]| b.iter().any(|&x| x != 0).then(|| hex(b));
    (f(&data[104..120]), f(&data[120..128]))
}

/// The controller's serial number (bytes 4..24), trimmed.
pub fn controller_serial(data: &[u8]) -> String {
    String::from_utf8_lossy(&data[4..24])
        .trim_matches([' ', '\0'])
        .to_string()
}
