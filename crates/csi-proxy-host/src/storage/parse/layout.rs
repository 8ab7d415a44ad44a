//! `DRIVE_LAYOUT_INFORMATION_EX`, the output of
//! `IOCTL_DISK_GET_DRIVE_LAYOUT_EX`: partition style and partitions of a
//! disk.
//!
//! Layout on 64-bit Windows (checked against `windows-sys` by a Windows-only
//! test in `windows_abi.rs`):
//!
//! * header, 48 bytes: `PartitionStyle` u32 @0 (0 MBR, 1 GPT, 2 RAW),
//!   `PartitionCount` u32 @4, then a union @8: MBR `Signature` u32 @8,
//!   `CheckSum` u32 @12; GPT `DiskId` GUID @8, `StartingUsableOffset` i64
//!   @24, `UsableLength` i64 @32, `MaxPartitionCount` u32 @40;
//! * `PartitionCount` × `PARTITION_INFORMATION_EX` from @48, 144 bytes each:
//!   `PartitionStyle` u32 @0, `StartingOffset` i64 @8, `PartitionLength` i64
//!   @16, `PartitionNumber` u32 @24, `RewritePartition` u8 @28,
//!   `IsServicePartition` u8 @29, union @32: MBR `PartitionType` u8 @32,
//!   `BootIndicator` @33, `RecognizedPartition` @34, `HiddenSectors` u32 @36,
//!   `PartitionId` GUID @40; GPT `PartitionType` GUID @32, `PartitionId` GUID
//!   @48, `Attributes` u64 @64, `Name` [u16; 36] @72 (72 bytes, ending the
//!   entry at 144).
//!
//! Decisions:
//!
//! * On an MBR disk Windows reports the partition table in slots of four,
//!   unused slots included (type 0, number 0, length 0), and an extended
//!   partition's container as an entry with number 0. Entries with
//!   `PartitionNumber` 0 or `PartitionLength` 0 hold no volume and are left
//!   out of [`DriveLayout::partitions`].
//! * A RAW disk has no partition table: its entries (normally none) are not
//!   read.
//! * An entry whose style differs from the disk's, a negative offset or
//!   length, or an end beyond `i64::MAX` is [`ParseError::Invalid`]; all
//!   `PartitionCount` entries must be in the buffer (a too-small output
//!   buffer fails with `ERROR_INSUFFICIENT_BUFFER`; callers grow it).
//! * GPT names are UTF-16 up to the first NUL; unpaired surrogates become
//!   U+FFFD (the name is informational only).

#[cfg(test)]
pub(crate) mod encode;
use super::bytes::{self, array, i64_le, u32_le, u64_le, u8_at};
use super::error::check_range;
use super::error::ParseError;
use super::guid::Guid;

/// Size of the `DRIVE_LAYOUT_INFORMATION_EX` header (offset of the entries).
pub const LAYOUT_HEADER_SIZE: usize = 48;
/// Size of one `PARTITION_INFORMATION_EX`.
pub const PARTITION_ENTRY_SIZE: usize = 144;
/// Number of UTF-16 units of a GPT partition name.
pub const GPT_NAME_UNITS: usize = 36;

/// Offsets inside `PARTITION_INFORMATION_EX`.
pub mod entry_offset {
    pub const STYLE: usize = 0;
    pub const STARTING_OFFSET: usize = 8;
    pub const LENGTH: usize = 16;
    pub const NUMBER: usize = 24;
    pub const REWRITE: usize = 28;
    pub const IS_SERVICE: usize = 29;
    pub const UNION: usize = 32;
    pub const MBR_TYPE: usize = 32;
    pub const MBR_BOOT: usize = 33;
    pub const MBR_RECOGNIZED: usize = 34;
    pub const MBR_HIDDEN_SECTORS: usize = 36;
    pub const MBR_ID: usize = 40;
    pub const GPT_TYPE: usize = 32;
    pub const GPT_ID: usize = 48;
    pub const GPT_ATTRIBUTES: usize = 64;
    pub const GPT_NAME: usize = 72;
}

/// Offsets inside the `DRIVE_LAYOUT_INFORMATION_EX` header.
pub mod layout_offset {
    pub const STYLE: usize = 0;
    pub const COUNT: usize = 4;
    pub const UNION: usize = 8;
    pub const MBR_SIGNATURE: usize = 8;
    pub const MBR_CHECKSUM: usize = 12;
    pub const GPT_DISK_ID: usize = 8;
    pub const GPT_STARTING_USABLE: usize = 24;
    pub const GPT_USABLE_LENGTH: usize = 32;
    pub const GPT_MAX_PARTITIONS: usize = 40;
}

