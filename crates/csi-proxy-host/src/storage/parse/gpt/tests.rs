use super::write::{encode_name, Layout};
use super::*;
use proptest::prelude::*;
use std::collections::BTreeMap;

const GIB: u64 = 1 << 30;
const TIB: u64 = 1 << 40;

fn guid(n: u8) -> Guid {
    Guid::from_random_bytes([n; 16])
}

/// A disk in memory that only stores what was written (zero elsewhere), so
/// multi-TiB disks cost nothing.
struct SparseDisk {
    ss: u64,
    sectors: u64,
    /// Sector number -> contents.
    data: BTreeMap<u64, Vec<u8>>,
}

impl SparseDisk {
    fn new(sector_size: u32, sectors: u64) -> SparseDisk {
        SparseDisk {
            ss: u64::from(sector_size),
            sectors,
            data: BTreeMap::new(),
        }
    }

    fn apply(&mut self, writes: &[Write]) {
        for w in writes {
            assert_eq!(w.offset % self.ss, 0, "unaligned write {w:?}");
            assert_eq!(w.bytes.len() as u64 % self.ss, 0, "partial sector {w:?}");
            let first = w.offset / self.ss;
            let n = w.bytes.len() as u64 / self.ss;
            assert!(first + n <= self.sectors, "write beyond the disk {w:?}");
            for (i, chunk) in w.bytes.chunks(self.ss as usize).enumerate() {
                self.data.insert(first + i as u64, chunk.to_vec());
            }
        }
    }

    fn read(&self, offset: u64, len: usize) -> Vec<u8> {
        let mut out = vec![0u8; len];
        let end = offset + len as u64;
        let first = offset / self.ss;
        for (&lba, sector) in self.data.range(first..) {
            let s_start = lba * self.ss;
            if s_start >= end {
                break;
            }
            for (i, &b) in sector.iter().enumerate() {
                let pos = s_start + i as u64;
                if pos >= offset && pos < end {
                    out[(pos - offset) as usize] = b;
                }
            }
        }
        out
    }

    fn head(&self) -> Vec<u8> {
        let ss = self.ss as u32;
        let len = (head_len(ss) as u64).min(self.sectors * self.ss) as usize;
        self.read(0, len)
    }

    /// The last `tail_len` bytes ending with sector `lba`.
    fn tail_at(&self, lba: u64) -> Vec<u8> {
        let len = (tail_len(self.ss as u32) as u64).min((lba + 1) * self.ss);
        self.read((lba + 1) * self.ss - len, len as usize)
    }

    fn grow_to(&mut self, sectors: u64) {
        assert!(sectors >= self.sectors);
        self.sectors = sectors;
    }

    fn corrupt_byte(&mut self, offset: u64) {
        let lba = offset / self.ss;
        let sector = self
            .data
            .entry(lba)
            .or_insert_with(|| vec![0; self.ss as usize]);
        sector[(offset % self.ss) as usize] ^= 0x01;
    }

    fn parse(&self) -> Result<Table, GptError> {
        parse_table(&self.head(), self.ss as u32, self.sectors)
    }

    fn gpt(&self) -> Gpt {
        match self.parse() {
            Ok(Table::Gpt(g)) => g,
            other => panic!("expected a GPT, got {other:?}"),
        }
    }

    fn backup(&self) -> Result<Gpt, GptError> {
        parse_backup(
            &self.tail_at(self.sectors - 1),
            self.ss as u32,
            self.sectors - 1,
        )
    }
}

fn created(ss: u32, sectors: u64) -> SparseDisk {
    let mut disk = SparseDisk::new(ss, sectors);
    let writes = create_single_partition(
        ss,
        sectors,
        guid(1),
        guid(2),
        Guid::BASIC_DATA,
        "Basic data partition",
    )
    .unwrap();
    disk.apply(&writes);
    disk
}

/// Checks everything a fresh single-partition table must satisfy.
fn check_fresh(disk: &SparseDisk) {
    let ss = disk.ss;
    let arr = 16384 / ss;
    let g = disk.gpt();
    assert_eq!(g.disk_guid, guid(1));
    assert_eq!(g.first_usable, 2 + arr);
    assert_eq!(g.last_usable, disk.sectors - 2 - arr);
    assert_eq!(g.alternate_lba, disk.sectors - 1);
    assert_eq!(g.entry_lba, 2);
    assert_eq!(g.entry_count, 128);
    assert_eq!(g.entry_size, 128);
    assert_eq!(
        g.partitions,
        vec![GptPartition {
            number: 1,
            type_guid: Guid::BASIC_DATA,
            unique_guid: guid(2),
            first_lba: MIB / ss,
            last_lba: g.last_usable,
            attributes: 0,
            name: "Basic data partition".into(),
        }]
    );
    let b = disk.backup().unwrap();
    assert!(g.same_table(&b), "{g:?} vs {b:?}");
    assert_eq!(b.alternate_lba, 1);
    assert_eq!(b.entry_lba, disk.sectors - 1 - arr);
    // Protective MBR.
    let mbr = disk.read(0, 512);
    assert_eq!(&mbr[510..], &[0x55, 0xAA]);
    assert_eq!(mbr[446 + 4], 0xEE);
    assert_eq!(le32(&mbr, 446 + 8), 1);
    assert_eq!(
        u64::from(le32(&mbr, 446 + 12)),
        (disk.sectors - 1).min(0xFFFF_FFFF)
    );
    for slot in 1..4 {
        assert_eq!(&mbr[446 + 16 * slot..446 + 16 * slot + 16], &[0; 16]);
    }
}

// ---------------------------------------------------------------------------
// GUID

#[test]
fn guid_text_and_layout() {
    assert_eq!(
        Guid::BASIC_DATA.to_string(),
        "ebd0a0a2-b9e5-4433-87c0-68b6b72699c7"
    );
    assert_eq!(
        Guid::MICROSOFT_RESERVED.to_string(),
        "e3c9e316-0b5c-4db8-817d-f92df00215ae"
    );
    assert_eq!(
        Guid::LINUX_FILESYSTEM.to_string(),
        "0fc63daf-8483-4772-8e79-3d69d8477de4"
    );
    // Mixed-endian on disk.
    assert_eq!(
        Guid::BASIC_DATA.to_windows_bytes(),
        [
            0xa2, 0xa0, 0xd0, 0xeb, 0xe5, 0xb9, 0x33, 0x44, 0x87, 0xc0, 0x68, 0xb6, 0xb7, 0x26,
            0x99, 0xc7
        ]
    );
    assert_eq!(
        Guid::parse("EBD0A0A2-B9E5-4433-87C0-68B6B72699C7").unwrap(),
        Guid::BASIC_DATA
    );
    assert_eq!(
        Guid::parse_braced("{e3c9e316-0b5c-4db8-817d-f92df00215ae}").unwrap(),
        Guid::MICROSOFT_RESERVED
    );
    for bad in [
        "",
        "ebd0a0a2-b9e5-4433-87c0-68b6b72699c",
        "ebd0a0a2-b9e5-4433-87c0-68b6b72699c77",
        "ebd0a0a2xb9e5-4433-87c0-68b6b72699c7",
        "gbd0a0a2-b9e5-4433-87c0-68b6b72699c7",
        "{ebd0a0a2-b9e5-4433-87c0-68b6b72699c7",
        "ebd0a0a2-b9e5-4433-87c0-68b6b72699ç",
        "+bd0a0a2-b9e5-4433-87c0-68b6b72699c7",
    ] {
        assert!(Guid::parse_braced(bad).is_err(), "{bad}");
    }
    assert_eq!(
        format!("{:?}", Guid::NIL),
        "Guid(00000000-0000-0000-0000-000000000000)"
    );
}

