//! Fuzz the partition tables of `csi_proxy_host::storage::parse::gpt`: a
//! disk built from the input (its sector size and length, its first and
//! last bytes), either zeros or a valid fresh GPT of ours, with the input's
//! bytes written over it at an offset it chooses and, if it asks, the
//! header and entry-array CRCs recomputed (random bytes never pass a CRC,
//! so without this only the first checks would be reached).
//!
//! Checks: nothing panics; an accepted primary or backup table keeps its
//! partitions inside the usable range, numbered within the array, in
//! order, without overlaps; a grow plan writes only inside the grown disk
//! and, applied to the head, gives a table whose partition ends where the
//! plan says; `resume_fresh` writes only inside the disk.
//!
//! Input: a flags byte, 8 bytes of disk length, 2 bytes of the offset the
//! rest is written at (in the head, or in the tail when flag 0x20 is set).
#![no_main]

use csi_proxy_host::storage::parse::content::Device;
use csi_proxy_host::storage::parse::gpt::{
    self, create_single_partition, grow, head_len, max_partition_end, min_disk_sectors,
    parse_backup, parse_table, resume_fresh, tail_len, Gpt, Guid, Table, Write,
};
use libfuzzer_sys::fuzz_target;

const FOURK: u8 = 0x01;
const FRESH: u8 = 0x02;
const FIX_CRC: u8 = 0x04;
const FORCE_HEADER: u8 = 0x08;
const RAW_SIZE: u8 = 0x10;
const IN_TAIL: u8 = 0x20;

const TYPE: Guid = Guid::from_windows_bytes([0xaf; 16]);

fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn le64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// Makes the header at `at` in `buf` (of a buffer starting at `buf_lba`)
/// self-consistent: signature and basics if asked, then both CRCs.
fn fix_header(buf: &mut [u8], at: usize, lba: u64, buf_lba: u64, ss: usize, force: bool) {
    if at + ss > buf.len() {
        return;
    }
    if force {
        buf[at..at + 8].copy_from_slice(b"EFI PART");
        buf[at + 8..at + 12].copy_from_slice(&0x0001_0000u32.to_le_bytes());
        buf[at + 12..at + 16].copy_from_slice(&92u32.to_le_bytes());
        buf[at + 24..at + 32].copy_from_slice(&lba.to_le_bytes());
    }
    let (entry_lba, count, size) = (le64(buf, at + 72), le32(buf, at + 80), le32(buf, at + 84));
    let bytes = u64::from(count) * u64::from(size);
    if let Some(start) = entry_lba
        .checked_sub(buf_lba)
        .and_then(|l| l.checked_mul(ss as u64))
    {
        if start.saturating_add(bytes) <= buf.len() as u64 {
            let start = start as usize;
            let crc = crc32(&buf[start..start + bytes as usize]);
            buf[at + 88..at + 92].copy_from_slice(&crc.to_le_bytes());
        }
    }
    let hs = le32(buf, at + 12) as usize;
    if (92..=ss).contains(&hs) {
        buf[at + 16..at + 20].fill(0);
        let crc = crc32(&buf[at..at + hs]);
        buf[at + 16..at + 20].copy_from_slice(&crc.to_le_bytes());
    }
}

/// Applies the writes that fall in `buf` (bytes `base..` of the disk).
fn apply(buf: &mut [u8], base: u64, writes: &[Write]) {
    for w in writes {
        let Some(start) = w.offset.checked_sub(base) else {
            continue;
        };
        let end = start + w.bytes.len() as u64;
        if end <= buf.len() as u64 {
            buf[start as usize..end as usize].copy_from_slice(&w.bytes);
        }
    }
}

fn check_table(g: &Gpt, disk_sectors: u64) {
    assert!(
        g.first_usable <= g.last_usable && g.last_usable < disk_sectors,
        "{g:?}"
    );
    let mut last = 0;
    for p in &g.partitions {
        assert!(p.number > last && p.number <= g.entry_count, "{g:?}");
        last = p.number;
        assert!(
            g.first_usable <= p.first_lba && p.first_lba <= p.last_lba,
            "{g:?}"
        );
        assert!(p.last_lba <= g.last_usable, "{g:?}");
        assert!(!p.type_guid.is_nil());
    }
    for (i, a) in g.partitions.iter().enumerate() {
        for b in &g.partitions[i + 1..] {
            assert!(
                a.last_lba < b.first_lba || b.last_lba < a.first_lba,
                "overlap {g:?}"
            );
        }
    }
}

