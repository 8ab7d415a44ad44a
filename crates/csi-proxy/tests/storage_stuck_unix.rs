//! One disk whose reads hang stalls nothing else (issue 39): the real
//! binary, real loop devices, root.
//!
//! The hung disk is a loop device whose backing file is served by a small
//! FUSE server (`storage/hangfs.py`, python3-fusepy) whose reads wait while
//! a marker file exists (as on a multipath LUN queueing without a path; a
//! frozen ext4 under the backing file was tried first, but the kernel
//! serves reads of a frozen file system). A call with an unknown volume id
//! then makes the inventory scan every disk.
//!
//! Quiet first (15 s), then for 60 s with the disk hung, under the same
//! load: the same mix of calls on other disks and other endpoints (Disk,
//! Volume, Filesystem) answer within twice their quiet time; the hung disk's own calls answer `Unavailable`
//! at once; the process holds a bounded number of threads. After the thaw
//! its own calls succeed again.
#![cfg(target_os = "linux")]

mod common;
mod storage;

use common::{partition_and_format, Proxy};
use csi_proxy_api::{disk::v1 as dk, filesystem::v1 as fs, volume::v1 as vl};
use std::process::Command;
use std::time::{Duration, Instant};
use storage::{hang_tests_run, HangFs, LoopDisk, MIB};
use tonic::Code;

/// How long the disk stays hung.
const HUNG_FOR: Duration = Duration::from_secs(60);

/// How long the same load runs with nothing hung, first.
const QUIET_FOR: Duration = Duration::from_secs(15);

fn sh(cmd: &str, args: &[&str]) {
    let st = Command::new(cmd).args(args).status().unwrap();
    assert!(st.success(), "{cmd} {args:?}: {st}");
}

/// Times of one round of calls on healthy disks and other endpoints.
#[derive(Default, Debug)]
struct Round {
    names: Vec<&'static str>,
    took: Vec<Duration>,
}

async fn timed<T>(
    name: &'static str,
    r: &mut Round,
    f: impl std::future::Future<Output = Result<T, tonic::Status>>,
) {
    let t = Instant::now();
    let res = tokio::time::timeout(Duration::from_secs(10), f).await;
    let took = t.elapsed();
    match res {
        Ok(Ok(_)) => {}
        Ok(Err(s)) => panic!("{name} failed: {:?} {}", s.code(), s.message()),
        Err(_) => panic!("{name} did not answer in 10 s"),
    }
    r.names.push(name);
    r.took.push(took);
}

/// One round: every call a driver makes on the healthy disk, plus lists
/// in parallel (more than the async workers), plus Filesystem.
async fn round(p: &Proxy, healthy: u32, id: &str, kubelet: &str) -> Round {
    let c = p.client();
    let mut r = Round::default();
    let mut d = c.connect_disk_v1().await.unwrap();
    let mut v = c.connect_volume_v1().await.unwrap();
    let mut f = fs::filesystem_client::FilesystemClient::new(p.channel("filesystem-v1").await);
    // Lists in parallel, more of them than async workers.
    let lists: Vec<_> = (0..4)
        .map(|_| {
            let mut d = d.clone();
            tokio::spawn(async move {
                let t = Instant::now();
                d.list_disk_locations(dk::ListDiskLocationsRequest {})
                    .await
                    .map(|_| t.elapsed())
            })
        })
        .collect();
    timed(
        "GetDiskStats",
        &mut r,
        d.get_disk_stats(dk::GetDiskStatsRequest {
            disk_number: healthy,
        }),
    )
    .await;
    timed(
        "ListDiskIDs",
        &mut r,
        d.list_disk_i_ds(dk::ListDiskIDsRequest {}),
    )
    .await;
    timed(
        "IsVolumeFormatted",
        &mut r,
        v.is_volume_formatted(vl::IsVolumeFormattedRequest {
            volume_id: id.into(),
        }),
    )
    .await;
    timed(
        "GetDiskNumberFromVolumeID",
        &mut r,
        v.get_disk_number_from_volume_id(vl::GetDiskNumberFromVolumeIdRequest {
            volume_id: id.into(),
        }),
    )
    .await;
    timed(
        "PathExists",
        &mut r,
        f.path_exists(fs::PathExistsRequest {
            path: kubelet.into(),
        }),
    )
    .await;
    timed(
        "Mkdir",
        &mut r,
        f.mkdir(fs::MkdirRequest {
            path: format!("{kubelet}/pods/stuck-test/d{}", rand_dir()),
        }),
    )
    .await;
    for l in lists {
        let took = tokio::time::timeout(Duration::from_secs(10), l)
            .await
            .expect("ListDiskLocations answers")
            .unwrap()
            .expect("ListDiskLocations succeeds");
        r.names.push("ListDiskLocations");
        r.took.push(took);
    }
    r
}