#[test]
fn random_guid_version_and_variant() {
    let g = Guid::from_random_bytes([0xFF; 16]);
    let text = g.to_string();
    assert_eq!(&text[14..15], "4");
    assert!(matches!(&text[19..20], "8" | "9" | "a" | "b"), "{text}");
    let g = Guid::from_random_bytes([0; 16]);
    assert_eq!(g.to_string(), "00000000-0000-4000-8000-000000000000");
}

proptest! {
    #[test]
    fn guid_text_round_trip(bytes in any::<[u8; 16]>()) {
        let g = Guid::from_windows_bytes(bytes);
        let text = g.to_string();
        prop_assert_eq!(text.len(), 36);
        prop_assert_eq!(Guid::parse(&text).unwrap(), g);
        prop_assert_eq!(Guid::parse(&text.to_uppercase()).unwrap(), g);
        let r = Guid::from_random_bytes(bytes).to_string();
        prop_assert_eq!(&r[14..15], "4");
        prop_assert!(matches!(&r[19..20], "8" | "9" | "a" | "b"));
    }

    #[test]
    fn guid_parse_never_panics(s in "\\PC{0,40}") {
        let _ = Guid::parse(&s);
    }
}

// ---------------------------------------------------------------------------
// Sizes

#[test]
fn lengths() {
    assert_eq!(head_len(512), 34 * 512);
    assert_eq!(head_len(4096), 6 * 4096);
    assert_eq!(tail_len(512), 33 * 512);
    assert_eq!(tail_len(4096), 5 * 4096);
    assert_eq!(min_disk_sectors(512), 2048 + 2048 + 32 + 1);
    assert_eq!(min_disk_sectors(4096), 256 + 256 + 4 + 1);
    assert_eq!(head_len(0), 0);
}

// ---------------------------------------------------------------------------
// Create / parse

#[test]
fn create_round_trip_various_sizes() {
    for ss in [512u32, 4096] {
        let s = u64::from(ss);
        for bytes in [
            min_disk_sectors(ss) * s,
            min_disk_sectors(ss) * s + s,
            64 * MIB,
            GIB + 7 * s,
            100 * GIB,
            2 * TIB,
            2 * TIB + 512 * MIB,
            3 * TIB,
            64 * TIB,
        ] {
            let disk = created(ss, bytes / s);
            check_fresh(&disk);
        }
    }
}

#[test]
fn minimum_disk() {
    for ss in [512u32, 4096] {
        let min = min_disk_sectors(ss);
        let disk = created(ss, min);
        let g = disk.gpt();
        assert_eq!(g.partitions[0].sectors() * u64::from(ss), MIB);
        assert_eq!(
            create_single_partition(ss, min - 1, guid(1), guid(2), Guid::BASIC_DATA, "x"),
            Err(GptError::DiskTooSmall {
                sectors: min - 1,
                needed: min
            })
        );
        assert!(matches!(
            create_single_partition(ss, 0, guid(1), guid(2), Guid::BASIC_DATA, "x"),
            Err(GptError::DiskTooSmall { .. })
        ));
    }
}

#[test]
fn create_rejects_bad_arguments() {
    assert_eq!(
        create_single_partition(1024, 1 << 20, guid(1), guid(2), Guid::BASIC_DATA, "x"),
        Err(GptError::UnsupportedSectorSize(1024))
    );
    assert_eq!(
        create_single_partition(
            512,
            1 << 20,
            guid(1),
            guid(2),
            Guid::BASIC_DATA,
            &"n".repeat(37)
        ),
        Err(GptError::NameTooLong)
    );
    assert!(create_single_partition(
        512,
        1 << 20,
        guid(1),
        guid(2),
        Guid::BASIC_DATA,
        &"n".repeat(36)
    )
    .is_ok());
    assert_eq!(
        create_single_partition(512, u64::MAX / 256, guid(1), guid(2), Guid::BASIC_DATA, "x"),
        Err(GptError::DiskTooLarge(u64::MAX / 256))
    );
    assert!(create_single_partition(512, 1 << 20, guid(1), guid(2), Guid::NIL, "x").is_err());
}

#[test]
fn write_order_backup_first_primary_header_last() {
    let writes =
        create_single_partition(512, 1 << 21, guid(1), guid(2), Guid::BASIC_DATA, "x").unwrap();
    let offsets: Vec<u64> = writes.iter().map(|w| w.offset).collect();
    let last = (1u64 << 21) - 1;
    assert_eq!(
        offsets,
        vec![(last - 32) * 512, last * 512, 2 * 512, 0, 512]
    );
}

#[test]
fn name_utf16_and_lossy() {
    let mut disk = SparseDisk::new(512, 1 << 20);
    disk.apply(
        &create_single_partition(
            512,
            1 << 20,
            guid(1),
            guid(2),
            Guid::BASIC_DATA,
            "Daten 💾ü",
        )
        .unwrap(),
    );
    assert_eq!(disk.gpt().partitions[0].name, "Daten 💾ü");
    // Entry 1 name starts at LBA2 + 56 in UTF-16LE.
    let e = disk.read(1024 + 56, 4);
    assert_eq!(e, vec![b'D', 0, b'a', 0]);
}

#[test]
fn head_too_short_is_truncated() {
    let disk = created(512, 1 << 20);
    let head = disk.head();
    for len in [0, 100, 511, 512, 1024, head.len() - 1] {
        assert_eq!(
            parse_table(&head[..len], 512, 1 << 20),
            Err(GptError::Truncated {
                needed: head.len(),
                got: len
            })
        );
    }
    // Small disks only need their own size.
    assert_eq!(parse_table(&[0u8; 1024], 512, 2), Ok(Table::Raw));
    assert_eq!(parse_table(&[], 512, 0), Ok(Table::Raw));
    assert_eq!(
        parse_table(&head, 2048, 1 << 20),
        Err(GptError::UnsupportedSectorSize(2048))
    );
}

#[test]
fn larger_entry_array_needs_more_head() {
    // 256 entries of 128 bytes: the array spans 64 sectors.
    let ss = 512u64;
    let sectors = 1u64 << 20;
    let gpt = Gpt {
        disk_guid: guid(1),
        first_usable: 2 + 64,
        last_usable: sectors - 2 - 64,
        alternate_lba: sectors - 1,
        entry_lba: 2,
        entry_count: 256,
        entry_size: 128,
        partitions: vec![],
    };
    let layout = Layout::relocated(&gpt, ss, sectors).unwrap();
    let mut disk = SparseDisk::new(512, sectors);
    disk.apply(&layout.writes(&vec![0u8; 256 * 128], None, None));
    assert_eq!(
        disk.parse(),
        Err(GptError::Truncated {
            needed: 66 * 512,
            got: 34 * 512
        })
    );
    let head = disk.read(0, 66 * 512);
    assert_eq!(
        parse_table(&head, 512, sectors),
        Ok(Table::Gpt(gpt.clone()))
    );
    // Backup likewise.
    let tail = disk.tail_at(sectors - 1);
    assert_eq!(
        parse_backup(&tail, 512, sectors - 1),
        Err(GptError::Truncated {
            needed: 65 * 512,
            got: 33 * 512
        })
    );
    let tail = disk.read((sectors - 65) * 512, 65 * 512);
    assert!(parse_backup(&tail, 512, sectors - 1)
        .unwrap()
        .same_table(&gpt));
}

