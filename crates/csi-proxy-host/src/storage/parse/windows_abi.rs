//! The offsets and sizes the parsers use, checked against the `windows-sys`
//! definitions of the structures (compiled and run on Windows targets only;
//! under wine on Linux: `cargo test --target x86_64-pc-windows-gnu`).

use std::mem::{offset_of, size_of};

use windows_sys::core::GUID;
use windows_sys::Win32::System::Ioctl::{
    DISK_EXTENT, DISK_GEOMETRY, DISK_GEOMETRY_EX, DRIVE_LAYOUT_INFORMATION_EX,
    DRIVE_LAYOUT_INFORMATION_GPT, DRIVE_LAYOUT_INFORMATION_MBR, GET_DISK_ATTRIBUTES,
    GET_LENGTH_INFORMATION, PARTITION_INFORMATION_EX, PARTITION_INFORMATION_GPT,
    PARTITION_INFORMATION_MBR, STORAGE_DEVICE_DESCRIPTOR, STORAGE_DEVICE_ID_DESCRIPTOR,
    STORAGE_DEVICE_NUMBER, STORAGE_IDENTIFIER, VOLUME_DISK_EXTENTS,
};

use super::device_id::{
    DEVICE_DESCRIPTOR_RAW_PROPERTIES, DEVICE_DESCRIPTOR_SERIAL_OFFSET_FIELD,
    DEVICE_ID_DESCRIPTOR_HEADER, STORAGE_IDENTIFIER_HEADER,
};
use super::extents::{
    DISK_ATTRIBUTE_OFFLINE, DISK_ATTRIBUTE_READ_ONLY, DISK_EXTENTS_OFFSET, DISK_EXTENT_SIZE,
    DISK_GEOMETRY_EX_BYTES_PER_SECTOR_OFFSET, DISK_GEOMETRY_EX_DISK_SIZE_OFFSET,
    GET_DISK_ATTRIBUTES_SIZE, GET_LENGTH_INFORMATION_SIZE, STORAGE_DEVICE_NUMBER_SIZE,
};
use super::layout::{
    entry_offset as e, layout_offset as l, GPT_NAME_UNITS, LAYOUT_HEADER_SIZE,
    PARTITION_ENTRY_SIZE, STYLE_GPT, STYLE_MBR, STYLE_RAW,
};

#[test]
fn drive_layout_matches_windows_sys() {
    type L = DRIVE_LAYOUT_INFORMATION_EX;
    assert_eq!(offset_of!(L, PartitionStyle), l::STYLE);
    assert_eq!(offset_of!(L, PartitionCount), l::COUNT);
    assert_eq!(offset_of!(L, Anonymous), l::UNION);
    assert_eq!(offset_of!(L, PartitionEntry), LAYOUT_HEADER_SIZE);
    assert_eq!(
        l::UNION + offset_of!(DRIVE_LAYOUT_INFORMATION_MBR, Signature),
        l::MBR_SIGNATURE
    );
    assert_eq!(
        l::UNION + offset_of!(DRIVE_LAYOUT_INFORMATION_MBR, CheckSum),
        l::MBR_CHECKSUM
    );
    type G = DRIVE_LAYOUT_INFORMATION_GPT;
    assert_eq!(l::UNION + offset_of!(G, DiskId), l::GPT_DISK_ID);
    assert_eq!(
        l::UNION + offset_of!(G, StartingUsableOffset),
        l::GPT_STARTING_USABLE
    );
    assert_eq!(l::UNION + offset_of!(G, UsableLength), l::GPT_USABLE_LENGTH);
    assert_eq!(
        l::UNION + offset_of!(G, MaxPartitionCount),
        l::GPT_MAX_PARTITIONS
    );

    type P = PARTITION_INFORMATION_EX;
    assert_eq!(size_of::<P>(), PARTITION_ENTRY_SIZE);
    assert_eq!(offset_of!(P, PartitionStyle), e::STYLE);
    assert_eq!(offset_of!(P, StartingOffset), e::STARTING_OFFSET);
    assert_eq!(offset_of!(P, PartitionLength), e::LENGTH);
    assert_eq!(offset_of!(P, PartitionNumber), e::NUMBER);
    assert_eq!(offset_of!(P, RewritePartition), e::REWRITE);
    assert_eq!(offset_of!(P, IsServicePartition), e::IS_SERVICE);
    assert_eq!(offset_of!(P, Anonymous), e::UNION);
    type M = PARTITION_INFORMATION_MBR;
    assert_eq!(e::UNION + offset_of!(M, PartitionType), e::MBR_TYPE);
    assert_eq!(e::UNION + offset_of!(M, BootIndicator), e::MBR_BOOT);
    assert_eq!(
        e::UNION + offset_of!(M, RecognizedPartition),
        e::MBR_RECOGNIZED
    );
    assert_eq!(
        e::UNION + offset_of!(M, HiddenSectors),
        e::MBR_HIDDEN_SECTORS
    );
    assert_eq!(e::UNION + offset_of!(M, PartitionId), e::MBR_ID);
    type PG = PARTITION_INFORMATION_GPT;
    assert_eq!(e::UNION + offset_of!(PG, PartitionType), e::GPT_TYPE);
    assert_eq!(e::UNION + offset_of!(PG, PartitionId), e::GPT_ID);
    assert_eq!(e::UNION + offset_of!(PG, Attributes), e::GPT_ATTRIBUTES);
    assert_eq!(e::UNION + offset_of!(PG, Name), e::GPT_NAME);
    assert_eq!(size_of::<[u16; GPT_NAME_UNITS]>(), 72);
    assert_eq!(e::GPT_NAME + 72, PARTITION_ENTRY_SIZE);

    use windows_sys::Win32::System::Ioctl::{
        PARTITION_STYLE_GPT, PARTITION_STYLE_MBR, PARTITION_STYLE_RAW,
    };
    assert_eq!(PARTITION_STYLE_MBR as u32, STYLE_MBR);
    assert_eq!(PARTITION_STYLE_GPT as u32, STYLE_GPT);
    assert_eq!(PARTITION_STYLE_RAW as u32, STYLE_RAW);
    assert_eq!(size_of::<GUID>(), 16);
    assert_eq!(offset_of!(GUID, data2), 4);
    assert_eq!(offset_of!(GUID, data3), 6);
    assert_eq!(offset_of!(GUID, data4), 8);
}