fn rand_dir() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

type Scan = tokio::task::JoinHandle<(Duration, Result<(), Code>)>;

/// GetDiskNumberFromVolumeID with a random id, in the background: a scan
/// of every disk.
fn unknown_id_scan(v: &vl::volume_client::VolumeClient<csi_proxy_client::ProxyChannel>) -> Scan {
    let mut vv = v.clone();
    tokio::spawn(async move {
        let t = Instant::now();
        let r = vv
            .get_disk_number_from_volume_id(vl::GetDiskNumberFromVolumeIdRequest {
                volume_id: random_id(),
            })
            .await;
        (t.elapsed(), r.map(|_| ()).map_err(|s| s.code()))
    })
}

/// Per call name: the median and the maximum over all rounds.
fn summary(rounds: &[Round]) -> std::collections::BTreeMap<&'static str, (Duration, Duration)> {
    let mut by: std::collections::BTreeMap<&'static str, Vec<Duration>> = Default::default();
    for r in rounds {
        for (n, t) in r.names.iter().zip(&r.took) {
            by.entry(n).or_default().push(*t);
        }
    }
    by.into_iter()
        .map(|(n, mut v)| {
            v.sort();
            (n, (v[v.len() / 2], v[v.len() - 1]))
        })
        .collect()
}