// ---------------------------------------------------------------------------
// Corruption

/// Fixes the header CRC of the header sector at `lba` after an edit.
fn fix_header_crc(disk: &mut SparseDisk, lba: u64) {
    let mut s = disk.read(lba * disk.ss, disk.ss as usize);
    let hs = (le32(&s, 12) as usize).clamp(92, s.len());
    let crc = header_crc(&s[..hs]);
    put(&mut s, 16, &crc.to_le_bytes());
    disk.data.insert(lba, s);
}

fn edit_header(disk: &mut SparseDisk, lba: u64, off: usize, value: &[u8]) {
    let mut s = disk.read(lba * disk.ss, disk.ss as usize);
    put(&mut s, off, value);
    disk.data.insert(lba, s);
    fix_header_crc(disk, lba);
}

#[test]
fn corrupt_crcs_are_errors() {
    for ss in [512u32, 4096] {
        let s = u64::from(ss);
        let sectors = GIB / s;
        // Header CRC: flip a byte of the disk GUID.
        let mut disk = created(ss, sectors);
        disk.corrupt_byte(s + 60);
        assert_eq!(disk.parse(), Err(GptError::Corrupt(Defect::HeaderCrc)));
        // The CRC field itself.
        let mut disk = created(ss, sectors);
        disk.corrupt_byte(s + 16);
        assert_eq!(disk.parse(), Err(GptError::Corrupt(Defect::HeaderCrc)));
        // Entry array: a byte of the partition name, and an unused entry.
        for off in [2 * s + 60, 2 * s + 128 * 127 + 5] {
            let mut disk = created(ss, sectors);
            disk.corrupt_byte(off);
            assert_eq!(disk.parse(), Err(GptError::Corrupt(Defect::EntriesCrc)));
        }
        // Backup copy.
        let mut disk = created(ss, sectors);
        disk.corrupt_byte((sectors - 1) * s + 60);
        assert_eq!(disk.backup(), Err(GptError::Corrupt(Defect::HeaderCrc)));
        assert!(disk.parse().is_ok());
        let mut disk = created(ss, sectors);
        disk.corrupt_byte((sectors - 2) * s);
        assert_eq!(disk.backup(), Err(GptError::Corrupt(Defect::EntriesCrc)));
    }
}

#[test]
fn protective_mbr_without_gpt_is_corrupt() {
    let mut disk = created(512, 1 << 20);
    disk.corrupt_byte(512); // "EFI PART" -> "DFI PART"
    assert_eq!(disk.parse(), Err(GptError::Corrupt(Defect::Signature)));
    // A GPT signature without a protective MBR still counts.
    let mut disk = created(512, 1 << 20);
    disk.data.remove(&0);
    assert!(matches!(disk.parse(), Ok(Table::Gpt(_))));
    // Wrong sector size: protective MBR but no header at 4096.
    let disk = created(512, 1 << 20);
    assert_eq!(
        parse_table(&disk.read(0, head_len(4096)), 4096, 1 << 17),
        Err(GptError::Corrupt(Defect::Signature))
    );
}

#[test]
fn header_rules() {
    let sectors = 1u64 << 20;
    let cases: Vec<(usize, Vec<u8>, Defect)> = vec![
        (
            8,
            0x0002_0000u32.to_le_bytes().to_vec(),
            Defect::Revision(0x0002_0000),
        ),
        (12, 91u32.to_le_bytes().to_vec(), Defect::HeaderSize(91)),
        (12, 513u32.to_le_bytes().to_vec(), Defect::HeaderSize(513)),
        (24, 2u64.to_le_bytes().to_vec(), Defect::MyLba(2)),
        (84, 64u32.to_le_bytes().to_vec(), Defect::EntrySize(64)),
        (84, 200u32.to_le_bytes().to_vec(), Defect::EntrySize(200)),
        (84, 384u32.to_le_bytes().to_vec(), Defect::EntrySize(384)),
        (84, 8192u32.to_le_bytes().to_vec(), Defect::EntrySize(8192)),
        (80, 0u32.to_le_bytes().to_vec(), Defect::EntryCount(0)),
        (80, 1025u32.to_le_bytes().to_vec(), Defect::EntryCount(1025)),
        (
            32,
            sectors.to_le_bytes().to_vec(),
            Defect::AlternateLba(sectors),
        ),
        (
            32,
            (sectors - 20).to_le_bytes().to_vec(),
            Defect::AlternateLba(sectors - 20),
        ),
        (72, 1u64.to_le_bytes().to_vec(), Defect::EntriesLocation),
        (72, 3u64.to_le_bytes().to_vec(), Defect::EntriesLocation),
        (
            40,
            sectors.to_le_bytes().to_vec(),
            Defect::UsableRange {
                first: sectors,
                last: sectors - 34,
                disk_sectors: sectors,
            },
        ),
        (
            48,
            sectors.to_le_bytes().to_vec(),
            Defect::UsableRange {
                first: 34,
                last: sectors,
                disk_sectors: sectors,
            },
        ),
    ];
    for (off, value, defect) in cases {
        let mut disk = created(512, sectors);
        edit_header(&mut disk, 1, off, &value);
        assert_eq!(
            disk.parse(),
            Err(GptError::Corrupt(defect.clone())),
            "{defect}"
        );
    }
    // Minor revisions and a larger header (with its CRC) are fine.
    let mut disk = created(512, sectors);
    edit_header(&mut disk, 1, 8, &0x0001_0003u32.to_le_bytes());
    edit_header(&mut disk, 1, 12, &120u32.to_le_bytes());
    assert!(matches!(disk.parse(), Ok(Table::Gpt(_))));
}

/// Edits entry `index` (0-based) of the primary array and fixes both CRCs.
fn edit_entry(disk: &mut SparseDisk, index: u64, off: usize, value: &[u8]) {
    let ss = disk.ss;
    let mut array = disk.read(2 * ss, 16384);
    put(&mut array, (index * 128) as usize + off, value);
    for (i, chunk) in array.chunks(ss as usize).enumerate() {
        disk.data.insert(2 + i as u64, chunk.to_vec());
    }
    edit_header(disk, 1, 88, &crc::crc32(&array).to_le_bytes());
}

#[test]
fn partition_rules() {
    let sectors = 1u64 << 20;
    let last_usable = sectors - 34;
    // Before the usable range, after it, inverted.
    for (first, last) in [(33, 4000), (2048, last_usable + 1), (5000, 4999)] {
        let mut disk = created(512, sectors);
        edit_entry(&mut disk, 0, 32, &u64::to_le_bytes(first));
        edit_entry(&mut disk, 0, 40, &u64::to_le_bytes(last));
        assert_eq!(
            disk.parse(),
            Err(GptError::Corrupt(Defect::PartitionRange { number: 1 }))
        );
    }
    // Entry 5 overlapping entry 1.
    let mut disk = created(512, sectors);
    edit_entry(&mut disk, 4, 0, &Guid::LINUX_FILESYSTEM.to_windows_bytes());
    edit_entry(&mut disk, 4, 32, &100u64.to_le_bytes());
    edit_entry(&mut disk, 4, 40, &2048u64.to_le_bytes());
    assert_eq!(
        disk.parse(),
        Err(GptError::Corrupt(Defect::PartitionOverlap { a: 1, b: 5 }))
    );
    // Adjacent is fine; numbers follow entry positions.
    edit_entry(&mut disk, 4, 40, &2047u64.to_le_bytes());
    let g = disk.gpt();
    assert_eq!(
        g.partitions.iter().map(|p| p.number).collect::<Vec<_>>(),
        vec![1, 5]
    );
    assert_eq!(g.partition(5).unwrap().sectors(), 1948);
}

