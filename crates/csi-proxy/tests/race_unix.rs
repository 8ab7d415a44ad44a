//! A hostile plugin against the real binary: while its calls run, it swaps
//! a parent directory of the paths it names with a link to a tree outside
//! the roots (`renameat2(RENAME_EXCHANGE)` in a tight loop). For each of
//! Mkdir, Rmdir, Rmdir(force), RmdirContents, CreateSymlink/LinkPath,
//! MountVolume and UnmountVolume, four clients call the proxy for the whole
//! run (`RACE_SECONDS`, default 10) while the swapper runs; the outside
//! trees (paths, modes, contents, link targets and the mounts below them)
//! must be the same afterwards, and no mount may appear below them or
//! disappear from them at any moment (a watcher polls the mount table).
//!
//! Needs root (mounts, loop devices); CI runs as root.
#![cfg(target_os = "linux")]

mod common;
mod storage;

use common::{partition_and_format, Proxy};
use csi_proxy_api::{filesystem, volume};
use nix::fcntl::{renameat2, OFlag, RenameFlags};
use nix::sys::stat::Mode;
use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use storage::{can_run, LoopDisk, MIB};

const CLIENTS: usize = 4;

fn s(p: &Path) -> String {
    p.display().to_string()
}

fn run_for() -> Duration {
    let secs = std::env::var("RACE_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    Duration::from_secs(secs)
}

/// Swaps `<dir>/p` (a directory) and `<dir>/l` (a link to the outside
/// tree) until stopped; returns the number of swaps.
fn swapper(dir: &Path, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    let fd: OwnedFd =
        nix::fcntl::open(dir, OFlag::O_PATH | OFlag::O_DIRECTORY, Mode::empty()).unwrap();
    std::thread::spawn(move || {
        let mut n = 0u64;
        while !stop.load(Ordering::Relaxed) {
            renameat2(&fd, "p", &fd, "l", RenameFlags::RENAME_EXCHANGE).unwrap();
            n += 1;
            // A short pause: seven swappers spinning flat out on a small
            // machine would starve the proxy and its clients, and fewer
            // calls would meet a swap. Each state lasts tens of
            // microseconds, about one system call of the proxy. An odd
            // number of swaps per pause, so both states get the pauses.
            if n.is_multiple_of(3) {
                std::thread::sleep(Duration::from_micros(10));
            }
        }
        n
    })
}

/// Every path below `dir` with its type, mode, content or link target, and
/// every mount at or below it (mount point, device, mount id).
fn snapshot(dir: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let md = std::fs::symlink_metadata(&p).unwrap();
            let mode = md.permissions().mode();
            let what = if md.file_type().is_symlink() {
                format!("link {:?}", std::fs::read_link(&p).unwrap())
            } else if md.is_dir() {
                stack.push(p.clone());
                format!("dir {mode:o}")
            } else {
                format!(
                    "file {mode:o} {:?} uid {}",
                    std::fs::read(&p).unwrap(),
                    md.uid()
                )
            };
            out.insert(s(&p), what);
        }
    }
    for (mp, what) in mounts_below(dir) {
        out.insert(format!("mount {mp}"), what);
    }
    out
}

/// Mounts at or below `dir` (from this namespace's mount table).
fn mounts_below(dir: &Path) -> Vec<(String, String)> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let d = s(dir);
    info.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let mp = f.get(4)?.replace("\\040", " ");
            (mp == d || mp.starts_with(&format!("{d}/")))
                .then(|| (mp, format!("id {} dev {}", f[0], f[2])))
        })
        .collect()
}

/// One attacked operation: its own directory in the kubelet dir (with `p`
/// and the link `l`) and its own outside tree.
struct Arena {
    name: &'static str,
    dir: PathBuf,
    outside: PathBuf,
}

impl Arena {
    fn new(proxy: &Proxy, name: &'static str) -> Arena {
        let dir = proxy.kubelet.join(format!("race-{name}"));
        let outside = proxy.outside.join(name);
        std::fs::create_dir_all(dir.join("p")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, dir.join("l")).unwrap();
        Arena { name, dir, outside }
    }

    /// `p/<rel>` as the client names it.
    fn at(&self, rel: &str) -> String {
        s(&self.dir.join("p").join(rel))
    }

    /// Plant `rel` in the outside tree: a directory with a file and a link.
    fn plant(&self, rel: &str) {
        let d = self.outside.join(rel);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("precious"), format!("{} {rel}", self.name)).unwrap();
        std::fs::set_permissions(d.join("precious"), std::fs::Permissions::from_mode(0o640))
            .unwrap();
        let _ = std::os::unix::fs::symlink("/etc/hostname", d.join("link"));
    }
}