fn random_id() -> String {
    let n = (std::process::id() as u128 * 0x9e37_79b9_7f4a_7c15) ^ rand_dir() as u128;
    let g = format!("{:032x}", n.wrapping_mul(0x2545_f491_4f6c_dd1d));
    format!(
        "\\\\?\\Volume{{{}-{}-{}-{}-{}}}\\",
        &g[0..8],
        &g[8..12],
        &g[12..16],
        &g[16..20],
        &g[20..32]
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disk_whose_reads_hang_stalls_no_other_call() {
    if !hang_tests_run() {
        return;
    }
    let p = Proxy::start(&[]);
    let kubelet = p.kubelet.display().to_string();
    std::fs::create_dir_all(p.kubelet.join("pods/stuck-test")).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let healthy = LoopDisk::new(tmp.path(), 64 * MIB);
    let id = partition_and_format(&p.client(), healthy.number).await;
    let fuse = HangFs::new(tmp.path(), 32 * MIB);
    let hung = LoopDisk::from_file(fuse.file());
    // Released before the loop device is detached, whatever happens.
    struct Release<'a>(&'a HangFs);
    impl Drop for Release<'_> {
        fn drop(&mut self) {
            self.0.release();
        }
    }
    let _release = Release(&fuse);
    let c = p.client();
    let mut d = c.connect_disk_v1().await.unwrap();
    let mut v = c.connect_volume_v1().await.unwrap();
    // The disk has a partition table (what a scan reads) and a volume,
    // and the proxy knows both before it hangs.
    let hung_id = partition_and_format(&p.client(), hung.number).await;

    // Quiet: the same rounds under the same load (a scan by an unknown id
    // in the background, the other disk's own calls), nothing hung: what
    // the hang costs is the difference, not the load.
    let mut quiet = Vec::new();
    let mut quiet_ids = Vec::new();
    let begin = Instant::now();
    while begin.elapsed() < QUIET_FOR {
        quiet_ids.push(unknown_id_scan(&v));
        quiet.push(round(&p, healthy.number, &id, &kubelet).await);
        d.get_disk_stats(dk::GetDiskStatsRequest {
            disk_number: hung.number,
        })
        .await
        .expect("the other disk answers while quiet");
        v.is_volume_formatted(vl::IsVolumeFormattedRequest {
            volume_id: hung_id.clone(),
        })
        .await
        .expect("the other disk's volume answers while quiet");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for j in quiet_ids {
        let (took, r) = j.await.unwrap();
        assert!(took < Duration::from_secs(4), "an unknown id took {took:?}");
        // Unavailable when a disk of someone else's on this machine hangs.
        assert!(
            matches!(r, Err(Code::NotFound) | Err(Code::Unavailable)),
            "{r:?}"
        );
    }
    let quiet_threads = p.threads();
    let quiet = summary(&quiet);

    // Hang it: nothing of it cached, then every read waits.
    sh("blockdev", &["--flushbufs", &hung.dev]);
    fuse.hang();

    let start = Instant::now();
    let mut busy = Vec::new();
    let mut unknown_ids = Vec::new();
    let mut max_threads = 0;
    let mut own_unavailable = 0;
    while start.elapsed() < HUNG_FOR {
        // A scan of every disk, started by an unknown id (in the background:
        // it may wait for the hung disk's read timeout).
        unknown_ids.push(unknown_id_scan(&v));
        busy.push(round(&p, healthy.number, &id, &kubelet).await);
        // The hung disk's own calls: Unavailable naming it, at once (once
        // a scan has marked it).
        let t = Instant::now();
        let r = tokio::time::timeout(
            Duration::from_secs(10),
            d.get_disk_stats(dk::GetDiskStatsRequest {
                disk_number: hung.number,
            }),
        )
        .await
        .expect("the hung disk's own call answers");
        if let Err(s) = &r {
            if s.code() == Code::Unavailable {
                assert!(s.message().contains(&hung.name), "{}", s.message());
                assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
                own_unavailable += 1;
            }
        }
        // Its volume's calls too.
        let t = Instant::now();
        let r = tokio::time::timeout(
            Duration::from_secs(10),
            v.is_volume_formatted({
                // Before the disk is marked, the call's read is bounded
                // by the read timeout (below the deadline).
                let mut r = tonic::Request::new(vl::IsVolumeFormattedRequest {
                    volume_id: hung_id.clone(),
                });
                r.set_timeout(Duration::from_secs(3));
                r
            }),
        )
        .await
        .expect("the hung disk's volume call answers");
        match &r {
            // The first call that reads it waits at most the read
            // timeout, which marks it; later ones answer at once.
            Err(s) if s.code() == Code::Unavailable => {
                assert!(
                    t.elapsed()
                        < csi_proxy_host::storage::inventory::READ_TIMEOUT + Duration::from_secs(1),
                    "{:?}",
                    t.elapsed()
                );
                own_unavailable += 1;
            }
            // The server's DeadlineExceeded, or the client's own timeout.
            Err(s) => assert!(
                matches!(s.code(), Code::DeadlineExceeded | Code::Cancelled),
                "{:?} {}",
                s.code(),
                s.message()
            ),
            Ok(_) => panic!("a read of the hung disk answered"),
        }
        max_threads = max_threads.max(p.threads());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let busy_summary = summary(&busy);
    eprintln!("quiet (median, max): {quiet:?}");
    eprintln!("hung  (median, max): {busy_summary:?}");
    eprintln!(
        "threads: quiet {quiet_threads}, at most {max_threads} while hung; {own_unavailable} Unavailable answers for the hung disk"
    );
    for j in unknown_ids {
        let (took, r) = j.await.unwrap();
        assert!(took < Duration::from_secs(4), "an unknown id took {took:?}");
        assert!(
            matches!(r, Err(Code::NotFound) | Err(Code::Unavailable)),
            "{r:?}"
        );
    }

    // Released: the disk answers again.
    fuse.release();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let r = d
            .get_disk_stats(dk::GetDiskStatsRequest {
                disk_number: hung.number,
            })
            .await;
        match r {
            Ok(s) => {
                assert_eq!(s.into_inner().total_bytes as u64, 32 * MIB);
                break;
            }
            Err(s) if Instant::now() < deadline => {
                assert_eq!(s.code(), Code::Unavailable, "{}", s.message());
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(s) => panic!("the disk does not answer after the thaw: {s:?}"),
        }
    }
    let after_threads = p.threads();
    eprintln!("threads after the thaw: {after_threads}");

    assert!(
        own_unavailable > 0,
        "the hung disk's calls were never answered Unavailable"
    );
    // Bounded: the stuck inventory reads and calls of one disk, plus what
    // the quiet load used (the tokio blocking pool grows with concurrent
    // calls, not with time).
    assert!(
        max_threads
            <= quiet_threads
                + csi_proxy_host::storage::inventory::DISK_THREADS
                + csi_proxy_host::storage::budget::DISK_CALLS
                + 8,
        "threads grew from {quiet_threads} to {max_threads}"
    );
    // Every call on other disks and endpoints: median within twice quiet
    // (a floor of 5 ms for sub-millisecond calls on a shared machine), and
    // none near a deadline.
    for (name, (q_med, _)) in &quiet {
        let (b_med, b_max) = busy_summary[name];
        let limit = (*q_med * 2).max(Duration::from_millis(5));
        assert!(
            b_med <= limit,
            "{name}: median {b_med:?} while a disk hangs, {q_med:?} quiet"
        );
        assert!(b_max < Duration::from_secs(1), "{name}: max {b_max:?}");
    }
}

/// Rescan while a disk's reads hang (a hung loop disk of another process
/// once held Rescan for minutes in `pread`): it answers OK within a bound,
/// the other disks are rescanned (a grown loop disk shows its new size),
/// and the hung disk's own calls then answer `Unavailable` naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rescan_while_a_disk_hangs_refreshes_the_others() {
    if !hang_tests_run() {
        return;
    }
    let p = Proxy::start(&[]);
    let tmp = tempfile::tempdir().unwrap();
    let healthy = LoopDisk::new(tmp.path(), 64 * MIB);
    let fuse = HangFs::new(tmp.path(), 32 * MIB);
    let hung = LoopDisk::from_file(fuse.file());
    struct Release<'a>(&'a HangFs);
    impl Drop for Release<'_> {
        fn drop(&mut self) {
            self.0.release();
        }
    }
    let _release = Release(&fuse);
    let mut d = p.client().connect_disk_v1().await.unwrap();
    // The hung disk has a partition table and the proxy knows it.
    partition_and_format(&p.client(), hung.number).await;
    let size = |d: &mut dk::disk_client::DiskClient<_>, n: u32| {
        let mut d = d.clone();
        async move {
            d.get_disk_stats(dk::GetDiskStatsRequest { disk_number: n })
                .await
                .map(|s| s.into_inner().total_bytes as u64)
        }
    };
    assert_eq!(size(&mut d, healthy.number).await.unwrap(), 64 * MIB);

    sh("blockdev", &["--flushbufs", &hung.dev]);
    fuse.hang();
    // The healthy disk grows: only a rescan (LOOP_SET_CAPACITY) shows it.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&healthy.file)
        .unwrap()
        .set_len(96 * MIB)
        .unwrap();

    let t = Instant::now();
    let r = tokio::time::timeout(Duration::from_secs(20), d.rescan(dk::RescanRequest {}))
        .await
        .expect("Rescan did not return while a disk hangs");
    let took = t.elapsed();
    eprintln!("Rescan took {took:?} while a disk hangs");
    r.expect("Rescan answers OK for the other disks");
    // Host scans and disk refreshes each wait at most the read timeout.
    assert!(
        took < 3 * csi_proxy_host::storage::inventory::READ_TIMEOUT,
        "Rescan took {took:?}"
    );
    assert_eq!(
        size(&mut d, healthy.number).await.unwrap(),
        96 * MIB,
        "the healthy disk was not rescanned"
    );
    let t = Instant::now();
    let e = size(&mut d, hung.number).await.unwrap_err();
    assert_eq!(e.code(), Code::Unavailable, "{}", e.message());
    assert!(e.message().contains(&hung.name), "{}", e.message());
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());

    fuse.release();
}