#[test]
fn grown_disk_accepted_shrunk_disk_rejected() {
    let sectors = 1u64 << 20;
    let mut disk = created(512, sectors);
    disk.grow_to(sectors + 12345);
    let g = disk.gpt();
    assert_eq!(g.alternate_lba, sectors - 1);
    // No backup at the new end, but at the old one.
    assert!(disk.backup().is_err());
    let old = parse_backup(&disk.tail_at(sectors - 1), 512, sectors - 1).unwrap();
    assert!(old.same_table(&g));
    // Shrunk.
    assert_eq!(
        parse_table(&disk.head(), 512, sectors - 1),
        Err(GptError::Corrupt(Defect::AlternateLba(sectors - 1)))
    );
}

// ---------------------------------------------------------------------------
// MBR

fn mbr_sector(signature: u32, entries: &[(usize, u8, u8, u32, u32)]) -> Vec<u8> {
    let mut s = vec![0u8; 512];
    put(&mut s, 440, &signature.to_le_bytes());
    for &(slot, boot, ty, start, size) in entries {
        let e = 446 + 16 * slot;
        s[e] = boot;
        s[e + 4] = ty;
        put(&mut s, e + 8, &start.to_le_bytes());
        put(&mut s, e + 12, &size.to_le_bytes());
    }
    s[510] = 0x55;
    s[511] = 0xAA;
    s
}

fn with_head(sector0: Vec<u8>) -> Vec<u8> {
    let mut head = sector0;
    head.resize(head_len(512), 0);
    head
}

#[test]
fn mbr_tables() {
    let sectors = 1u64 << 21;
    let head = with_head(mbr_sector(
        0xDEAD_BEEF,
        &[
            (0, 0x80, 0x07, 2048, 204800),
            (2, 0x00, 0x83, 206848, 1_000_000),
            (3, 0x00, 0x00, 0, 0),
        ],
    ));
    assert_eq!(
        parse_table(&head, 512, sectors),
        Ok(Table::Mbr {
            signature: 0xDEAD_BEEF,
            partitions: vec![
                MbrPartition {
                    number: 1,
                    type_byte: 0x07,
                    bootable: true,
                    start_lba: 2048,
                    sectors: 204800
                },
                MbrPartition {
                    number: 3,
                    type_byte: 0x83,
                    bootable: false,
                    start_lba: 206848,
                    sectors: 1_000_000
                },
            ]
        })
    );
    // Signature only: an empty MBR.
    assert_eq!(
        parse_table(&with_head(mbr_sector(7, &[])), 512, sectors),
        Ok(Table::Mbr {
            signature: 7,
            partitions: vec![]
        })
    );
    // Nothing.
    assert_eq!(
        parse_table(&with_head(vec![0; 512]), 512, sectors),
        Ok(Table::Raw)
    );
    // Invalid boot flag, zero start, beyond the disk, overlap.
    for (entries, defect) in [
        (
            vec![(1, 0x12, 0x83, 2048, 100)],
            Defect::MbrEntry { number: 2 },
        ),
        (vec![(0, 0, 0x83, 0, 100)], Defect::MbrEntry { number: 1 }),
        (
            vec![(3, 0, 0x83, 2048, sectors as u32)],
            Defect::MbrEntry { number: 4 },
        ),
        (
            vec![(0, 0, 0x83, 2048, 100), (1, 0, 0x07, 2100, 100)],
            Defect::MbrOverlap { a: 1, b: 2 },
        ),
    ] {
        assert_eq!(
            parse_table(&with_head(mbr_sector(0, &entries)), 512, sectors),
            Err(GptError::Corrupt(defect))
        );
    }
    // 4096-byte sectors: the MBR is still in the first 512 bytes.
    let mut head = mbr_sector(1, &[(0, 0, 0x83, 256, 1000)]);
    head.resize(head_len(4096), 0);
    assert!(matches!(
        parse_table(&head, 4096, 1 << 18),
        Ok(Table::Mbr { .. })
    ));
}

#[test]
fn hybrid_mbr_with_valid_gpt_is_gpt() {
    let mut disk = created(512, 1 << 20);
    let mut mbr = disk.read(0, 512);
    let e = 446 + 16;
    mbr[e + 4] = 0x07;
    put(&mut mbr, e + 8, &2048u32.to_le_bytes());
    put(&mut mbr, e + 12, &1000u32.to_le_bytes());
    disk.data.insert(0, mbr);
    assert!(matches!(disk.parse(), Ok(Table::Gpt(_))));
}

// ---------------------------------------------------------------------------
// Add

/// A GPT with only an MSR partition (as Windows' Initialize-Disk leaves it).
fn with_msr(ss: u32, sectors: u64) -> SparseDisk {
    let s = u64::from(ss);
    let mut disk = created(ss, sectors);
    // Turn partition 1 into a 16 MiB MSR at 1 MiB... at first_usable + 0
    // like Windows does (LBA 34 for 512-byte sectors).
    let first = 2 + 16384 / s;
    edit_entry(
        &mut disk,
        0,
        0,
        &Guid::MICROSOFT_RESERVED.to_windows_bytes(),
    );
    edit_entry(&mut disk, 0, 32, &first.to_le_bytes());
    edit_entry(&mut disk, 0, 40, &(first + 16 * MIB / s - 1).to_le_bytes());
    edit_entry(
        &mut disk,
        0,
        56,
        &encode_name("Microsoft reserved partition").unwrap(),
    );
    disk
}

#[test]
fn add_after_msr() {
    for ss in [512u32, 4096] {
        let s = u64::from(ss);
        let sectors = 10 * GIB / s;
        let mut disk = with_msr(ss, sectors);
        let g = disk.gpt();
        let msr_end = g.partitions[0].last_lba;
        let writes = add_single_partition(
            &g,
            ss,
            sectors,
            guid(9),
            Guid::BASIC_DATA,
            "Basic data partition",
        )
        .unwrap();
        // Same backup place: no stale header to clear.
        assert_eq!(writes.len(), 4);
        disk.apply(&writes);
        let g2 = disk.gpt();
        assert_eq!(g2.partitions.len(), 2);
        assert_eq!(g2.partitions[0], g.partitions[0]);
        let p = &g2.partitions[1];
        assert_eq!(p.number, 2);
        assert_eq!(p.first_lba, (msr_end + 1).div_ceil(MIB / s) * (MIB / s));
        assert_eq!(p.first_lba * s, 17 * MIB);
        assert_eq!(p.last_lba, g2.last_usable);
        assert_eq!(p.unique_guid, guid(9));
        // What is checked before the write is what was written.
        assert_eq!(
            single_partition_extent(&g, ss, sectors),
            Ok((p.first_lba, p.last_lba))
        );
        assert!(disk.backup().unwrap().same_table(&g2));
        // Now it has a data partition.
        assert_eq!(
            add_single_partition(&g2, ss, sectors, guid(9), Guid::BASIC_DATA, "x"),
            Err(GptError::HasDataPartitions(2))
        );
    }
}

