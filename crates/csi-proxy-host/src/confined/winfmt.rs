//! Byte layouts the Windows confined filesystem reads, parsed by pure
//! functions (unit-tested on every OS; offsets checked against windows-sys
//! under wine): `REPARSE_DATA_BUFFER` (what a link or mount point stores)
//! and `FILE_FULL_DIR_INFORMATION` records (a directory listing).

/// `IO_REPARSE_TAG_SYMLINK`.
pub const TAG_SYMLINK: u32 = 0xA000_000C;
/// `IO_REPARSE_TAG_MOUNT_POINT` (junctions and volume mount points).
pub const TAG_MOUNT_POINT: u32 = 0xA000_0003;

fn u16_at(b: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(off..off + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(off..off + 4)?.try_into().ok()?))
}

fn utf16_at(b: &[u8], off: usize, len: usize) -> Option<String> {
    if !len.is_multiple_of(2) {
        return None;
    }
    let raw = b.get(off..off.checked_add(len)?)?;
    let units: Vec<u16> = raw
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect();
    String::from_utf16(&units).ok()
}

/// The target a symlink or mount-point reparse buffer stores: its
/// substitute name (`\??\C:\x`, `\??\Volume{...}\`, or a relative path for
/// a relative symlink). `None` for other tags or a malformed buffer.
pub fn reparse_target(buf: &[u8]) -> Option<(u32, String)> {
    let tag = u32_at(buf, 0)?;
    let data_len = u16_at(buf, 4)? as usize;
    let data = buf.get(8..8 + data_len)?;
    // Symlinks carry a Flags field before their path buffer (a relative
    // target simply has no `\??\` prefix).
    let path_base: usize = match tag {
        TAG_SYMLINK => 12,
        TAG_MOUNT_POINT => 8,
        _ => return None,
    };
    let sub_off = u16_at(data, 0)? as usize;
    let sub_len = u16_at(data, 2)? as usize;
    let name = utf16_at(data, path_base.checked_add(sub_off)?, sub_len)?;
    Some((tag, name))
}

/// One entry of a `FILE_FULL_DIR_INFORMATION` listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    pub name: Vec<u16>,
    pub attributes: u32,
    /// The reparse tag when `attributes` has `FILE_ATTRIBUTE_REPARSE_POINT`
    /// (the listing stores it in `EaSize`).
    pub reparse_tag: u32,
}

/// `FILE_ATTRIBUTE_DIRECTORY`.
pub const ATTR_DIRECTORY: u32 = 0x10;
/// `FILE_ATTRIBUTE_REPARSE_POINT`.
pub const ATTR_REPARSE_POINT: u32 = 0x400;

/// Offsets in `FILE_FULL_DIR_INFORMATION`.
pub const FULL_DIR_ATTRIBUTES: usize = 56;
pub const FULL_DIR_NAME_LENGTH: usize = 60;
pub const FULL_DIR_EA_SIZE: usize = 64;
pub const FULL_DIR_NAME: usize = 68;

/// The records of a `NtQueryDirectoryFile(FileFullDirectoryInformation)`
/// buffer, following `NextEntryOffset`; a malformed tail ends the walk.
pub fn parse_full_dir_info(buf: &[u8]) -> Vec<DirEntry> {
    let mut out = Vec::new();
    let mut off = 0usize;
    while let Some(rec) = buf.get(off..) {
        let (Some(next), Some(attributes), Some(name_len), Some(ea)) = (
            u32_at(rec, 0),
            u32_at(rec, FULL_DIR_ATTRIBUTES),
            u32_at(rec, FULL_DIR_NAME_LENGTH),
            u32_at(rec, FULL_DIR_EA_SIZE),
        ) else {
            break;
        };
        let name_len = name_len as usize;
        let Some(raw) = rec.get(FULL_DIR_NAME..FULL_DIR_NAME.saturating_add(name_len)) else {
            break;
        };
        if !name_len.is_multiple_of(2) {
            break;
        }
        out.push(DirEntry {
            name: raw
                .chunks_exact(2)
                .map(|c| u16::from_le_bytes([c[0], c[1]]))
                .collect(),
            attributes,
            reparse_tag: if attributes & ATTR_REPARSE_POINT != 0 {
                ea
            } else {
                0
            },
        });
        if next == 0 || (next as usize) < FULL_DIR_NAME {
            break;
        }
        off = match off.checked_add(next as usize) {
            Some(o) => o,
            None => break,
        };
    }
    out
}

/// Is `name` `.` or `..`?
pub fn is_dot(name: &[u16]) -> bool {
    name == [b'.' as u16] || name == [b'.' as u16, b'.' as u16]
}