/// Counts of what the clients saw.
#[derive(Default)]
struct Tally {
    ok: AtomicU64,
    denied: AtomicU64,
    other: AtomicU64,
}

impl Tally {
    fn note<T>(&self, r: Result<T, tonic::Status>) {
        match r {
            Ok(_) => self.ok.fetch_add(1, Ordering::Relaxed),
            Err(s) if s.code() == tonic::Code::PermissionDenied => {
                self.denied.fetch_add(1, Ordering::Relaxed)
            }
            Err(_) => self.other.fetch_add(1, Ordering::Relaxed),
        };
    }
    fn show(&self) -> String {
        format!(
            "ok {} denied {} other {}",
            self.ok.load(Ordering::Relaxed),
            self.denied.load(Ordering::Relaxed),
            self.other.load(Ordering::Relaxed)
        )
    }
}

/// The partitioned, formatted volume of a new loop disk.
async fn volume_of(proxy: &Proxy, disk: &LoopDisk) -> String {
    partition_and_format(&proxy.client(), disk.number).await
}

/// The device node of a disk's first partition.
fn partition_node(disk: &LoopDisk) -> PathBuf {
    for cand in [
        format!("/dev/{}p1", disk.name),
        format!("/dev/{}1", disk.name),
    ] {
        if Path::new(&cand).exists() {
            return PathBuf::from(cand);
        }
    }
    panic!("no partition node for {}", disk.name)
}