#[test]
fn add_to_empty_gpt_on_grown_disk() {
    let sectors = 1u64 << 20;
    let mut disk = created(512, sectors);
    // Remove the partition: an empty table.
    edit_entry(&mut disk, 0, 0, &[0; 128]);
    let g = disk.gpt();
    assert!(g.partitions.is_empty());
    disk.grow_to(sectors * 2);
    let writes =
        add_single_partition(&g, 512, sectors * 2, guid(3), Guid::BASIC_DATA, "d").unwrap();
    // The stale backup header is cleared last.
    let stale = writes.last().unwrap();
    assert_eq!(stale.offset, (sectors - 1) * 512);
    assert!(stale.bytes.iter().all(|&b| b == 0));
    disk.apply(&writes);
    let g2 = disk.gpt();
    assert_eq!(g2.alternate_lba, sectors * 2 - 1);
    assert_eq!(g2.last_usable, sectors * 2 - 34);
    assert_eq!(g2.partitions.len(), 1);
    assert_eq!(g2.partitions[0].first_lba, 2048);
    assert_eq!(g2.partitions[0].last_lba, sectors * 2 - 34);
    assert!(disk.backup().unwrap().same_table(&g2));
    assert!(parse_backup(&disk.tail_at(sectors - 1), 512, sectors - 1).is_err());
}

#[test]
fn add_errors() {
    let sectors = 1u64 << 20;
    let mut disk = created(512, sectors);
    edit_entry(&mut disk, 0, 0, &[0; 128]);
    let g = disk.gpt();
    assert_eq!(
        add_single_partition(&g, 512, sectors, guid(3), Guid::BASIC_DATA, &"x".repeat(40)),
        Err(GptError::NameTooLong)
    );
    assert_eq!(
        add_single_partition(&g, 512, sectors - 1, guid(3), Guid::BASIC_DATA, "x"),
        Err(GptError::DiskShrank {
            disk_sectors: sectors - 1,
            table_end: sectors - 1
        })
    );
    // An MSR filling the disk leaves no space.
    let mut full = g.clone();
    full.partitions.push(GptPartition {
        number: 1,
        type_guid: Guid::MICROSOFT_RESERVED,
        unique_guid: guid(4),
        first_lba: 34,
        last_lba: g.last_usable - 100,
        attributes: 0,
        name: String::new(),
    });
    assert_eq!(
        add_single_partition(&full, 512, sectors, guid(3), Guid::BASIC_DATA, "x"),
        Err(GptError::NoSpace)
    );
    // All entries used by MSRs.
    let mut crowded = g.clone();
    crowded.entry_count = 1;
    crowded.partitions = vec![GptPartition {
        number: 1,
        type_guid: Guid::MICROSOFT_RESERVED,
        unique_guid: guid(4),
        first_lba: 34,
        last_lba: 100,
        attributes: 0,
        name: String::new(),
    }];
    assert_eq!(
        add_single_partition(&crowded, 512, sectors, guid(3), Guid::BASIC_DATA, "x"),
        Err(GptError::TableFull)
    );
    // A hand-made inconsistent Gpt is refused, not encoded.
    let mut bad = g.clone();
    bad.partitions = vec![GptPartition {
        number: 200,
        type_guid: Guid::MICROSOFT_RESERVED,
        unique_guid: guid(4),
        first_lba: 34,
        last_lba: 100,
        attributes: 0,
        name: String::new(),
    }];
    assert_eq!(
        add_single_partition(&bad, 512, sectors, guid(3), Guid::BASIC_DATA, "x"),
        Err(GptError::Corrupt(Defect::PartitionRange { number: 200 }))
    );
}

// ---------------------------------------------------------------------------
// Grow

#[test]
fn create_grow_parse() {
    for ss in [512u32, 4096] {
        let s = u64::from(ss);
        let old = GIB / s;
        let new = 3 * GIB / s + 5;
        let mut disk = created(ss, old);
        disk.grow_to(new);
        let g = disk.gpt();
        let head = disk.head();
        assert_eq!(max_partition_end(&g, ss, 1, new), Ok(new - 2 - 16384 / s));
        let plan = grow(&g, &head, ss, new, 1, None).unwrap();
        assert_eq!(plan.old_last_lba, old - 2 - 16384 / s);
        assert_eq!(plan.new_last_lba, new - 2 - 16384 / s);
        disk.apply(&plan.writes);
        let g2 = disk.gpt();
        assert_eq!(g2.alternate_lba, new - 1);
        assert_eq!(g2.last_usable, new - 2 - 16384 / s);
        assert_eq!(g2.partitions[0].last_lba, g2.last_usable);
        assert_eq!(g2.partitions[0].first_lba, g.partitions[0].first_lba);
        assert_eq!(g2.partitions[0].name, g.partitions[0].name);
        let b = disk.backup().unwrap();
        assert!(b.same_table(&g2));
        // The old backup header is gone.
        assert!(parse_backup(&disk.tail_at(old - 1), ss, old - 1).is_err());
        assert!(disk.read((old - 1) * s, s as usize).iter().all(|&b| b == 0));
        // Growing again without a disk change: nothing moves.
        let plan = grow(&g2, &disk.head(), ss, new, 1, None).unwrap();
        assert_eq!(plan.old_last_lba, plan.new_last_lba);
        assert_eq!(plan.writes.len(), 4);
    }
}

#[test]
fn grow_to_explicit_end_then_in_place() {
    let old = 1u64 << 20;
    let new = 1u64 << 22;
    let mut disk = created(512, old);
    disk.grow_to(new);
    let g = disk.gpt();
    let plan = grow(&g, &disk.head(), 512, new, 1, Some(old + 1000)).unwrap();
    assert_eq!(plan.new_last_lba, old + 1000);
    disk.apply(&plan.writes);
    let g2 = disk.gpt();
    assert_eq!(g2.partitions[0].last_lba, old + 1000);
    assert_eq!(g2.alternate_lba, new - 1);
    // Disk did not grow this time; free space after the partition.
    let plan = grow(&g2, &disk.head(), 512, new, 1, None).unwrap();
    assert_eq!(plan.writes.len(), 4, "only entries and headers");
    disk.apply(&plan.writes);
    assert_eq!(disk.gpt().partitions[0].last_lba, new - 34);
    assert!(disk.backup().unwrap().same_table(&disk.gpt()));
}

#[test]
fn grow_small_increase_keeps_new_backup() {
    // The disk grows by fewer sectors than the backup array: the old backup
    // header lies inside the new backup array and must not be zeroed.
    let old = 1u64 << 20;
    let new = old + 5;
    let mut disk = created(512, old);
    disk.grow_to(new);
    let g = disk.gpt();
    let plan = grow(&g, &disk.head(), 512, new, 1, None).unwrap();
    assert_eq!(plan.writes.len(), 4);
    disk.apply(&plan.writes);
    assert!(disk.backup().unwrap().same_table(&disk.gpt()));
    assert_eq!(disk.gpt().partitions[0].last_lba, new - 34);
}

