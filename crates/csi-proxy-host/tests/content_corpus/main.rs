//! `storage::parse::content` against `blkid -p` over a corpus of real
//! images, made by the real tools Debian packages (mkfs.*, cryptsetup,
//! lvm2, bcache-tools, drbd-utils, sfdisk, ...): for every image, both must
//! find something, every `TYPE`/`PTTYPE` blkid prints must be among the
//! names `identify` returns, and every name `identify` returns must be
//! blkid's or one the case expects (a format blkid reports only one of,
//! or a disagreement explained in [`KNOWN`]).
//!
//! With `CSI_PROXY_SAMPLE_IMAGES` naming a directory of images (`*.img`,
//! or `*.img.xz` when xz is installed: for example util-linux's
//! tests/ts/blkid/images-fs and images-pt, libblkid's own samples, made
//! by the formats' tools and by other systems), each is compared the same
//! way; [`SAMPLE_KNOWN`] explains the differences.
//!
//! A case whose tool is missing is skipped with a message, unless `CI` is
//! set and the tool's package is in scripts/setup.sh's apt list: then it
//! fails. Cases that need a block device (LVM, md) run as root on loop
//! devices they create, and remove what they made (loop devices, volume
//! groups) on every path, panics included; they never touch a device they
//! did not create.
#![cfg(target_os = "linux")]

mod cases;
mod ctx;
mod near_miss;

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use csi_proxy_host::storage::parse::content::{identify, read_regions, Device};

use cases::{cases, Case};
use ctx::{find_tool, is_root, run, setup_packages, Ctx};

/// Where blkid's answer differs from ours by design or by blkid version:
/// (case, name, why). A name listed here may be missing on either side.
const KNOWN: &[(&str, &str, &str)] = &[
    (
        "exfat",
        "dos",
        "libblkid 2.38's dos probe takes an exFAT boot sector for an empty MBR; \
         later versions skip exFAT boot sectors, as we do",
    ),
    (
        "unixware-label-in-sector-29",
        "unixware",
        "libblkid 2.38 looks for the label's magic at byte 29174 (its offset macro \
         subtracts kilobytes as bytes), not 4 bytes into sector 29 where the label \
         puts it; we look at both",
    ),
    (
        "gpt-backup-only",
        "gpt",
        "libblkid needs the protective MBR to look for a GPT; the backup header \
         at the end still describes the partitions, so we report it",
    ),
];

/// Sample images (by file name without `.img.xz`) where blkid 2.38 and we
/// differ: (image, name, why).
const SAMPLE_KNOWN: &[(&str, &str, &str)] = &[
    ("bcachefs", "bcachefs", NEWER_THAN_238),
    ("bcachefs-2", "bcachefs", NEWER_THAN_238),
    ("bcachefs-3", "bcachefs", NEWER_THAN_238),
    ("cs_fvault2", "cs_fvault2", NEWER_THAN_238),
    (
        "bsd",
        "bsd",
        "libblkid reports a BSD disklabel only when asked for partition \
         details (blkid -p asks for types only); we report it",
    ),
    (
        "erofs-minix-magic",
        "erofs",
        "an EROFS image whose inode count reads as a minix magic: libblkid 2.38 \
         finds both and answers \"ambivalent\" (later versions check for EROFS, \
         as we do)",
    ),
    (
        "swap-luks",
        "swap",
        "a swap signature left inside a LUKS header's unused space: libblkid \
         stops at the first crypto or RAID member; we report every signature",
    ),
    (
        "tuxonice",
        "swap",
        "a TuxOnIce image keeps the swap signature in its first page: libblkid \
         reports the first match only (in this order); we report both",
    ),
];

const NEWER_THAN_238: &str = "libblkid learned this format after 2.38 (Debian 12's)";

/// `TYPE` and `PTTYPE` of `blkid -p -o export`.
fn blkid_names(target: &Path) -> Result<BTreeSet<String>, String> {
    let exe = find_tool("blkid").ok_or("blkid: not found")?;
    let out = Command::new(exe)
        .args(["-p", "-o", "export"])
        .arg(target)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| e.to_string())?;
    // 2: nothing found. Anything else but 0 is an error (ambivalent
    // results included: blkid then prints nothing).
    match out.status.code() {
        Some(0) | Some(2) => {}
        _ => {
            return Err(format!(
                "blkid -p {}: {}: {}",
                target.display(),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            l.strip_prefix("TYPE=")
                .or_else(|| l.strip_prefix("PTTYPE="))
                .map(str::to_string)
        })
        .collect())
}

/// What `identify` names on `target`, read as the backends read it.
fn our_names(target: &Path) -> Result<BTreeSet<String>, String> {
    let mut f = File::open(target).map_err(|e| format!("open {}: {e}", target.display()))?;
    let size = f.seek(SeekFrom::End(0)).map_err(|e| e.to_string())?;
    let (head, tail) =
        read_regions(size, |off, buf| f.read_exact_at(buf, off)).map_err(|e| e.to_string())?;
    Ok(identify(&Device::new(&head, &tail, size))
        .iter()
        .map(|found| found.name.to_string())
        .collect())
}

fn known(case: &str, name: &str) -> bool {
    KNOWN.iter().any(|&(c, n, _)| c == case && n == name)
}

