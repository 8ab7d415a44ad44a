//! GUIDs and volume ids: the one GUID type of the crate (GPT headers
//! and entries, Windows IOCTL buffers, volume ids, WMI), with the GPT
//! partition types.
//!
//! [`Guid`] holds the 16 bytes in the order they are written in the
//! canonical text form (`xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`), which is
//! also the RFC 4122 network order. Windows stores a `GUID` in memory (and
//! in IOCTL buffers) mixed-endian: `Data1` (u32), `Data2` (u16) and `Data3`
//! (u16) little-endian, then the 8 bytes of `Data4` as they are;
//! [`Guid::from_windows_bytes`] and [`Guid::to_windows_bytes`] convert.
//!
//! [`VolumeId`] is the `\\?\Volume{GUID}\` name that `FindFirstVolumeW`,
//! `GetVolumeNameForVolumeMountPointW` and `MSFT_Volume.UniqueId` use, and
//! that clients send back. Accepted input, and nothing else:
//!
//! * the literal prefix `\\?\Volume{` (case-sensitive, as Windows writes it;
//!   `\\.\`, `\??\` and other spellings are rejected);
//! * a GUID in canonical form, hex digits of either case;
//! * `}`, optionally followed by one `\`.
//!
//! Output is always lower-case hex with the trailing `\`
//! ([`VolumeId::as_str`]); [`VolumeId::device_path`] is the same without the
//! trailing `\`, the form `CreateFileW` needs to open the volume device.

use std::fmt;
use std::str::FromStr;

use super::error::ParseError;

/// Length of the canonical text form of a GUID.
pub const GUID_TEXT_LEN: usize = 36;

/// A GUID, stored in canonical (text) byte order.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Guid([u8; 16]);

impl Guid {
    /// The all-zero GUID; a GPT entry with this type GUID is unused.
    pub const NIL: Guid = Guid([0; 16]);
    /// GPT type of a Windows basic data partition.
    pub const BASIC_DATA: Guid = Guid::from_u128(0xebd0a0a2_b9e5_4433_87c0_68b6b72699c7);
    /// GPT type of the Microsoft reserved partition (MSR).
    pub const MICROSOFT_RESERVED: Guid = Guid::from_u128(0xe3c9e316_0b5c_4db8_817d_f92df00215ae);
    /// GPT type of Linux filesystem data.
    pub const LINUX_FILESYSTEM: Guid = Guid::from_u128(0x0fc63daf_8483_4772_8e79_3d69d8477de4);

    /// Whether this is the all-zero GUID.
    pub fn is_nil(&self) -> bool {
        self.0 == [0; 16]
    }

    /// A random (version 4, RFC 4122 variant) GUID from 16 random bytes,
    /// taken in the on-disk (Windows) layout.
    pub fn from_random_bytes(mut bytes: [u8; 16]) -> Guid {
        // Version: high nibble of the third field, stored little-endian.
        bytes[7] = (bytes[7] & 0x0F) | 0x40;
        // Variant 10xx in the first byte of the fourth field.
        bytes[8] = (bytes[8] & 0x3F) | 0x80;
        Guid::from_windows_bytes(bytes)
    }

    /// The GUID whose canonical text is the hex form of `v`, e.g.
    /// `Guid::from_u128(0xe3c9e316_0b5c_4db8_817d_f92df00215ae)`.
    pub const fn from_u128(v: u128) -> Guid {
        Guid(v.to_be_bytes())
    }

    /// The value as a number whose hex form is the canonical text.
    pub const fn to_u128(self) -> u128 {
        u128::from_be_bytes(self.0)
    }

    /// From the 16 bytes in canonical order.
    pub const fn from_bytes(bytes: [u8; 16]) -> Guid {
        Guid(bytes)
    }