/// A disk with partitions: 1 at 1 MiB..(1 MiB + 100 MiB), 2 after a 50 MiB
/// gap up to 500 MiB, disk 1 GiB.
fn two_partitions() -> SparseDisk {
    let mut disk = created(512, GIB / 512);
    let m = MIB / 512;
    edit_entry(&mut disk, 0, 40, &(m + 100 * m - 1).to_le_bytes());
    edit_entry(&mut disk, 1, 0, &Guid::LINUX_FILESYSTEM.to_windows_bytes());
    edit_entry(&mut disk, 1, 16, &guid(7).to_windows_bytes());
    edit_entry(&mut disk, 1, 32, &(151 * m).to_le_bytes());
    edit_entry(&mut disk, 1, 40, &(500 * m - 1).to_le_bytes());
    disk
}

#[test]
fn grow_respects_next_partition() {
    let m = MIB / 512;
    let mut disk = two_partitions();
    let new = 2 * GIB / 512;
    disk.grow_to(new);
    let g = disk.gpt();
    let head = disk.head();
    assert_eq!(max_partition_end(&g, 512, 1, new), Ok(151 * m - 1));
    assert_eq!(max_partition_end(&g, 512, 2, new), Ok(new - 34));
    assert_eq!(
        max_partition_end(&g, 512, 3, new),
        Err(GptError::NoSuchPartition(3))
    );
    assert_eq!(
        grow(&g, &head, 512, new, 1, Some(151 * m)),
        Err(GptError::TooLarge {
            number: 1,
            requested: 151 * m,
            max: 151 * m - 1
        })
    );
    assert_eq!(
        grow(&g, &head, 512, new, 1, Some(m)),
        Err(GptError::Shrink {
            number: 1,
            current: 101 * m - 1,
            requested: m
        })
    );
    assert_eq!(
        grow(&g, &head, 512, new, 3, None),
        Err(GptError::NoSuchPartition(3))
    );
    // Partition 1 up to partition 2.
    let plan = grow(&g, &head, 512, new, 1, None).unwrap();
    assert_eq!(plan.new_last_lba, 151 * m - 1);
    disk.apply(&plan.writes);
    let g2 = disk.gpt();
    assert_eq!(g2.alternate_lba, new - 1);
    assert_eq!(g2.partition(1).unwrap().last_lba, 151 * m - 1);
    assert_eq!(g2.partition(2).unwrap().last_lba, 500 * m - 1);
    // Partition 1 can no longer grow; None is a no-op, not an error.
    let plan = grow(&g2, &disk.head(), 512, new, 1, None).unwrap();
    assert_eq!(plan.old_last_lba, plan.new_last_lba);
    // Partition 2 grows to the end.
    let plan = grow(&g2, &disk.head(), 512, new, 2, None).unwrap();
    disk.apply(&plan.writes);
    assert_eq!(disk.gpt().partition(2).unwrap().last_lba, new - 34);
    assert!(disk.backup().unwrap().same_table(&disk.gpt()));
}

#[test]
fn grow_refuses_mismatch_and_shrunk_disk() {
    let sectors = 1u64 << 20;
    let disk = created(512, sectors);
    let g = disk.gpt();
    let mut other = g.clone();
    other.partitions[0].name = "other".into();
    assert_eq!(
        grow(&other, &disk.head(), 512, sectors, 1, None),
        Err(GptError::Mismatch)
    );
    assert_eq!(
        grow(&g, &disk.head(), 512, sectors - 1, 1, None),
        Err(GptError::Corrupt(Defect::AlternateLba(sectors - 1)))
    );
    assert_eq!(
        max_partition_end(&g, 512, 1, sectors - 1),
        Err(GptError::DiskShrank {
            disk_sectors: sectors - 1,
            table_end: sectors - 1
        })
    );
    assert_eq!(
        grow(&g, &vec![0u8; head_len(512)], 512, sectors, 1, None),
        Err(GptError::Mismatch)
    );
}

#[test]
fn grow_keeps_unknown_header_and_entry_bytes() {
    let sectors = 1u64 << 20;
    let mut disk = created(512, sectors);
    // Header of 100 bytes with vendor bytes, and attribute bits.
    edit_header(&mut disk, 1, 92, &[0xAB; 8]);
    edit_header(&mut disk, 1, 12, &100u32.to_le_bytes());
    edit_entry(&mut disk, 0, 48, &(1u64 << 63 | 1).to_le_bytes());
    disk.grow_to(sectors * 2);
    let g = disk.gpt();
    let plan = grow(&g, &disk.head(), 512, sectors * 2, 1, None).unwrap();
    disk.apply(&plan.writes);
    let g2 = disk.gpt();
    assert_eq!(g2.partitions[0].attributes, 1 << 63 | 1);
    let h = disk.read(512, 512);
    assert_eq!(le32(&h, 12), 100);
    assert_eq!(&h[92..100], &[0xAB; 8]);
    let b = disk.read((sectors * 2 - 1) * 512, 512);
    assert_eq!(&b[92..100], &[0xAB; 8]);
    assert!(disk.backup().unwrap().same_table(&g2));
}

// ---------------------------------------------------------------------------
// Properties

fn sector_size() -> impl Strategy<Value = u32> {
    prop_oneof![Just(512u32), Just(4096u32)]
}

