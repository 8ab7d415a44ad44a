//! The real-Windows tier, isolation (issue 39): a plugin that holds an
//! oplock in its pod directory and never acknowledges its break holds up
//! only its own call: RmdirContents of that directory ends at its deadline
//! (the confined filesystem opens with `FILE_COMPLETE_IF_OPLOCKED` and
//! retries until then), and calls on other directories answer meanwhile.
//! Wine has no oplocks: skipped there with the reason.
//!
//! An iSCSI target stopped under a mounted volume (the iSCSI Target Server
//! of this host stopped, a write on the volume held by the initiator):
//! MountVolume and UnmountVolume of another (VHDX) volume answer within
//! twice their quiet time (no mount lock held across the hung volume's
//! I/O); after the target is back, the iSCSI volume's own calls work
//! again. Wine has no iSCSI initiator, Target Server or Virtual Disk API:
//! skipped there with the reason.
#![cfg(windows)]

mod pipes;
mod real_windows;
// Only the iSCSI client here.
#[allow(unused_macros, unused_imports)]
mod versions;

use csi_proxy_api::filesystem::v2alpha1 as fs;
use csi_proxy_client::Group;
use csi_proxy_host::win::wmi::WmiWorker;
use pipes::Proxy;
use real_windows::calls::Calls;
use real_windows::iscsi_target::{self, Target};
use real_windows::require;
use real_windows::vhd::{Vhd, MIB};
use real_windows::win32::HeldOplock;
use std::time::{Duration, Instant};
use versions::iscsi::{Iscsi, Login, Portal};

#[tokio::test]
async fn real_windows_an_unacknowledged_oplock_holds_up_only_its_own_call() {
    let Some(_w) = require("oplocks (FSCTL_REQUEST_OPLOCK), which wine does not implement") else {
        return;
    };
    let p = Proxy::start_unique("rw-oplock", "filesystem", &[]);
    let pod = p.kubelet.join(r"pods\p\volumes\v");
    std::fs::create_dir_all(pod.join("deep")).unwrap();
    let held = pod.join(r"deep\held");
    std::fs::write(&held, b"x").unwrap();
    let _oplock = HeldOplock::take(&held).expect("an oplock on a file we created");

    let channel = p.channel(Group::Filesystem, "v2alpha1").await;
    let mut c = fs::filesystem_client::FilesystemClient::new(channel.clone());
    let stuck = tokio::spawn({
        let mut c = c.clone();
        let path = pod.display().to_string();
        async move {
            let mut req = tonic::Request::new(fs::RmdirContentsRequest { path });
            req.set_timeout(Duration::from_secs(5));
            let t = Instant::now();
            let r = c.rmdir_contents(req).await;
            (r, t.elapsed())
        }
    });
    // Another directory is removed meanwhile, at once.
    for i in 0..5 {
        let other = p.kubelet.join(format!(r"pods\q\volumes\v{i}"));
        std::fs::create_dir_all(other.join("sub")).unwrap();
        std::fs::write(other.join(r"sub\f"), b"x").unwrap();
        let t = Instant::now();
        c.rmdir_contents(fs::RmdirContentsRequest {
            path: other.display().to_string(),
        })
        .await
        .unwrap();
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    }
    let (r, took) = stuck.await.unwrap();
    assert!(
        took < Duration::from_secs(8),
        "RmdirContents waited {took:?} on the oplock holder"
    );
    eprintln!("RmdirContents beside an unacknowledged oplock: {r:?} after {took:?}");
}

/// Restarts the iSCSI Target Server when dropped (also on a failed
/// assertion), so the target can be removed and later tests find it.
struct TargetServerBack;

impl Drop for TargetServerBack {
    fn drop(&mut self) {
        if let Err(e) = iscsi_target::set_service_running(iscsi_target::TARGET_SERVICE, true) {
            eprintln!("restarting {}: {e}", iscsi_target::TARGET_SERVICE);
        }
    }
}

/// `rounds` MountVolume + UnmountVolume of `volume`, each at a fresh
/// directory `<tag><k>` under `dir`: the slowest mount and the slowest
/// unmount.
async fn mount_rounds(
    c: &mut Calls,
    volume: &str,
    dir: &std::path::Path,
    tag: &str,
    rounds: usize,
) -> (Duration, Duration) {
    let (mut mount, mut unmount) = (Duration::ZERO, Duration::ZERO);
    for k in 0..rounds {
        let target = dir.join(format!("{tag}{k}")).display().to_string();
        let t = Instant::now();
        c.mount(volume, &target).await.unwrap();
        mount = mount.max(t.elapsed());
        let t = Instant::now();
        c.unmount(volume, &target).await.unwrap();
        unmount = unmount.max(t.elapsed());
    }
    (mount, unmount)
}

/// Twice the quiet time, with a floor of 100 ms for the timer's and the
/// scheduler's noise on calls of a few milliseconds.
fn twice(quiet: Duration) -> Duration {
    (quiet * 2).max(Duration::from_millis(100))
}

