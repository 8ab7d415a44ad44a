//! Concurrency of the Disk and Volume APIs over the real binary's Unix
//! sockets, on loop-device disks (needs root; CI runs as root): one disk's
//! writes slowed by the block layer's throttle (cgroup v1 blkio, every
//! writer of that one device) while another disk is partitioned, formatted
//! and mounted in its own time; identical calls joining one operation,
//! different ones answered Aborted, a deadline passing while the format
//! goes on and the retry collecting its result; the tools run counted by
//! the server (its `child_processes` on shutdown).
#![cfg(target_os = "linux")]

mod common;
mod storage;

use common::Proxy;
use csi_proxy_api::{disk::v1 as dk, volume::v2alpha1 as vl};
use csi_proxy_http2::client::{RawClient, Shape};
use std::io::Read;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};
use storage::{can_run, can_throttle, is_mount_point, LoopDisk, Throttle, MIB};
use tonic::Code;

/// A FormatVolume sent with `grpc-timeout` over a raw HTTP/2 connection
/// (tonic's client would end the call itself at the deadline, hiding the
/// server's answer): the server's gRPC status code and how long it took.
fn raw_format(proxy: &Proxy, volume_id: &str, grpc_timeout: &str) -> (i32, String, Duration) {
    use prost::Message;
    let socket = proxy.socket("volume-v2alpha1");
    let mut c = RawClient::new(UnixStream::connect(socket).unwrap(), Shape::default()).unwrap();
    let block = c.request_block(
        "/v2alpha1.Volume/FormatVolume",
        None,
        &[(b"grpc-timeout", grpc_timeout.as_bytes())],
    );
    let msg = vl::FormatVolumeRequest {
        volume_id: volume_id.into(),
    }
    .encode_to_vec();
    let t = Instant::now();
    let r = c.call_with_block(&block, &msg).unwrap();
    (
        r.grpc_status.expect("a status"),
        r.grpc_message,
        t.elapsed(),
    )
}

/// Whether a `mkfs.*` that the server started is running.
fn server_mkfs_running(server: u32) -> bool {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .any(|stat| {
            // pid (comm) state ppid ...
            let Some((comm, rest)) = stat.split_once(") ") else {
                return false;
            };
            let ppid = rest.split(' ').nth(1).and_then(|p| p.parse::<u32>().ok());
            comm.contains("(mkfs") && ppid == Some(server)
        })
}

fn wait_for(what: &str, secs: u64, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < Duration::from_secs(secs), "{what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The processes the server ran, from the count it logs on SIGTERM.
fn tools_run(proxy: &mut Proxy) -> u64 {
    proxy.terminate();
    let log = proxy.log();
    log.lines()
        .find_map(|l| l.split("child_processes=").nth(1))
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|d| d.parse().ok())
        .unwrap_or_else(|| panic!("no child_processes count in the log:\n{log}"))
}

