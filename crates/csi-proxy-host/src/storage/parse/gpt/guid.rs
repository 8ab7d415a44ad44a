//! The GUID of GPT headers and entries, in its on-disk byte order.

use std::fmt;

/// A GUID in its on-disk byte order: the first three fields little-endian,
/// the last eight bytes as written (the "mixed-endian" layout of GPT and
/// Windows).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct Guid(pub [u8; 16]);

/// Text that is not a GUID.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a GUID: {0:?}")]
pub struct ParseGuidError(pub String);

impl Guid {
    /// The all-zero GUID; an entry with this type GUID is unused.
    pub const NIL: Guid = Guid([0; 16]);
    /// Windows basic data partition, ebd0a0a2-b9e5-4433-87c0-68b6b72699c7.
    pub const BASIC_DATA: Guid = Guid::from_fields(
        0xebd0_a0a2,
        0xb9e5,
        0x4433,
        [0x87, 0xc0, 0x68, 0xb6, 0xb7, 0x26, 0x99, 0xc7],
    );
    /// Microsoft reserved partition, e3c9e316-0b5c-4db8-817d-f92df00215ae.
    pub const MICROSOFT_RESERVED: Guid = Guid::from_fields(
        0xe3c9_e316,
        0x0b5c,
        0x4db8,
        [0x81, 0x7d, 0xf9, 0x2d, 0xf0, 0x02, 0x15, 0xae],
    );
    /// Linux filesystem data, 0fc63daf-8483-4772-8e79-3d69d8477de4.
    pub const LINUX_FILESYSTEM: Guid = Guid::from_fields(
        0x0fc6_3daf,
        0x8483,
        0x4772,
        [0x8e, 0x79, 0x3d, 0x69, 0xd8, 0x47, 0x7d, 0xe4],
    );

    /// The GUID whose text form is `d1-d2-d3-d4[0..2]-d4[2..8]`.
    pub const fn from_fields(d1: u32, d2: u16, d3: u16, d4: [u8; 8]) -> Guid {
        let a = d1.to_le_bytes();
        let b = d2.to_le_bytes();
        let c = d3.to_le_bytes();
        Guid([
            a[0], a[1], a[2], a[3], b[0], b[1], c[0], c[1], d4[0], d4[1], d4[2], d4[3], d4[4],
            d4[5], d4[6], d4[7],
        ])
    }

    /// A random (version 4, RFC 4122 variant) GUID from 16 random bytes.
    pub fn from_random_bytes(mut bytes: [u8; 16]) -> Guid {
        // Version: high nibble of the third field, stored little-endian.
        bytes[7] = (bytes[7] & 0x0F) | 0x40;
        // Variant 10xx in the first byte of the fourth field.
        bytes[8] = (bytes[8] & 0x3F) | 0x80;
        Guid(bytes)
    }

    /// Parses `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` in any case, optionally
    /// in braces as Windows prints it.
    pub fn parse(text: &str) -> Result<Guid, ParseGuidError> {
        let err = || ParseGuidError(text.to_string());
        let inner = match text.strip_prefix('{') {
            Some(rest) => rest.strip_suffix('}').ok_or_else(err)?,
            None => text,
        };
        let g = crate::storage::parse::guid::Guid::parse(inner).map_err(|_| err())?;
        Ok(Guid(g.to_windows_bytes()))
    }

    /// The same GUID in the canonical representation of [`crate::storage::parse::guid`].
    pub fn canonical(self) -> crate::storage::parse::guid::Guid {
        crate::storage::parse::guid::Guid::from_windows_bytes(self.0)
    }

    /// Whether this is the all-zero GUID.
    pub fn is_nil(&self) -> bool {
        self.0 == [0; 16]
    }

    pub(super) fn read(bytes: &[u8], offset: usize) -> Guid {
        let mut g = [0u8; 16];
        if let Some(src) = bytes.get(offset..offset + 16) {
            g.copy_from_slice(src);
        }
        Guid(g)
    }
}

impl fmt::Display for Guid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.canonical(), f)
    }
}

impl fmt::Debug for Guid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Guid({self})")
    }
}

impl std::str::FromStr for Guid {
    type Err = ParseGuidError;
    fn from_str(s: &str) -> Result<Guid, ParseGuidError> {
        Guid::parse(s)
    }
}
