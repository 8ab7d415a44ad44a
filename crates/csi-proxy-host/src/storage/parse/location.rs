//! `MSFT_Disk.Location` → the `DiskLocation` of `ListDiskLocations`.
//!
//! Windows describes where a disk hangs as `:`-separated parts, for example
//! (all seen on real machines):
//!
//! | Disk | Location |
//! |---|---|
//! | SCSI (classic) | `PCI Slot 3 : Adapter 0 : Port 0 : Target 1 : LUN 0` |
//! | Hyper-V / Azure SCSI | `Integrated : Bus 0 : Device 63667 : Function 30747 : Adapter 3 : Port 0 : Target 0 : LUN 0` |
//! | NVMe | `Integrated : Bus 12606208 : Device 0 : Function 0 : Adapter 0` |
//! | NVMe in a slot | `PCI Slot 9 : Bus 194 : Device 0 : Function 0 : Adapter 5` |
//! | SATA / USB | `Integrated : Bus 0 : Device 0 : Function 1 : Adapter 0 : Port 0` |
//! | IDE (Hyper-V gen 1) | `PCI Slot 0 : Adapter 0 : Channel 0 : Device 0` |
//!
//! Upstream csi-proxy splits on `:`, trims each part, and for every part
//! made of exactly two words takes the number after `Adapter`, `Bus`,
//! `Target` and `LUN` into the fields of the same name; every other word
//! (`Port`, `Channel`, `Device`, `Function`, `PCI Slot`, `Integrated`) is
//! ignored. In particular `Port` is *not* mapped to the bus: for the classic
//! SCSI form upstream reports an empty bus, and for the Hyper-V form the bus
//! is the PCI bus number. Upstream also drops any location with fewer than
//! five parts.
//!
//! This parser keeps the upstream field mapping exactly, so every location
//! upstream reports yields the same four strings here. It differs in which
//! strings it accepts, by the fields present instead of the part count:
//!
//! * **SCSI form** (has `Adapter`, `Target` and `LUN`): adapter, bus (empty
//!   if there is no `Bus` part, as upstream), target, LUN.
//! * **PCI form** (NVMe, SATA, USB: has `Adapter` and `Bus`, neither
//!   `Target` nor `LUN`): adapter and bus; target and LUN are **empty**,
//!   which is also what upstream reports for the five-part NVMe string. We
//!   deliberately do not promote `Device`/`Function` to target/LUN: all
//!   namespaces of one NVMe controller share them (`Function 0`), so every
//!   NVMe disk would claim LUN 0 and a driver looking for "LUN 0" would pick
//!   a wrong disk. The namespace is not part of this string: the Windows
//!   backend replaces an NVMe disk's entry with its SCSI address as stornvme
//!   reports it (LUN = `Lun` − 1, Azure's convention; `parse::nvme`).
//! * Anything else (the IDE form, a `Target` without `LUN`, no `Adapter`,
//!   an empty string) is [`ParseError::Invalid`]; the backend skips that
//!   disk, as upstream does.
//!
//! Also rejected: a known word with a value that is not a decimal number,
//! or the same known word twice. Words are case-sensitive, as Windows
//! writes them; parts are split on any run of whitespace.

use super::error::ParseError;

const WHAT: &str = "disk location";

/// Where a disk is attached; the strings are decimal numbers or empty.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Location {
    pub adapter: String,
    pub bus: String,
    pub target: String,
    pub lun_id: String,
}