proptest! {
    #[test]
    fn random_bytes_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..20000),
        ss in prop_oneof![Just(512u32), Just(4096), Just(0), Just(1000)],
        sectors in prop_oneof![any::<u64>(), 0u64..100_000],
        mbr in any::<bool>(),
    ) {
        let mut bytes = bytes;
        if mbr && bytes.len() >= 512 {
            bytes[510] = 0x55;
            bytes[511] = 0xAA;
        }
        let _ = parse_table(&bytes, ss, sectors);
        let _ = parse_backup(&bytes, ss, sectors);
    }

    /// Valid table with random header fields (CRCs fixed up) or random
    /// entry bytes: parsing and the encoders never panic, and whatever
    /// parses obeys the rules.
    #[test]
    fn mutated_tables_never_panic(
        ss in sector_size(),
        field in prop_oneof![
            Just(24usize), Just(32), Just(40), Just(48), Just(72), Just(80), Just(84), Just(12)
        ],
        value in prop_oneof![any::<u64>(), 0u64..4096, Just(u64::MAX)],
        entry_off in 0usize..16384,
        entry_bytes in proptest::collection::vec(any::<u8>(), 0..40),
        grow_by in 0u64..100_000,
    ) {
        let sectors = (64 * MIB) / u64::from(ss);
        let mut disk = created(ss, sectors);
        let width = if matches!(field, 80 | 84 | 12) { 4 } else { 8 };
        edit_header(&mut disk, 1, field, &value.to_le_bytes()[..width]);
        let mut array = disk.read(2 * u64::from(ss), 16384);
        put(&mut array, entry_off.min(16384 - entry_bytes.len()), &entry_bytes);
        for (i, chunk) in array.chunks(ss as usize).enumerate() {
            disk.data.insert(2 + i as u64, chunk.to_vec());
        }
        edit_header(&mut disk, 1, 88, &crc::crc32(&array).to_le_bytes());
        disk.grow_to(sectors + grow_by);
        let head = disk.head();
        if let Ok(Table::Gpt(g)) = parse_table(&head, ss, disk.sectors) {
            prop_assert!(g.first_usable <= g.last_usable);
            prop_assert!(g.last_usable < g.alternate_lba);
            prop_assert!(g.alternate_lba < disk.sectors);
            for p in &g.partitions {
                prop_assert!(g.first_usable <= p.first_lba);
                prop_assert!(p.first_lba <= p.last_lba && p.last_lba <= g.last_usable);
            }
            for n in 1..=3 {
                let _ = max_partition_end(&g, ss, n, disk.sectors);
                let _ = grow(&g, &head, ss, disk.sectors, n, None);
                let _ = grow(&g, &head, ss, disk.sectors, n, Some(value));
            }
            let _ = add_single_partition(&g, ss, disk.sectors, guid(5), Guid::BASIC_DATA, "x");
        }
    }

    #[test]
    fn random_disk_sizes_round_trip(
        ss in sector_size(),
        bytes in 0u64..(1u64 << 50),
    ) {
        let sectors = bytes / u64::from(ss);
        let result = create_single_partition(
            ss, sectors, guid(1), guid(2), Guid::BASIC_DATA, "Basic data partition");
        if sectors < min_disk_sectors(ss) {
            prop_assert!(
                matches!(result, Err(GptError::DiskTooSmall { .. })),
                "unexpected {:?}", result
            );
        } else {
            let mut disk = SparseDisk::new(ss, sectors);
            disk.apply(&result.unwrap());
            check_fresh(&disk);
        }
    }

    #[test]
    fn grow_never_overlaps_or_leaves_the_disk(
        ss in sector_size(),
        mib in 3u64..4096,
        grow_mib in 0u64..4096,
        extra in 0u64..64,
        split in any::<bool>(),
        target in 0usize..2,
        request in prop_oneof![Just(None), any::<u64>().prop_map(Some)],
    ) {
        let s = u64::from(ss);
        let m = MIB / s;
        let sectors = mib * m + 40;
        let mut disk = created(ss, sectors);
        let g = disk.gpt();
        if split && g.partitions[0].sectors() >= 3 * m {
            // Partition 1 ends half-way; partition 2 starts after a gap.
            let p1_end = g.partitions[0].first_lba + g.partitions[0].sectors() / 2;
            edit_entry(&mut disk, 0, 40, &p1_end.to_le_bytes());
            edit_entry(&mut disk, 1, 0, &Guid::LINUX_FILESYSTEM.to_windows_bytes());
            edit_entry(&mut disk, 1, 32, &(p1_end + m / 2).to_le_bytes());
            edit_entry(&mut disk, 1, 40, &(g.last_usable - m / 4).to_le_bytes());
        }
        let new = sectors + grow_mib * m + extra;
        disk.grow_to(new);
        let g = disk.gpt();
        let number = g.partitions[target.min(g.partitions.len() - 1)].number;
        let max = max_partition_end(&g, ss, number, new).unwrap();
        let plan = grow(&g, &disk.head(), ss, new, number, request);
        match plan {
            Ok(plan) => {
                prop_assert!(plan.new_last_lba <= max);
                prop_assert!(plan.new_last_lba >= plan.old_last_lba);
                disk.apply(&plan.writes);
                let g2 = disk.gpt();
                prop_assert_eq!(g2.alternate_lba, new - 1);
                prop_assert_eq!(g2.last_usable, new - 2 - 16384 / s);
                prop_assert_eq!(g2.partition(number).unwrap().last_lba, plan.new_last_lba);
                for p in &g2.partitions {
                    prop_assert!(p.last_lba <= g2.last_usable);
                    let before = g.partition(p.number).unwrap();
                    prop_assert_eq!(p.first_lba, before.first_lba);
                    if p.number != number {
                        prop_assert_eq!(p, before);
                    }
                }
                prop_assert!(disk.backup().unwrap().same_table(&g2));
            }
            Err(GptError::Shrink { requested, .. }) => {
                prop_assert!(request == Some(requested));
            }
            Err(GptError::TooLarge { requested, max: m2, .. }) => {
                prop_assert_eq!(m2, max);
                prop_assert!(requested > max);
            }
            Err(e) => prop_assert!(false, "unexpected {e}"),
        }
    }
}

// ---------------------------------------------------------------------------
// Real tools: sfdisk / fdisk on sparse image files, skipped when absent.

mod tools {
    use super::*;
    use std::fs::File;
    use std::io::{Read, Seek, SeekFrom, Write as _};
    use std::path::Path;
    use std::process::Command;

    fn have(tool: &str) -> bool {
        Command::new(tool).arg("--version").output().is_ok()
    }

    fn image(dir: &Path, name: &str, bytes: u64) -> std::path::PathBuf {
        let path = dir.join(name);
        File::create(&path).unwrap().set_len(bytes).unwrap();
        path
    }

    fn apply(path: &Path, writes: &[Write]) {
        let mut f = File::options().write(true).open(path).unwrap();
        for w in writes {
            f.seek(SeekFrom::Start(w.offset)).unwrap();
            f.write_all(&w.bytes).unwrap();
        }
        f.sync_all().unwrap();
    }

    fn read(path: &Path, offset: u64, len: usize) -> Vec<u8> {
        let mut f = File::open(path).unwrap();
        f.seek(SeekFrom::Start(offset)).unwrap();
        let mut buf = vec![0u8; len];
        f.read_exact(&mut buf).unwrap();
        buf
    }

    fn run(cmd: &mut Command) -> (bool, String) {
        let out = cmd.output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    }

