//! The encoder of `DRIVE_LAYOUT_INFORMATION_EX`, for the layout's table
//! tests, round-trip tests and the fuzz seeds.

use super::super::bytes::put;
use super::{
    entry_offset, layout_offset, PartitionEntry, PartitionKind, PartitionStyle, GPT_NAME_UNITS,
    LAYOUT_HEADER_SIZE, PARTITION_ENTRY_SIZE, STYLE_GPT, STYLE_MBR, STYLE_RAW,
};

/// One slot of a drive layout to encode.
#[derive(Debug, Clone)]
pub(crate) enum LayoutSlot {
    /// Encoded as given (number 0 makes it an omitted container).
    Used(PartitionEntry),
    /// An unused MBR slot / empty GPT entry: all zero but the style.
    Unused,
}

/// `DRIVE_LAYOUT_INFORMATION_EX` with one entry per slot.
pub(crate) fn drive_layout(style: PartitionStyle, slots: &[LayoutSlot]) -> Vec<u8> {
    use entry_offset as o;
    let mut buf = vec![0u8; LAYOUT_HEADER_SIZE + PARTITION_ENTRY_SIZE * slots.len()];
    let style_value = match style {
        PartitionStyle::Mbr { signature } => {
            put(
                &mut buf,
                layout_offset::MBR_SIGNATURE,
                &signature.to_le_bytes(),
            );
            put(
                &mut buf,
                layout_offset::MBR_CHECKSUM,
                &0x5A5A_5A5Au32.to_le_bytes(),
            );
            STYLE_MBR
        }
        PartitionStyle::Gpt { disk_id } => {
            put(
                &mut buf,
                layout_offset::GPT_DISK_ID,
                &disk_id.to_windows_bytes(),
            );
            put(
                &mut buf,
                layout_offset::GPT_STARTING_USABLE,
                &17_408i64.to_le_bytes(),
            );
            put(
                &mut buf,
                layout_offset::GPT_USABLE_LENGTH,
                &(1i64 << 40).to_le_bytes(),
            );
            put(
                &mut buf,
                layout_offset::GPT_MAX_PARTITIONS,
                &128u32.to_le_bytes(),
            );
            STYLE_GPT
        }
        PartitionStyle::Raw => STYLE_RAW,
    };
    put(&mut buf, layout_offset::STYLE, &style_value.to_le_bytes());
    put(
        &mut buf,
        layout_offset::COUNT,
        &(slots.len() as u32).to_le_bytes(),
    );
    for (i, slot) in slots.iter().enumerate() {
        let at = LAYOUT_HEADER_SIZE + PARTITION_ENTRY_SIZE * i;
        put(&mut buf, at + o::STYLE, &style_value.to_le_bytes());
        let LayoutSlot::Used(p) = slot else {
            continue;
        };
        put(&mut buf, at + o::STARTING_OFFSET, &p.offset.to_le_bytes());
        put(&mut buf, at + o::LENGTH, &p.length.to_le_bytes());
        put(&mut buf, at + o::NUMBER, &p.number.to_le_bytes());
        buf[at + o::REWRITE] = 0;
        buf[at + o::IS_SERVICE] = 0;
        match &p.kind {
            PartitionKind::Mbr { type_byte } => {
                buf[at + o::MBR_TYPE] = *type_byte;
                buf[at + o::MBR_BOOT] = u8::from(i == 0);
                buf[at + o::MBR_RECOGNIZED] = 1;
                let hidden = (p.offset / 512) as u32;
                put(&mut buf, at + o::MBR_HIDDEN_SECTORS, &hidden.to_le_bytes());
                put(&mut buf, at + o::MBR_ID, &[0x77; 16]);
            }
            PartitionKind::Gpt {
                type_guid,
                id,
                attributes,
                name,
            } => {
                put(&mut buf, at + o::GPT_TYPE, &type_guid.to_windows_bytes());
                put(&mut buf, at + o::GPT_ID, &id.to_windows_bytes());
                put(&mut buf, at + o::GPT_ATTRIBUTES, &attributes.to_le_bytes());
                for (k, unit) in name.encode_utf16().take(GPT_NAME_UNITS).enumerate() {
                    put(&mut buf, at + o::GPT_NAME + 2 * k, &unit.to_le_bytes());
                }
            }
        }
    }
    buf
}
