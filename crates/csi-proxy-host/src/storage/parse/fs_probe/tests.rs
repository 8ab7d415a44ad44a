use super::*;
use proptest::prelude::*;

fn put(b: &mut [u8], off: usize, v: &[u8]) {
    b[off..off + v.len()].copy_from_slice(v);
}

struct ExtSb {
    log_block: u32,
    compat: u32,
    incompat: u32,
    ro_compat: u32,
    blocks: u64,
    reserved: u64,
    free: u64,
}

impl Default for ExtSb {
    fn default() -> Self {
        ExtSb {
            log_block: 2,
            compat: 0,
            incompat: 0x2,
            ro_compat: 0x1 | 0x2,
            blocks: 16384,
            reserved: 819,
            free: 15000,
        }
    }
}

fn ext_head(sb: &ExtSb) -> Vec<u8> {
    let mut h = vec![0u8; PROBE_LEN];
    let s = EXT_SB;
    put(&mut h, s + 0x04, &(sb.blocks as u32).to_le_bytes());
    put(&mut h, s + 0x08, &(sb.reserved as u32).to_le_bytes());
    put(&mut h, s + 0x0C, &(sb.free as u32).to_le_bytes());
    put(&mut h, s + 0x18, &sb.log_block.to_le_bytes());
    put(&mut h, s + 0x38, &EXT_MAGIC.to_le_bytes());
    put(&mut h, s + 0x5C, &sb.compat.to_le_bytes());
    put(&mut h, s + 0x60, &sb.incompat.to_le_bytes());
    put(&mut h, s + 0x64, &sb.ro_compat.to_le_bytes());
    put(&mut h, s + 0x150, &((sb.blocks >> 32) as u32).to_le_bytes());
    put(
        &mut h,
        s + 0x154,
        &((sb.reserved >> 32) as u32).to_le_bytes(),
    );
    put(&mut h, s + 0x158, &((sb.free >> 32) as u32).to_le_bytes());
    h
}

#[test]
fn ext_generations() {
    assert_eq!(probe(&ext_head(&ExtSb::default())), Some(FsKind::Ext2));
    let ext3 = ExtSb {
        compat: 0x4 | 0x10 | 0x20,
        ..Default::default()
    };
    assert_eq!(probe(&ext_head(&ext3)), Some(FsKind::Ext3));
    for incompat in [0x40, 0x80, 0x200] {
        let ext4 = ExtSb {
            compat: 0x4,
            incompat: 0x2 | incompat,
            ..Default::default()
        };
        assert_eq!(probe(&ext_head(&ext4)), Some(FsKind::Ext4), "{incompat:#x}");
    }
    // ext4 features in ro_compat only (huge_file, metadata_csum).
    let ext4 = ExtSb {
        ro_compat: 0x1 | 0x8 | 0x400,
        ..Default::default()
    };
    assert_eq!(probe(&ext_head(&ext4)), Some(FsKind::Ext4));
    // External journal device: not a filesystem.
    let jdev = ExtSb {
        incompat: 0x8,
        ..Default::default()
    };
    assert_eq!(probe(&ext_head(&jdev)), None);
    // Block size out of range: not ext.
    let bad = ExtSb {
        log_block: 7,
        ..Default::default()
    };
    assert_eq!(probe(&ext_head(&bad)), None);
    assert_eq!(ext_usage(&ext_head(&bad)), None);
    // Short input.
    assert_eq!(probe(&ext_head(&ExtSb::default())[..1024 + 0x38]), None);
}

#[test]
fn ext_usage_32_and_64_bit() {
    let sb = ExtSb {
        log_block: 0,
        blocks: 65536,
        reserved: 3276,
        free: 60000,
        ..Default::default()
    };
    let u = ext_usage(&ext_head(&sb)).unwrap();
    assert_eq!(
        u,
        ExtUsage {
            block_size: 1024,
            blocks_total: 65536,
            blocks_free: 60000,
            reserved: 3276
        }
    );
    assert_eq!(u.total_bytes(), 64 << 20);
    assert_eq!(u.free_bytes(), 60000 * 1024);
    // Without the 64bit feature the high words are ignored.
    let big = ExtSb {
        log_block: 6,
        incompat: 0x2 | 0x40,
        blocks: (3 << 32) | 5,
        reserved: (1 << 32) | 7,
        free: (2 << 32) | 9,
        ..Default::default()
    };
    let u = ext_usage(&ext_head(&big)).unwrap();
    assert_eq!(
        (u.block_size, u.blocks_total, u.reserved, u.blocks_free),
        (65536, 5, 7, 9)
    );
    let big = ExtSb {
        incompat: 0x2 | 0x40 | 0x80,
        ..big
    };
    let u = ext_usage(&ext_head(&big)).unwrap();
    assert_eq!(
        (u.blocks_total, u.reserved, u.blocks_free),
        ((3 << 32) | 5, (1 << 32) | 7, (2 << 32) | 9)
    );
    assert_eq!(ext_usage(&vec![0u8; PROBE_LEN]), None);
    // Only the first 2048 bytes are needed.
    assert!(ext_usage(&ext_head(&ExtSb::default())[..2048]).is_some());
}