/// Parses `MSFT_Disk.Location` (see the module documentation).
pub fn parse_location(s: &str) -> Result<Location, ParseError> {
    let mut adapter = None;
    let mut bus = None;
    let mut target = None;
    let mut lun = None;
    for part in s.split(':') {
        let mut words = part.split_whitespace();
        let (Some(key), Some(value), None) = (words.next(), words.next(), words.next()) else {
            continue;
        };
        let slot = match key {
            "Adapter" => &mut adapter,
            "Bus" => &mut bus,
            "Target" => &mut target,
            "LUN" => &mut lun,
            _ => continue,
        };
        if !value.bytes().all(|c| c.is_ascii_digit()) {
            return Err(ParseError::invalid(
                WHAT,
                format!("{key} {value:?} is not a decimal number in {s:?}"),
            ));
        }
        if slot.is_some() {
            return Err(ParseError::invalid(
                WHAT,
                format!("{key} appears twice in {s:?}"),
            ));
        }
        *slot = Some(value);
    }
    let own = |v: Option<&str>| v.unwrap_or_default().to_string();
    match (adapter, bus, target, lun) {
        (Some(a), b, Some(t), Some(l)) => Ok(Location {
            adapter: a.to_string(),
            bus: own(b),
            target: t.to_string(),
            lun_id: l.to_string(),
        }),
        (Some(a), Some(b), None, None) => Ok(Location {
            adapter: a.to_string(),
            bus: b.to_string(),
            target: String::new(),
            lun_id: String::new(),
        }),
        _ => Err(ParseError::invalid(
            WHAT,
            format!(
                "{s:?} is neither a SCSI location (Adapter, Target, LUN) nor a PCI location (Adapter, Bus)"
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn loc(a: &str, b: &str, t: &str, l: &str) -> Location {
        Location {
            adapter: a.into(),
            bus: b.into(),
            target: t.into(),
            lun_id: l.into(),
        }
    }

    #[test]
    fn real_forms() {
        let cases = [
            (
                "PCI Slot 3 : Adapter 0 : Port 0 : Target 1 : LUN 0",
                loc("0", "", "1", "0"),
            ),
            (
                "Integrated : Bus 0 : Device 63667 : Function 30747 : Adapter 3 : Port 0 : Target 0 : LUN 0",
                loc("3", "0", "0", "0"),
            ),
            (
                "Integrated : Bus 0 : Device 23 : Function 0 : Adapter 1 : Port 6 : Target 8 : LUN 0",
                loc("1", "0", "8", "0"),
            ),
            (
                "Integrated : Bus 12606208 : Device 0 : Function 0 : Adapter 0",
                loc("0", "12606208", "", ""),
            ),
            (
                "PCI Slot 9 : Bus 194 : Device 0 : Function 0 : Adapter 5",
                loc("5", "194", "", ""),
            ),
            (
                "Integrated : Bus 0 : Device 0 : Function 1 : Adapter 0 : Port 0",
                loc("0", "0", "", ""),
            ),
            // Fewer than five parts: upstream drops it, we keep it.
            (
                "Adapter 2 : Port 0 : Target 4 : LUN 12",
                loc("2", "", "4", "12"),
            ),
            (
                "  PCI Slot 3 :Adapter   0: Port 0 :Target 1:  LUN 0  ",
                loc("0", "", "1", "0"),
            ),
        ];
        for (s, want) in cases {
            assert_eq!(parse_location(s), Ok(want), "{s}");
        }
    }

    #[test]
    fn rejected_forms() {
        for bad in [
            "",
            "   ",
            "Integrated",
            "PCI Slot 0 : Adapter 0 : Channel 0 : Device 0",
            "PCI Slot 3 : Adapter 0 : Port 0 : Target 1",
            "PCI Slot 3 : Port 0 : Target 1 : LUN 0",
            "Integrated : Bus 0 : Device 0 : Function 0",
            "PCI Slot 3 : Adapter x : Port 0 : Target 1 : LUN 0",
            "PCI Slot 3 : Adapter -1 : Port 0 : Target 1 : LUN 0",
            "PCI Slot 3 : Adapter 0 : Adapter 1 : Target 1 : LUN 0",
            "PCI Slot 3 : Adapter 0 : Port 0 : Target 1 : LUN 0 : LUN 1",
            "adapter 0 : bus 1",
            "Integrated : Bus 1 : Adapter 0 : LUN 0",
        ] {
            assert!(parse_location(bad).is_err(), "{bad:?}");
        }
    }

    proptest! {
        #[test]
        fn never_panics(s in any::<String>()) {
            let _ = parse_location(&s);
        }

        #[test]
        fn scsi_round_trip(slot in 0u32..100, a: u32, p: u32, t: u32, l: u32) {
            let s = format!("PCI Slot {slot} : Adapter {a} : Port {p} : Target {t} : LUN {l}");
            prop_assert_eq!(
                parse_location(&s),
                Ok(loc(&a.to_string(), "", &t.to_string(), &l.to_string()))
            );
        }

        #[test]
        fn hyperv_round_trip(b: u32, d: u32, f: u32, a: u32, p: u32, t: u32, l: u32) {
            let s = format!(
                "Integrated : Bus {b} : Device {d} : Function {f} : Adapter {a} : Port {p} : Target {t} : LUN {l}"
            );
            prop_assert_eq!(
                parse_location(&s),
                Ok(loc(&a.to_string(), &b.to_string(), &t.to_string(), &l.to_string()))
            );
        }

        #[test]
        fn nvme_round_trip(b: u32, d: u32, f: u32, a: u32) {
            let s = format!("Integrated : Bus {b} : Device {d} : Function {f} : Adapter {a}");
            prop_assert_eq!(parse_location(&s), Ok(loc(&a.to_string(), &b.to_string(), "", "")));
        }

        #[test]
        fn accepted_fields_are_decimal(s in "[A-Za-z0-9 :]{0,60}") {
            if let Ok(l) = parse_location(&s) {
                for f in [&l.adapter, &l.bus, &l.target, &l.lun_id] {
                    prop_assert!(f.bytes().all(|c| c.is_ascii_digit()));
                }
                prop_assert!(!l.adapter.is_empty());
                prop_assert_eq!(l.target.is_empty(), l.lun_id.is_empty());
            }
        }
    }
}