/// `PARTITION_STYLE_*` values.
pub const STYLE_MBR: u32 = 0;
pub const STYLE_GPT: u32 = 1;
pub const STYLE_RAW: u32 = 2;

/// GPT type of the Microsoft reserved partition (MSR).
pub const MICROSOFT_RESERVED: Guid = Guid::MICROSOFT_RESERVED;
/// GPT type of a basic data partition.
pub const BASIC_DATA: Guid = Guid::BASIC_DATA;

/// Partitioning scheme of a disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartitionStyle {
    Mbr {
        signature: u32,
    },
    Gpt {
        disk_id: Guid,
    },
    /// Not initialised: no partition table.
    Raw,
}

/// What kind of partition an entry is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PartitionKind {
    Mbr {
        type_byte: u8,
    },
    Gpt {
        type_guid: Guid,
        id: Guid,
        /// `GPT_ATTRIBUTE_*` / `GPT_BASIC_DATA_ATTRIBUTE_*` bits.
        attributes: u64,
        name: String,
    },
}

/// One partition in use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionEntry {
    /// 1-based partition number (never 0 here).
    pub number: u32,
    /// Byte offset on the disk.
    pub offset: i64,
    /// Length in bytes (never 0 here).
    pub length: i64,
    pub kind: PartitionKind,
}

impl PartitionEntry {
    /// A GPT Microsoft reserved partition (never holds a volume).
    pub fn is_microsoft_reserved(&self) -> bool {
        matches!(&self.kind, PartitionKind::Gpt { type_guid, .. } if *type_guid == MICROSOFT_RESERVED)
    }
}

/// A disk's partition style and its partitions in use, in table order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriveLayout {
    pub style: PartitionStyle,
    pub partitions: Vec<PartitionEntry>,
    /// GPT: the usable byte range `(StartingUsableOffset, UsableLength)`.
    pub usable: Option<(u64, u64)>,
}

impl DriveLayout {
    /// Partitions that can hold data: all but MSR and empty ones.
    pub fn data_partitions(&self) -> impl Iterator<Item = &PartitionEntry> + '_ {
        self.partitions
            .iter()
            .filter(|p| !p.is_microsoft_reserved() && p.length > 0)
    }
}

/// Parses `DRIVE_LAYOUT_INFORMATION_EX` (see the module documentation).
pub fn parse_drive_layout_ex(buf: &[u8]) -> Result<DriveLayout, ParseError> {
    const WHAT: &str = "DRIVE_LAYOUT_INFORMATION_EX";
    bytes::need(buf, LAYOUT_HEADER_SIZE, WHAT)?;
    let style_value = u32_le(buf, layout_offset::STYLE, WHAT)?;
    let count = bytes::usize_from(u32_le(buf, layout_offset::COUNT, WHAT)?);
    let style = match style_value {
        STYLE_MBR => PartitionStyle::Mbr {
            signature: u32_le(buf, layout_offset::MBR_SIGNATURE, WHAT)?,
        },
        STYLE_GPT => PartitionStyle::Gpt {
            disk_id: Guid::from_windows_bytes(array(buf, layout_offset::GPT_DISK_ID, WHAT)?),
        },
        STYLE_RAW => {
            return Ok(DriveLayout {
                style: PartitionStyle::Raw,
                partitions: Vec::new(),
                usable: None,
            })
        }
        other => {
            return Err(ParseError::invalid(
                WHAT,
                format!("unknown PartitionStyle {other}"),
            ))
        }
    };
    let total = count
        .checked_mul(PARTITION_ENTRY_SIZE)
        .and_then(|n| n.checked_add(LAYOUT_HEADER_SIZE))
        .unwrap_or(usize::MAX);
    bytes::need(buf, total, WHAT)?;
    let mut partitions = Vec::new();
    for i in 0..count {
        let base = LAYOUT_HEADER_SIZE + i * PARTITION_ENTRY_SIZE; // < total
        let entry = bytes::slice(buf, base, PARTITION_ENTRY_SIZE, WHAT)?;
        if let Some(p) = parse_entry(entry, style_value, i)? {
            partitions.push(p);
        }
    }
    let usable = match style {
        PartitionStyle::Gpt { .. } => {
            let start = i64_le(buf, layout_offset::GPT_STARTING_USABLE, WHAT)?;
            let len = i64_le(buf, layout_offset::GPT_USABLE_LENGTH, WHAT)?;
            if start < 0 || len < 0 || start.checked_add(len).is_none() {
                return Err(ParseError::invalid(
                    WHAT,
                    format!("usable range {start}+{len}"),
                ));
            }
            Some((start as u64, len as u64))
        }
        _ => None,
    };
    Ok(DriveLayout {
        style,
        partitions,
        usable,
    })
}

