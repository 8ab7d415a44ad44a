//! Device identifiers: the page-0x83 id and the serial number of a disk.
//!
//! Two sources, one result type ([`Identifier`]), so [`page83_id`] gives the
//! same answer for both:
//!
//! * Windows: `STORAGE_DEVICE_ID_DESCRIPTOR`, the output of
//!   `IOCTL_STORAGE_QUERY_PROPERTY(StorageDeviceIdProperty)`: a 12-byte
//!   header (`Version`, `Size`, `NumberOfIdentifiers`, u32 each) and a chain
//!   of `STORAGE_IDENTIFIER`s from offset 12, each a 16-byte header
//!   (`CodeSet` u32 @0, `Type` u32 @4, `IdentifierSize` u16 @8, `NextOffset`
//!   u16 @10, `Association` u32 @12) followed by the identifier bytes; the
//!   next identifier starts `NextOffset` bytes after the start of this one.
//! * Linux: the raw SCSI VPD page 0x83 (`/sys/block/<dev>/device/vpd_pg83`),
//!   whose designators carry the same code set, type and association
//!   numbers (Windows copies them from the page).
//!
//! The serial number comes from VPD page 0x80 or from the
//! `STORAGE_DEVICE_DESCRIPTOR` of `StorageDeviceProperty`.
//!
//! Decisions on malformed input:
//!
//! * `Size` bounds the descriptor: the parser reads at most
//!   `min(Size, buf.len())` bytes. A `Size` below the 12-byte header is
//!   invalid. An identifier that does not fit is [`ParseError::Truncated`]
//!   (with a too-small output buffer Windows reports the full `Size`; the
//!   caller retries with that many bytes).
//! * `NextOffset` of the last announced identifier is ignored. A
//!   `NextOffset` of 0 on an earlier identifier **ends the chain**: the
//!   identifiers read so far are returned. Upstream csi-proxy in that case
//!   reads the same identifier again and again, so it can only ever find
//!   that one; returning the identifiers before the break gives
//!   [`page83_id`] the same result. A non-zero `NextOffset` smaller than the
//!   identifier (16 + `IdentifierSize`) would make identifiers overlap and
//!   is invalid. Every step therefore advances at least 16 bytes, which
//!   bounds the loop by the buffer length whatever `NumberOfIdentifiers`
//!   says.

use super::bytes::{self, u16_be, u16_le, u32_le, u8_at};
use super::error::ParseError;

/// `STORAGE_IDENTIFIER_CODE_SET` / SCSI code set of an identifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CodeSet {
    /// 1: raw bytes.
    Binary,
    /// 2: ASCII text.
    Ascii,
    /// 3: UTF-8 text.
    Utf8,
    /// Anything else (0 = reserved).
    Other(u32),
}

impl CodeSet {
    /// From the numeric value.
    pub fn from_u32(v: u32) -> CodeSet {
        match v {
            1 => CodeSet::Binary,
            2 => CodeSet::Ascii,
            3 => CodeSet::Utf8,
            v => CodeSet::Other(v),
        }
    }

    /// The numeric value.
    pub fn to_u32(self) -> u32 {
        match self {
            CodeSet::Binary => 1,
            CodeSet::Ascii => 2,
            CodeSet::Utf8 => 3,
            CodeSet::Other(v) => v,
        }
    }
}

/// `STORAGE_ASSOCIATION_TYPE` / SCSI association: the logical unit (device).
pub const ASSOCIATION_DEVICE: u32 = 0;
/// The target port.
pub const ASSOCIATION_PORT: u32 = 1;
/// The target device.
pub const ASSOCIATION_TARGET: u32 = 2;

/// Common identifier types (`STORAGE_IDENTIFIER_TYPE` = SCSI designator type).
pub const ID_TYPE_VENDOR_SPECIFIC: u32 = 0;
pub const ID_TYPE_VENDOR_ID: u32 = 1;
pub const ID_TYPE_EUI64: u32 = 2;
pub const ID_TYPE_FCPH_NAME: u32 = 3;
pub const ID_TYPE_SCSI_NAME_STRING: u32 = 8;

/// One device identifier (page-0x83 designator).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identifier {
    pub code_set: CodeSet,
    /// Designator type (`STORAGE_IDENTIFIER_TYPE`), e.g. 2 = EUI-64, 3 = NAA.
    pub id_type: u32,
    /// 0 device, 1 port, 2 target.
    pub association: u32,
    pub bytes: Vec<u8>,
}

/// Size of the `STORAGE_DEVICE_ID_DESCRIPTOR` header.
pub const DEVICE_ID_DESCRIPTOR_HEADER: usize = 12;
/// Size of the `STORAGE_IDENTIFIER` header (identifier bytes follow).
pub const STORAGE_IDENTIFIER_HEADER: usize = 16;

