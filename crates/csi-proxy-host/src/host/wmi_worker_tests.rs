//! Under wine: the groups' WMI workers, wired as the host wires them, are
//! apart. An iSCSI call whose provider never returns (the test hook
//! `WmiWorker::hang_next_job`, since wine has no iSCSI classes) ends at its
//! deadline; SMB and System answer meanwhile; iSCSI answers again after.

use super::*;
use crate::iscsi::ListTargetPortalsRequest;
use crate::path::Flavor;
use crate::smb::IsSmbMappedRequest;
use crate::system::GetBiosSerialNumberRequest;
use crate::{deadline, Error};
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn within<T>(d: Duration, f: impl FnOnce() -> T) -> T {
    deadline::run(Some(Instant::now() + d), f)
}

fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let t = Instant::now();
    let r = f();
    (r, t.elapsed())
}

/// An answer of the group's own (whatever wine makes of it), not a wait
/// that ran into the deadline.
fn answered<T: std::fmt::Debug>(what: &str, r: &crate::Result<T>, took: Duration) {
    assert!(
        !matches!(r, Err(Error::DeadlineExceeded(_))),
        "{what}: {r:?} after {took:?}"
    );
    assert!(took < Duration::from_secs(3), "{what} took {took:?}: {r:?}");
}

#[test]
fn a_stuck_iscsi_call_holds_up_neither_smb_nor_system_and_ends_at_its_deadline() {
    let shared = OsShared::new();
    let options = HostOptions::default();
    let root = std::env::temp_dir().to_string_lossy().into_owned();
    let fs = Arc::new(Confined::new(
        PathPolicy::new(Flavor::Windows, [root.as_str()]).unwrap(),
    ));
    let iscsi = os_iscsi(&shared);
    let smb = os_smb(&fs, &options, &shared);
    let system = os_system(&options, &shared).unwrap();
    let bios = || system.get_bios_serial_number(GetBiosSerialNumberRequest {});
    let mapped = || {
        smb.is_smb_mapped(IsSmbMappedRequest {
            remote_path: r"\\server\share".into(),
        })
    };
    let portals = || iscsi.list_target_portals(ListTargetPortalsRequest {});

    // Each group's threads and connections warm (wine: the first COM start
    // takes a while), and what each answers here.
    let (r, _) = timed(|| within(Duration::from_secs(60), bios));
    assert!(r.is_ok(), "Win32_BIOS under wine: {r:?}");
    let (r, _) = timed(|| within(Duration::from_secs(60), mapped));
    assert!(matches!(r, Err(Error::FailedPrecondition(_))), "{r:?}");
    let (r, _) = timed(|| within(Duration::from_secs(60), portals));
    assert!(matches!(r, Err(Error::FailedPrecondition(_))), "{r:?}");

    // iSCSI's provider hangs.
    let (release, hang) = mpsc::channel::<()>();
    shared.iscsi.hang_next_job(hang);
    let stuck_deadline = Duration::from_secs(3);
    let (started_tx, started) = mpsc::channel();
    let stuck = {
        let iscsi = iscsi.clone();
        std::thread::spawn(move || {
            started_tx.send(()).unwrap();
            timed(|| {
                within(stuck_deadline, || {
                    iscsi.list_target_portals(ListTargetPortalsRequest {})
                })
            })
        })
    };
    started.recv().unwrap();
    std::thread::sleep(Duration::from_millis(300));

    // The other groups answer promptly meanwhile, again and again.
    for _ in 0..3 {
        let (r, took) = timed(|| within(Duration::from_secs(10), bios));
        answered("System GetBIOSSerialNumber", &r, took);
        assert!(r.is_ok(), "{r:?}");
        let (r2, took2) = timed(|| within(Duration::from_secs(10), mapped));
        answered("SMB IsSmbMapped", &r2, took2);
        println!("while iSCSI is stuck: System {took:?}, SMB {took2:?}");
    }

    // The stuck call ends at its deadline.
    let (r, took) = stuck.join().unwrap();
    assert!(matches!(r, Err(Error::DeadlineExceeded(_))), "{r:?}");
    assert!(
        took >= stuck_deadline && took < stuck_deadline + Duration::from_secs(1),
        "the stuck call ended after {took:?}"
    );
    assert_eq!(shared.iscsi.overdue(), 1);
    println!("the stuck iSCSI call ended after {took:?} (deadline {stuck_deadline:?})");

    // iSCSI answers again while its provider is still stuck (another
    // thread), and after it returns (its answer discarded).
    let (r, took) = timed(|| within(Duration::from_secs(10), portals));
    answered("iSCSI ListTargetPortals beside the stuck thread", &r, took);
    println!("iSCSI beside its stuck thread: {took:?}");
    assert!(matches!(r, Err(Error::FailedPrecondition(_))), "{r:?}");
    release.send(()).unwrap();
    let end = Instant::now() + Duration::from_secs(10);
    while shared.iscsi.overdue() != 0 {
        assert!(Instant::now() < end, "the stuck thread never came back");
        std::thread::sleep(Duration::from_millis(20));
    }
    let (r, took) = timed(|| within(Duration::from_secs(10), portals));
    answered(
        "iSCSI ListTargetPortals after the provider returned",
        &r,
        took,
    );
    assert!(matches!(r, Err(Error::FailedPrecondition(_))), "{r:?}");
    // SMB and System never had a thread of theirs touched.
    assert_eq!(shared.smb.overdue() + shared.system.overdue(), 0);
}