fn check_writes(writes: &[Write], disk_bytes: u64) {
    for w in writes {
        let end = w.offset.checked_add(w.bytes.len() as u64).unwrap();
        assert!(end <= disk_bytes, "{w:?} beyond {disk_bytes}");
    }
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 11 {
        return;
    }
    let flags = data[0];
    let ss: u32 = if flags & FOURK != 0 { 4096 } else { 512 };
    let ssz = ss as usize;
    let raw = u64::from_le_bytes(data[1..9].try_into().unwrap());
    let at = usize::from(u16::from_le_bytes([data[9], data[10]]));
    let over = &data[11..];
    let min = min_disk_sectors(ss);
    let disk_sectors = if flags & RAW_SIZE != 0 {
        raw
    } else if flags & FRESH != 0 {
        min + raw % (1 << 24)
    } else {
        raw % (1 << 24)
    };
    let (hl, tl) = (head_len(ss), tail_len(ss));
    let disk_bytes = disk_sectors.saturating_mul(u64::from(ss));
    let tail_base = disk_bytes.saturating_sub(tl as u64);
    let mut head = vec![0u8; hl];
    let mut tail = vec![0u8; tl];
    if flags & FRESH != 0 {
        let (dg, pg) = (Guid::from_windows_bytes([1; 16]), Guid::from_windows_bytes([2; 16]));
        if let Ok(w) = create_single_partition(ss, disk_sectors, dg, pg, TYPE, "fuzz") {
            check_writes(&w, disk_bytes);
            apply(&mut head, 0, &w);
            apply(&mut tail, tail_base, &w);
        }
    }
    let buf = if flags & IN_TAIL != 0 {
        &mut tail
    } else {
        &mut head
    };
    let at = at % buf.len();
    let n = over.len().min(buf.len() - at);
    buf[at..at + n].copy_from_slice(&over[..n]);
    if flags & FIX_CRC != 0 {
        let force = flags & FORCE_HEADER != 0;
        fix_header(&mut head, ssz, 1, 0, ssz, force);
        let backup = disk_sectors.saturating_sub(1);
        let tail_lba = tail_base / u64::from(ss);
        fix_header(&mut tail, tl - ssz, backup, tail_lba, ssz, force);
    }

    // A short head is refused, never read past.
    let _ = parse_table(&head[..hl / 2], ss, disk_sectors);
    if disk_sectors > 0 {
        if let Ok(b) = parse_backup(&tail, ss, disk_sectors - 1) {
            check_table(&b, disk_sectors);
        }
    }
    let dev = Device::new(&head, &tail, disk_bytes);
    if let Some(w) = resume_fresh(&dev, ss, disk_sectors, TYPE, "fuzz", Guid::from_windows_bytes([3; 16])) {
        check_writes(&w, disk_bytes);
    }
    let Ok(Table::Gpt(g)) = parse_table(&head, ss, disk_sectors) else {
        return;
    };
    check_table(&g, disk_sectors);
    let grown = disk_sectors.saturating_add(raw >> 40);
    for p in g.partitions.iter().take(4) {
        if let Ok(end) = max_partition_end(&g, ss, p.number, grown) {
            assert!(
                end >= p.first_lba && end < grown,
                "{end} for {p:?} in {grown}"
            );
        }
        let Ok(plan) = grow(&g, &head, ss, grown, p.number, None) else {
            continue;
        };
        assert_eq!(plan.old_last_lba, p.last_lba);
        assert!(plan.new_last_lba >= plan.old_last_lba && plan.new_last_lba < grown);
        let grown_bytes = grown.saturating_mul(u64::from(ss));
        check_writes(&plan.writes, grown_bytes);
        let mut after = head.clone();
        apply(&mut after, 0, &plan.writes);
        if let Ok(Table::Gpt(g2)) = parse_table(&after, ss, grown) {
            check_table(&g2, grown);
            let q = g2.partition(p.number).expect("the grown partition");
            assert_eq!(q.last_lba, plan.new_last_lba);
        }
    }
    if g.partitions.is_empty() {
        if let Ok(w) = gpt::add_single_partition(&g, ss, disk_sectors, Guid::from_windows_bytes([4; 16]), TYPE, "x") {
            check_writes(&w, disk_bytes);
        }
    }
});