async fn partitioned(proxy: &Proxy, n: u32) -> String {
    let c = proxy.client();
    c.connect_disk_v1()
        .await
        .unwrap()
        .partition_disk(dk::PartitionDiskRequest { disk_number: n })
        .await
        .unwrap();
    c.connect_volume_v2alpha1()
        .await
        .unwrap()
        .list_volumes_on_disk(vl::ListVolumesOnDiskRequest {
            disk_number: n,
            partition_number: 0,
        })
        .await
        .unwrap()
        .into_inner()
        .volume_ids
        .remove(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_disk_holds_up_no_other_disk_and_no_read() {
    if !can_run() || !can_throttle() {
        return;
    }
    let proxy = Proxy::start(&[]);
    let slow = LoopDisk::new(proxy.root.path(), 128 * MIB);
    let fast = LoopDisk::new(proxy.root.path(), 128 * MIB);
    let slow_vol = partitioned(&proxy, slow.number).await;
    let _throttle = Throttle::of(&slow);

    let c = proxy.client();
    let mut slow_v = c.connect_volume_v2alpha1().await.unwrap();
    let slow_start = Instant::now();
    let slow_format = {
        let id = slow_vol.clone();
        tokio::spawn(async move {
            slow_v
                .format_volume(vl::FormatVolumeRequest { volume_id: id })
                .await
                .map(|_| Instant::now())
        })
    };
    let server = proxy.child.as_ref().unwrap().id();
    wait_for("the slow format's mkfs starts", 20, || {
        server_mkfs_running(server)
    });

    // Meanwhile: the other disk's whole life cycle, and reads of the slow
    // one, each timed.
    let mut d = c.connect_disk_v1().await.unwrap();
    let mut v = c.connect_volume_v2alpha1().await.unwrap();
    let mut took = Vec::new();
    macro_rules! timed {
        ($what:expr, $call:expr) => {{
            let t = Instant::now();
            let r = $call.await.unwrap().into_inner();
            took.push(($what, t.elapsed()));
            r
        }};
    }
    let fast_start = Instant::now();
    timed!(
        "PartitionDisk (other disk)",
        d.partition_disk(dk::PartitionDiskRequest {
            disk_number: fast.number
        })
    );
    let fast_vol = timed!(
        "ListVolumesOnDisk (other disk)",
        v.list_volumes_on_disk(vl::ListVolumesOnDiskRequest {
            disk_number: fast.number,
            partition_number: 0
        })
    )
    .volume_ids
    .remove(0);
    timed!(
        "FormatVolume (other disk)",
        v.format_volume(vl::FormatVolumeRequest {
            volume_id: fast_vol.clone()
        })
    );
    let target = proxy.kubelet.join("pods/fast/mnt");
    timed!(
        "MountVolume (other disk)",
        v.mount_volume(vl::MountVolumeRequest {
            volume_id: fast_vol.clone(),
            target_path: target.display().to_string()
        })
    );
    let fast_done = Instant::now();
    let state = timed!(
        "GetDiskState (slow disk)",
        d.get_disk_state(dk::GetDiskStateRequest {
            disk_number: slow.number
        })
    );
    assert!(state.is_online);
    // (IsVolumeFormatted of the slow disk's volume reads that device, and
    // the kernel makes a read of blocks being written wait for them: a
    // wait in the device, not behind a lock of ours.)
    let formatted = timed!(
        "IsVolumeFormatted (other disk)",
        v.is_volume_formatted(vl::IsVolumeFormattedRequest {
            volume_id: fast_vol.clone()
        })
    );
    assert!(formatted.formatted);
    timed!(
        "ListVolumesOnDisk (slow disk)",
        v.list_volumes_on_disk(vl::ListVolumesOnDiskRequest {
            disk_number: slow.number,
            partition_number: 0
        })
    );
    timed!(
        "GetDiskStats (slow disk)",
        d.get_disk_stats(dk::GetDiskStatsRequest {
            disk_number: slow.number
        })
    );
    timed!(
        "GetDiskNumberFromVolumeID (slow disk)",
        v.get_disk_number_from_volume_id(vl::GetDiskNumberFromVolumeIdRequest {
            volume_id: slow_vol.clone()
        })
    );
    let reads_done = Instant::now();
    assert!(
        server_mkfs_running(server),
        "the slow format ended before the other calls did: the disk is not slow enough to tell"
    );

    let slow_done = slow_format.await.unwrap().unwrap();
    let slow_took = slow_done - slow_start;
    let fast_took = fast_done - fast_start;
    for (what, t) in &took {
        eprintln!("{what:<40} {:>8.1} ms", t.as_secs_f64() * 1e3);
    }
    eprintln!(
        "slow disk's format {:.2} s; the other disk's partition+format+mount {:.2} s",
        slow_took.as_secs_f64(),
        fast_took.as_secs_f64()
    );
    assert!(
        slow_took >= Duration::from_secs(3),
        "the throttled format took only {slow_took:?}"
    );
    // Everything else finished in its own time, well before the slow one.
    assert!(
        reads_done < slow_done && fast_took * 4 < slow_took,
        "the other disk waited for the slow one: {fast_took:?} against {slow_took:?}"
    );
    assert!(is_mount_point(&target));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identical_calls_join_others_are_aborted_and_a_late_retry_collects() {
    if !can_run() || !can_throttle() {
        return;
    }
    let mut proxy = Proxy::start(&[]);
    let slow = LoopDisk::new(proxy.root.path(), 128 * MIB);
    let vol = partitioned(&proxy, slow.number).await;
    let throttle = Throttle::of(&slow);
    let server = proxy.child.as_ref().unwrap().id();
    let c = proxy.client();
    let format = || vl::FormatVolumeRequest {
        volume_id: vol.clone(),
    };

    // 1. The first format's caller gives up after 1 s; the server answers
    // DeadlineExceeded and the format goes on.
    let (code, msg, took) = raw_format(&proxy, &vol, "1000m");
    assert_eq!(code, Code::DeadlineExceeded as i32, "{msg}");
    assert!(took < Duration::from_secs(3), "{took:?}");
    assert!(server_mkfs_running(server), "the format goes on");
    let mut v = c.connect_volume_v2alpha1().await.unwrap();

    // A different call on that volume: Aborted at once, naming it.
    let target = proxy.kubelet.join("pods/p/mnt");
    let t = Instant::now();
    let e = v
        .mount_volume(vl::MountVolumeRequest {
            volume_id: vol.clone(),
            target_path: target.display().to_string(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::Aborted, "{e:?}");
    assert!(e.message().contains("FormatVolume is in progress"), "{e:?}");
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    assert!(!target.exists(), "an aborted mount touches nothing");
    let e = v
        .resize_volume(vl::ResizeVolumeRequest {
            volume_id: vol.clone(),
            size_bytes: 0,
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::Aborted, "{e:?}");
    // An identical call joins it; its own short deadline passes first.
    let (code, msg, took) = raw_format(&proxy, &vol, "300m");
    assert_eq!(code, Code::DeadlineExceeded as i32, "{msg}");
    assert!(took < Duration::from_secs(2), "{took:?}");

    // 2. Once it has finished, the retry gets its result: no second mkfs.
    wait_for("the first format's mkfs ends", 120, || {
        !server_mkfs_running(server)
    });
    let t = Instant::now();
    v.format_volume(format()).await.unwrap();
    assert!(
        t.elapsed() < Duration::from_secs(1),
        "the retry ran the format again: {:?}",
        t.elapsed()
    );
    assert!(!server_mkfs_running(server));

    // 3. A new format (its caller waits) and an identical one at the same
    // time: one mkfs for both.
    let mut v2 = c.connect_volume_v2alpha1().await.unwrap();
    let first = tokio::spawn({
        let req = format();
        async move { v2.format_volume(req).await.map(drop) }
    });
    wait_for("the second format's mkfs starts", 20, || {
        server_mkfs_running(server)
    });
    let mut v3 = c.connect_volume_v2alpha1().await.unwrap();
    v3.format_volume(format()).await.unwrap();
    first.await.unwrap().unwrap();
    drop(throttle);
    // The volume is usable afterwards.
    v.mount_volume(vl::MountVolumeRequest {
        volume_id: vol.clone(),
        target_path: target.display().to_string(),
    })
    .await
    .unwrap();
    assert!(is_mount_point(&target));
    v.unmount_volume(vl::UnmountVolumeRequest {
        volume_id: vol.clone(),
        target_path: target.display().to_string(),
    })
    .await
    .unwrap();

    // Five FormatVolume calls reached the host; two mkfs ran.
    assert_eq!(tools_run(&mut proxy), 2, "{}", proxy.log());
}

/// Whether any `mkfs.*` process has `dev` (e.g. `/dev/loop3p1`) on its
/// command line.
fn mkfs_on(dev: &str) -> bool {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .any(|c| {
            let args: Vec<&[u8]> = c.split(|&b| b == 0).collect();
            args.first()
                .is_some_and(|a| a.windows(4).any(|w| w == b"mkfs"))
                && args.contains(&dev.as_bytes())
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_mid_format_holds_nothing_after_restart() {
    if !can_run() || !can_throttle() {
        return;
    }
    let mut proxy = Proxy::start(&[]);
    let slow = LoopDisk::new(proxy.root.path(), 128 * MIB);
    let vol = partitioned(&proxy, slow.number).await;
    let throttle = Throttle::of(&slow);
    let server = proxy.child.as_ref().unwrap().id();
    let c = proxy.client();
    let mut v = c.connect_volume_v2alpha1().await.unwrap();
    let format = {
        let id = vol.clone();
        tokio::spawn(async move {
            v.format_volume(vl::FormatVolumeRequest { volume_id: id })
                .await
                .map(drop)
        })
    };
    wait_for("the format's mkfs starts", 20, || {
        server_mkfs_running(server)
    });
    let part = format!("{}p1", slow.dev);
    assert!(mkfs_on(&part), "mkfs on {part}");
    // Killed inside the format: the caller sees the connection go.
    proxy.kill_and_restart(&[]);
    assert!(format.await.unwrap().is_err());
    // The orphaned mkfs still holds the device exclusively: the new server
    // refuses to format under it, and nothing of the old server's
    // operation (its lock, its registration) is left to wait for.
    let c = proxy.client();
    let mut v = c.connect_volume_v2alpha1().await.unwrap();
    eprintln!("orphaned mkfs running after the kill: {}", mkfs_on(&part));
    if mkfs_on(&part) {
        let e = v
            .format_volume(vl::FormatVolumeRequest {
                volume_id: vol.clone(),
            })
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    }
    drop(throttle);
    wait_for("the orphaned mkfs ends", 120, || !mkfs_on(&part));
    v.format_volume(vl::FormatVolumeRequest {
        volume_id: vol.clone(),
    })
    .await
    .unwrap();
    let target = proxy.kubelet.join("pods/k/mnt");
    v.mount_volume(vl::MountVolumeRequest {
        volume_id: vol.clone(),
        target_path: target.display().to_string(),
    })
    .await
    .unwrap();
    assert!(is_mount_point(&target));
}

/// The pids of the `mkfs` processes working on `dev`.
fn mkfs_pids(dev: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            let c = std::fs::read(e.path().join("cmdline")).ok()?;
            let args: Vec<&[u8]> = c.split(|&b| b == 0).collect();
            (args.first()?.windows(4).any(|w| w == b"mkfs") && args.contains(&dev.as_bytes()))
                .then_some(pid)
        })
        .collect()
}

/// The proxy and its mkfs both killed inside a format (a service stop
/// kills the whole control group): what mkfs left (block group
/// descriptors, no superblock) is no known format and not zero. A server
/// that did not start that format refuses to format over it; the server
/// that did (its record in the state dir) completes it on the retry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_format_cut_short_is_completed_by_the_retry() {
    if !can_run() || !can_throttle() {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let state_flag = format!("-state-dir={}", state.path().display());
    let mut proxy = Proxy::start(&[&state_flag]);
    let slow = LoopDisk::new(proxy.root.path(), 128 * MIB);
    let vol = partitioned(&proxy, slow.number).await;
    let part = format!("{}p1", slow.dev);
    let throttle = Throttle::of(&slow);
    let server = proxy.child.as_ref().unwrap().id();
    let mut v = proxy.client().connect_volume_v2alpha1().await.unwrap();
    let format = {
        let id = vol.clone();
        tokio::spawn(async move {
            v.format_volume(vl::FormatVolumeRequest { volume_id: id })
                .await
                .map(drop)
        })
    };
    wait_for("the format's mkfs starts", 20, || {
        server_mkfs_running(server)
    });
    // Let it write its first structures, then cut both short.
    std::thread::sleep(Duration::from_millis(1500));
    proxy.kill_and_restart(&[&state_flag]);
    for pid in mkfs_pids(&part) {
        // SAFETY: kill has no memory preconditions.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    wait_for("the killed mkfs is gone", 30, || !mkfs_on(&part));
    assert!(format.await.unwrap().is_err());
    drop(throttle);
    let mut head = vec![0u8; MIB as usize];
    std::fs::File::open(&part)
        .unwrap()
        .read_exact(&mut head)
        .unwrap();
    assert!(
        head.iter().any(|&b| b != 0),
        "the cut-short mkfs wrote nothing: the test shows nothing"
    );

    // Another server, which did not start that format: in doubt, refused.
    let other_state = tempfile::tempdir().unwrap();
    let other = Proxy::start(&[&format!("-state-dir={}", other_state.path().display())]);
    let e = other
        .client()
        .connect_volume_v2alpha1()
        .await
        .unwrap()
        .format_volume(vl::FormatVolumeRequest {
            volume_id: vol.clone(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    assert!(
        e.message().contains("-overwrite-unidentified-content"),
        "{}",
        e.message()
    );
    drop(other);

    // The server that started it completes it, and its record goes.
    let c = proxy.client();
    let mut v = c.connect_volume_v2alpha1().await.unwrap();
    v.format_volume(vl::FormatVolumeRequest {
        volume_id: vol.clone(),
    })
    .await
    .unwrap();
    let target = proxy.kubelet.join("pods/k/mnt");
    v.mount_volume(vl::MountVolumeRequest {
        volume_id: vol.clone(),
        target_path: target.display().to_string(),
    })
    .await
    .unwrap();
    assert!(is_mount_point(&target));
    let left: Vec<_> = std::fs::read_dir(state.path().join("formatting"))
        .unwrap()
        .collect();
    assert!(left.is_empty(), "records left: {left:?}");
}

/// A format record names the disk it was made on: a different disk whose
/// GPT partition has the same GUID (a clone, a restored snapshot), with
/// data in that partition's first MiB, does not inherit it. The record is
/// ignored (the format refused as content in doubt) and removed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_format_record_does_not_follow_its_guid_to_another_disk() {
    if !can_run() || !can_throttle() {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let state_flag = format!("-state-dir={}", state.path().display());
    let mut proxy = Proxy::start(&[&state_flag]);
    let mut slow = LoopDisk::new(proxy.root.path(), 128 * MIB);
    let vol = partitioned(&proxy, slow.number).await;
    let part = format!("{}p1", slow.dev);
    let throttle = Throttle::of(&slow);
    let server = proxy.child.as_ref().unwrap().id();
    let mut v = proxy.client().connect_volume_v2alpha1().await.unwrap();
    let format = {
        let id = vol.clone();
        tokio::spawn(async move {
            v.format_volume(vl::FormatVolumeRequest { volume_id: id })
                .await
                .map(drop)
        })
    };
    wait_for("the format's mkfs starts", 20, || {
        server_mkfs_running(server)
    });
    std::thread::sleep(Duration::from_millis(1500));
    proxy.kill_and_restart(&[&state_flag]);
    for pid in mkfs_pids(&part) {
        // SAFETY: kill has no memory preconditions.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    wait_for("the killed mkfs is gone", 30, || !mkfs_on(&part));
    assert!(format.await.unwrap().is_err());
    drop(throttle);
    let records = || {
        std::fs::read_dir(state.path().join("formatting"))
            .map(|d| d.count())
            .unwrap_or(0)
    };
    assert_eq!(records(), 1, "the cut-short format's record stays");

    // Another disk: the same bytes (the same partition GUID), then
    // application data in the partition's first MiB; the first disk gone.
    let clone = proxy.root.path().join("clone.img");
    std::fs::copy(&slow.file, &clone).unwrap();
    let data: Vec<u8> = (0..MIB).map(|i| (i * 7 + 3) as u8).collect();
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&clone)
            .unwrap();
        f.write_all_at(&data, MIB).unwrap();
        f.sync_all().unwrap();
    }
    slow.detach();
    slow.wait_detached();
    let other = LoopDisk::from_file(clone);
    let other_part = format!("{}p1", other.dev);
    proxy.kill_and_restart(&[&state_flag]);
    // The kernel here does not read the table of a disk it attaches:
    // PartitionDisk on a disk that has its data partition only tells the
    // kernel about it.
    proxy
        .client()
        .connect_disk_v1()
        .await
        .unwrap()
        .partition_disk(dk::PartitionDiskRequest {
            disk_number: other.number,
        })
        .await
        .unwrap();
    wait_for("the other disk's partition appears", 10, || {
        std::path::Path::new(&other_part).exists()
    });
    let mut v = proxy.client().connect_volume_v2alpha1().await.unwrap();
    let e = v
        .format_volume(vl::FormatVolumeRequest {
            volume_id: vol.clone(),
        })
        .await
        .expect_err("a record made on another disk");
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    assert!(
        e.message().contains("-overwrite-unidentified-content"),
        "{}",
        e.message()
    );
    let mut head = vec![0u8; MIB as usize];
    std::fs::File::open(&other_part)
        .unwrap()
        .read_exact(&mut head)
        .unwrap();
    assert!(head == data, "the other disk's data was written over");
    assert_eq!(records(), 0, "the record was removed");
    assert!(
        proxy.log().contains("names another disk"),
        "{}",
        proxy.log()
    );
}

/// Rescan while one disk is busy with a slow format: the other disks are
/// refreshed at once and the busy one once its format ends; the call
/// returns (it waits for that disk, it never holds a lock twice).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rescan_during_a_slow_format_returns_after_it() {
    if !can_run() || !can_throttle() {
        return;
    }
    let proxy = Proxy::start(&[]);
    let slow = LoopDisk::new(proxy.root.path(), 128 * MIB);
    let vol = partitioned(&proxy, slow.number).await;
    let throttle = Throttle::of(&slow);
    let server = proxy.child.as_ref().unwrap().id();
    let mut v = proxy.client().connect_volume_v2alpha1().await.unwrap();
    let format = tokio::spawn(async move {
        v.format_volume(vl::FormatVolumeRequest { volume_id: vol })
            .await
            .map(drop)
    });
    wait_for("the format's mkfs starts", 20, || {
        server_mkfs_running(server)
    });
    let mut d = proxy.client().connect_disk_v1().await.unwrap();
    let rescan = tokio::spawn(async move { d.rescan(dk::RescanRequest {}).await.map(drop) });
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert!(
        !format.is_finished(),
        "the throttled format ended too soon to show anything"
    );
    drop(throttle);
    tokio::time::timeout(Duration::from_secs(120), rescan)
        .await
        .expect("Rescan hung behind the busy disk")
        .unwrap()
        .unwrap();
    format.await.unwrap().unwrap();
}
