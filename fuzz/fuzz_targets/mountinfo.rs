//! Fuzz the mountinfo parser (`csi_proxy_host::storage::parse::mountinfo`)
//! and the bounded reader over it (`storage::linux::mountinfo::scan`):
//! arbitrary bytes as a table.
//!
//! Checks: nothing panics; the whole-table parse and the streamed scan
//! agree (same mounts, or both refuse); every mount point is non-empty
//! and holds no NUL; a mount written back with the kernel's escapes
//! parses to itself; a scan with a budget either reads the same mounts or
//! refuses, never returns fewer.
#![no_main]

use csi_proxy_host::storage::linux::mountinfo::scan;
use csi_proxy_host::storage::parse::mountinfo::{parse, parse_line, unescape, Mount};
use libfuzzer_sys::fuzz_target;

fn escape(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for &c in b {
        if matches!(c, b' ' | b'\t' | b'\n' | b'\\') {
            out.extend_from_slice(format!("\\{c:03o}").as_bytes());
        } else {
            out.push(c);
        }
    }
    out
}

fn line_of(m: &Mount) -> Vec<u8> {
    let mut l = format!("{} 1 {}:{} / ", m.id, m.major, m.minor).into_bytes();
    l.extend_from_slice(&escape(&m.mount_point));
    l.extend_from_slice(b" rw");
    if let Some(s) = m.shared {
        l.extend_from_slice(format!(" shared:{s}").as_bytes());
    }
    if let Some(s) = m.master {
        l.extend_from_slice(format!(" master:{s}").as_bytes());
    }
    l.extend_from_slice(b" - ");
    l.extend_from_slice(&escape(m.fs_type.as_bytes()));
    l.extend_from_slice(b" src rw");
    l
}

fuzz_target!(|data: &[u8]| {
    let _ = unescape(data);
    let whole = parse(data);
    let mut streamed = Vec::new();
    let mut budget = u64::MAX;
    let s = scan(data, &mut budget, |m| streamed.push(m));
    match (&whole, &s) {
        (Ok(w), Ok(())) => assert_eq!(w, &streamed),
        (Err(_), Err(_)) => {}
        _ => panic!("parse {whole:?} but scan {s:?}"),
    }
    let Ok(mounts) = whole else { return };
    for m in &mounts {
        assert!(!m.mount_point.is_empty() && !m.mount_point.contains(&0));
        // fs_type came through a lossy decode; only compare what survives.
        if !m.fs_type.contains('\u{fffd}') && !m.fs_type.is_empty() {
            let again = parse_line(&line_of(m)).expect("a written-back line");
            assert_eq!(&again, m);
        }
    }
    // A budget short of the table refuses; one as long as it reads it.
    let len = data.len() as u64;
    let mut short = len / 2;
    let mut got = Vec::new();
    if scan(data, &mut short, |m| got.push(m)).is_ok() {
        assert!(got.len() == mounts.len(), "a short budget returned {got:?}");
    }
    let mut exact = len;
    let mut got = Vec::new();
    scan(data, &mut exact, |m| got.push(m)).expect("the table fits its own length");
    assert_eq!(got, mounts);
});