/// Does the final path of a handle (`\\?\C:\a\b`, from
/// `GetFinalPathNameByHandleW`) name exactly `expected` (`C:\a\b`)? Case is
/// ignored as NTFS ignores it (`path::case`: `CompareStringOrdinal` on
/// Windows); any other difference, such as a short 8.3 name in the
/// request, is "not proven" and the caller walks component by component
/// instead.
pub fn same_final_path(final_path: &str, expected: &str) -> bool {
    let f = final_path.strip_prefix(r"\\?\").unwrap_or(final_path);
    let f = f.strip_suffix('\\').unwrap_or(f);
    let e = expected.strip_suffix('\\').unwrap_or(expected);
    crate::path::case::eq_ignore_case(f, e)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utf16(s: &str) -> Vec<u8> {
        s.encode_utf16().flat_map(|u| u.to_le_bytes()).collect()
    }

    /// A reparse buffer as Windows lays it out.
    fn reparse(tag: u32, sub: &str, print: &str, flags: Option<u32>) -> Vec<u8> {
        let (s, p) = (utf16(sub), utf16(print));
        let mut data = Vec::new();
        data.extend((0u16).to_le_bytes());
        data.extend((s.len() as u16).to_le_bytes());
        data.extend((s.len() as u16 + 2).to_le_bytes());
        data.extend((p.len() as u16).to_le_bytes());
        if let Some(f) = flags {
            data.extend(f.to_le_bytes());
        }
        data.extend(&s);
        data.extend([0, 0]);
        data.extend(&p);
        data.extend([0, 0]);
        let mut buf = Vec::new();
        buf.extend(tag.to_le_bytes());
        buf.extend((data.len() as u16).to_le_bytes());
        buf.extend([0, 0]);
        buf.extend(data);
        buf
    }

    #[test]
    fn reparse_targets() {
        let b = reparse(TAG_SYMLINK, r"\??\C:\var\x", r"C:\var\x", Some(0));
        assert_eq!(
            reparse_target(&b),
            Some((TAG_SYMLINK, r"\??\C:\var\x".into()))
        );
        let b = reparse(TAG_SYMLINK, r"..\x", r"..\x", Some(1));
        assert_eq!(reparse_target(&b), Some((TAG_SYMLINK, r"..\x".into())));
        let vol = r"\??\Volume{01234567-89ab-cdef-0123-456789abcdef}\";
        let b = reparse(TAG_MOUNT_POINT, vol, "", None);
        assert_eq!(reparse_target(&b), Some((TAG_MOUNT_POINT, vol.into())));
        // Other tags, truncation, lying lengths: None, never a panic.
        let mut other = b.clone();
        other[0..4].copy_from_slice(&0x8000_0013u32.to_le_bytes());
        assert_eq!(reparse_target(&other), None);
        for cut in 0..b.len() {
            assert_eq!(reparse_target(&b[..cut]), None, "{cut}");
        }
        let mut lying = b.clone();
        lying[10..12].copy_from_slice(&5000u16.to_le_bytes());
        assert_eq!(reparse_target(&lying), None);
    }

    fn record(name: &str, attributes: u32, ea: u32, last: bool) -> Vec<u8> {
        let n = utf16(name);
        let len = (FULL_DIR_NAME + n.len()).div_ceil(8) * 8;
        let mut r = vec![0u8; len];
        let next = if last { 0 } else { len as u32 };
        r[0..4].copy_from_slice(&next.to_le_bytes());
        r[FULL_DIR_ATTRIBUTES..FULL_DIR_ATTRIBUTES + 4].copy_from_slice(&attributes.to_le_bytes());
        r[FULL_DIR_NAME_LENGTH..FULL_DIR_NAME_LENGTH + 4]
            .copy_from_slice(&(n.len() as u32).to_le_bytes());
        r[FULL_DIR_EA_SIZE..FULL_DIR_EA_SIZE + 4].copy_from_slice(&ea.to_le_bytes());
        r[FULL_DIR_NAME..FULL_DIR_NAME + n.len()].copy_from_slice(&n);
        r
    }

    #[test]
    fn directory_listings() {
        let mut buf = record(".", ATTR_DIRECTORY, 0, false);
        buf.extend(record("file.txt", 0x20, 7, false));
        buf.extend(record(
            "link",
            ATTR_DIRECTORY | ATTR_REPARSE_POINT,
            TAG_SYMLINK,
            true,
        ));
        let e = parse_full_dir_info(&buf);
        assert_eq!(e.len(), 3);
        assert!(is_dot(&e[0].name));
        assert_eq!(String::from_utf16(&e[1].name).unwrap(), "file.txt");
        assert_eq!(
            e[1].reparse_tag, 0,
            "EaSize is a tag only for reparse points"
        );
        assert_eq!(e[2].reparse_tag, TAG_SYMLINK);
        for cut in 0..buf.len() {
            assert!(parse_full_dir_info(&buf[..cut]).len() <= 3);
        }
        let mut looping = record("x", 0, 0, false);
        looping[0..4].copy_from_slice(&1u32.to_le_bytes());
        assert_eq!(parse_full_dir_info(&looping).len(), 1);
    }

    #[test]
    fn final_paths() {
        assert!(same_final_path(
            r"\\?\C:\var\lib\kubelet\pods",
            r"c:\VAR\lib\kubelet\pods"
        ));
        assert!(same_final_path(r"\\?\C:\", r"C:\"));
        assert!(!same_final_path(
            r"\\?\D:\elsewhere\pods",
            r"C:\var\lib\kubelet\pods"
        ));
        assert!(!same_final_path(
            r"\\?\C:\var\lib\kubelet\PROGRA~1",
            r"C:\var\lib\kubelet\Program Files"
        ));
        assert!(!same_final_path(
            r"\\?\C:\var\lib\kubelet\podsX",
            r"C:\var\lib\kubelet\pods"
        ));
    }

    /// A name spelled in another case than it is stored is the same name
    /// for NTFS, beyond ASCII too; what NTFS keeps apart stays apart.
    #[test]
    fn final_paths_beyond_ascii() {
        for (stored, asked) in [("élan", "ÉLAN"), ("Σοφία", "ΣΟΦΊΑ"), ("журнал", "ЖУРНАЛ")]
        {
            assert!(
                same_final_path(
                    &format!(r"\\?\C:\var\lib\kubelet\pods\{stored}"),
                    &format!(r"C:\var\lib\kubelet\pods\{asked}")
                ),
                "{stored} / {asked}"
            );
        }
        for (stored, asked) in [
            ("straße", "STRASSE"),
            ("ı", "I"),
            ("i", "İ"),
            ("e", "é"),
            ("ς", "Σ"),
        ] {
            assert!(
                !same_final_path(&format!(r"\\?\C:\k\{stored}"), &format!(r"C:\k\{asked}")),
                "{stored} / {asked}"
            );
        }
    }
}
