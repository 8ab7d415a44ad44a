//! One disk whose reads hang stalls nothing else (issue 39): the real
//! binary, real loop devices, root.
//!
//! The hung disk is a loop device whose backing file sits on an ext4 that
//! is frozen (`fsfreeze`) with one direct write to the loop device queued:
//! the loop worker waits for the thaw, and every read queued behind the
//! write waits too (as on a multipath LUN queueing without a path). A call
//! with an unknown volume id then makes the inventory scan every disk.
//!
//! Quiet first, then for 60 s with the disk hung: the same mix of calls on
//! other disks and other endpoints (Disk, Volume, Filesystem) answer within
//! twice their quiet time; the hung disk's own calls answer `Unavailable`
//! at once; the process holds a bounded number of threads. After the thaw
//! its own calls succeed again.
#![cfg(target_os = "linux")]

mod common;
mod storage;

use common::Proxy;
use csi_proxy_api::{disk::v1 as dk, filesystem::v1 as fs, volume::v1 as vl};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use storage::{can_run, partition_and_format, LoopDisk, MIB};
use tonic::Code;

/// How long the disk stays hung.
const HUNG_FOR: Duration = Duration::from_secs(60);

fn threads(pid: u32) -> usize {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap()
}

fn sh(cmd: &str, args: &[&str]) {
    let st = Command::new(cmd).args(args).status().unwrap();
    assert!(st.success(), "{cmd} {args:?}: {st}");
}

/// An ext4 on a loop device, mounted at `dir`, frozen and thawed on demand.
struct FrozenFs {
    dir: std::path::PathBuf,
    dev: String,
    frozen: bool,
}

impl FrozenFs {
    fn new(root: &Path) -> FrozenFs {
        let img = root.join("outer.img");
        std::fs::File::create(&img)
            .unwrap()
            .set_len(96 * MIB)
            .unwrap();
        sh("mkfs.ext4", &["-q", "-F", img.to_str().unwrap()]);
        let out = Command::new("losetup")
            .args(["--find", "--show", img.to_str().unwrap()])
            .output()
            .unwrap();
        let dev = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let dir = root.join("outer");
        std::fs::create_dir_all(&dir).unwrap();
        sh("mount", &[&dev, dir.to_str().unwrap()]);
        FrozenFs {
            dir,
            dev,
            frozen: false,
        }
    }

    fn freeze(&mut self) {
        sh("fsfreeze", &["-f", self.dir.to_str().unwrap()]);
        self.frozen = true;
    }

    fn thaw(&mut self) {
        if self.frozen {
            sh("fsfreeze", &["-u", self.dir.to_str().unwrap()]);
            self.frozen = false;
        }
    }
}

impl Drop for FrozenFs {
    fn drop(&mut self) {
        self.thaw();
        let _ = Command::new("umount").arg(&self.dir).status();
        let _ = Command::new("losetup").args(["-d", &self.dev]).status();
    }
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
    timed("GetDiskStats", &mut r, d.get_disk_stats(dk::GetDiskStatsRequest { disk_number: healthy })).await;
    timed("ListDiskIDs", &mut r, d.list_disk_i_ds(dk::ListDiskIDsRequest {})).await;
    timed(
        "IsVolumeFormatted",
        &mut r,
        v.is_volume_formatted(vl::IsVolumeFormattedRequest { volume_id: id.into() }),
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
        f.path_exists(fs::PathExistsRequest { path: kubelet.into() }),
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
    let n = std::process::id() as u128 * 0x9e37_79b9_7f4a_7c15 ^ rand_dir() as u128;
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
    if !can_run() || storage::tool("fsfreeze").is_none() {
        eprintln!("skipping: needs root, loop devices and fsfreeze");
        return;
    }
    let p = Proxy::start(&[]);
    let pid = p.child.as_ref().unwrap().id();
    let kubelet = p.kubelet.display().to_string();
    std::fs::create_dir_all(p.kubelet.join("pods/stuck-test")).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let healthy = LoopDisk::new(tmp.path(), 64 * MIB);
    let id = partition_and_format(&p.client(), healthy.number).await;
    let mut outer = FrozenFs::new(tmp.path());
    let hung = LoopDisk::new(&outer.dir, 32 * MIB);
    let c = p.client();
    let mut d = c.connect_disk_v1().await.unwrap();
    let mut v = c.connect_volume_v1().await.unwrap();
    // The proxy knows the disk before it hangs.
    d.get_disk_stats(dk::GetDiskStatsRequest {
        disk_number: hung.number,
    })
    .await
    .expect("the disk answers before it hangs");

    // Quiet: the same rounds, nothing hung.
    let mut quiet = Vec::new();
    for _ in 0..10 {
        quiet.push(round(&p, healthy.number, &id, &kubelet).await);
    }
    let quiet_threads = threads(pid);
    let quiet = summary(&quiet);

    // Hang it: nothing of it cached, the fs frozen, one write queued.
    sh("blockdev", &["--flushbufs", &hung.dev]);
    outer.freeze();
    let mut writer: Child = Command::new("dd")
        .args([
            "if=/dev/zero",
            &format!("of={}", hung.dev),
            "bs=4096",
            "count=1",
            "oflag=direct",
            "conv=notrunc",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(writer.try_wait().unwrap().is_none(), "the queued write waits for the thaw");

    let start = Instant::now();
    let mut busy = Vec::new();
    let mut unknown_ids = Vec::new();
    let mut max_threads = 0;
    let mut own_unavailable = 0;
    while start.elapsed() < HUNG_FOR {
        // A scan of every disk, started by an unknown id (in the background:
        // it may wait for the hung disk's read timeout).
        let mut vv = v.clone();
        unknown_ids.push(tokio::spawn(async move {
            let t = Instant::now();
            let r = vv
                .get_disk_number_from_volume_id(vl::GetDiskNumberFromVolumeIdRequest {
                    volume_id: random_id(),
                })
                .await;
            (t.elapsed(), r.map(|_| ()).map_err(|s| s.code()))
        }));
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
        max_threads = max_threads.max(threads(pid));
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

    // Thaw: the write goes through, the disk answers again.
    outer.thaw();
    assert!(writer.wait().unwrap().success());
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
    let after_threads = threads(pid);
    eprintln!("threads after the thaw: {after_threads}");

    assert!(own_unavailable > 0, "the hung disk's calls were never answered Unavailable");
    // Bounded: the stuck reads of one disk, plus what the quiet load used
    // (the tokio blocking pool grows with concurrent calls, not with time).
    assert!(
        max_threads <= quiet_threads + csi_proxy_host::storage::inventory::DISK_THREADS + 8,
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
