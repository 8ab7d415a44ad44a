//! Which disk a write reaches. Windows names disks by number, and numbers
//! are reused: a disk that leaves (an iSCSI logout, a detached VHDX) frees
//! its number for the next one to arrive. A write that names a disk by
//! number after the disk was checked could reach another one, so the
//! Windows backend holds the checked disk's handle across the write and
//! compares what identifies the disk, read through that handle and from
//! the API that writes (`MSFT_Disk`), before and after (rules here,
//! platform-neutral; the reads in `windows/disk.rs`).

use crate::{Error, Result};

/// What identifies a disk beyond its number. Strings are compared
/// trimmed; an empty string, or a size of 0, is "not known" and compared
/// with nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DiskIdentity {
    /// The disk number (`IOCTL_STORAGE_GET_DEVICE_NUMBER`, `MSFT_Disk.Number`).
    pub number: u32,
    /// Size in bytes.
    pub size: u64,
    /// The device's serial number.
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
    /// From another source (e.g. `MSFT_Disk`): only what both sides know
    /// is compared.
    From(&'a str),
}

/// The first difference between the disk that was checked and the one
/// seen now, named; `None` when they agree (as `seen` defines it).
pub fn difference(checked: &DiskIdentity, now: &DiskIdentity, seen: Seen) -> Option<String> {
    let strict = seen == Seen::HeldHandle;
    if checked.number != now.number {
        return Some(format!("its number is now {}", now.number));
    }
    let both = |a: bool, b: bool| strict || (a && b);
    if both(checked.size != 0, now.size != 0) && checked.size != now.size {
        return Some(format!(
            "its size is now {} bytes, not {}",
            now.size, checked.size
        ));
    }
    // Another source may spell an id its own way (case, spaces, the
    // separators of NVMe's EUI-64 form): only letters and digits count.
    let spelled = |a: &str| -> String {
        if strict {
            a.trim().to_string()
        } else {
            a.chars()
                .filter(char::is_ascii_alphanumeric)
                .map(|c| c.to_ascii_uppercase())
                .collect()
        }
    };
    let known = |a: &str, b: &str| {
        let (a, b) = (spelled(a), spelled(b));
        both(!a.is_empty(), !b.is_empty()) && a != b
    };
    if known(&checked.serial, &now.serial) {
        return Some(format!(
            "its serial number is now {:?}, not {:?}",
            now.serial.trim(),
            checked.serial.trim()
        ));
    }
    if known(&checked.page83, &now.page83) {
        return Some(format!(
            "its page-83 id is now {:?}, not {:?}",
            now.page83.trim(),
            checked.page83.trim()
        ));
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

    #[test]
    fn the_same_disk_is_the_same_whatever_one_side_does_not_know() {
        let a = disk(3, 1 << 30, " 6000c29a ", "naa.6000c29a");
        let msft = Seen::From("MSFT_Disk");
        for seen in [Seen::HeldHandle, msft] {
            assert_eq!(difference(&a, &a, seen), None);
        }
        // Trimmed; another source that does not know a field compares
        // nothing there.
        assert_eq!(
            difference(&a, &disk(3, 1 << 30, "6000c29a", ""), msft),
            None
        );
        assert_eq!(difference(&a, &disk(3, 0, "", ""), msft), None);
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
        assert_eq!(
            difference(
                &unknown,
                &disk(0, 1 << 30, "SER-B", ""),
                Seen::From("MSFT_Disk")
            ),
            None
        );
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
}