/// Parses `STORAGE_DEVICE_ID_DESCRIPTOR` (see the module documentation).
pub fn parse_storage_device_id_descriptor(buf: &[u8]) -> Result<Vec<Identifier>, ParseError> {
    const WHAT: &str = "STORAGE_DEVICE_ID_DESCRIPTOR";
    const ID: &str = "STORAGE_IDENTIFIER";
    bytes::need(buf, DEVICE_ID_DESCRIPTOR_HEADER, WHAT)?;
    let size = bytes::usize_from(u32_le(buf, 4, WHAT)?);
    let count = u32_le(buf, 8, WHAT)?;
    if size < DEVICE_ID_DESCRIPTOR_HEADER {
        return Err(ParseError::invalid(
            WHAT,
            format!("Size {size} is smaller than the {DEVICE_ID_DESCRIPTOR_HEADER}-byte header"),
        ));
    }
    // Report truncation against the announced size, read only what is there.
    let data = buf.get(..size.min(buf.len())).unwrap_or(buf);
    let mut out = Vec::new();
    let mut pos = DEVICE_ID_DESCRIPTOR_HEADER;
    for i in 0..count {
        let fits = |need: usize| {
            if need <= data.len() {
                Ok(())
            } else {
                Err(ParseError::truncated(ID, need, data.len()))
            }
        };
        fits(bytes::end(pos, STORAGE_IDENTIFIER_HEADER))?;
        let code_set = u32_le(data, pos, ID)?;
        let id_type = u32_le(data, pos + 4, ID)?;
        let id_size = usize::from(u16_le(data, pos + 8, ID)?);
        let next = usize::from(u16_le(data, pos + 10, ID)?);
        let association = u32_le(data, pos + 12, ID)?;
        let start = pos + STORAGE_IDENTIFIER_HEADER;
        fits(bytes::end(start, id_size))?;
        let id = bytes::slice(data, start, id_size, ID)?;
        out.push(Identifier {
            code_set: CodeSet::from_u32(code_set),
            id_type,
            association,
            bytes: id.to_vec(),
        });
        if i.checked_add(1) == Some(count) || next == 0 {
            break;
        }
        if next < STORAGE_IDENTIFIER_HEADER + id_size {
            return Err(ParseError::invalid(
                ID,
                format!(
                    "NextOffset {next} of identifier {i} is smaller than the identifier ({} bytes)",
                    STORAGE_IDENTIFIER_HEADER + id_size
                ),
            ));
        }
        pos = pos
            .checked_add(next)
            .ok_or_else(|| ParseError::truncated(ID, usize::MAX, data.len()))?;
    }
    Ok(out)
}

/// Parses a raw SCSI VPD page 0x83 (device identification): byte 1 = 0x83,
/// bytes 2..4 = page length (big-endian), designators from byte 4, each
/// with code set in the low nibble of byte 0, designator type in bits 0-3
/// and association in bits 4-5 of byte 1, length in byte 3, then the
/// designator. The whole announced page must be present; bytes after it
/// are ignored.
pub fn parse_scsi_vpd_page83(buf: &[u8]) -> Result<Vec<Identifier>, ParseError> {
    const WHAT: &str = "VPD page 0x83";
    const DES: &str = "VPD page 0x83 designator";
    let page = vpd_page(buf, 0x83, WHAT)?;
    let mut out = Vec::new();
    let mut pos = 0usize;
    while pos < page.len() {
        let b0 = u8_at(page, pos, DES)?;
        let b1 = u8_at(page, pos + 1, DES)?;
        let len = usize::from(u8_at(page, pos + 3, DES)?);
        let id = bytes::slice(page, pos + 4, len, DES)?;
        out.push(Identifier {
            code_set: CodeSet::from_u32(u32::from(b0 & 0x0F)),
            id_type: u32::from(b1 & 0x0F),
            association: u32::from((b1 >> 4) & 0x03),
            bytes: id.to_vec(),
        });
        pos += 4 + len; // <= page.len(): the slice above succeeded
    }
    Ok(out)
}

/// Parses a raw SCSI VPD page 0x80 (unit serial number): byte 1 = 0x80,
/// bytes 2..4 = length (big-endian), then the serial in ASCII. Surrounding
/// spaces and trailing NULs are removed; non-ASCII bytes are invalid.
pub fn parse_scsi_vpd_page80(buf: &[u8]) -> Result<String, ParseError> {
    const WHAT: &str = "VPD page 0x80";
    let page = vpd_page(buf, 0x80, WHAT)?;
    if !page.is_ascii() {
        return Err(ParseError::invalid(WHAT, "serial number is not ASCII"));
    }
    // ASCII is valid UTF-8.
    let text = std::str::from_utf8(page).map_err(|e| ParseError::invalid(WHAT, e.to_string()))?;
    Ok(trim_id_text(text).to_string())
}