/// One `PARTITION_INFORMATION_EX`; `None` for an unused slot.
fn parse_entry(
    e: &[u8],
    disk_style: u32,
    index: usize,
) -> Result<Option<PartitionEntry>, ParseError> {
    use entry_offset as o;
    const WHAT: &str = "PARTITION_INFORMATION_EX";
    let style = u32_le(e, o::STYLE, WHAT)?;
    if style != disk_style {
        return Err(ParseError::invalid(
            WHAT,
            format!("entry {index} has PartitionStyle {style} on a disk of style {disk_style}"),
        ));
    }
    let offset = i64_le(e, o::STARTING_OFFSET, WHAT)?;
    let length = i64_le(e, o::LENGTH, WHAT)?;
    let number = u32_le(e, o::NUMBER, WHAT)?;
    check_range(WHAT, offset, length)?;
    if number == 0 || length == 0 {
        return Ok(None);
    }
    let kind = if style == STYLE_GPT {
        let units: [u8; GPT_NAME_UNITS * 2] = array(e, o::GPT_NAME, WHAT)?;
        let name: Vec<u16> = units
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .take_while(|&u| u != 0)
            .collect();
        PartitionKind::Gpt {
            type_guid: Guid::from_windows_bytes(array(e, o::GPT_TYPE, WHAT)?),
            id: Guid::from_windows_bytes(array(e, o::GPT_ID, WHAT)?),
            attributes: u64_le(e, o::GPT_ATTRIBUTES, WHAT)?,
            name: String::from_utf16_lossy(&name),
        }
    } else {
        PartitionKind::Mbr {
            type_byte: u8_at(e, o::MBR_TYPE, WHAT)?,
        }
    };
    Ok(Some(PartitionEntry {
        number,
        offset,
        length,
        kind,
    }))
}

#[cfg(test)]
mod tests {
    use super::encode::{self as fixtures, LayoutSlot};
    use super::*;
    use proptest::prelude::*;

    const MIB: i64 = 1 << 20;

    fn gpt(number: u32, offset: i64, length: i64, type_guid: Guid, name: &str) -> PartitionEntry {
        PartitionEntry {
            number,
            offset,
            length,
            kind: PartitionKind::Gpt {
                type_guid,
                id: Guid::from_u128(0x1111_2222_3333_4444_5555_6666_7777_8800 + u128::from(number)),
                attributes: 0,
                name: name.to_string(),
            },
        }
    }

    #[test]
    fn gpt_with_msr_and_basic_data() {
        // What a disk initialised by Initialize-Disk + New-Partition looks
        // like: a 16 MiB MSR at 17408 bytes, then the data partition at 16 MiB.
        let disk_id = Guid::parse("5b7a3f3e-2d64-4c38-9a43-3d1f1c0b7e21").unwrap();
        let msr = gpt(
            1,
            17_408,
            16 * MIB - 17_408,
            MICROSOFT_RESERVED,
            "Microsoft reserved partition",
        );
        let data = gpt(
            2,
            16 * MIB,
            10 * 1024 * MIB,
            BASIC_DATA,
            "Basic data partition",
        );
        let buf = fixtures::drive_layout(
            PartitionStyle::Gpt { disk_id },
            &[
                LayoutSlot::Used(msr.clone()),
                LayoutSlot::Used(data.clone()),
            ],
        );
        assert_eq!(buf.len(), 48 + 2 * 144);
        let layout = parse_drive_layout_ex(&buf).unwrap();
        assert_eq!(layout.style, PartitionStyle::Gpt { disk_id });
        assert_eq!(layout.partitions, vec![msr, data.clone()]);
        assert!(layout.partitions[0].is_microsoft_reserved());
        assert!(!layout.partitions[1].is_microsoft_reserved());
        assert_eq!(layout.data_partitions().collect::<Vec<_>>(), vec![&data]);
    }