fn with(off: usize, magic: &[u8]) -> Vec<u8> {
    let mut h = vec![0u8; PROBE_LEN];
    put(&mut h, off, magic);
    h
}

fn boot_sector(oem_or_type: (usize, &[u8])) -> Vec<u8> {
    let mut h = with(oem_or_type.0, oem_or_type.1);
    put(&mut h, 510, &[0x55, 0xAA]);
    h
}

#[test]
fn signatures() {
    let cases: Vec<(Vec<u8>, Option<FsKind>)> = vec![
        (vec![], None),
        (vec![0u8; PROBE_LEN], None),
        (with(0, b"XFSB"), Some(FsKind::Xfs)),
        (with(0x10040, b"_BHRfS_M"), Some(FsKind::Btrfs)),
        (boot_sector((3, b"NTFS    ")), Some(FsKind::Ntfs)),
        (boot_sector((3, b"EXFAT   ")), Some(FsKind::Exfat)),
        (boot_sector((54, b"FAT16   ")), Some(FsKind::Vfat)),
        (boot_sector((54, b"FAT12   ")), Some(FsKind::Vfat)),
        (boot_sector((82, b"FAT32   ")), Some(FsKind::Vfat)),
        // FAT label without the boot signature.
        (with(82, b"FAT32   "), None),
        (with(4086, b"SWAPSPACE2"), Some(FsKind::Swap)),
        (with(4086, b"SWAP-SPACE"), Some(FsKind::Swap)),
        (with(65526, b"SWAPSPACE2"), Some(FsKind::Swap)),
        (with(0, b"LUKS\xba\xbe"), Some(FsKind::Luks)),
        (with(0x8001, b"CD001"), Some(FsKind::Iso9660)),
    ];
    for (head, kind) in cases {
        assert_eq!(probe(&head), kind, "{kind:?}");
    }
    // Truncated just short of the btrfs magic.
    assert_eq!(probe(&with(0x10040, b"_BHRfS_M")[..0x10047]), None);
}

#[test]
fn names() {
    let all = [
        (FsKind::Ext2, "ext2"),
        (FsKind::Ext3, "ext3"),
        (FsKind::Ext4, "ext4"),
        (FsKind::Xfs, "xfs"),
        (FsKind::Btrfs, "btrfs"),
        (FsKind::Ntfs, "ntfs"),
        (FsKind::Vfat, "vfat"),
        (FsKind::Exfat, "exfat"),
        (FsKind::Swap, "swap"),
        (FsKind::Luks, "crypto_LUKS"),
        (FsKind::Iso9660, "iso9660"),
    ];
    for (k, n) in all {
        assert_eq!(k.name(), n);
        assert_eq!(k.to_string(), n);
    }
}

#[test]
fn partition_table_detection() {
    assert!(!has_partition_table(&[]));
    assert!(!has_partition_table(&vec![0u8; 8192]));
    let mut mbr = vec![0u8; 8192];
    put(&mut mbr, 510, &[0x55, 0xAA]);
    assert!(has_partition_table(&mbr));
    assert!(has_partition_table(&with(512, b"EFI PART")));
    assert!(has_partition_table(&with(4096, b"EFI PART")));
    // Whole-disk filesystems with a boot signature are not tables.
    assert!(!has_partition_table(&boot_sector((3, b"NTFS    "))));
    assert!(!has_partition_table(&boot_sector((3, b"EXFAT   "))));
    assert!(!has_partition_table(&boot_sector((82, b"FAT32   "))));
    assert!(!has_partition_table(&ext_head(&ExtSb::default())));
}

proptest! {
    #[test]
    fn random_bytes_never_panic(
        mut bytes in proptest::collection::vec(any::<u8>(), 0..PROBE_LEN + 10),
        magic in 0usize..6,
    ) {
        // Plant the cheap signatures so that the deeper checks run.
        let len = bytes.len();
        if len > 1024 + 0x3A && magic == 0 {
            bytes[1024 + 0x38] = 0x53;
            bytes[1024 + 0x39] = 0xEF;
        }
        if len > 512 && magic == 1 {
            bytes[510] = 0x55;
            bytes[511] = 0xAA;
        }
        let _ = probe(&bytes);
        let _ = ext_usage(&bytes);
        let _ = has_partition_table(&bytes);
        if let Some(u) = ext_usage(&bytes) {
            prop_assert!((1024..=65536).contains(&u.block_size));
            prop_assert!(u.block_size.is_power_of_two());
        }
    }
}