#[test]
fn device_id_matches_windows_sys() {
    type D = STORAGE_DEVICE_ID_DESCRIPTOR;
    assert_eq!(offset_of!(D, Version), 0);
    assert_eq!(offset_of!(D, Size), 4);
    assert_eq!(offset_of!(D, NumberOfIdentifiers), 8);
    assert_eq!(offset_of!(D, Identifiers), DEVICE_ID_DESCRIPTOR_HEADER);
    type I = STORAGE_IDENTIFIER;
    assert_eq!(offset_of!(I, CodeSet), 0);
    assert_eq!(offset_of!(I, Type), 4);
    assert_eq!(offset_of!(I, IdentifierSize), 8);
    assert_eq!(offset_of!(I, NextOffset), 10);
    assert_eq!(offset_of!(I, Association), 12);
    assert_eq!(offset_of!(I, Identifier), STORAGE_IDENTIFIER_HEADER);
    type S = STORAGE_DEVICE_DESCRIPTOR;
    assert_eq!(offset_of!(S, Size), 4);
    assert_eq!(offset_of!(S, DeviceType), 8);
    assert_eq!(offset_of!(S, VendorIdOffset), 12);
    assert_eq!(offset_of!(S, ProductIdOffset), 16);
    assert_eq!(offset_of!(S, ProductRevisionOffset), 20);
    assert_eq!(
        offset_of!(S, SerialNumberOffset),
        DEVICE_DESCRIPTOR_SERIAL_OFFSET_FIELD
    );
    assert_eq!(offset_of!(S, BusType), 28);
    assert_eq!(
        offset_of!(S, RawDeviceProperties),
        DEVICE_DESCRIPTOR_RAW_PROPERTIES
    );
}