fn mount_at(node: &Path, target: &str) -> nix::Result<()> {
    nix::mount::mount(
        Some(node),
        target,
        Some("ext4"),
        nix::mount::MsFlags::empty(),
        None::<&str>,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn swapped_parents_never_lead_outside() {
    if !can_run() {
        return;
    }
    let proxy = Proxy::start_on_tmpfs(&[]);
    let mk = Arena::new(&proxy, "mkdir");
    let rm = Arena::new(&proxy, "rmdir");
    let force = Arena::new(&proxy, "rmdir-force");
    let contents = Arena::new(&proxy, "rmdir-contents");
    let link = Arena::new(&proxy, "symlink");
    let mount = Arena::new(&proxy, "mount");
    let unmount = Arena::new(&proxy, "unmount");
    for i in 0..CLIENTS {
        mk.plant(&format!("a{i}"));
        rm.plant(&format!("x{i}"));
        // Rmdir takes only empty directories: an empty one outside too.
        std::fs::create_dir_all(rm.outside.join(format!("e{i}"))).unwrap();
        force.plant(&format!("y{i}/z"));
        contents.plant(&format!("c{i}/deeper"));
        link.plant(&format!("keep{i}"));
        std::fs::create_dir_all(mount.outside.join(format!("m{i}"))).unwrap();
        std::fs::create_dir_all(unmount.outside.join(format!("m{i}"))).unwrap();
    }
    let src = proxy.kubelet.join("race-symlink-source");
    std::fs::create_dir_all(&src).unwrap();

    // Two volumes: one the clients mount and unmount; one the test mounts
    // both outside (the mount the attack aims at) and, again and again,
    // inside the arena (the mounts the clients may legitimately unmount).
    let disk_a = LoopDisk::new(proxy.root.path(), 64 * MIB);
    let disk_b = LoopDisk::new(proxy.root.path(), 64 * MIB);
    let vol_a = volume_of(&proxy, &disk_a).await;
    let vol_b = volume_of(&proxy, &disk_b).await;
    let node_b = partition_node(&disk_b);
    for i in 0..CLIENTS {
        mount_at(&node_b, &s(&unmount.outside.join(format!("m{i}")))).unwrap();
        std::fs::create_dir_all(unmount.dir.join(format!("p/m{i}"))).unwrap();
    }

    let arenas = [&mk, &rm, &force, &contents, &link, &mount, &unmount];
    let before: Vec<_> = arenas.iter().map(|a| snapshot(&a.outside)).collect();
    let expected_mounts: Vec<_> = arenas.iter().map(|a| mounts_below(&a.outside)).collect();

    // The real directory of the unmount arena, opened before any swap (a
    // handle on it stays valid whatever name it has).
    let unmount_real = nix::fcntl::open(
        &unmount.dir.join("p"),
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW,
        Mode::empty(),
    )
    .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let swappers: Vec<_> = arenas
        .iter()
        .map(|a| swapper(&a.dir, stop.clone()))
        .collect();

    // The watcher: no mount ever appears below, or disappears from, an
    // outside tree while the clients run.
    let violations = Arc::new(Mutex::new(Vec::<String>::new()));
    let watcher = {
        let stop = stop.clone();
        let violations = violations.clone();
        let outsides: Vec<PathBuf> = arenas.iter().map(|a| a.outside.clone()).collect();
        let expected = expected_mounts.clone();
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                for (o, want) in outsides.iter().zip(&expected) {
                    let now = mounts_below(o);
                    if &now != want {
                        violations
                            .lock()
                            .unwrap()
                            .push(format!("mounts below {o:?}: {now:?}, expected {want:?}"));
                    }
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        })
    };

    // The remounter: keeps volume B mounted at every p/m<i> of the unmount
    // arena (through a handle on the real directory, whatever its name).
    let remounter = {
        let stop = stop.clone();
        let real = unmount_real;
        let node = node_b.clone();
        std::thread::spawn(move || {
            let mut mounts = 0u64;
            while !stop.load(Ordering::Relaxed) {
                for i in 0..CLIENTS {
                    let t = format!("/proc/self/fd/{}/m{i}", real.as_raw_fd());
                    if mount_at(&node, &t).is_ok() {
                        mounts += 1;
                    }
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            // Leave nothing mounted inside.
            for i in 0..CLIENTS {
                let t = format!("/proc/self/fd/{}/m{i}", real.as_raw_fd());
                while nix::mount::umount2(t.as_str(), nix::mount::MntFlags::empty()).is_ok() {}
            }
            mounts
        })
    };

    let deadline = Instant::now() + run_for();
    let tallies: Vec<Arc<Tally>> = (0..arenas.len()).map(|_| Arc::default()).collect();
    let mut tasks = tokio::task::JoinSet::new();
    let source = s(&src);
    for i in 0..CLIENTS {
        // One connection and one task per client and operation, so a slow
        // operation (a mount) does not hold the others back.
        let c = proxy.client();
        let t = tallies.clone();
        let (a, b) = (mk.at(&format!("a{i}/b/c")), mk.at(&format!("a{i}")));
        let mut fs = c.connect_filesystem_v1().await.unwrap();
        tasks.spawn(async move {
            use filesystem::v1::*;
            while Instant::now() < deadline {
                t[0].note(fs.mkdir(MkdirRequest { path: a.clone() }).await);
                t[0].note(
                    fs.rmdir(RmdirRequest {
                        path: b.clone(),
                        force: true,
                    })
                    .await,
                );
            }
        });
        let t = tallies.clone();
        let (x, e) = (rm.at(&format!("x{i}")), rm.at(&format!("e{i}")));
        let mut fs = c.connect_filesystem_v1().await.unwrap();
        tasks.spawn(async move {
            use filesystem::v1::*;
            while Instant::now() < deadline {
                let _ = fs.mkdir(MkdirRequest { path: x.clone() }).await;
                t[1].note(
                    fs.rmdir(RmdirRequest {
                        path: x.clone(),
                        force: false,
                    })
                    .await,
                );
                // An empty directory of that name exists only outside.
                t[1].note(
                    fs.rmdir(RmdirRequest {
                        path: e.clone(),
                        force: false,
                    })
                    .await,
                );
            }
        });
        let t = tallies.clone();
        let (z, y) = (force.at(&format!("y{i}/z")), force.at(&format!("y{i}")));
        let mut fs = c.connect_filesystem_v1().await.unwrap();
        tasks.spawn(async move {
            use filesystem::v1::*;
            while Instant::now() < deadline {
                let _ = fs.mkdir(MkdirRequest { path: z.clone() }).await;
                t[2].note(
                    fs.rmdir(RmdirRequest {
                        path: y.clone(),
                        force: true,
                    })
                    .await,
                );
            }
        });
        let t = tallies.clone();
        let (q, cdir) = (
            contents.at(&format!("c{i}/q")),
            contents.at(&format!("c{i}")),
        );
        let mut fs = c.connect_filesystem_v1().await.unwrap();
        let mut fs2 = c.connect_filesystem_v2alpha1().await.unwrap();
        tasks.spawn(async move {
            while Instant::now() < deadline {
                let _ = fs
                    .mkdir(filesystem::v1::MkdirRequest { path: q.clone() })
                    .await;
                t[3].note(
                    fs2.rmdir_contents(filesystem::v2alpha1::RmdirContentsRequest {
                        path: cdir.clone(),
                    })
                    .await,
                );
            }
        });
        let t = tallies.clone();
        let l = link.at(&format!("keep{i}/s"));
        let source = source.clone();
        let mut fs = c.connect_filesystem_v1().await.unwrap();
        let mut old = c.connect_filesystem_v1beta1().await.unwrap();
        tasks.spawn(async move {
            use filesystem::v1::*;
            while Instant::now() < deadline {
                let _ = fs.mkdir(MkdirRequest { path: parent(&l) }).await;
                t[4].note(
                    fs.create_symlink(CreateSymlinkRequest {
                        source_path: source.clone(),
                        target_path: l.clone(),
                    })
                    .await,
                );
                let _ = fs
                    .rmdir(RmdirRequest {
                        path: l.clone(),
                        force: false,
                    })
                    .await;
                t[4].note(
                    old.link_path(filesystem::v1beta1::LinkPathRequest {
                        source_path: source.clone(),
                        target_path: l.clone(),
                    })
                    .await,
                );
                let _ = fs
                    .rmdir(RmdirRequest {
                        path: l.clone(),
                        force: false,
                    })
                    .await;
            }
        });
        let t = tallies.clone();
        let (m, vol_a) = (mount.at(&format!("m{i}")), vol_a.clone());
        let mut vol = c.connect_volume_v1().await.unwrap();
        tasks.spawn(async move {
            while Instant::now() < deadline {
                t[5].note(
                    vol.mount_volume(volume::v1::MountVolumeRequest {
                        volume_id: vol_a.clone(),
                        target_path: m.clone(),
                    })
                    .await,
                );
                let _ = vol
                    .unmount_volume(volume::v1::UnmountVolumeRequest {
                        volume_id: vol_a.clone(),
                        target_path: m.clone(),
                    })
                    .await;
            }
        });
        let t = tallies.clone();
        let (u, vol_b) = (unmount.at(&format!("m{i}")), vol_b.clone());
        let mut vol = c.connect_volume_v1().await.unwrap();
        tasks.spawn(async move {
            while Instant::now() < deadline {
                t[6].note(
                    vol.unmount_volume(volume::v1::UnmountVolumeRequest {
                        volume_id: vol_b.clone(),
                        target_path: u.clone(),
                    })
                    .await,
                );
                // Give the remounter a moment to mount it again.
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    let swaps: Vec<u64> = swappers.into_iter().map(|h| h.join().unwrap()).collect();
    watcher.join().unwrap();
    let remounts = remounter.join().unwrap();

    // Clean the mount arena (a client may have left volume A mounted).
    for name in ["p", "l"] {
        let real = mount.dir.join(name);
        if real.is_symlink() {
            continue;
        }
        for i in 0..CLIENTS {
            let _ = nix::mount::umount2(&real.join(format!("m{i}")), nix::mount::MntFlags::empty());
        }
    }

    let report: Vec<String> = arenas
        .iter()
        .zip(&tallies)
        .zip(&swaps)
        .map(|((a, t), n)| format!("{}: {} swaps, {}", a.name, n, t.show()))
        .collect();
    eprintln!(
        "race report:\n  {}\n  remounts of B inside: {remounts}",
        report.join("\n  ")
    );
    let v = violations.lock().unwrap();
    assert!(
        v.is_empty(),
        "{} violations, first: {:?}",
        v.len(),
        v.first()
    );
    for (a, b) in arenas.iter().zip(&before) {
        assert_eq!(
            &snapshot(&a.outside),
            b,
            "{}: the outside tree changed",
            a.name
        );
    }
    // The attack really ran: many swaps, and every operation both got
    // through (the directory was in place) and was refused (the link was).
    for ((a, t), n) in arenas.iter().zip(&tallies).zip(&swaps) {
        assert!(*n > 1000, "{}: only {n} swaps", a.name);
        assert!(
            t.ok.load(Ordering::Relaxed) > 0,
            "{}: no call succeeded: {}",
            a.name,
            t.show()
        );
        assert!(
            t.denied.load(Ordering::Relaxed) > 0,
            "{}: no call met the link: {}",
            a.name,
            t.show()
        );
    }
    assert!(remounts > 0);
    for i in 0..CLIENTS {
        let _ = nix::mount::umount2(
            &unmount.outside.join(format!("m{i}")),
            nix::mount::MntFlags::empty(),
        );
    }
    drop(proxy);
}

fn parent(p: &str) -> String {
    Path::new(p).parent().unwrap().display().to_string()
}
