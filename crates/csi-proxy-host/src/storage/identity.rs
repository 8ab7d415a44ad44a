//! Which disk a write reaches. Windows names disks by number, and numbers
//! are reused: a disk that leaves (an iSCSI logout, a detached VHDX) frees
//! its number for the next one to arrive. A write that names a disk by
//! number after the disk was checked could reach another one, so the
//! Windows backend holds the checked disk's handle across the write and
//! compares what identifies the disk, read through that handle and from
//! the API that writes (`MSFT_Disk`), before and after (rules here,
//! platform-neutral; the reads in `windows/disk.rs`).

use crate::storage::parse::guid::Guid;
use crate::storage::parse::layout::PartitionStyle;
use crate::{Error, Result};

/// What identifies a disk beyond its number. Strings are compared with
/// surrounding whitespace and NUL padding removed and nothing else: two
/// spellings that differ in any other byte are two disks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DiskIdentity {
    /// The disk number (`IOCTL_STORAGE_GET_DEVICE_NUMBER`, `MSFT_Disk.Number`).
    pub number: u32,
    /// Size in bytes (0: the source gave none).
    pub size: u64,
    /// The device's serial number (empty: the source gave none).
    pub serial: String,
    /// The SCSI page-0x83 identifier (empty where the source has none).
    pub page83: String,
}

/// Where the identity seen now was read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seen<'a> {
    /// Through the handle held since the check: the same queries on the
    /// same device answer the same, so every field must be equal, known
    /// or not.
    HeldHandle,
    /// From another source (e.g. `MSFT_Disk`): every field must be equal
    /// too, and a field known on one side only is "not proven", a
    /// difference (a size must be known on both). A field neither side
    /// knows proves nothing and is skipped.
    From(&'a str),
}

/// A value as both sources spell it: surrounding whitespace and NUL
/// padding removed, nothing else (no case folding, no punctuation
/// dropped: `VOL-0A1B` and `vol0a1b` are two serials).
fn spelled(a: &str) -> &str {
    a.trim_matches(|c: char| c.is_whitespace() || c == '\0')
}

/// The first difference between the disk that was checked and the one
/// seen now, named; `None` when they agree (as `seen` defines it).
pub fn difference(checked: &DiskIdentity, now: &DiskIdentity, seen: Seen) -> Option<String> {
    if checked.number != now.number {
        return Some(format!("its number is now {}", now.number));
    }
    if checked.size != now.size {
        return Some(format!(
            "its size is now {} bytes, not {}",
            now.size, checked.size
        ));
    }
    if let Seen::From(source) = seen {
        if now.size == 0 {
            return Some(format!(
                "{source} gives no size for it: the same disk is not proven"
            ));
        }
    }
    for (what, a, b) in [
        ("serial number", &checked.serial, &now.serial),
        ("page-83 id", &checked.page83, &now.page83),
    ] {
        let (a, b) = (spelled(a), spelled(b));
        if a == b {
            continue;
        }
        return Some(match seen {
            Seen::From(source) if b.is_empty() => format!(
                "{source} gives no {what} for it (the checked disk's is {a:?}): \
                 the same disk is not proven"
            ),
            Seen::From(source) if a.is_empty() => format!(
                "{source} gives the {what} {b:?}, which the checked disk did not report: \
                 the same disk is not proven"
            ),
            _ => format!("its {what} is now {b:?}, not {a:?}"),
        });
    }
    None
}

/// Refuses `what` when the disk seen `now` is not the one that was
/// checked: nothing was written, the caller may retry.
pub fn refuse_if_replaced(
    checked: &DiskIdentity,
    now: &DiskIdentity,
    seen: Seen,
    what: &str,
) -> Result<()> {
    let source = match seen {
        Seen::HeldHandle => "its held handle",
        Seen::From(s) => s,
    };
    match difference(checked, now, seen) {
        None => Ok(()),
        Some(d) => Err(Error::FailedPrecondition(format!(
            "cannot {what}: disk {} as {source} sees it is not the disk that was checked \
             ({d}; serial {:?}, {} bytes when checked): it was replaced meanwhile, \
             nothing was written",
            checked.number,
            checked.serial.trim(),
            checked.size
        ))),
    }
}