    /// The 16 bytes in canonical order.
    pub const fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }

    /// From the in-memory layout of a Windows `GUID` structure.
    pub const fn from_windows_bytes(b: [u8; 16]) -> Guid {
        Guid([
            b[3], b[2], b[1], b[0], b[5], b[4], b[7], b[6], b[8], b[9], b[10], b[11], b[12], b[13],
            b[14], b[15],
        ])
    }

    /// The in-memory layout of a Windows `GUID` structure.
    pub const fn to_windows_bytes(self) -> [u8; 16] {
        // The conversion is its own inverse.
        Guid::from_windows_bytes(self.0).0
    }

    /// Parses the canonical 36-character form (hex of either case, dashes at
    /// positions 8, 13, 18 and 23; no braces, no surrounding space).
    pub fn parse(s: &str) -> Result<Guid, ParseError> {
        const WHAT: &str = "GUID";
        let b = s.as_bytes();
        if b.len() != GUID_TEXT_LEN {
            return Err(ParseError::invalid(
                WHAT,
                format!("expected {GUID_TEXT_LEN} characters, got {}", b.len()),
            ));
        }
        let mut out = [0u8; 16];
        let mut nibbles = 0usize;
        for (i, &c) in b.iter().enumerate() {
            if matches!(i, 8 | 13 | 18 | 23) {
                if c != b'-' {
                    return Err(ParseError::invalid(
                        WHAT,
                        format!("expected '-' at position {i}"),
                    ));
                }
                continue;
            }
            let v = hex_value(c).ok_or_else(|| {
                ParseError::invalid(WHAT, format!("not a hex digit at position {i}"))
            })?;
            // 32 nibbles exactly: the length and dash checks guarantee it.
            if let Some(byte) = out.get_mut(nibbles / 2) {
                *byte = (*byte << 4) | v;
            }
            nibbles += 1;
        }
        Ok(Guid(out))
    }
}

impl Guid {
    /// [`Guid::parse`] of the canonical form, optionally in braces as
    /// Windows prints it (`{xxxxxxxx-...}`).
    pub fn parse_braced(s: &str) -> Result<Guid, ParseError> {
        match s.strip_prefix('{') {
            Some(rest) => match rest.strip_suffix('}') {
                Some(inner) => Guid::parse(inner),
                None => Err(ParseError::invalid(
                    "GUID",
                    "an opening brace without a closing one",
                )),
            },
            None => Guid::parse(s),
        }
    }
}

impl FromStr for Guid {
    type Err = ParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Guid::parse(s)
    }
}

impl fmt::Display for Guid {
    /// Canonical lower-case form without braces.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, byte) in self.0.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                f.write_str("-")?;
            }
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Guid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Guid({self})")
    }
}

fn hex_value(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// The prefix of every volume id.
pub const VOLUME_ID_PREFIX: &str = r"\\?\Volume{";

/// A validated, normalised volume id: `\\?\Volume{<lower-case GUID>}\`.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VolumeId {
    guid: Guid,
    text: String,
}

impl VolumeId {
    /// Validates `s` (see the module documentation for the accepted form).
    pub fn parse(s: &str) -> Result<VolumeId, ParseError> {
        const WHAT: &str = "volume id";
        let body = s.strip_prefix(VOLUME_ID_PREFIX).ok_or_else(|| {
            ParseError::invalid(WHAT, format!("must start with {VOLUME_ID_PREFIX}"))
        })?;
        let body = body.strip_suffix('\\').unwrap_or(body);
        let guid_text = body
            .strip_suffix('}')
            .ok_or_else(|| ParseError::invalid(WHAT, "must end with '}' or '}\\'"))?;
        let guid = Guid::parse(guid_text).map_err(|e| match e {
            ParseError::Invalid { detail, .. } => ParseError::invalid(WHAT, detail),
            other => other,
        })?;
        Ok(VolumeId::from_guid(guid))
    }

    /// The volume id of the volume named by `guid`.
    pub fn from_guid(guid: Guid) -> VolumeId {
        VolumeId {
            guid,
            text: format!("{VOLUME_ID_PREFIX}{guid}}}\\"),
        }
    }

    /// The GUID of the volume.
    pub fn guid(&self) -> Guid {
        self.guid
    }