/// The first call that reads a disk whose reads hang (before any scan
/// has marked it) waits at most the read timeout and marks the disk: it
/// answers `Unavailable` naming the disk, and every later call on the
/// disk answers so at once, instead of each waiting its own deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_read_of_a_hung_disk_marks_it_within_the_read_timeout() {
    if !hang_tests_run() {
        return;
    }
    let read_timeout = csi_proxy_host::storage::inventory::READ_TIMEOUT;
    let p = Proxy::start(&[]);
    let tmp = tempfile::tempdir().unwrap();
    let fuse = HangFs::new(tmp.path(), 32 * MIB);
    let hung = LoopDisk::from_file(fuse.file());
    struct Release<'a>(&'a HangFs);
    impl Drop for Release<'_> {
        fn drop(&mut self) {
            self.0.release();
        }
    }
    let _release = Release(&fuse);
    let hung_id = partition_and_format(&p.client(), hung.number).await;
    let mut v = p.client().connect_volume_v1().await.unwrap();
    let mut d = p.client().connect_disk_v1().await.unwrap();
    // Known, answering, nothing of it cached; then every read waits.
    sh("blockdev", &["--flushbufs", &hung.dev]);
    fuse.hang();

    let formatted = |v: &mut vl::volume_client::VolumeClient<_>| {
        let mut v = v.clone();
        let id = hung_id.clone();
        async move {
            let mut r = tonic::Request::new(vl::IsVolumeFormattedRequest { volume_id: id });
            r.set_timeout(Duration::from_secs(10));
            let t = Instant::now();
            let r = tokio::time::timeout(Duration::from_secs(15), v.is_volume_formatted(r))
                .await
                .expect("IsVolumeFormatted answers");
            (t.elapsed(), r)
        }
    };
    // The first call reads the disk.
    let (took, r) = formatted(&mut v).await;
    eprintln!("first call on the hung disk: {took:?} {r:?}");
    let s = r.expect_err("a read of the hung disk answered");
    assert_eq!(s.code(), Code::Unavailable, "{}", s.message());
    assert!(s.message().contains(&hung.name), "{}", s.message());
    assert!(took < read_timeout + Duration::from_secs(1), "{took:?}");
    // Later calls on the disk and its volume: at once.
    for _ in 0..3 {
        let (took, r) = formatted(&mut v).await;
        let s = r.expect_err("a read of the hung disk answered");
        assert_eq!(s.code(), Code::Unavailable, "{}", s.message());
        assert!(took < Duration::from_millis(500), "{took:?}");
        let t = Instant::now();
        let mut req = tonic::Request::new(dk::GetDiskStatsRequest {
            disk_number: hung.number,
        });
        req.set_timeout(Duration::from_secs(10));
        let s = d.get_disk_stats(req).await.unwrap_err();
        assert_eq!(s.code(), Code::Unavailable, "{}", s.message());
        assert!(s.message().contains(&hung.name), "{}", s.message());
        assert!(
            t.elapsed() < Duration::from_millis(500),
            "{:?}",
            t.elapsed()
        );
    }

    // Released: the disk and its volume answer again.
    fuse.release();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        match formatted(&mut v).await.1 {
            Ok(r) => {
                assert!(r.into_inner().formatted);
                break;
            }
            Err(s) if Instant::now() < deadline => {
                assert_eq!(s.code(), Code::Unavailable, "{}", s.message());
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(s) => panic!("the disk does not answer after the thaw: {s:?}"),
        }
    }
}