/// After a write by number answered success (`what`): the disk held open
/// since the check (`now`, read through that handle) must still be the
/// disk under that number, and if it was raw (`was_raw`) it must carry a
/// partition table now (`table_now`, read through the handle); otherwise
/// the write reached another disk, and the error says so.
pub fn confirm_written(
    checked: &DiskIdentity,
    now: &DiskIdentity,
    was_raw: bool,
    table_now: bool,
    what: &str,
) -> Result<()> {
    let why = match difference(checked, now, Seen::HeldHandle) {
        Some(d) => format!("the disk held open since the check changed ({d})"),
        None if was_raw && !table_now => {
            "the disk held open since the check still has no partition table".to_string()
        }
        None => return Ok(()),
    };
    Err(Error::Internal(format!(
        "{what}: Windows answered success, but {why}: the write reached another disk \
         than the one checked (disk {}, serial {:?}, {} bytes)",
        checked.number,
        checked.serial.trim(),
        checked.size
    )))
}

/// The id of a disk's partition table, read through the handle held
/// since the check: on a disk we initialised, a GPT disk GUID we chose at
/// random and wrote through that handle. A WMI method called by number
/// acts on the disk we hold only if `MSFT_Disk` N carries the same id
/// ([`refuse_unless_table`]); size and serial alone cannot tell two
/// serial-less disks of one size apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TableId {
    /// The GPT disk GUID.
    Gpt(Guid),
    /// The MBR disk signature.
    Mbr(u32),
}

/// The id of the table `style` (read through the held handle) of disk
/// `disk`: refused when the disk has no table, or one whose id proves
/// nothing (a nil GUID, a zero MBR signature: many disks share them).
pub fn table_id(disk: u32, style: &PartitionStyle, what: &str) -> Result<TableId> {
    match *style {
        PartitionStyle::Gpt { disk_id } if disk_id != Guid::NIL => Ok(TableId::Gpt(disk_id)),
        PartitionStyle::Mbr { signature } if signature != 0 => Ok(TableId::Mbr(signature)),
        PartitionStyle::Raw => Err(crate::storage::not_initialized(disk)),
        _ => Err(Error::FailedPrecondition(format!(
            "cannot {what}: disk {disk}'s partition table has no id (a nil GPT disk GUID or \
             a zero MBR signature), so which disk the Storage Management API means by \
             number {disk} cannot be proven; nothing was written"
        ))),
    }
}

/// The GPT disk GUID as `MSFT_Disk.Guid` spells it (`{...}`, any case).
fn msft_guid(s: &str) -> Option<Guid> {
    let t = s.trim();
    let t = t
        .strip_prefix('{')
        .and_then(|t| t.strip_suffix('}'))
        .unwrap_or(t);
    Guid::parse(t).ok()
}

/// Refuses `what` unless `MSFT_Disk` `disk` (its `Guid`, its
/// `Signature`) carries the table id `held` read through the held handle.
pub fn refuse_unless_table(
    disk: u32,
    held: TableId,
    msft_guid_text: Option<&str>,
    msft_signature: Option<u32>,
    what: &str,
) -> Result<()> {
    let (same, seen) = match held {
        TableId::Gpt(g) => {
            let seen = msft_guid_text.unwrap_or_default();
            (
                msft_guid(seen) == Some(g),
                format!("GPT disk GUID {seen:?}, not {g}"),
            )
        }
        TableId::Mbr(sig) => (
            msft_signature == Some(sig),
            format!("MBR signature {msft_signature:?}, not {sig:#010x}"),
        ),
    };
    if same {
        return Ok(());
    }
    Err(Error::FailedPrecondition(format!(
        "cannot {what}: MSFT_Disk {disk} has the {seen} (read through the handle held \
         since the check): it is not the disk that was checked, or the Storage \
         Management API has not seen its table yet; nothing was written"
    )))
}

