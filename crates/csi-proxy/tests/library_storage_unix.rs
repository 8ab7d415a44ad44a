//! Library mode's finer partitioning steps on a real disk (a loop device;
//! needs root, skipped otherwise): IsDiskInitialized, InitializeDisk,
//! BasicPartitionsExist, CreateBasicPartition through csi_proxy's C ABI,
//! checked with the kernel's view of the disk (and `sfdisk` when present).
#![cfg(target_os = "linux")]

#[path = "../../csi-proxy-ffi/tests/ffi/mod.rs"]
mod ffi;
mod storage;

use csi_proxy::extras::{BoolResponse, DiskNumberRequest, EmptyResponse};
use csi_proxy_api::volume::v2alpha1 as vol;
use storage::{can_run, tool, LoopDisk, MIB};

fn ask(lib: &ffi::Lib, method: &str, n: u32) -> bool {
    let r: BoolResponse = lib
        .ok("disk", method, &DiskNumberRequest { disk_number: n })
        .unwrap_or_else(|e| panic!("{method} {n}: {e:?}"));
    r.value
}

fn step(lib: &ffi::Lib, method: &str, n: u32) -> Result<(), (i32, String)> {
    lib.ok::<_, EmptyResponse>("disk", method, &DiskNumberRequest { disk_number: n })
        .map(drop)
}

fn volumes(lib: &ffi::Lib, n: u32) -> Vec<String> {
    let r: vol::ListVolumesOnDiskResponse = lib
        .ok(
            "volume",
            "ListVolumesOnDisk",
            &vol::ListVolumesOnDiskRequest {
                disk_number: n,
                partition_number: 0,
            },
        )
        .unwrap();
    r.volume_ids
}

/// The partition table type sfdisk reads (`gpt`), if sfdisk is installed.
fn label(dev: &str) -> Option<String> {
    let out = std::process::Command::new(tool("sfdisk")?)
        .args(["--dump", dev])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines()
        .find_map(|l| l.strip_prefix("label: "))
        .map(str::to_string)
}

/// A library host over `<tmp>/kubelet` and a 64 MiB loop disk in `<tmp>`;
/// bound in this order, they drop disk first, directory last.
fn library_with_a_disk() -> (tempfile::TempDir, ffi::Lib, LoopDisk) {
    let dir = tempfile::tempdir().unwrap();
    let kubelet = dir.path().join("kubelet");
    std::fs::create_dir(&kubelet).unwrap();
    let lib = ffi::Lib::open(&ffi::options(&kubelet.display().to_string())).unwrap();
    let disk = LoopDisk::new(dir.path(), 64 * MIB);
    (dir, lib, disk)
}

#[test]
fn the_finer_steps_initialize_then_partition_a_raw_disk() {
    if !can_run() {
        return;
    }
    let (_dir, lib, disk) = library_with_a_disk();
    let n = disk.number;

    assert!(!ask(&lib, "IsDiskInitialized", n));
    assert!(!ask(&lib, "BasicPartitionsExist", n));
    // No partition on a raw disk: it is initialised first, explicitly.
    assert_eq!(step(&lib, "CreateBasicPartition", n).unwrap_err().0, 9);
    assert!(!ask(&lib, "IsDiskInitialized", n));

    step(&lib, "InitializeDisk", n).unwrap();
    assert!(ask(&lib, "IsDiskInitialized", n));
    assert!(!ask(&lib, "BasicPartitionsExist", n));
    assert!(volumes(&lib, n).is_empty());
    if let Some(l) = label(&disk.dev) {
        assert_eq!(l, "gpt");
    }
    // Again: the table stays (nothing is rewritten).
    let before = std::fs::read(&disk.file).unwrap();
    step(&lib, "InitializeDisk", n).unwrap();
    assert!(std::fs::read(&disk.file).unwrap() == before);

    step(&lib, "CreateBasicPartition", n).unwrap();
    assert!(ask(&lib, "BasicPartitionsExist", n));
    let vs = volumes(&lib, n);
    assert_eq!(vs.len(), 1, "{vs:?}");
    assert!(std::path::Path::new(&format!("/sys/block/{}/{}p1", disk.name, disk.name)).exists());
    // Again: still one partition.
    step(&lib, "CreateBasicPartition", n).unwrap();
    assert_eq!(volumes(&lib, n), vs);
}

#[test]
fn a_filesystem_without_a_table_is_not_initialised_over() {
    if !can_run() {
        return;
    }
    let Some(mkfs) = tool("mkfs.ext4") else {
        eprintln!("skipping: mkfs.ext4 is not installed");
        return;
    };
    let (_dir, lib, disk) = library_with_a_disk();
    let st = std::process::Command::new(mkfs)
        .args(["-q", "-F", &disk.dev])
        .status()
        .unwrap();
    assert!(st.success());
    let before = std::fs::read(&disk.file).unwrap();
    assert!(!ask(&lib, "IsDiskInitialized", disk.number));
    let (code, message) = step(&lib, "InitializeDisk", disk.number).unwrap_err();
    assert_eq!(code, 9, "{message}");
    assert!(message.contains("ext4"), "{message}");
    assert!(
        std::fs::read(&disk.file).unwrap() == before,
        "the disk was written"
    );
}

/// Unknown disks: NotFound, as every disk operation answers.
#[test]
fn unknown_disks_are_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let lib = ffi::Lib::open(&ffi::options(&dir.path().display().to_string())).unwrap();
    for method in ["IsDiskInitialized", "BasicPartitionsExist"] {
        let r = lib.ok::<_, BoolResponse>(
            "disk",
            method,
            &DiskNumberRequest {
                disk_number: 4_000_000,
            },
        );
        assert_eq!(r.unwrap_err().0, 5, "{method}");
    }
    for method in ["InitializeDisk", "CreateBasicPartition"] {
        assert_eq!(step(&lib, method, 4_000_000).unwrap_err().0, 5, "{method}");
    }
}
