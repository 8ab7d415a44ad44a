//! Small fixed IOCTL outputs: volume extents, device numbers, sizes, disk
//! attributes.
//!
//! Layouts (64-bit Windows):
//!
//! * `VOLUME_DISK_EXTENTS` (`IOCTL_VOLUME_GET_VOLUME_DISK_EXTENTS`):
//!   `NumberOfDiskExtents` u32 @0, 4 bytes padding, then `DISK_EXTENT[]`
//!   @8, each 24 bytes: `DiskNumber` u32 @0, padding, `StartingOffset` i64
//!   @8, `ExtentLength` i64 @16.
//! * `STORAGE_DEVICE_NUMBER` (`IOCTL_STORAGE_GET_DEVICE_NUMBER`):
//!   `DeviceType`, `DeviceNumber`, `PartitionNumber`, u32 each (12 bytes).
//! * `GET_LENGTH_INFORMATION` (`IOCTL_DISK_GET_LENGTH_INFO`): `Length` i64.
//! * `DISK_GEOMETRY_EX` (`IOCTL_DISK_GET_DRIVE_GEOMETRY_EX`): a 24-byte
//!   `DISK_GEOMETRY`, then `DiskSize` i64 @24.
//! * `GET_DISK_ATTRIBUTES` (`IOCTL_DISK_GET_DISK_ATTRIBUTES`): `Version` u32
//!   @0, `Reserved1` u32 @4, `Attributes` u64 @8.
//!
//! Offsets and sizes are byte counts and must not be negative: a negative
//! value is [`ParseError::Invalid`], as is an extent whose end overflows.

use super::bytes::{self, i64_le, u32_le, u64_le};
use super::error::{check_range, ParseError};

/// Offset of the first `DISK_EXTENT` in `VOLUME_DISK_EXTENTS`.
pub const DISK_EXTENTS_OFFSET: usize = 8;
/// Size of one `DISK_EXTENT`.
pub const DISK_EXTENT_SIZE: usize = 24;
/// Size of `STORAGE_DEVICE_NUMBER`.
pub const STORAGE_DEVICE_NUMBER_SIZE: usize = 12;
/// Size of `GET_LENGTH_INFORMATION`.
pub const GET_LENGTH_INFORMATION_SIZE: usize = 8;
/// Offset of `DiskSize` in `DISK_GEOMETRY_EX`.
pub const DISK_GEOMETRY_EX_DISK_SIZE_OFFSET: usize = 24;
/// Offset of `Geometry.BytesPerSector` in `DISK_GEOMETRY_EX`.
pub const DISK_GEOMETRY_EX_BYTES_PER_SECTOR_OFFSET: usize = 20;
/// Size of `GET_DISK_ATTRIBUTES`.
pub const GET_DISK_ATTRIBUTES_SIZE: usize = 16;
/// `DISK_ATTRIBUTE_OFFLINE`.
pub const DISK_ATTRIBUTE_OFFLINE: u64 = 0x1;
/// `DISK_ATTRIBUTE_READ_ONLY`.
pub const DISK_ATTRIBUTE_READ_ONLY: u64 = 0x2;

/// One contiguous piece of a volume on a disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskExtent {
    pub disk_number: u32,
    /// Byte offset on the disk (never negative).
    pub offset: i64,
    /// Length in bytes (never negative; `offset + length` does not overflow).
    pub length: i64,
}

/// Parses `VOLUME_DISK_EXTENTS`. All announced extents must be present
/// (with a too-small output buffer Windows fails with `ERROR_MORE_DATA` and
/// fills in only the count: the caller retries with `8 + 24 × count`
/// bytes). Zero extents give an empty list; choosing among several (a
/// spanned volume) is the caller's decision.
pub fn parse_volume_disk_extents(buf: &[u8]) -> Result<Vec<DiskExtent>, ParseError> {
    const WHAT: &str = "VOLUME_DISK_EXTENTS";
    let count = bytes::usize_from(u32_le(buf, 0, WHAT)?);
    if count == 0 {
        return Ok(Vec::new());
    }
    let total = count
        .checked_mul(DISK_EXTENT_SIZE)
        .and_then(|n| n.checked_add(DISK_EXTENTS_OFFSET))
        .unwrap_or(usize::MAX);
    bytes::need(buf, total, WHAT)?;
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        let base = DISK_EXTENTS_OFFSET + i * DISK_EXTENT_SIZE; // < total: no overflow
        let extent = DiskExtent {
            disk_number: u32_le(buf, base, "DISK_EXTENT")?,
            offset: i64_le(buf, base + 8, "DISK_EXTENT")?,
            length: i64_le(buf, base + 16, "DISK_EXTENT")?,
        };
        check_range("DISK_EXTENT", extent.offset, extent.length)?;
        out.push(extent);
    }
    Ok(out)
}