/// After `IOCTL_DISK_CREATE_DISK` with the GPT disk GUID `written`: the
/// table read back through the same handle (`now`) must carry it.
pub fn confirm_created(disk: u32, written: Guid, now: &PartitionStyle, what: &str) -> Result<()> {
    match now {
        PartitionStyle::Gpt { disk_id } if *disk_id == written => Ok(()),
        other => Err(Error::Internal(format!(
            "{what}: IOCTL_DISK_CREATE_DISK answered success, but disk {disk} read back \
             through the same handle has {other:?}, not a GPT with disk GUID {written}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn disk(number: u32, size: u64, serial: &str, page83: &str) -> DiskIdentity {
        DiskIdentity {
            number,
            size,
            serial: serial.into(),
            page83: page83.into(),
        }
    }

    const MSFT: Seen<'static> = Seen::From("MSFT_Disk");

    #[test]
    fn the_same_disk_is_the_same_spelled_with_padding() {
        let a = disk(3, 1 << 30, " 6000c29a ", "naa.6000c29a");
        for seen in [Seen::HeldHandle, MSFT] {
            assert_eq!(difference(&a, &a, seen), None);
            // Whitespace and NUL padding are how sources pad, not ids.
            let padded = disk(3, 1 << 30, "6000c29a\0\0", " naa.6000c29a\t");
            assert_eq!(difference(&a, &padded, seen), None);
        }
        // Neither side knows a field: nothing to compare there.
        let bare = disk(3, 1 << 30, "", "");
        assert_eq!(difference(&bare, &bare, MSFT), None);
    }

    // The red team's cases (redteam-42disk #5, tests/rt42_identity.rs):
    // each is a different disk, or one not proven the same.

    /// Two serial-less disks of one size (Hyper-V VHDX): the other source
    /// not knowing the page-83 id is not a match.
    #[test]
    fn a_field_known_on_one_side_only_is_not_proven() {
        let checked = disk(3, 10 << 30, "", "60022480aaaaaaaaaaaaaaaaaaaaaaaa");
        let d = difference(&checked, &disk(3, 10 << 30, "", ""), MSFT).unwrap();
        assert!(
            d.contains("MSFT_Disk gives no page-83 id") && d.contains("not proven"),
            "{d}"
        );
        let d = difference(
            &disk(3, 10 << 30, "", ""),
            &disk(3, 10 << 30, "SER-B", ""),
            MSFT,
        )
        .unwrap();
        assert!(
            d.contains("serial number \"SER-B\"") && d.contains("not proven"),
            "{d}"
        );
    }

    #[test]
    fn serials_differing_in_punctuation_or_case_are_two_serials() {
        let checked = disk(3, 1 << 30, "VOL-0A1B", "");
        for other in ["VOL0A1B", "vol-0a1b", "V.O.L 0A1B", "VOL_0A1B"] {
            for seen in [Seen::HeldHandle, MSFT] {
                let d = difference(&checked, &disk(3, 1 << 30, other, ""), seen)
                    .unwrap_or_else(|| panic!("serial {other:?} equals VOL-0A1B"));
                assert!(d.contains("serial number is now"), "{d}");
            }
        }
    }

    #[test]
    fn serials_without_ascii_letters_or_digits_are_compared() {
        let checked = disk(3, 1 << 30, "ДИСК-ПЕРВЫЙ", "");
        assert!(difference(&checked, &disk(3, 1 << 30, "ДИСК-ВТОРОЙ", ""), MSFT).is_some());
        assert_eq!(difference(&checked, &checked, MSFT), None);
        let checked = disk(3, 1 << 30, "----", "");
        assert!(difference(&checked, &disk(3, 1 << 30, "SER-B", ""), MSFT).is_some());
    }

    #[test]
    fn a_missing_size_is_not_proven_the_same() {
        let checked = disk(3, 1 << 30, "", "");
        let d = difference(&checked, &disk(3, 0, "", ""), MSFT).unwrap();
        assert!(d.contains("size is now 0"), "{d}");
        // Both sides without a size: still not proven from another source.
        let d = difference(&disk(3, 0, "S", ""), &disk(3, 0, "S", ""), MSFT).unwrap();
        assert!(d.contains("gives no size"), "{d}");
    }

    #[test]
    fn through_the_held_handle_a_field_that_appears_or_vanishes_differs() {
        let unknown = disk(0, 1 << 30, "", "");
        let d = difference(&unknown, &disk(0, 1 << 30, "SER-B", ""), Seen::HeldHandle).unwrap();
        assert!(d.contains("serial number is now \"SER-B\""), "{d}");
        let d = difference(
            &disk(0, 1 << 30, "SER-A", ""),
            &disk(0, 0, "SER-A", ""),
            Seen::HeldHandle,
        )
        .unwrap();
        assert!(d.contains("size is now 0"), "{d}");
        assert!(difference(&unknown, &disk(0, 1 << 30, "SER-B", ""), MSFT).is_some());
    }

    #[test]
    fn a_disk_that_took_the_number_is_another_disk() {
        let a = disk(3, 1 << 30, "SER-A", "id-a");
        for (now, says) in [
            (disk(4, 1 << 30, "SER-A", "id-a"), "number is now 4"),
            (disk(3, 2 << 30, "SER-A", "id-a"), "size is now 2147483648"),
            (
                disk(3, 1 << 30, "SER-B", "id-a"),
                "serial number is now \"SER-B\"",
            ),
            (
                disk(3, 1 << 30, "SER-A", "id-b"),
                "page-83 id is now \"id-b\"",
            ),
        ] {
            for seen in [Seen::HeldHandle, Seen::From("MSFT_Disk")] {
                let d = difference(&a, &now, seen).unwrap();
                assert!(d.contains(says), "{d}");
            }
            let e = refuse_if_replaced(&a, &now, Seen::From("MSFT_Disk"), "initialize disk 3")
                .unwrap_err();
            assert!(
                matches!(&e, Error::FailedPrecondition(m)
                    if m.contains("initialize disk 3") && m.contains(says)
                        && m.contains("nothing was written")),
                "{e}"
            );
        }
    }

    #[test]
    fn a_write_that_left_the_held_disk_raw_or_renumbered_reached_another() {
        let a = disk(3, 1 << 30, "SER-A", "");
        confirm_written(&a, &a, true, true, "initialize disk 3").unwrap();
        confirm_written(&a, &a, false, false, "create a partition on disk 3").unwrap();
        for (now, was_raw, table_now, says) in [
            (a.clone(), true, false, "still has no partition table"),
            (
                disk(5, 1 << 30, "SER-A", ""),
                false,
                true,
                "number is now 5",
            ),
        ] {
            let e = confirm_written(&a, &now, was_raw, table_now, "initialize disk 3").unwrap_err();
            assert!(
                matches!(&e, Error::Internal(m)
                    if m.starts_with("initialize disk 3: ") && m.contains(says)
                        && m.contains("reached another disk")),
                "{e}"
            );
        }
    }
    #[test]
    fn a_table_id_proves_the_disk_only_when_it_is_one_and_msft_carries_it() {
        use crate::storage::parse::guid::Guid;
        use crate::storage::parse::layout::PartitionStyle;
        let g = Guid::from_u128(0x0b1c2d3e_4f50_6172_8394_a5b6c7d8e9f0);
        let what = "partition disk 3";
        let id = table_id(3, &PartitionStyle::Gpt { disk_id: g }, what).unwrap();
        assert_eq!(id, TableId::Gpt(g));
        for spelled in [
            "{0B1C2D3E-4F50-6172-8394-A5B6C7D8E9F0}",
            "{0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0}",
            "0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0 ",
        ] {
            refuse_unless_table(3, id, Some(spelled), None, what).unwrap();
        }
        // Another disk's GUID, none (a raw disk that took number 3, or a
        // provider cache not refreshed), or text that is no GUID: refused.
        for seen in [
            Some("{0B1C2D3E-4F50-6172-8394-A5B6C7D8E9F1}"),
            Some(""),
            None,
            Some("{x}"),
        ] {
            let e = refuse_unless_table(3, id, seen, Some(1), what).unwrap_err();
            assert!(
                matches!(&e, Error::FailedPrecondition(m) if m.starts_with("cannot partition disk 3: MSFT_Disk 3 has the GPT disk GUID")
                    && m.contains("nothing was written")),
                "{e}"
            );
        }
        let mbr = table_id(3, &PartitionStyle::Mbr { signature: 0x1234 }, what).unwrap();
        refuse_unless_table(3, mbr, None, Some(0x1234), what).unwrap();
        assert!(refuse_unless_table(3, mbr, None, Some(0x1235), what).is_err());
        assert!(refuse_unless_table(3, mbr, None, None, what).is_err());
        // Ids many disks share prove nothing; a raw disk has none.
        for style in [
            PartitionStyle::Gpt { disk_id: Guid::NIL },
            PartitionStyle::Mbr { signature: 0 },
        ] {
            let e = table_id(3, &style, what).unwrap_err();
            assert!(e.to_string().contains("has no id"), "{e}");
        }
        let e = table_id(3, &PartitionStyle::Raw, what).unwrap_err();
        assert!(e.to_string().contains("no partition table"), "{e}");
    }

    #[test]
    fn a_created_table_must_carry_the_guid_written() {
        use crate::storage::parse::guid::Guid;
        use crate::storage::parse::layout::PartitionStyle;
        let g = Guid::from_u128(7);
        confirm_created(
            3,
            g,
            &PartitionStyle::Gpt { disk_id: g },
            "initialize disk 3",
        )
        .unwrap();
        for now in [
            PartitionStyle::Gpt {
                disk_id: Guid::from_u128(8),
            },
            PartitionStyle::Raw,
            PartitionStyle::Mbr { signature: 7 },
        ] {
            let e = confirm_created(3, g, &now, "initialize disk 3").unwrap_err();
            assert!(
                matches!(&e, Error::Internal(m) if m.starts_with("initialize disk 3: ")),
                "{e}"
            );
        }
    }
}