/// The payload of a VPD page after checking the page code and length.
fn vpd_page<'a>(buf: &'a [u8], code: u8, what: &'static str) -> Result<&'a [u8], ParseError> {
    let got = u8_at(buf, 1, what)?;
    let len = usize::from(u16_be(buf, 2, what)?);
    if got != code {
        return Err(ParseError::invalid(
            what,
            format!("page code {got:#04x}, expected {code:#04x}"),
        ));
    }
    bytes::slice(buf, 4, len, what)
}

/// Offsets in `STORAGE_DEVICE_DESCRIPTOR`.
pub const DEVICE_DESCRIPTOR_SERIAL_OFFSET_FIELD: usize = 24;
/// Offset of `RawDeviceProperties`: string data never starts before it.
pub const DEVICE_DESCRIPTOR_RAW_PROPERTIES: usize = 36;

/// The serial number of a `STORAGE_DEVICE_DESCRIPTOR`
/// (`StorageDeviceProperty`): `SerialNumberOffset` (u32 @24) points to a
/// NUL-terminated ASCII string inside the descriptor (`Size`, u32 @4,
/// bounds it as for the id descriptor). Offset 0, or a string that is empty
/// after trimming spaces, is `None`. An offset into the fixed part of the
/// structure (below 36) or text that is not UTF-8 is invalid; a string
/// without its NUL is truncated if `Size` exceeds the buffer, else invalid.
pub fn parse_storage_device_descriptor_serial(buf: &[u8]) -> Result<Option<String>, ParseError> {
    const WHAT: &str = "STORAGE_DEVICE_DESCRIPTOR";
    bytes::need(buf, DEVICE_DESCRIPTOR_SERIAL_OFFSET_FIELD + 4, WHAT)?;
    let size = bytes::usize_from(u32_le(buf, 4, WHAT)?);
    let off = bytes::usize_from(u32_le(buf, DEVICE_DESCRIPTOR_SERIAL_OFFSET_FIELD, WHAT)?);
    if off == 0 {
        return Ok(None);
    }
    if off < DEVICE_DESCRIPTOR_RAW_PROPERTIES {
        return Err(ParseError::invalid(
            WHAT,
            format!("SerialNumberOffset {off} points into the fixed header"),
        ));
    }
    let data = buf.get(..size.min(buf.len())).unwrap_or(buf);
    let tail = data.get(off..).ok_or_else(|| {
        if size > buf.len() {
            ParseError::truncated(WHAT, bytes::end(off, 1), buf.len())
        } else {
            ParseError::invalid(
                WHAT,
                format!("SerialNumberOffset {off} is beyond Size {size}"),
            )
        }
    })?;
    let Some(nul) = tail.iter().position(|&c| c == 0) else {
        return Err(if size > buf.len() {
            ParseError::truncated(WHAT, size, buf.len())
        } else {
            ParseError::invalid(WHAT, "serial number is not NUL-terminated")
        });
    };
    let raw = tail.get(..nul).unwrap_or_default();
    let text = std::str::from_utf8(raw)
        .map_err(|_| ParseError::invalid(WHAT, "serial number is not UTF-8"))?;
    let text = text.trim_matches(' ');
    Ok((!text.is_empty()).then(|| text.to_string()))
}

/// The page-0x83 id of a disk, as upstream csi-proxy computes it: the
/// **first** identifier with association 0 (device), whatever its type.
///
/// * Binary → lower-case hex of the bytes.
/// * ASCII / UTF-8 → the text, trailing NULs and surrounding spaces removed.
///
/// Identifiers that cannot give a lossless, non-empty string are skipped
/// and the search goes on: other code sets, text that is not UTF-8 (or,
/// for ASCII, not ASCII), text containing NUL after trimming, and empty
/// identifiers. (Upstream would return undecodable bytes as is, which gRPC
/// cannot send as a string; it also skips UTF-8 identifiers, which we
/// accept.)
pub fn page83_id(ids: &[Identifier]) -> Option<String> {
    ids.iter()
        .filter(|id| id.association == ASSOCIATION_DEVICE)
        .find_map(identifier_text)
}

/// One identifier as a page-83 string, or `None` if it cannot be one.
fn identifier_text(id: &Identifier) -> Option<String> {
    let s = match id.code_set {
        CodeSet::Binary => id.bytes.iter().map(|b| format!("{b:02x}")).collect(),
        CodeSet::Ascii | CodeSet::Utf8 => {
            if id.code_set == CodeSet::Ascii && !id.bytes.is_ascii() {
                return None;
            }
            let text = trim_id_text(std::str::from_utf8(&id.bytes).ok()?);
            if text.contains('\0') {
                return None;
            }
            text.to_string()
        }
        CodeSet::Other(_) => return None,
    };
    (!s.is_empty()).then_some(s)
}

/// Removes trailing NULs and spaces, and leading spaces.
fn trim_id_text(s: &str) -> &str {
    s.trim_end_matches(['\0', ' ']).trim_start_matches(' ')
}

#[cfg(test)]
mod tests;