#[test]
fn nvme_query_matches_windows_sys() {
    use super::nvme::{self, protocol_offset as p};
    use windows_sys::Win32::Storage::FileSystem::BusTypeNvme;
    use windows_sys::Win32::System::Ioctl::{
        NVMeDataTypeIdentify, ProtocolTypeNvme, StorageAdapterProtocolSpecificProperty,
        StorageDeviceProtocolSpecificProperty, STORAGE_PROPERTY_QUERY,
        STORAGE_PROTOCOL_DATA_DESCRIPTOR, STORAGE_PROTOCOL_SPECIFIC_DATA,
    };
    assert_eq!(
        offset_of!(STORAGE_PROPERTY_QUERY, AdditionalParameters),
        nvme::PROPERTY_QUERY_HEADER
    );
    type P = STORAGE_PROTOCOL_SPECIFIC_DATA;
    assert_eq!(size_of::<P>(), nvme::PROTOCOL_SPECIFIC_DATA_SIZE);
    assert_eq!(offset_of!(P, ProtocolType), p::PROTOCOL_TYPE);
    assert_eq!(offset_of!(P, DataType), p::DATA_TYPE);
    assert_eq!(offset_of!(P, ProtocolDataRequestValue), p::REQUEST_VALUE);
    assert_eq!(
        offset_of!(P, ProtocolDataRequestSubValue),
        p::REQUEST_SUB_VALUE
    );
    assert_eq!(offset_of!(P, ProtocolDataOffset), p::DATA_OFFSET);
    assert_eq!(offset_of!(P, ProtocolDataLength), p::DATA_LENGTH);
    type D = STORAGE_PROTOCOL_DATA_DESCRIPTOR;
    assert_eq!(size_of::<D>(), nvme::PROTOCOL_DATA_DESCRIPTOR_SIZE);
    assert_eq!(
        offset_of!(D, ProtocolSpecificData),
        nvme::PROTOCOL_DATA_DESCRIPTOR_DATA
    );
    assert_eq!(
        offset_of!(STORAGE_DEVICE_DESCRIPTOR, BusType),
        nvme::DEVICE_DESCRIPTOR_BUS_TYPE
    );
    assert_eq!(BusTypeNvme as u32, nvme::BUS_TYPE_NVME);
    assert_eq!(ProtocolTypeNvme as u32, nvme::PROTOCOL_TYPE_NVME);
    assert_eq!(NVMeDataTypeIdentify as u32, nvme::NVME_DATA_TYPE_IDENTIFY);
    assert_eq!(
        StorageAdapterProtocolSpecificProperty as u32,
        nvme::ADAPTER_PROTOCOL_SPECIFIC_PROPERTY
    );
    assert_eq!(
        StorageDeviceProtocolSpecificProperty as u32,
        nvme::DEVICE_PROTOCOL_SPECIFIC_PROPERTY
    );
}

#[test]
fn small_structs_match_windows_sys() {
    assert_eq!(
        offset_of!(VOLUME_DISK_EXTENTS, Extents),
        DISK_EXTENTS_OFFSET
    );
    assert_eq!(size_of::<DISK_EXTENT>(), DISK_EXTENT_SIZE);
    assert_eq!(offset_of!(DISK_EXTENT, DiskNumber), 0);
    assert_eq!(offset_of!(DISK_EXTENT, StartingOffset), 8);
    assert_eq!(offset_of!(DISK_EXTENT, ExtentLength), 16);
    assert_eq!(
        size_of::<STORAGE_DEVICE_NUMBER>(),
        STORAGE_DEVICE_NUMBER_SIZE
    );
    assert_eq!(offset_of!(STORAGE_DEVICE_NUMBER, DeviceNumber), 4);
    assert_eq!(offset_of!(STORAGE_DEVICE_NUMBER, PartitionNumber), 8);
    assert_eq!(
        size_of::<GET_LENGTH_INFORMATION>(),
        GET_LENGTH_INFORMATION_SIZE
    );
    assert_eq!(
        size_of::<DISK_GEOMETRY>(),
        DISK_GEOMETRY_EX_DISK_SIZE_OFFSET
    );
    assert_eq!(
        offset_of!(DISK_GEOMETRY_EX, DiskSize),
        DISK_GEOMETRY_EX_DISK_SIZE_OFFSET
    );
    assert_eq!(
        offset_of!(DISK_GEOMETRY_EX, Geometry) + offset_of!(DISK_GEOMETRY, BytesPerSector),
        DISK_GEOMETRY_EX_BYTES_PER_SECTOR_OFFSET
    );
    assert_eq!(size_of::<GET_DISK_ATTRIBUTES>(), GET_DISK_ATTRIBUTES_SIZE);
    assert_eq!(offset_of!(GET_DISK_ATTRIBUTES, Attributes), 8);
    assert_eq!(
        windows_sys::Win32::System::Ioctl::DISK_ATTRIBUTE_OFFLINE,
        DISK_ATTRIBUTE_OFFLINE
    );
    assert_eq!(
        windows_sys::Win32::System::Ioctl::DISK_ATTRIBUTE_READ_ONLY,
        DISK_ATTRIBUTE_READ_ONLY
    );
}

#[test]
fn guid_windows_bytes_match_the_in_memory_guid() {
    use super::guid::Guid;
    let v = 0xe3c9e316_0b5c_4db8_817d_f92df00215ae_u128;
    let g = GUID::from_u128(v);
    let mut mem = [0u8; 16];
    mem[0..4].copy_from_slice(&g.data1.to_ne_bytes());
    mem[4..6].copy_from_slice(&g.data2.to_ne_bytes());
    mem[6..8].copy_from_slice(&g.data3.to_ne_bytes());
    mem[8..16].copy_from_slice(&g.data4);
    assert_eq!(Guid::from_u128(v).to_windows_bytes(), mem);
    assert_eq!(Guid::from_windows_bytes(mem), Guid::from_u128(v));
}
