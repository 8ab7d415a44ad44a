//! Tests of the Windows backend against the real OS. CI runs them under
//! wine, so they assert what wine implements and accept "not supported"
//! where wine lacks a call (see docs/windows-storage.md for the list).

use super::errors::{kind_of, Kind};
use super::mounts::Mounts;
use super::wmi::{WmiWorker, CIMV2_NAMESPACE, STORAGE_NAMESPACE};
use super::{win32, WindowsStorage};
use crate::confined::{Confined, Located};
use crate::path::{Flavor, PathPolicy};
use crate::storage::{At, NotMounted, StorageBackend, VolumeId};
use crate::Error;

const UNKNOWN_VOLUME: &str = "\\\\?\\Volume{0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0}\\";

/// The volume of drive C:.
fn c_volume() -> VolumeId {
    let name = win32::volume_name_for_mount_point("C:\\").unwrap();
    VolumeId::parse(&name).unwrap()
}

/// A scratch directory on C: and the confined filesystem whose root it is.
struct Scratch {
    dir: std::path::PathBuf,
    fs: Confined,
}

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("csi-proxy-storage-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let root = dir.to_string_lossy().into_owned();
        assert!(
            root.starts_with("C:\\") || root.starts_with("c:\\"),
            "{root}"
        );
        let policy = PathPolicy::new(Flavor::Windows, [root]).unwrap();
        Scratch {
            dir,
            fs: Confined::new(policy),
        }
    }

    fn at(&self, rel: &str) -> Located {
        let p = format!("{}\\{rel}", self.dir.display());
        self.fs.locate(&p).unwrap()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn win32_errors_sort_into_kinds() {
    assert_eq!(kind_of(2), Kind::NotFound);
    assert_eq!(kind_of(5), Kind::PermissionDenied);
    assert_eq!(kind_of(87), Kind::InvalidArgument);
    assert_eq!(kind_of(145), Kind::FailedPrecondition);
    assert_eq!(kind_of(50), Kind::Unsupported);
    assert_eq!(kind_of(183), Kind::AlreadyExists);
    assert_eq!(kind_of(9999), Kind::Internal);
    let e = super::errors::win32("IOCTL_X", "disk 3", std::io::Error::from_raw_os_error(2));
    assert!(
        matches!(&e, Error::NotFound(m) if m.starts_with("IOCTL_X disk 3: ")),
        "{e}"
    );
}

#[test]
fn volume_enumeration_finds_the_c_volume() {
    let s = WindowsStorage::new();
    let all = s.volumes().unwrap();
    assert!(all.contains(&c_volume()), "{all:?}");
}

#[test]
fn c_volume_is_formatted_and_has_stats() {
    let s = WindowsStorage::new();
    let c = c_volume();
    assert!(s.is_formatted(&c).unwrap());
    let st = s.volume_stats(&c).unwrap();
    assert!(
        st.total_bytes > 0 && st.used_bytes <= st.total_bytes,
        "{st:?}"
    );
    assert!(!s.wmi().started(), "a Win32 call started WMI");
}

#[test]
fn unknown_volumes_are_not_found() {
    let s = WindowsStorage::new();
    let v = VolumeId::parse(UNKNOWN_VOLUME).unwrap();
    let e = s.volume_disk(&v).unwrap_err();
    assert!(matches!(e, Error::NotFound(_)), "{e}");
    let e = s.flush(&v).unwrap_err();
    assert!(matches!(e, Error::NotFound(_)), "{e}");
    for r in [s.is_formatted(&v).map(drop), s.volume_stats(&v).map(drop)] {
        let e = r.unwrap_err();
        assert!(matches!(e, Error::NotFound(_)), "{e}");
    }
}

#[test]
fn closest_volume_of_a_directory_on_c_is_the_c_volume() {
    let scratch = Scratch::new("closest");
    std::fs::create_dir_all(scratch.dir.join("a\\b")).unwrap();
    let s = WindowsStorage::new();
    let c = c_volume();
    assert_eq!(
        s.closest_volume(&scratch.fs, &scratch.at("a\\b")).unwrap(),
        c
    );
    // A path that does not exist (yet) walks up to an existing parent.
    assert_eq!(
        s.closest_volume(&scratch.fs, &scratch.at("a\\missing\\deeper"))
            .unwrap(),
        c
    );
}

#[test]
fn plain_directories_are_not_mount_points() {
    let scratch = Scratch::new("plain");
    std::fs::create_dir_all(scratch.dir.join("dir")).unwrap();
    let s = WindowsStorage::new();
    let c = c_volume();
    let dir = scratch.at("dir");
    assert_eq!(
        s.volume_at(&scratch.fs, &dir).unwrap(),
        At::NotMounted(NotMounted::PlainDirectory)
    );
    assert_eq!(
        s.volume_at(&scratch.fs, &scratch.at("missing")).unwrap(),
        At::NotMounted(NotMounted::Missing)
    );
    assert_eq!(
        s.volume_at(&scratch.fs, &scratch.at(r"missing\deeper"))
            .unwrap(),
        At::NotMounted(NotMounted::MissingParent)
    );
    std::fs::write(scratch.dir.join("file"), b"x").unwrap();
    assert_eq!(
        s.volume_at(&scratch.fs, &scratch.at("file")).unwrap(),
        At::NotMounted(NotMounted::File)
    );
    // Unmounting what is not mounted is a no-op and leaves the directory.
    s.unmount(&c, &scratch.fs, &dir).unwrap();
    assert!(scratch.dir.join("dir").is_dir());
}

#[test]
fn host_volumes_are_never_mounted_into_the_roots() {
    let scratch = Scratch::new("mount");
    let s = WindowsStorage::new();
    let c = c_volume();
    // C: has a drive letter: the host's. Refused before anything changes.
    let e = s.mount(&c, &scratch.fs, &scratch.at("mnt")).unwrap_err();
    assert!(
        matches!(&e, Error::FailedPrecondition(m) if m.contains("in use by the host")),
        "{e}"
    );
    assert!(!scratch.dir.join("mnt").exists());
    // Formatting it, or taking its disk offline, is refused too.
    let e = s.format(&c).unwrap_err();
    assert!(matches!(e, Error::FailedPrecondition(_)), "{e}");
    let disk = s.volume_disk(&c).unwrap();
    let s = WindowsStorage::new().with_roots(scratch.fs.policy().clone());
    let e = s.set_disk_online(disk, false).unwrap_err();
    assert!(matches!(e, Error::FailedPrecondition(_)), "{e}");
    let e = s.partition_disk(disk).unwrap_err();
    assert!(matches!(e, Error::FailedPrecondition(_)), "{e}");
}

#[test]
fn mount_targets_are_checked_before_mounting() {
    let scratch = Scratch::new("targets");
    let s = Mounts::default();
    let unknown = VolumeId::parse(UNKNOWN_VOLUME).unwrap();
    // A file is never a mount target (an unknown volume: refused first as
    // missing, so use the target check directly through the confined layer).
    std::fs::write(scratch.dir.join("file"), b"x").unwrap();
    let e = scratch.fs.create_dir(&scratch.at("file")).unwrap_err();
    assert!(matches!(e, Error::FailedPrecondition(_)), "{e}");
    let e = s
        .mount(&unknown, &scratch.fs, &scratch.at("m"))
        .unwrap_err();
    assert!(matches!(e, Error::NotFound(_)), "{e}");
}

#[test]
fn physical_drive_0_has_a_size_and_unknown_disks_are_not_found() {
    let s = WindowsStorage::new();
    assert!(s.disk_size(0).unwrap() > 0);
    assert!(s.disks().unwrap().contains(&0));
    for r in [
        s.disk_size(4000).map(drop),
        s.disk_online(4000).map(drop),
        s.set_disk_online(4000, true),
        s.partition_disk(4000),
        s.volumes_on_disk(4000, None).map(drop),
    ] {
        let e = r.unwrap_err();
        assert!(
            matches!(e, Error::NotFound(ref m) if m.contains("disk 4000")),
            "{e}"
        );
    }
    assert!(!s.wmi().started(), "an IOCTL call started WMI");
}

#[test]
fn disk_ids_and_state_of_disk_0() {
    let s = WindowsStorage::new();
    // Wine answers page83 with ERROR_NOT_SUPPORTED: empty strings.
    let ids = s.disk_ids().unwrap();
    assert!(ids.contains_key(&0), "{ids:?}");
    match s.disk_online(0) {
        Ok(online) => assert!(online, "the system disk is online"),
        // Wine: GET_DISK_ATTRIBUTES is not supported.
        Err(e) => assert!(matches!(e, Error::Unimplemented(_)), "{e}"),
    }
}

#[test]
fn volume_disk_and_volumes_on_disk_agree_for_c() {
    let s = WindowsStorage::new();
    let c = c_volume();
    // Windows: from the volume's disk extents; wine reports no extents,
    // and the device number is used instead.
    let d = s.volume_disk(&c).unwrap();
    let on = s.volumes_on_disk(d, None).unwrap();
    assert!(on.contains(&c), "{on:?}");
    let e = s.volumes_on_disk(0, Some(4000)).unwrap_err();
    assert!(matches!(e, Error::NotFound(_)), "{e}");
}

#[test]
fn wmi_worker_queries_cimv2_and_the_storage_namespace() {
    let w = WmiWorker::new(CIMV2_NAMESPACE);
    assert!(!w.started());
    let captions = w
        .call(|wmi| {
            let rows = wmi.query("SELECT Caption FROM Win32_OperatingSystem")?;
            rows.iter()
                .map(|r| r.string("Caption"))
                .collect::<crate::Result<Vec<_>>>()
        })
        .unwrap();
    assert!(w.started());
    assert_eq!(captions.len(), 1, "{captions:?}");
    assert!(captions[0].as_deref().is_some_and(|c| !c.is_empty()));
    let disks = w
        .call(|wmi| {
            let rows = wmi.query("SELECT Index, Size FROM Win32_DiskDrive")?;
            rows.iter()
                .map(|r| Ok((r.u32("Index")?, r.u64("Size")?)))
                .collect::<crate::Result<Vec<_>>>()
        })
        .unwrap();
    assert!(!disks.is_empty());
    // The same warm worker, another namespace. Wine has no MSFT_* classes
    // and answers 0 rows; Windows has at least the system disk.
    let n = w
        .call(|wmi| {
            Ok(wmi
                .query_in(STORAGE_NAMESPACE, "SELECT Number FROM MSFT_Disk")?
                .len())
        })
        .unwrap();
    let _ = n;
    // A job that panics does not kill the worker.
    let e = w
        .call(|_| -> crate::Result<()> { panic!("boom") })
        .unwrap_err();
    assert!(matches!(e, Error::Internal(_)), "{e}");
    let again = w
        .call(|wmi| {
            Ok(wmi
                .query("SELECT Caption FROM Win32_OperatingSystem")?
                .len())
        })
        .unwrap();
    assert_eq!(again, 1);
}

#[test]
fn a_long_wmi_call_does_not_hold_up_the_next_one() {
    use std::sync::mpsc;
    use std::time::{Duration, Instant};
    let w = std::sync::Arc::new(WmiWorker::new(CIMV2_NAMESPACE).with_max_threads(2));
    let (release, wait) = mpsc::channel::<()>();
    let (started_tx, started) = mpsc::channel::<()>();
    let long = {
        let w = w.clone();
        std::thread::spawn(move || {
            w.call(move |_| {
                started_tx.send(()).unwrap();
                wait.recv_timeout(Duration::from_secs(30)).unwrap();
                Ok(())
            })
        })
    };
    started.recv().unwrap();
    // The first thread is busy: a second one answers, with its own COM.
    let t = Instant::now();
    let rows = w
        .call(|wmi| {
            Ok(wmi
                .query("SELECT Caption FROM Win32_OperatingSystem")?
                .len())
        })
        .unwrap();
    assert_eq!(rows, 1);
    assert!(t.elapsed() < Duration::from_secs(20));
    assert_eq!(w.threads(), 2);
    release.send(()).unwrap();
    long.join().unwrap().unwrap();
    // At most two: a third call while both are busy waits for one.
    let (release2, wait2) = mpsc::channel::<()>();
    let (started2_tx, started2) = mpsc::channel::<()>();
    let busy = {
        let w = w.clone();
        std::thread::spawn(move || {
            w.call(move |_| {
                started2_tx.send(()).unwrap();
                wait2.recv().unwrap();
                Ok(())
            })
        })
    };
    started2.recv().unwrap();
    w.call(|_| Ok(())).unwrap();
    assert_eq!(w.threads(), 2);
    release2.send(()).unwrap();
    busy.join().unwrap().unwrap();
}

#[test]
fn storage_wmi_operations_answer_without_msft_classes() {
    let s = WindowsStorage::new();
    // Wine: the namespace is empty, so no disk has a location.
    let locs = s.disk_locations().unwrap();
    let _ = locs;
    assert!(s.wmi().started());
}

#[test]
fn the_msr_partition_type_is_recognised_in_any_case_and_with_braces() {
    use super::stor::is_msr;
    assert!(is_msr("{e3c9e316-0b5c-4db8-817d-f92df00215ae}"));
    assert!(is_msr("{E3C9E316-0B5C-4DB8-817D-F92DF00215AE}"));
    assert!(is_msr("e3c9e316-0b5c-4db8-817d-f92df00215ae"));
    assert!(!is_msr("{ebd0a0a2-b9e5-4433-87c0-68b6b72699c7}"));
    assert!(!is_msr(""));
}

/// Wine 8.0 has no `CM_Register_Notification`: the inventory then has no
/// event source and every list call scans (as before the inventory). On
/// Windows the registration succeeds.
#[test]
fn device_notifications_exist_on_windows_and_not_under_wine() {
    use crate::storage::inventory::notify::Notifications;
    // Wine maps the Unix root to Z: and passes WINEPREFIX through.
    let under_wine =
        std::env::var_os("WINEPREFIX").is_some() || std::path::Path::new("Z:\\proc\\self").exists();
    match Notifications::register() {
        Ok(_) => assert!(!under_wine, "wine 8.0 gained CM_Register_Notification"),
        Err(e) => {
            assert_eq!(e.kind(), std::io::ErrorKind::Unsupported, "{e}");
            assert!(under_wine, "registration failed on Windows: {e}");
        }
    }
    let s = WindowsStorage::new();
    assert_eq!(s.follows_notifications(), !under_wine);
    // Without notifications nothing is cached between calls.
    if under_wine {
        assert_eq!(s.inventory_generation().unwrap(), None);
    }
}

/// The callback counts interface arrivals and removals only, into the
/// counter its context points to.
#[test]
fn the_notification_callback_bumps_its_counter() {
    use crate::storage::inventory::notify::on_interface_change;
    use std::sync::atomic::{AtomicU64, Ordering};
    use windows_sys::Win32::Devices::DeviceAndDriverInstallation::{
        CM_NOTIFY_ACTION_DEVICEINSTANCEENUMERATED, CM_NOTIFY_ACTION_DEVICEINTERFACEARRIVAL,
        CM_NOTIFY_ACTION_DEVICEINTERFACEREMOVAL,
    };
    let counter = AtomicU64::new(0);
    let ctx = (&counter as *const AtomicU64).cast();
    for action in [
        CM_NOTIFY_ACTION_DEVICEINTERFACEARRIVAL,
        CM_NOTIFY_ACTION_DEVICEINTERFACEREMOVAL,
        CM_NOTIFY_ACTION_DEVICEINSTANCEENUMERATED,
    ] {
        // SAFETY: the context points to `counter`, alive for the call; the
        // event data is not read.
        let r =
            unsafe { on_interface_change(std::ptr::null_mut(), ctx, action, std::ptr::null(), 0) };
        assert_eq!(r, 0);
    }
    assert_eq!(counter.load(Ordering::SeqCst), 2);
    // A null context is ignored.
    // SAFETY: a null context is checked before use.
    unsafe {
        on_interface_change(
            std::ptr::null_mut(),
            std::ptr::null(),
            CM_NOTIFY_ACTION_DEVICEINTERFACEARRIVAL,
            std::ptr::null(),
            0,
        )
    };
}

/// The inventory's lists equal the direct IOCTL answers, and an inline
/// attempt never does device I/O: it answers from memory or "would block".
#[test]
fn inventory_lists_match_the_ioctls_and_inline_attempts_never_block() {
    use crate::inline::{is_would_block, run};
    let s = WindowsStorage::new();
    let c = c_volume();
    let ids = s.disk_ids().unwrap();
    for n in super::disk::disk_numbers().unwrap() {
        assert_eq!(
            ids.get(&n),
            super::disk::disk_ids(n).ok().as_ref(),
            "disk {n}"
        );
    }
    let page83 = &ids[&0].page83;
    assert!(s.disk_by_page83(page83).unwrap().is_some());
    assert_eq!(s.disk_by_page83("no such id").unwrap(), None);
    let d = s.volume_disk(&c).unwrap();
    let on = s.volumes_on_disk(d, None).unwrap();
    assert!(on.contains(&c), "{on:?}");
    assert!(matches!(
        s.volumes_on_disk(4000, None).unwrap_err(),
        Error::NotFound(_)
    ));
    // Device I/O always goes to the blocking pool.
    for r in [
        run(|| s.disk_size(0).map(drop)),
        run(|| s.disk_online(0).map(drop)),
        run(|| s.volume_disk(&c).map(drop)),
    ] {
        assert!(is_would_block(&r.unwrap_err()));
    }
    // From memory when notifications keep it current; else "would block".
    match run(|| s.volumes_on_disk(d, None)) {
        Ok(v) => {
            assert!(s.follows_notifications());
            assert_eq!(v, on);
        }
        Err(e) => assert!(is_would_block(&e) && !s.follows_notifications(), "{e}"),
    }
    // Locations (WMI; none under wine) are the same twice.
    assert_eq!(s.disk_locations().unwrap(), s.disk_locations().unwrap());
}

/// Under wine: the identifiers of every disk hang at once. ListDiskIDs
/// reads the disks it does not know yet together, each on a thread of its
/// own, waited for until one deadline: it answers within one read timeout,
/// not one per disk (it read them one after another before).
#[test]
fn disks_whose_reads_hang_cost_one_read_timeout_together() {
    use crate::storage::inventory::READ_TIMEOUT;
    use std::time::{Duration, Instant};
    let s = WindowsStorage::new();
    let all: Vec<u32> = (0..64).filter(|n| s.disk_size(*n).is_ok()).collect();
    // A fresh instance: nothing read yet, every disk missing.
    let s = WindowsStorage::new();
    s.hang.set_all(&all);
    let t = Instant::now();
    let ids = s.disk_ids().unwrap();
    let took = t.elapsed();
    eprintln!("{} disks hung: ListDiskIDs in {took:?}", all.len());
    if all.len() < 2 {
        // Wine shows one disk: this bounds the call, it cannot show the
        // reads running together (a Windows host with several disks does).
        eprintln!("one disk here: the reads running together are not shown");
    }
    assert!(ids.is_empty(), "{ids:?}");
    assert!(
        took < READ_TIMEOUT + READ_TIMEOUT / 2,
        "{took:?} for {} disks",
        all.len()
    );
    s.hang.set_all(&[]);
    // Released: every disk answers again.
    let deadline = Instant::now() + Duration::from_secs(10);
    while s.disk_ids().unwrap().len() < all.len() {
        assert!(Instant::now() < deadline, "the disks did not answer again");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Under wine: reads of disk 0's identifiers hang (the test hook, as a hung
/// `\\.\PhysicalDrive0` would). ListDiskIDs answers within the read timeout
/// from what is known, disk 0's own calls answer `Unavailable` at once,
/// other calls answer; released, disk 0 answers again.
#[test]
fn a_disk_whose_reads_hang_holds_up_no_other_call() {
    use crate::storage::inventory::{DISK_THREADS, READ_TIMEOUT};
    use std::time::{Duration, Instant};
    let s = WindowsStorage::new();
    assert!(s.disk_size(0).unwrap() > 0);
    s.hang.set(Some(0));
    let t = Instant::now();
    let ids = s.disk_ids().unwrap();
    assert!(t.elapsed() < READ_TIMEOUT * 2, "{:?}", t.elapsed());
    assert!(!ids.contains_key(&0), "{ids:?}");
    // Its own calls: Unavailable naming it, at once.
    let t = Instant::now();
    let e = s.disk_size(0).unwrap_err();
    assert!(
        matches!(e, Error::Unavailable(ref m) if m.contains("disk 0")),
        "{e}"
    );
    // Other calls answer, without waiting for the read timeout.
    for _ in 0..5 {
        s.disk_ids().unwrap();
        assert!(!s.volumes().unwrap().is_empty());
        let e = s.volumes_on_disk(4000, None).unwrap_err();
        assert!(matches!(e, Error::NotFound(_)), "{e}");
    }
    assert!(t.elapsed() < READ_TIMEOUT, "{:?}", t.elapsed());
    assert!(s.inventory.reads_in_flight(&0) <= DISK_THREADS);
    s.hang.set(None);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match s.disk_size(0) {
            Ok(n) => {
                assert!(n > 0);
                break;
            }
            Err(e) if Instant::now() < deadline => {
                assert!(matches!(e, Error::Unavailable(_)), "{e}");
                // A view takes the returned read back.
                let _ = s.disk_ids();
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => panic!("disk 0 does not answer after the release: {e}"),
        }
    }
    assert!(s.disk_ids().unwrap().contains_key(&0));
}

/// Disk numbers are reused: a write by number checks that the disk held
/// open since the check is still the disk with that identity. Wine cannot
/// replace a disk under a held handle, so the test hook makes the
/// handle's later reads report another serial number.
#[test]
fn a_held_disk_replaced_before_the_write_is_refused() {
    let mut pin = super::disk::Pinned::open(0, win32::GENERIC_READ).unwrap();
    assert_eq!(pin.identity.number, 0);
    assert!(pin.identity.size > 0, "{:?}", pin.identity);
    pin.still_the_same("partition disk 0").unwrap();
    // (Its content is read through the held handle; wine answers no
    // ReadFile on a physical drive, so only the tier reads it.)
    pin.replaced_by = Some("ANOTHER-DISK".into());
    let e = pin.still_the_same("partition disk 0").unwrap_err();
    assert!(
        matches!(&e, Error::FailedPrecondition(m)
            if m.contains("cannot partition disk 0")
                && m.contains("serial number is now \"ANOTHER-DISK\"")
                && m.contains("nothing was written")),
        "{e}"
    );
}

/// The uses that keep SetDiskState(offline) and DisconnectTarget away
/// from a disk: C: is mounted at its drive letter.
#[test]
fn the_c_volume_is_in_use_at_its_drive_letter() {
    use crate::storage::disk_use::VolumeUse;
    let s = WindowsStorage::new();
    let c = c_volume();
    let disk = s.volume_disk(&c).unwrap();
    assert!(
        super::in_use::volumes_on(disk).unwrap().contains(&c),
        "disk {disk}"
    );
    let (uses, claim) = super::in_use::claim(std::slice::from_ref(&c)).unwrap();
    // Mounted: refused, so nothing is left locked.
    assert!(claim.is_empty());
    assert!(
        uses.iter().any(|(v, u)| v == &c
            && matches!(u, VolumeUse::Mounted(p) if p.eq_ignore_ascii_case("C:\\"))),
        "{uses:?}"
    );
    let e = crate::storage::disk_use::refuse(disk, &uses, "take it offline").unwrap_err();
    assert!(
        matches!(&e, Error::FailedPrecondition(m) if m.contains("C:\\")),
        "{e}"
    );
}

/// Under wine: the storage provider's `UpdateHostStorageCache` hangs (the
/// WMI test hook). Later Rescan calls are answered `Unavailable` at once,
/// naming the rescan still running, and start no WMI thread of their own;
/// released, Rescan runs again.
#[test]
fn a_hung_rescan_answers_later_rescans_at_once() {
    use std::sync::mpsc;
    use std::time::{Duration, Instant};
    let s = WindowsStorage::new();
    // The worker's thread started before the hang, so the count below is
    // the hung one's.
    let _ = s.rescan();
    let (release, hang) = mpsc::channel::<()>();
    s.wmi.hang_next_job(hang);
    std::thread::scope(|scope| {
        let first = scope.spawn(|| s.rescan());
        std::thread::sleep(Duration::from_millis(300));
        assert!(!first.is_finished(), "the hung rescan answered");
        let threads = s.wmi.threads();
        for _ in 0..5 {
            let t = Instant::now();
            let e = s.rescan().unwrap_err();
            assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
            assert!(
                matches!(e, Error::Unavailable(ref m) if m.contains("a rescan is still running since")),
                "{e}"
            );
        }
        assert!(
            s.wmi.threads() <= threads,
            "{} WMI threads, {threads} before",
            s.wmi.threads()
        );
        release.send(()).unwrap();
        let _ = first.join().unwrap();
    });
    // The gate is open again: whatever the provider answers, not "still
    // running".
    match s.rescan() {
        Err(Error::Unavailable(m)) if m.contains("still running") => panic!("{m}"),
        _ => {}
    }
}