#[tokio::test]
async fn real_windows_a_stopped_iscsi_target_holds_up_no_other_volume() {
    a_stopped_iscsi_target_with::<versions::iscsi::V1alpha2>().await;
}

async fn a_stopped_iscsi_target_with<I: Iscsi>() {
    let p = Proxy::start_unique("rw-iscsi-stopped", "disk,volume,iscsi", &[]);
    let mut c = Calls::new(
        p.channel(Group::Disk, "v1").await,
        p.channel(Group::Volume, "v2alpha1").await,
    );
    let mut i = I::new(p.channel(Group::Iscsi, "v1alpha2").await);
    let Some(_w) = require(
        "the iSCSI initiator and Target Server (stopped under a mounted volume) and a VHDX volume",
    ) else {
        return;
    };
    if let Err(why) = iscsi_target::available(&WmiWorker::new(iscsi_target::NAMESPACE)) {
        println!("SKIPPED (needs the iSCSI Target Server feature): {why}");
        eprintln!("SKIPPED (needs the iSCSI Target Server feature): {why}");
        return;
    }
    iscsi_target::start_initiator().unwrap();
    let t = Target::create("stopped", None).unwrap();
    let portal = Portal::new("127.0.0.1", 3260);
    i.add_target_portal(&portal).await.unwrap();
    i.connect_target(&Login::new(&portal, &t.iqn, 0, "", ""))
        .await
        .unwrap();
    let disks = i.get_target_disks(&portal, &t.iqn).await.unwrap();
    let n: u32 = disks[0].parse().unwrap();
    let iscsi_vol = c.formatted_volume(n).await;
    let iscsi_mnt = p.kubelet.join(r"pods\iscsi\mnt");
    c.mount(&iscsi_vol, &iscsi_mnt.display().to_string())
        .await
        .unwrap();

    let vhd = Vhd::create(&p.root, "beside-iscsi", 128 * MIB).unwrap();
    let other = c.formatted_volume(vhd.disk()).await;
    let dir = p.kubelet.join(r"podshd");
    // Warm, then measured on a quiet machine.
    mount_rounds(&mut c, &other, &dir, "warm", 1).await;
    let (quiet_mount, quiet_unmount) = mount_rounds(&mut c, &other, &dir, "quiet", 3).await;

    // The target stops under the mounted volume; a write on it is flushed
    // and waits in the initiator (held up to its MaxRequestHoldTime,
    // 60 s by default, or until the target is back).
    let back = TargetServerBack;
    iscsi_target::set_service_running(iscsi_target::TARGET_SERVICE, false).unwrap();
    let outstanding = std::thread::spawn({
        let file = iscsi_mnt.join("outstanding");
        move || {
            use std::io::Write;
            let t = Instant::now();
            let r = std::fs::File::create(&file).and_then(|mut f| {
                f.write_all(&vec![0x5a; MIB as usize])?;
                f.sync_all()
            });
            (r, t.elapsed())
        }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        !outstanding.is_finished(),
        "the write on the stopped target's volume ended at once: {:?}",
        outstanding.join()
    );
    let (stuck_mount, stuck_unmount) = mount_rounds(&mut c, &other, &dir, "stuck", 3).await;
    let still_out = !outstanding.is_finished();
    println!(
        "MountVolume {stuck_mount:?} (quiet {quiet_mount:?}), \
         UnmountVolume {stuck_unmount:?} (quiet {quiet_unmount:?}) \
         beside a stopped iSCSI target; its write still outstanding: {still_out}"
    );
    assert!(
        still_out,
        "the initiator gave up on the write before the measure ended"
    );
    assert!(
        stuck_mount <= twice(quiet_mount),
        "MountVolume took {stuck_mount:?} beside a stopped target, {quiet_mount:?} quiet"
    );
    assert!(
        stuck_unmount <= twice(quiet_unmount),
        "UnmountVolume took {stuck_unmount:?} beside a stopped target, {quiet_unmount:?} quiet"
    );

    // The target back: the initiator reconnects, the held write ends, and
    // the iSCSI volume's own calls answer again.
    drop(back);
    let (w, took) = outstanding.join().unwrap();
    println!("the held write ended after {took:?}: {w:?}");
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        match c.is_formatted(&iscsi_vol).await {
            Ok(true) => break,
            other => assert!(
                Instant::now() < deadline,
                "the iSCSI volume after the target's restart: {other:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    c.stats(&iscsi_vol).await.unwrap();
    c.unmount(&iscsi_vol, &iscsi_mnt.display().to_string())
        .await
        .unwrap();
    let again = p.kubelet.join(r"pods\iscsigain").display().to_string();
    c.mount(&iscsi_vol, &again).await.unwrap();
    c.unmount(&iscsi_vol, &again).await.unwrap();
    i.disconnect_target(&portal, &t.iqn).await.unwrap();
    i.remove_target_portal(&portal).await.unwrap();
    drop(vhd);
}