    /// `sfdisk --verify` must be clean and `sfdisk --json` must show our
    /// table; then grow the file and check again after [`grow`].
    #[test]
    fn sfdisk_agrees_with_create_and_grow() {
        if !have("sfdisk") {
            eprintln!("sfdisk not installed; skipping");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        for bytes in [64 * MIB, 3 * TIB] {
            let path = image(dir.path(), "disk.img", bytes);
            let sectors = bytes / 512;
            let writes = create_single_partition(
                512,
                sectors,
                Guid::parse("11111111-2222-4333-8444-555555555555").unwrap(),
                Guid::parse("66666666-7777-4888-9999-aaaaaaaaaaaa").unwrap(),
                Guid::BASIC_DATA,
                "Basic data partition",
            )
            .unwrap();
            apply(&path, &writes);
            let (ok, text) = run(Command::new("sfdisk").arg("--verify").arg(&path));
            assert!(ok && text.contains("No errors detected."), "{text}");
            let (ok, json) = run(Command::new("sfdisk").arg("--json").arg(&path));
            assert!(ok, "{json}");
            let compact: String = json.split_whitespace().collect();
            assert!(compact.contains("\"label\":\"gpt\""), "{json}");
            assert!(
                compact.contains("\"id\":\"11111111-2222-4333-8444-555555555555\""),
                "{json}"
            );
            assert!(compact.contains("\"firstlba\":34"), "{json}");
            assert!(
                compact.contains(&format!("\"lastlba\":{}", sectors - 34)),
                "{json}"
            );
            assert!(
                compact.contains(&format!(
                    "\"start\":2048,\"size\":{},\"type\":\"EBD0A0A2-B9E5-4433-87C0-68B6B72699C7\",\"uuid\":\"66666666-7777-4888-9999-AAAAAAAAAAAA\",\"name\":\"Basicdatapartition\"",
                    sectors - 34 - 2048 + 1
                )),
                "{json}"
            );
        }
        // Grow a 64 MiB image to 96 MiB.
        let path = image(dir.path(), "grow.img", 64 * MIB);
        let old = 64 * MIB / 512;
        let new = 96 * MIB / 512;
        apply(
            &path,
            &create_single_partition(512, old, guid(1), guid(2), Guid::BASIC_DATA, "p").unwrap(),
        );
        File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(new * 512)
            .unwrap();
        let head = read(&path, 0, head_len(512));
        let Ok(Table::Gpt(g)) = parse_table(&head, 512, new) else {
            panic!("no gpt")
        };
        let plan = grow(&g, &head, 512, new, 1, None).unwrap();
        apply(&path, &plan.writes);
        let (ok, text) = run(Command::new("sfdisk").arg("--verify").arg(&path));
        assert!(ok && text.contains("No errors detected."), "{text}");
        let (_, json) = run(Command::new("sfdisk").arg("--json").arg(&path));
        let compact: String = json.split_whitespace().collect();
        assert!(
            compact.contains(&format!("\"lastlba\":{}", new - 34)),
            "{json}"
        );
        assert!(
            compact.contains(&format!("\"start\":2048,\"size\":{}", new - 34 - 2048 + 1)),
            "{json}"
        );
        // The tail as the backend reads it.
        let tail = read(&path, new * 512 - tail_len(512) as u64, tail_len(512));
        assert!(parse_backup(&tail, 512, new - 1)
            .unwrap()
            .same_table(&g_after(&path, new)));
    }

    fn g_after(path: &Path, sectors: u64) -> Gpt {
        match parse_table(&read(path, 0, head_len(512)), 512, sectors) {
            Ok(Table::Gpt(g)) => g,
            other => panic!("{other:?}"),
        }
    }

    /// Tables written by sfdisk (GPT with an MSR and a data partition; MBR)
    /// parse to what sfdisk describes.
    #[test]
    fn parses_sfdisk_tables() {
        if !have("sfdisk") {
            eprintln!("sfdisk not installed; skipping");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let sectors = 256 * MIB / 512;
        let path = image(dir.path(), "gpt.img", 256 * MIB);
        let script = "label: gpt\n\
            label-id: 0D0E0A0D-BEEF-4000-8000-000000000001\n\
            first-lba: 34\n\
            start=34, size=32734, type=E3C9E316-0B5C-4DB8-817D-F92DF00215AE, name=\"Microsoft reserved partition\"\n\
            start=32768, size=100000, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4, uuid=01234567-89AB-4CDE-8F01-23456789ABCD, name=\"data\", attrs=\"GUID:63\"\n";
        let mut child = Command::new("sfdisk")
            .args(["--no-reread", "--no-tell-kernel", "-q"])
            .arg(&path)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(script.as_bytes())
            .unwrap();
        assert!(child.wait().unwrap().success());
        let g = g_after(&path, sectors);
        assert_eq!(
            g.disk_guid.to_string(),
            "0d0e0a0d-beef-4000-8000-000000000001"
        );
        assert_eq!(g.alternate_lba, sectors - 1);
        assert_eq!(g.partitions.len(), 2);
        let msr = &g.partitions[0];
        assert_eq!(msr.type_guid, Guid::MICROSOFT_RESERVED);
        assert_eq!((msr.first_lba, msr.last_lba), (34, 34 + 32734 - 1));
        assert_eq!(msr.name, "Microsoft reserved partition");
        let data = &g.partitions[1];
        assert_eq!(data.number, 2);
        assert_eq!(data.type_guid, Guid::LINUX_FILESYSTEM);
        assert_eq!(
            data.unique_guid.to_string(),
            "01234567-89ab-4cde-8f01-23456789abcd"
        );
        assert_eq!((data.first_lba, data.last_lba), (32768, 32768 + 100000 - 1));
        assert_eq!(data.attributes, 1 << 63);
        let tail = read(&path, sectors * 512 - tail_len(512) as u64, tail_len(512));
        assert!(parse_backup(&tail, 512, sectors - 1)
            .unwrap()
            .same_table(&g));

        // MBR.
        let path = image(dir.path(), "mbr.img", 256 * MIB);
        let script = "label: dos\nlabel-id: 0x12345678\n\
            start=2048, size=20480, type=83, bootable\n\
            start=22528, size=40960, type=7\n";
        let mut child = Command::new("sfdisk")
            .args(["--no-reread", "--no-tell-kernel", "-q"])
            .arg(&path)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(script.as_bytes())
            .unwrap();
        assert!(child.wait().unwrap().success());
        let head = read(&path, 0, head_len(512));
        assert_eq!(
            parse_table(&head, 512, sectors),
            Ok(Table::Mbr {
                signature: 0x1234_5678,
                partitions: vec![
                    MbrPartition {
                        number: 1,
                        type_byte: 0x83,
                        bootable: true,
                        start_lba: 2048,
                        sectors: 20480
                    },
                    MbrPartition {
                        number: 2,
                        type_byte: 0x07,
                        bootable: false,
                        start_lba: 22528,
                        sectors: 40960
                    },
                ]
            })
        );
    }

    /// fdisk with 4096-byte logical sectors reads our 4Kn table cleanly.
    #[test]
    fn fdisk_reads_4096_byte_sector_table() {
        if !have("fdisk") {
            eprintln!("fdisk not installed; skipping");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let sectors = 256 * MIB / 4096;
        let path = image(dir.path(), "4k.img", 256 * MIB);
        apply(
            &path,
            &create_single_partition(4096, sectors, guid(1), guid(2), Guid::BASIC_DATA, "p")
                .unwrap(),
        );
        let (ok, text) = run(Command::new("fdisk").args(["-b", "4096", "-l"]).arg(&path));
        assert!(ok, "{text}");
        assert!(text.contains("Disklabel type: gpt"), "{text}");
        assert!(!text.to_lowercase().contains("corrupt"), "{text}");
        assert!(!text.contains("mismatch"), "{text}");
        // Start 256, end last usable.
        let line = text
            .lines()
            .find(|l| l.contains("4k.img1"))
            .unwrap_or_else(|| panic!("{text}"));
        let fields: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(fields[1], "256", "{line}");
        assert_eq!(fields[2], (sectors - 6).to_string(), "{line}");
    }
}

#[test]
fn an_empty_table_is_a_gpt_without_partitions_that_takes_one() {
    for ss in [512u32, 4096] {
        let sectors = (64u64 << 20) / u64::from(ss);
        let mut disk = SparseDisk::new(ss, sectors);
        disk.apply(&create_empty(ss, sectors, guid(1)).unwrap());
        let g = disk.gpt();
        assert!(g.partitions.is_empty(), "{ss}");
        assert_eq!(disk.backup().unwrap().partitions.len(), 0);
        let add = add_single_partition(&g, ss, sectors, guid(2), Guid::BASIC_DATA, "data").unwrap();
        disk.apply(&add);
        let g = disk.gpt();
        assert_eq!(g.partitions.len(), 1, "{ss}");
        assert_eq!(g.partitions[0].type_guid, Guid::BASIC_DATA);
        assert_eq!(g.partitions[0].first_lba, (1 << 20) / u64::from(ss));
        assert_eq!(g.partitions[0].last_lba, g.last_usable);
    }
    assert!(create_empty(512, 10, guid(1)).is_err());
}