    #[test]
    fn mbr_with_three_unused_slots() {
        let p1 = PartitionEntry {
            number: 1,
            offset: MIB,
            length: 20 * 1024 * MIB,
            kind: PartitionKind::Mbr { type_byte: 0x07 },
        };
        let buf = fixtures::drive_layout(
            PartitionStyle::Mbr {
                signature: 0x1234_abcd,
            },
            &[
                LayoutSlot::Used(p1.clone()),
                LayoutSlot::Unused,
                LayoutSlot::Unused,
                LayoutSlot::Unused,
            ],
        );
        let layout = parse_drive_layout_ex(&buf).unwrap();
        assert_eq!(
            layout.style,
            PartitionStyle::Mbr {
                signature: 0x1234_abcd
            }
        );
        assert_eq!(layout.partitions, vec![p1.clone()]);
        assert_eq!(layout.data_partitions().count(), 1);
        assert!(!p1.is_microsoft_reserved());
    }

    #[test]
    fn mbr_extended_container_is_omitted() {
        let container = PartitionEntry {
            number: 0,
            offset: MIB,
            length: 100 * MIB,
            kind: PartitionKind::Mbr { type_byte: 0x0F },
        };
        let logical = PartitionEntry {
            number: 1,
            offset: 2 * MIB,
            length: 99 * MIB,
            kind: PartitionKind::Mbr { type_byte: 0x07 },
        };
        let buf = fixtures::drive_layout(
            PartitionStyle::Mbr { signature: 1 },
            &[
                LayoutSlot::Used(container),
                LayoutSlot::Unused,
                LayoutSlot::Unused,
                LayoutSlot::Unused,
                LayoutSlot::Used(logical.clone()),
                LayoutSlot::Unused,
                LayoutSlot::Unused,
                LayoutSlot::Unused,
            ],
        );
        assert_eq!(
            parse_drive_layout_ex(&buf).unwrap().partitions,
            vec![logical]
        );
    }

    #[test]
    fn raw_disk() {
        let buf = fixtures::drive_layout(PartitionStyle::Raw, &[]);
        assert_eq!(buf.len(), 48);
        assert_eq!(
            parse_drive_layout_ex(&buf),
            Ok(DriveLayout {
                style: PartitionStyle::Raw,
                partitions: vec![],
                usable: None
            })
        );
    }

    #[test]
    fn gpt_name_edge_cases() {
        let full: String = "N".repeat(GPT_NAME_UNITS);
        let p = gpt(1, MIB, MIB, BASIC_DATA, &full);
        let buf = fixtures::drive_layout(
            PartitionStyle::Gpt { disk_id: Guid::NIL },
            &[LayoutSlot::Used(p.clone())],
        );
        assert_eq!(parse_drive_layout_ex(&buf).unwrap().partitions, vec![p]);
        // An unpaired surrogate does not fail the layout.
        let mut buf = fixtures::drive_layout(
            PartitionStyle::Gpt { disk_id: Guid::NIL },
            &[LayoutSlot::Used(gpt(1, MIB, MIB, BASIC_DATA, "ab"))],
        );
        let name_at = 48 + entry_offset::GPT_NAME;
        buf[name_at..name_at + 2].copy_from_slice(&0xD800u16.to_le_bytes());
        let layout = parse_drive_layout_ex(&buf).unwrap();
        match &layout.partitions[0].kind {
            PartitionKind::Gpt { name, .. } => assert_eq!(name, "\u{FFFD}b"),
            k => panic!("{k:?}"),
        }
    }