/// `STORAGE_DEVICE_NUMBER`: which disk (and partition, 0 = the whole disk)
/// a handle refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StorageDeviceNumber {
    /// `FILE_DEVICE_*`, e.g. 7 = `FILE_DEVICE_DISK`.
    pub device_type: u32,
    pub device_number: u32,
    pub partition_number: u32,
}

/// Parses `STORAGE_DEVICE_NUMBER`.
pub fn parse_storage_device_number(buf: &[u8]) -> Result<StorageDeviceNumber, ParseError> {
    const WHAT: &str = "STORAGE_DEVICE_NUMBER";
    bytes::need(buf, STORAGE_DEVICE_NUMBER_SIZE, WHAT)?;
    Ok(StorageDeviceNumber {
        device_type: u32_le(buf, 0, WHAT)?,
        device_number: u32_le(buf, 4, WHAT)?,
        partition_number: u32_le(buf, 8, WHAT)?,
    })
}

/// Parses `GET_LENGTH_INFORMATION`: the size of a disk or partition in
/// bytes (never negative).
pub fn parse_length_info(buf: &[u8]) -> Result<i64, ParseError> {
    non_negative(
        "GET_LENGTH_INFORMATION",
        i64_le(buf, 0, "GET_LENGTH_INFORMATION")?,
    )
}

/// Parses the `DiskSize` of `DISK_GEOMETRY_EX` (never negative). Only the
/// 32 bytes up to and including `DiskSize` are required.
pub fn parse_disk_geometry_ex_size(buf: &[u8]) -> Result<i64, ParseError> {
    const WHAT: &str = "DISK_GEOMETRY_EX";
    non_negative(WHAT, i64_le(buf, DISK_GEOMETRY_EX_DISK_SIZE_OFFSET, WHAT)?)
}

/// Parses `DISK_GEOMETRY_EX`: the logical sector size (512 or 4096 on
/// the disks PartitionDisk handles; anything that is not a power of two
/// from 512 to 64 KiB is refused).
pub fn parse_disk_geometry_ex_sector_size(buf: &[u8]) -> Result<u32, ParseError> {
    const WHAT: &str = "DISK_GEOMETRY_EX";
    let ss = u32_le(buf, DISK_GEOMETRY_EX_BYTES_PER_SECTOR_OFFSET, WHAT)?;
    if !ss.is_power_of_two() || !(512..=65536).contains(&ss) {
        return Err(ParseError::invalid(WHAT, format!("sector size {ss}")));
    }
    Ok(ss)
}

fn non_negative(what: &'static str, v: i64) -> Result<i64, ParseError> {
    if v < 0 {
        Err(ParseError::invalid(what, format!("negative size {v}")))
    } else {
        Ok(v)
    }
}

/// `GET_DISK_ATTRIBUTES`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskAttributes {
    pub version: u32,
    /// `DISK_ATTRIBUTE_*` bits.
    pub attributes: u64,
}

impl DiskAttributes {
    /// `DISK_ATTRIBUTE_OFFLINE` is set.
    pub fn is_offline(&self) -> bool {
        self.attributes & DISK_ATTRIBUTE_OFFLINE != 0
    }

    /// `DISK_ATTRIBUTE_READ_ONLY` is set.
    pub fn is_read_only(&self) -> bool {
        self.attributes & DISK_ATTRIBUTE_READ_ONLY != 0
    }
}

/// Parses `GET_DISK_ATTRIBUTES`.
pub fn parse_disk_attributes(buf: &[u8]) -> Result<DiskAttributes, ParseError> {
    const WHAT: &str = "GET_DISK_ATTRIBUTES";
    bytes::need(buf, GET_DISK_ATTRIBUTES_SIZE, WHAT)?;
    Ok(DiskAttributes {
        version: u32_le(buf, 0, WHAT)?,
        attributes: u64_le(buf, 8, WHAT)?,
    })
}

#[cfg(test)]
mod tests {
    use super::super::fixtures;
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn one_extent() {
        let buf = fixtures::volume_disk_extents(&[(2, 1_048_576, 10_736_369_664)]);
        assert_eq!(buf.len(), 32); // sizeof(VOLUME_DISK_EXTENTS)
        assert_eq!(
            parse_volume_disk_extents(&buf),
            Ok(vec![DiskExtent {
                disk_number: 2,
                offset: 1_048_576,
                length: 10_736_369_664
            }])
        );
    }

    #[test]
    fn spanned_volume_and_oversized_buffer() {
        let mut buf = fixtures::volume_disk_extents(&[(1, 0, 100), (3, 512, 4096)]);
        buf.extend_from_slice(&[0xAA; 40]);
        let e = parse_volume_disk_extents(&buf).unwrap();
        assert_eq!(e.len(), 2);
        assert_eq!(e[1].disk_number, 3);
        assert_eq!(e[1].offset, 512);
    }