/// What the case's image shows: blkid's names and ours, or why it could
/// not be compared.
fn compare(case: &Case, ctx: &Ctx) -> Result<(BTreeSet<String>, BTreeSet<String>), String> {
    let theirs = blkid_names(&ctx.target)?;
    let ours = our_names(&ctx.target)?;
    let mut problems = Vec::new();
    if ours.is_empty() {
        problems.push("we find nothing".to_string());
    }
    if theirs.is_empty() && !case.expect.iter().all(|e| known(case.name, e)) {
        problems.push("blkid finds nothing".to_string());
    }
    for e in case.expect {
        if !ours.contains(*e) {
            problems.push(format!("we miss {e}"));
        }
    }
    for t in &theirs {
        if !ours.contains(t) && !known(case.name, t) {
            problems.push(format!("blkid names {t}, we do not"));
        }
    }
    for o in &ours {
        if !theirs.contains(o) && !case.expect.contains(&o.as_str()) {
            problems.push(format!("we name {o}, blkid does not"));
        }
    }
    if problems.is_empty() {
        Ok((theirs, ours))
    } else {
        Err(format!(
            "{} (blkid: {theirs:?}, ours: {ours:?})",
            problems.join("; ")
        ))
    }
}

#[test]
fn identify_agrees_with_blkid_on_real_images() {
    if find_tool("blkid").is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "blkid (util-linux) is missing"
        );
        eprintln!("skip: blkid is missing");
        return;
    }
    let ci = std::env::var_os("CI").is_some();
    let listed = setup_packages();
    let root = is_root();
    let mut failures = Vec::new();
    let mut table = Vec::new();
    for case in cases() {
        let missing: Vec<_> = case
            .tools
            .iter()
            .filter(|t| find_tool(t).is_none())
            .collect();
        if !missing.is_empty() {
            let msg = format!("{}: {missing:?} missing ({})", case.name, case.package);
            if ci && listed.contains(case.package) {
                failures.push(format!("{msg}, which scripts/setup.sh installs"));
            } else {
                table.push(format!("{:<18} skipped: {msg}", case.name));
            }
            continue;
        }
        if case.block && !root {
            table.push(format!("{:<18} skipped: needs root", case.name));
            continue;
        }
        let mut ctx = Ctx::new();
        match (case.make)(&mut ctx) {
            Ok(()) => {}
            Err(e) if e.starts_with("skip:") => {
                table.push(format!("{:<18} {e}", case.name));
                continue;
            }
            Err(e) => {
                failures.push(format!("{}: making the image: {e}", case.name));
                continue;
            }
        }
        match compare(&case, &ctx) {
            Ok((theirs, ours)) => {
                let theirs = format!("{theirs:?}");
                table.push(format!(
                    "{:<18} blkid {theirs:<32} ours {ours:?}",
                    case.name
                ))
            }
            Err(e) => failures.push(format!("{}: {e}", case.name)),
        }
    }
    eprintln!("{}", table.join("\n"));
    for (case, name, why) in KNOWN {
        eprintln!("known difference: {case}: {name}: {why}");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn identify_agrees_with_blkid_on_sample_images() {
    let Some(dir) = std::env::var_os("CSI_PROXY_SAMPLE_IMAGES") else {
        eprintln!("skip: CSI_PROXY_SAMPLE_IMAGES is not set");
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut entries: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("CSI_PROXY_SAMPLE_IMAGES")
        .map(|e| e.expect("entry").path())
        .collect();
    entries.sort();
    let mut failures = Vec::new();
    let mut table = Vec::new();
    for path in entries {
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        let (name, img) = if let Some(stem) = file.strip_suffix(".img.xz") {
            let out = tmp.path().join(stem);
            let data = match run("xz", &["-dc"], &[&path], "") {
                Ok(_) => {
                    Command::new(find_tool("xz").unwrap())
                        .args(["-dc"])
                        .arg(&path)
                        .output()
                        .expect("xz")
                        .stdout
                }
                Err(e) => {
                    table.push(format!("{stem:<40} skipped: {e}"));
                    continue;
                }
            };
            std::fs::write(&out, data).expect("write sample");
            (stem.to_string(), out)
        } else if let Some(stem) = file.strip_suffix(".img") {
            (stem.to_string(), path.clone())
        } else {
            continue;
        };
        let theirs = match blkid_names(&img) {
            Ok(t) => t,
            Err(e) => {
                table.push(format!("{name:<40} blkid failed: {e}"));
                BTreeSet::new()
            }
        };
        let ours = our_names(&img).expect("read sample");
        // libblkid reports one of UDF and ISO 9660 on a bridge disc.
        let bridge = |n: &str| n == "iso9660" && theirs.contains("udf");
        let known =
            |n: &str| bridge(n) || SAMPLE_KNOWN.iter().any(|&(i, k, _)| i == name && k == n);
        let missed: Vec<_> = theirs
            .iter()
            .filter(|t| !ours.contains(*t) && !known(t))
            .collect();
        let extra: Vec<_> = ours
            .iter()
            .filter(|o| !theirs.contains(*o) && !known(o))
            .collect();
        let shown = format!("{theirs:?}");
        table.push(format!("{name:<40} blkid {shown:<32} ours {ours:?}"));
        if !missed.is_empty() || !extra.is_empty() {
            failures.push(format!(
                "{name}: blkid {theirs:?}, ours {ours:?} (we miss {missed:?}, we add {extra:?})"
            ));
        }
        let _ = std::fs::remove_file(tmp.path().join(&name));
    }
    eprintln!("{}", table.join("\n"));
    for (img, name, why) in SAMPLE_KNOWN {
        eprintln!("known difference: {img}: {name}: {why}");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