    #[test]
    fn errors() {
        let good = fixtures::drive_layout(
            PartitionStyle::Gpt { disk_id: Guid::NIL },
            &[LayoutSlot::Used(gpt(1, MIB, MIB, BASIC_DATA, "x"))],
        );
        assert_eq!(
            parse_drive_layout_ex(&good[..47]),
            Err(ParseError::truncated("DRIVE_LAYOUT_INFORMATION_EX", 48, 47))
        );
        assert_eq!(
            parse_drive_layout_ex(&good[..100]),
            Err(ParseError::truncated(
                "DRIVE_LAYOUT_INFORMATION_EX",
                192,
                100
            ))
        );
        let mut b = good.clone();
        b[0] = 3;
        assert!(matches!(
            parse_drive_layout_ex(&b),
            Err(ParseError::Invalid { .. })
        ));
        // Entry style differs from the disk's.
        let mut b = good.clone();
        b[48] = 0;
        assert!(matches!(
            parse_drive_layout_ex(&b),
            Err(ParseError::Invalid { .. })
        ));
        // Negative offset.
        let mut b = good.clone();
        b[48 + 8..48 + 16].copy_from_slice(&(-1i64).to_le_bytes());
        assert!(matches!(
            parse_drive_layout_ex(&b),
            Err(ParseError::Invalid { .. })
        ));
        // Offset + length overflows.
        let mut b = good.clone();
        b[48 + 8..48 + 16].copy_from_slice(&i64::MAX.to_le_bytes());
        assert!(matches!(
            parse_drive_layout_ex(&b),
            Err(ParseError::Invalid { .. })
        ));
        // A huge count is truncated, not a huge allocation or overflow.
        let mut b = good.clone();
        b[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            parse_drive_layout_ex(&b),
            Err(ParseError::Truncated { .. })
        ));
    }

    fn arb_guid() -> impl Strategy<Value = Guid> {
        any::<u128>().prop_map(Guid::from_u128)
    }

    fn arb_gpt_entry(number: u32) -> impl Strategy<Value = PartitionEntry> {
        (
            0i64..i64::MAX / 2,
            1i64..i64::MAX / 2,
            arb_guid(),
            arb_guid(),
            any::<u64>(),
            "[^\u{0}]{0,20}",
        )
            .prop_map(move |(offset, length, type_guid, id, attributes, name)| {
                // Keep the name within the 36 UTF-16 units of the field.
                let units: Vec<u16> = name.encode_utf16().take(GPT_NAME_UNITS).collect();
                let name = String::from_utf16_lossy(&units);
                PartitionEntry {
                    number,
                    offset,
                    length,
                    kind: PartitionKind::Gpt {
                        type_guid,
                        id,
                        attributes,
                        name,
                    },
                }
            })
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(buf in proptest::collection::vec(any::<u8>(), 0..1024)) {
            if let Ok(l) = parse_drive_layout_ex(&buf) {
                let _ = l.data_partitions().count();
            }
        }

        #[test]
        fn corrupted_valid_layouts_never_panic(
            flips in proptest::collection::vec((0usize..480, any::<u8>()), 0..8)
        ) {
            let mut buf = fixtures::drive_layout(
                PartitionStyle::Gpt { disk_id: Guid::NIL },
                &[
                    LayoutSlot::Used(gpt(1, 17_408, MIB, MICROSOFT_RESERVED, "m")),
                    LayoutSlot::Used(gpt(2, 16 * MIB, MIB, BASIC_DATA, "d")),
                    LayoutSlot::Unused,
                ],
            );
            for (at, v) in flips {
                if let Some(b) = buf.get_mut(at) {
                    *b = v;
                }
            }
            let _ = parse_drive_layout_ex(&buf);
        }

        #[test]
        fn gpt_round_trip(
            disk_id in arb_guid(),
            entries in (0u32..6).prop_flat_map(|n| (1..=n).map(arb_gpt_entry).collect::<Vec<_>>()),
        ) {
            let slots: Vec<LayoutSlot> = entries.iter().cloned().map(LayoutSlot::Used).collect();
            let buf = fixtures::drive_layout(PartitionStyle::Gpt { disk_id }, &slots);
            let got = parse_drive_layout_ex(&buf).unwrap();
            prop_assert_eq!(got.style, PartitionStyle::Gpt { disk_id });
            prop_assert_eq!(got.partitions, entries);
        }

        #[test]
        fn mbr_round_trip(
            signature: u32,
            used in proptest::collection::vec(
                proptest::option::of((0i64..i64::MAX / 2, 1i64..i64::MAX / 2, any::<u8>())),
                0..12,
            ),
        ) {
            let mut want = Vec::new();
            let slots: Vec<LayoutSlot> = used
                .iter()
                .enumerate()
                .map(|(i, u)| match u {
                    Some((offset, length, type_byte)) => {
                        let p = PartitionEntry {
                            number: i as u32 + 1,
                            offset: *offset,
                            length: *length,
                            kind: PartitionKind::Mbr { type_byte: *type_byte },
                        };
                        want.push(p.clone());
                        LayoutSlot::Used(p)
                    }
                    None => LayoutSlot::Unused,
                })
                .collect();
            let buf = fixtures::drive_layout(PartitionStyle::Mbr { signature }, &slots);
            let got = parse_drive_layout_ex(&buf).unwrap();
            prop_assert_eq!(got.style, PartitionStyle::Mbr { signature });
            prop_assert_eq!(got.partitions, want);
        }
    }
}