    #[test]
    fn extents_errors() {
        assert_eq!(
            parse_volume_disk_extents(&[1, 0]),
            Err(ParseError::truncated("VOLUME_DISK_EXTENTS", 4, 2))
        );
        assert_eq!(parse_volume_disk_extents(&[0, 0, 0, 0]), Ok(vec![]));
        // ERROR_MORE_DATA shape: count 2 in a 32-byte buffer.
        let mut buf = fixtures::volume_disk_extents(&[(1, 0, 100)]);
        buf[0] = 2;
        assert_eq!(
            parse_volume_disk_extents(&buf),
            Err(ParseError::truncated("VOLUME_DISK_EXTENTS", 56, 32))
        );
        let buf = [0xFF; 16];
        assert!(matches!(
            parse_volume_disk_extents(&buf),
            Err(ParseError::Truncated { .. })
        ));
        let buf = fixtures::volume_disk_extents(&[(1, -1, 100)]);
        assert!(matches!(
            parse_volume_disk_extents(&buf),
            Err(ParseError::Invalid { .. })
        ));
        let buf = fixtures::volume_disk_extents(&[(1, i64::MAX, 1)]);
        assert!(matches!(
            parse_volume_disk_extents(&buf),
            Err(ParseError::Invalid { .. })
        ));
    }

    #[test]
    fn device_number() {
        let buf = fixtures::storage_device_number(7, 3, 2);
        assert_eq!(
            parse_storage_device_number(&buf),
            Ok(StorageDeviceNumber {
                device_type: 7,
                device_number: 3,
                partition_number: 2
            })
        );
        assert!(parse_storage_device_number(&buf[..11]).is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(
            parse_length_info(&fixtures::length_info(1 << 40)),
            Ok(1 << 40)
        );
        assert!(parse_length_info(&fixtures::length_info(-5)).is_err());
        assert!(parse_length_info(&[0; 7]).is_err());
        let g = fixtures::disk_geometry_ex(137_438_953_472);
        assert_eq!(g.len(), 40);
        assert_eq!(parse_disk_geometry_ex_size(&g), Ok(137_438_953_472));
        assert_eq!(parse_disk_geometry_ex_sector_size(&g), Ok(512));
        let mut odd = g.clone();
        odd[20..24].copy_from_slice(&520u32.to_le_bytes());
        assert!(parse_disk_geometry_ex_sector_size(&odd).is_err());
        assert!(parse_disk_geometry_ex_sector_size(&g[..23]).is_err());
        assert_eq!(parse_disk_geometry_ex_size(&g[..32]), Ok(137_438_953_472));
        assert_eq!(
            parse_disk_geometry_ex_size(&g[..31]),
            Err(ParseError::truncated("DISK_GEOMETRY_EX", 32, 31))
        );
        assert!(parse_disk_geometry_ex_size(&fixtures::disk_geometry_ex(-1)).is_err());
    }

    #[test]
    fn attributes() {
        let a = parse_disk_attributes(&fixtures::disk_attributes(DISK_ATTRIBUTE_OFFLINE)).unwrap();
        assert!(a.is_offline());
        assert!(!a.is_read_only());
        assert_eq!(a.version, 16);
        let a = parse_disk_attributes(&fixtures::disk_attributes(0x2)).unwrap();
        assert!(!a.is_offline());
        assert!(a.is_read_only());
        assert!(parse_disk_attributes(&[0; 15]).is_err());
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(buf in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = parse_volume_disk_extents(&buf);
            let _ = parse_storage_device_number(&buf);
            let _ = parse_length_info(&buf);
            let _ = parse_disk_geometry_ex_size(&buf);
            let _ = parse_disk_attributes(&buf);
        }

        #[test]
        fn extents_round_trip(
            ext in proptest::collection::vec((any::<u32>(), 0i64..i64::MAX / 2, 0i64..i64::MAX / 2), 0..8)
        ) {
            let buf = fixtures::volume_disk_extents(&ext);
            let got = parse_volume_disk_extents(&buf).unwrap();
            let want: Vec<DiskExtent> = ext
                .iter()
                .map(|&(disk_number, offset, length)| DiskExtent { disk_number, offset, length })
                .collect();
            prop_assert_eq!(got, want);
        }

        #[test]
        fn small_structs_round_trip(t: u32, n: u32, p: u32, len in 0i64..=i64::MAX, attrs: u64) {
            prop_assert_eq!(
                parse_storage_device_number(&fixtures::storage_device_number(t, n, p)),
                Ok(StorageDeviceNumber { device_type: t, device_number: n, partition_number: p })
            );
            prop_assert_eq!(parse_length_info(&fixtures::length_info(len)), Ok(len));
            prop_assert_eq!(parse_disk_geometry_ex_size(&fixtures::disk_geometry_ex(len)), Ok(len));
            let a = parse_disk_attributes(&fixtures::disk_attributes(attrs)).unwrap();
            prop_assert_eq!(a.attributes, attrs);
            prop_assert_eq!(a.is_offline(), attrs & 1 == 1);
        }
    }
}
