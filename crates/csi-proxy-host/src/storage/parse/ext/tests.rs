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
    let mut h = vec![0u8; SUPERBLOCK_END];
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
    assert_eq!(ext_usage(&vec![0u8; SUPERBLOCK_END]), None);
    // Only the first 2048 bytes are needed.
    assert!(ext_usage(&ext_head(&ExtSb::default())[..2048]).is_some());
}

#[test]
fn no_superblock_no_usage() {
    let bad = ExtSb {
        log_block: 7,
        ..Default::default()
    };
    assert_eq!(ext_usage(&ext_head(&bad)), None, "block size out of range");
    assert_eq!(ext_usage(&ext_head(&ExtSb::default())[..1024 + 0x38]), None);
}

proptest! {
    #[test]
    fn random_bytes_never_panic(
        mut bytes in proptest::collection::vec(any::<u8>(), 0..SUPERBLOCK_END + 10),
        magic: bool,
    ) {
        // Plant the magic so that the deeper reads run.
        if bytes.len() > 1024 + 0x3A && magic {
            bytes[1024 + 0x38] = 0x53;
            bytes[1024 + 0x39] = 0xEF;
        }
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

    fn dumpe2fs_field(text: &str, field: &str) -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {field} in {text}"))
    }

    #[test]
    fn ext_family_matches_dumpe2fs() {
        let dir = tempfile::tempdir().unwrap();
        for (program, args) in [
            ("mkfs.ext2", vec!["-F", "-q"]),
            ("mkfs.ext3", vec!["-F", "-q"]),
            ("mkfs.ext4", vec!["-F", "-q"]),
            ("mkfs.ext4", vec!["-F", "-q", "-b", "1024", "-m", "7"]),
            ("mkfs.ext4", vec!["-F", "-q", "-O", "64bit"]),
        ] {
            let path = dir.path().join("ext.img");
            File::create(&path).unwrap().set_len(64 * MIB).unwrap();
            if run(program, &args, &path).is_none() {
                continue;
            }
            let mut h = Vec::new();
            File::open(&path)
                .unwrap()
                .take(SUPERBLOCK_END as u64)
                .read_to_end(&mut h)
                .unwrap();
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
}