// ---------------------------------------------------------------------------
// Real mkfs tools on sparse files, each skipped when absent.

mod tools {
    use super::*;
    use std::fs::File;
    use std::io::Read;
    use std::path::Path;
    use std::process::Command;

    const MIB: u64 = 1 << 20;

    fn run(program: &str, args: &[&str], path: &Path) -> Option<String> {
        let out = Command::new(program).args(args).arg(path).output();
        match out {
            Err(_) => {
                eprintln!("{program} not installed; skipping");
                None
            }
            Ok(out) => {
                assert!(
                    out.status.success(),
                    "{program} {args:?}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                Some(String::from_utf8_lossy(&out.stdout).into_owned())
            }
        }
    }

    fn head(path: &Path) -> Vec<u8> {
        let mut buf = Vec::new();
        File::open(path)
            .unwrap()
            .take(PROBE_LEN as u64)
            .read_to_end(&mut buf)
            .unwrap();
        buf
    }

    /// What blkid says, if installed.
    fn blkid_type(path: &Path) -> Option<String> {
        let out = Command::new("blkid")
            .args(["-p", "-o", "value", "-s", "TYPE"])
            .arg(path)
            .output()
            .ok()?;
        Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    /// Formats a fresh sparse file of `mib` MiB with `program args file`
    /// and checks `probe`; returns the file's head for further checks.
    fn format(
        dir: &Path,
        program: &str,
        args: &[&str],
        mib: u64,
        expect: FsKind,
    ) -> Option<(std::path::PathBuf, Vec<u8>)> {
        let path = dir.join(format!("{program}.img"));
        File::create(&path).unwrap().set_len(mib * MIB).unwrap();
        run(program, args, &path)?;
        let h = head(&path);
        assert_eq!(probe(&h), Some(expect), "{program}");
        assert!(!has_partition_table(&h), "{program}");
        if let Some(t) = blkid_type(&path) {
            assert_eq!(t, expect.name(), "blkid on {program}");
        }
        Some((path, h))
    }

    fn dumpe2fs_field(text: &str, field: &str) -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {field} in {text}"))
    }

    #[test]
    fn ext_family_matches_dumpe2fs() {
        let dir = tempfile::tempdir().unwrap();
        for (program, args, kind) in [
            ("mkfs.ext2", vec!["-F", "-q"], FsKind::Ext2),
            ("mkfs.ext3", vec!["-F", "-q"], FsKind::Ext3),
            ("mkfs.ext4", vec!["-F", "-q"], FsKind::Ext4),
            (
                "mkfs.ext4",
                vec!["-F", "-q", "-b", "1024", "-m", "7"],
                FsKind::Ext4,
            ),
            ("mkfs.ext4", vec!["-F", "-q", "-O", "64bit"], FsKind::Ext4),
        ] {
            let Some((path, h)) = format(dir.path(), program, &args, 64, kind) else {
                continue;
            };
            let u = ext_usage(&h).unwrap();
            assert_eq!(u.total_bytes(), 64 * MIB, "{program} {args:?}");
            let Some(text) = run("dumpe2fs", &["-h"], &path) else {
                continue;
            };
            assert_eq!(
                u64::from(u.block_size),
                dumpe2fs_field(&text, "Block size:")
            );
            assert_eq!(u.blocks_total, dumpe2fs_field(&text, "Block count:"));
            assert_eq!(u.blocks_free, dumpe2fs_field(&text, "Free blocks:"));
            assert_eq!(u.reserved, dumpe2fs_field(&text, "Reserved block count:"));
        }
    }

    #[test]
    fn other_filesystems() {
        let dir = tempfile::tempdir().unwrap();
        // mkfs.xfs refuses filesystems under 300 MiB; mkfs.btrfs needs
        // about 114 MiB. Sparse files cost nothing.
        let cases: Vec<(&str, Vec<&str>, u64, FsKind)> = vec![
            ("mkfs.xfs", vec!["-f", "-q"], 512, FsKind::Xfs),
            ("mkfs.btrfs", vec!["-f", "-q"], 256, FsKind::Btrfs),
            ("mkfs.vfat", vec![], 64, FsKind::Vfat),
            ("mkfs.vfat", vec!["-F", "32"], 64, FsKind::Vfat),
            ("mkfs.vfat", vec!["-F", "12"], 8, FsKind::Vfat),
            ("mkfs.ntfs", vec!["-F", "-f", "-q"], 64, FsKind::Ntfs),
            ("mkfs.exfat", vec![], 64, FsKind::Exfat),
            ("mkswap", vec![], 64, FsKind::Swap),
        ];
        for (program, args, mib, kind) in cases {
            if let Some((_, h)) = format(dir.path(), program, &args, mib, kind) {
                assert_eq!(ext_usage(&h), None, "{program}");
            }
        }
    }
}
