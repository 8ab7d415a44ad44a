//! Volume identifiers.
//!
//! A volume id is what Windows calls a volume GUID path:
//! `\\?\Volume{xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx}\`. The Linux backend
//! uses the same form (derived from the partition's GPT unique GUID), so a
//! driver sees one format on every OS.

use crate::{Error, Result};
use std::fmt;

const PREFIX: &str = "\\\\?\\Volume{";

/// A validated volume id, kept in its canonical form: lower-case hex, with
/// the trailing backslash.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VolumeId(String);

impl VolumeId {
    /// Parses a client-supplied volume id. Accepts exactly
    /// `\\?\Volume{GUID}` with or without the trailing `\` (hex in any case);
    /// everything else is [`Error::InvalidArgument`].
    pub fn parse(s: &str) -> Result<VolumeId> {
        let bad = |why: &str| {
            let shown: String = s.chars().take(80).collect();
            Error::InvalidArgument(format!(
                "volume id {shown:?} {why}: expected \\\\?\\Volume{{xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx}}\\"
            ))
        };
        if s.is_empty() {
            return Err(bad("is empty"));
        }
        let rest = s
            .get(..PREFIX.len())
            .filter(|p| p.eq_ignore_ascii_case(PREFIX))
            .map(|_| &s[PREFIX.len()..])
            .ok_or_else(|| bad("does not start with \\\\?\\Volume{"))?;
        let rest = rest.strip_suffix('\\').unwrap_or(rest);
        let guid = rest
            .strip_suffix('}')
            .ok_or_else(|| bad("does not end with }"))?;
        let guid = canonical_guid(guid).ok_or_else(|| bad("does not hold a GUID"))?;
        Ok(VolumeId(format!("{PREFIX}{guid}}}\\")))
    }

    /// The volume id of a GUID given in canonical text form.
    pub fn from_guid(guid: &str) -> Result<VolumeId> {
        let g =
            canonical_guid(guid).ok_or_else(|| Error::Internal(format!("not a GUID: {guid:?}")))?;
        Ok(VolumeId(format!("{PREFIX}{g}}}\\")))
    }

    /// `\\?\Volume{GUID}\`.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The GUID, lower case, without braces.
    pub fn guid(&self) -> &str {
        &self.0[PREFIX.len()..PREFIX.len() + 36]
    }

    /// `\\?\Volume{GUID}` (no trailing backslash): the form `CreateFileW`
    /// wants for the volume device.
    pub fn device_path(&self) -> &str {
        &self.0[..self.0.len() - 1]
    }
}

impl fmt::Display for VolumeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for VolumeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "VolumeId({})", self.0)
    }
}

/// `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` in lower case, or `None`.
pub fn canonical_guid(s: &str) -> Option<String> {
    let b = s.as_bytes();
    if b.len() != 36 {
        return None;
    }
    for (i, c) in b.iter().enumerate() {
        let dash = matches!(i, 8 | 13 | 18 | 23);
        if dash != (*c == b'-') || (!dash && !c.is_ascii_hexdigit()) {
            return None;
        }
    }
    Some(s.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const G: &str = "0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0";

    #[test]
    fn accepted_forms_normalise() {
        let want = format!("\\\\?\\Volume{{{G}}}\\");
        for s in [
            format!("\\\\?\\Volume{{{G}}}\\"),
            format!("\\\\?\\Volume{{{G}}}"),
            format!("\\\\?\\volume{{{}}}\\", G.to_uppercase()),
        ] {
            let v = VolumeId::parse(&s).unwrap();
            assert_eq!(v.as_str(), want);
            assert_eq!(v.guid(), G);
            assert_eq!(v.device_path(), &want[..want.len() - 1]);
        }
    }

    #[test]
    fn hostile_ids_are_rejected() {
        for s in [
            "",
            "C:\\",
            "\\\\.\\Volume{0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0}\\",
            "\\\\?\\Volume{0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0}\\\\",
            "\\\\?\\Volume{0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0}\\x",
            "\\\\?\\Volume{0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f}\\",
            "\\\\?\\Volume{0b1c2d3e4f50-6172-8394-a5b6c7d8e9f00}\\",
            "\\\\?\\Volume{0b1c2d3e-4f50-6172-8394-a5b6c7d8e9fg}\\",
            "\\\\?\\Volume0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0\\",
            "\\\\?\\Volume{0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0}\0",
            "\\\\?\\Volume{../../etc/passwd/aaaaaaaaaaaaaaaaaaaaa}\\",
            "\\\\?\\Volume{0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0',}\\",
            "/dev/sda1",
            "\\\\?\\GLOBALROOT\\Device\\HarddiskVolume1",
            "\\\\?\\Volume{é0b1c2d3-4f50-6172-8394-a5b6c7d8e9f0}\\",
        ] {
            let e = VolumeId::parse(s).unwrap_err();
            assert!(matches!(e, Error::InvalidArgument(_)), "{s:?}: {e}");
        }
    }

    proptest! {
        #[test]
        fn never_panics_and_accepts_only_canonical(s in "\\PC{0,60}") {
            if let Ok(v) = VolumeId::parse(&s) {
                prop_assert!(s.eq_ignore_ascii_case(v.as_str()) || s.eq_ignore_ascii_case(v.device_path()));
            }
        }

        #[test]
        fn round_trips(bytes in proptest::array::uniform16(any::<u8>())) {
            let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            let g = format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..]);
            let v = VolumeId::from_guid(&g).unwrap();
            prop_assert_eq!(VolumeId::parse(v.as_str()).unwrap(), v.clone());
            prop_assert_eq!(VolumeId::parse(v.device_path()).unwrap(), v);
        }
    }
}