    /// `\\?\Volume{guid}\`, with the trailing backslash: the form of
    /// `GetVolumeInformationW`, `GetDiskFreeSpaceExW`,
    /// `SetVolumeMountPointW` and WQL.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// `\\?\Volume{guid}`, without the trailing backslash: the form of
    /// `CreateFileW` on the volume device.
    pub fn device_path(&self) -> &str {
        self.text.strip_suffix('\\').unwrap_or(&self.text)
    }
}

impl FromStr for VolumeId {
    type Err = ParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        VolumeId::parse(s)
    }
}

impl fmt::Display for VolumeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl fmt::Debug for VolumeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "VolumeId({:?})", self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MSR: &str = "e3c9e316-0b5c-4db8-817d-f92df00215ae";

    #[test]
    fn guid_text_round_trip() {
        let g = Guid::parse(MSR).unwrap();
        assert_eq!(g, Guid::from_u128(0xe3c9e316_0b5c_4db8_817d_f92df00215ae));
        assert_eq!(g.to_string(), MSR);
        assert_eq!(
            Guid::parse("E3C9E316-0B5C-4DB8-817D-F92DF00215AE").unwrap(),
            g
        );
        assert_eq!(format!("{g:?}"), format!("Guid({MSR})"));
        assert_eq!(
            Guid::NIL.to_string(),
            "00000000-0000-0000-0000-000000000000"
        );
    }

    #[test]
    fn guid_windows_layout() {
        // Basic data partition type as it appears in a GPT entry on disk and
        // in PARTITION_INFORMATION_GPT.PartitionType.
        let raw = [
            0xa2, 0xa0, 0xd0, 0xeb, 0xe5, 0xb9, 0x33, 0x44, 0x87, 0xc0, 0x68, 0xb6, 0xb7, 0x26,
            0x99, 0xc7,
        ];
        let g = Guid::from_windows_bytes(raw);
        assert_eq!(g.to_string(), "ebd0a0a2-b9e5-4433-87c0-68b6b72699c7");
        assert_eq!(g.to_windows_bytes(), raw);
    }

    #[test]
    fn guid_rejects() {
        for bad in [
            "",
            "e3c9e316-0b5c-4db8-817d-f92df00215a",
            "e3c9e316-0b5c-4db8-817d-f92df00215aef",
            "{e3c9e316-0b5c-4db8-817d-f92df00215a}",
            "e3c9e3160-b5c-4db8-817d-f92df00215ae",
            "e3c9e316-0b5c-4db8-817d-f92df00215ag",
            "e3c9e316_0b5c_4db8_817d_f92df00215ae",
            " e3c9e316-0b5c-4db8-817d-f92df00215a",
            "e3c9e316-0b5c-4db8-817d-f92df00215\u{e9}",
            "+3c9e316-0b5c-4db8-817d-f92df00215ae",
        ] {
            assert!(Guid::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn volume_id_forms() {
        let want = r"\\?\Volume{e3c9e316-0b5c-4db8-817d-f92df00215ae}\";
        for ok in [
            r"\\?\Volume{e3c9e316-0b5c-4db8-817d-f92df00215ae}\",
            r"\\?\Volume{e3c9e316-0b5c-4db8-817d-f92df00215ae}",
            r"\\?\Volume{E3C9E316-0B5C-4DB8-817D-F92DF00215AE}\",
        ] {
            let v = VolumeId::parse(ok).unwrap();
            assert_eq!(v.as_str(), want);
            assert_eq!(v.to_string(), want);
            assert_eq!(
                v.device_path(),
                r"\\?\Volume{e3c9e316-0b5c-4db8-817d-f92df00215ae}"
            );
            assert_eq!(v.guid().to_string(), MSR);
            assert_eq!(ok.parse::<VolumeId>().unwrap(), v);
        }
        assert_eq!(
            VolumeId::from_guid(Guid::parse(MSR).unwrap()).as_str(),
            want
        );
    }

    #[test]
    fn volume_id_rejects() {
        for bad in [
            "",
            r"\\?\Volume{}",
            r"\\.\Volume{e3c9e316-0b5c-4db8-817d-f92df00215ae}\",
            r"\??\Volume{e3c9e316-0b5c-4db8-817d-f92df00215ae}\",
            r"\\?\volume{e3c9e316-0b5c-4db8-817d-f92df00215ae}\",
            r"\\?\Volume{e3c9e316-0b5c-4db8-817d-f92df00215ae}\\",
            r"\\?\Volume{e3c9e316-0b5c-4db8-817d-f92df00215ae}\x",
            r"\\?\Volume{e3c9e316-0b5c-4db8-817d-f92df00215ae}/",
            r"\\?\Volume{e3c9e316-0b5c-4db8-817d-f92df00215ae",
            r"\\?\Volumee3c9e316-0b5c-4db8-817d-f92df00215ae}\",
            r"\\?\Volume{{e3c9e316-0b5c-4db8-817d-f92df00215ae}}\",
            "\\\\?\\Volume{e3c9e316-0b5c-4db8-817d-f92df00215ae}\\\0",
            "\\\\?\\Volume{e3c9e316-0b5c-4db8-817d-f92df00215a\0}\\",
            r" \\?\Volume{e3c9e316-0b5c-4db8-817d-f92df00215ae}\",
            r"\\?\Volume{e3c9e316-0b5c-4db8-817d-f92df00215ae} ",
            r"C:\",
            r"\\?\Volume{e3c9e316-0b5c-4db8-817d-f92df00215ae0}\",
            r"\\?\Volume{00000000-0000-0000-0000-00000000000}\",
        ] {
            assert!(VolumeId::parse(bad).is_err(), "{bad:?}");
        }
    }

    fn arb_guid() -> impl Strategy<Value = Guid> {
        any::<u128>().prop_map(Guid::from_u128)
    }

    proptest! {
        #[test]
        fn guid_formats_and_parses_back(g in arb_guid()) {
            prop_assert_eq!(Guid::parse(&g.to_string()), Ok(g));
            prop_assert_eq!(Guid::parse(&g.to_string().to_uppercase()), Ok(g));
            prop_assert_eq!(Guid::from_windows_bytes(g.to_windows_bytes()), g);
        }

        #[test]
        fn volume_id_formats_and_parses_back(g in arb_guid()) {
            let v = VolumeId::from_guid(g);
            prop_assert_eq!(VolumeId::parse(v.as_str()), Ok(v.clone()));
            prop_assert_eq!(VolumeId::parse(v.device_path()), Ok(v.clone()));
            prop_assert_eq!(v.guid(), g);
        }

        #[test]
        fn random_strings_never_panic(s in any::<String>()) {
            let _ = Guid::parse(&s);
            let _ = VolumeId::parse(&s);
        }

        #[test]
        fn accepted_volume_ids_are_canonical_modulo_case_and_backslash(
            s in r"(\\\\\?\\Volume\{)?[0-9a-fA-Fx-]{30,38}\}?\\?.?"
        ) {
            if let Ok(v) = VolumeId::parse(&s) {
                let with = if s.ends_with('\\') { s.clone() } else { format!("{s}\\") };
                prop_assert_eq!(with.to_ascii_lowercase().replace("volume", "Volume"), v.as_str());
            }
        }

        #[test]
        fn near_misses_of_valid_ids_are_handled(g in arb_guid(), pos in 0usize..60, c in any::<char>()) {
            // Insert one arbitrary character anywhere into a valid id: the
            // result is either rejected or still canonical modulo case.
            let mut s: Vec<char> = VolumeId::from_guid(g).as_str().chars().collect();
            let pos = pos.min(s.len());
            s.insert(pos, c);
            let s: String = s.into_iter().collect();
            if let Ok(v) = VolumeId::parse(&s) {
                let with = if s.ends_with('\\') { s.clone() } else { format!("{s}\\") };
                prop_assert_eq!(with.to_ascii_lowercase().replace("volume", "Volume"), v.as_str());
            }
        }
    }
}
