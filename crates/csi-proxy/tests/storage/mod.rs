//! Loop-device disks for the storage tests and benches: a sparse backing
//! file attached with partition scanning ([`attach`]), detached (after
//! unmounting whatever is still mounted from it) when the fixture drops,
//! even if the test panicked; and [`Server`], a csi-proxy started and
//! waited for (the benches; `#[path]`-included there, and in csi-proxy-host's
//! loop-disk tests: so it uses std only; what needs the proxy's client is in
//! `tests/common/mod.rs`).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const MIB: u64 = 1024 * 1024;

const THROTTLE: &str = "/sys/fs/cgroup/blkio/blkio.throttle.write_bps_device";
/// Writes to the slow disk, in bytes per second: mkfs.ext4 of 128 MiB
/// writes several MiB (journal, tables), so it takes seconds.
pub const SLOW_BPS: u64 = MIB;

/// The block layer throttles every write to one device while this lives.
pub struct Throttle(String);

impl Throttle {
    /// Writes to `d` at [`SLOW_BPS`].
    pub fn of(d: &LoopDisk) -> Throttle {
        Throttle::at(d, SLOW_BPS)
    }

    /// Writes to `d` at `bps` bytes per second.
    pub fn at(d: &LoopDisk, bps: u64) -> Throttle {
        let dev = std::fs::read_to_string(format!("/sys/block/{}/dev", d.name)).unwrap();
        let key = dev.trim().to_string();
        std::fs::write(THROTTLE, format!("{key} {bps}")).unwrap();
        Throttle(key)
    }
}

impl Drop for Throttle {
    fn drop(&mut self) {
        if let Err(e) = std::fs::write(THROTTLE, format!("{} 0", self.0)) {
            eprintln!("cleanup: unthrottle {}: {e}", self.0);
        }
    }
}

/// Whether the throttle exists here (cgroup v1 blkio); else says why not.
pub fn can_throttle() -> bool {
    let ok = Path::new(THROTTLE).exists();
    if !ok {
        eprintln!("skipping: needs the cgroup v1 blkio throttle ({THROTTLE}) to slow one disk");
    }
    ok
}

/// Storage tests need root (loop devices, mount). CI runs as root; elsewhere
/// they are skipped with a message.
pub fn can_run() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let ok = root && Path::new("/dev/loop-control").exists() && tool("losetup").is_some();
    if !ok {
        eprintln!("skipping: storage tests need root, /dev/loop-control and losetup");
    }
    ok
}

pub fn tool(name: &str) -> Option<PathBuf> {
    ["/usr/sbin", "/sbin", "/usr/bin", "/bin"]
        .iter()
        .map(|d| Path::new(d).join(name))
        .find(|p| p.exists())
}

fn run(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(tool(cmd).unwrap_or_else(|| panic!("{cmd} not installed")))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// One loop disk.
pub struct LoopDisk {
    pub file: PathBuf,
    /// `/dev/loopN`.
    pub dev: String,
    /// `loopN`.
    pub name: String,
    /// The disk number csi-proxy reports (the kernel's diskseq).
    pub number: u32,
    detached: bool,
}

impl LoopDisk {
    /// A disk of `size` bytes backed by a sparse file in `dir`.
    pub fn new(dir: &Path, size: u64) -> LoopDisk {
        let file = dir.join(format!(
            "disk-{}.img",
            std::process::id() as u64 * 1000 + rand_u16() as u64
        ));
        let f = std::fs::File::create(&file).unwrap();
        f.set_len(size).unwrap();
        drop(f);
        LoopDisk::from_file(file)
    }

    /// A disk backed by an existing file (e.g. a copy of another disk's).
    pub fn from_file(file: PathBuf) -> LoopDisk {
        let (dev, number) = attach(&file, false);
        let name = dev.trim_start_matches("/dev/").to_string();
        LoopDisk {
            file,
            dev,
            name,
            number,
            detached: false,
        }
    }

    /// Attaches the backing file again after [`LoopDisk::detach`]: to the
    /// same device if it is still free (the kernel gives it a new
    /// `diskseq`), else to any free one. Returns whether it is the same.
    pub fn reattach(&mut self) -> bool {
        assert!(self.detached, "attached");
        let file = self.file.to_str().unwrap().to_string();
        let same = Command::new(tool("losetup").unwrap())
            .args(["--partscan", &self.dev, &file])
            .status()
            .is_ok_and(|s| s.success());
        if !same {
            self.dev = run("losetup", &["--find", "--show", "--partscan", &file]);
            self.name = self.dev.trim_start_matches("/dev/").to_string();
        }
        self.number = diskseq(&self.name);
        self.detached = false;
        same
    }

    /// Picks up a grown backing file (`losetup --set-capacity`, from this
    /// process, not through csi-proxy).
    pub fn set_capacity(&self) {
        run("losetup", &["--set-capacity", &self.dev]);
    }

    /// Waits until the kernel has really detached the device (a detach
    /// while another process has it open completes at its last close).
    pub fn wait_detached(&self) {
        let size = format!("/sys/block/{}/size", self.name);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::fs::read_to_string(&size).is_ok_and(|s| s.trim() != "0") {
            assert!(
                std::time::Instant::now() < deadline,
                "{} still attached",
                self.dev
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// Grows the backing file (the disk itself changes at the next Rescan).
    pub fn grow_file(&self, size: u64) {
        std::fs::OpenOptions::new()
            .write(true)
            .open(&self.file)
            .unwrap()
            .set_len(size)
            .unwrap();
    }

    /// Detaches the device now (a disk that vanishes); the backing file
    /// stays until the fixture drops.
    pub fn detach(&mut self) {
        self.cleanup();
    }

    fn mounts_of_this_disk(&self) -> Vec<PathBuf> {
        let mut devs = vec![dev_of(&format!("/sys/block/{}/dev", self.name))];
        if let Ok(rd) = std::fs::read_dir(format!("/sys/block/{}", self.name)) {
            for e in rd.flatten() {
                let p = e.path().join("dev");
                if e.file_name().to_string_lossy().starts_with(&self.name) && p.exists() {
                    devs.push(dev_of(p.to_str().unwrap()));
                }
            }
        }
        mounts()
            .into_iter()
            .filter(|(dev, _)| devs.contains(dev))
            .map(|(_, at)| at)
            .collect()
    }

    fn cleanup(&mut self) {
        if self.detached {
            return;
        }
        self.detached = true;
        for m in self.mounts_of_this_disk().into_iter().rev() {
            use std::os::unix::ffi::OsStrExt;
            let c = std::ffi::CString::new(m.as_os_str().as_bytes()).unwrap();
            // SAFETY: umount2 with a valid C string.
            if unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } != 0 {
                eprintln!("cleanup: umount {m:?}: {}", std::io::Error::last_os_error());
            }
        }
        // Make sure the device is writable again before detaching.
        let _ = Command::new(tool("blockdev").unwrap_or_default())
            .args(["--setrw", &self.dev])
            .status();
        let st = Command::new(tool("losetup").unwrap())
            .args(["-d", &self.dev])
            .status();
        if !matches!(st, Ok(s) if s.success()) {
            eprintln!("cleanup: losetup -d {} failed", self.dev);
        }
    }
}

fn dev_of(path: &str) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .trim()
        .to_string()
}

fn rand_u16() -> u16 {
    let mut b = [0u8; 2];
    // SAFETY: getrandom writes 2 bytes into the live buffer.
    unsafe { libc::getrandom(b.as_mut_ptr().cast(), 2, 0) };
    u16::from_le_bytes(b)
}

impl Drop for LoopDisk {
    fn drop(&mut self) {
        self.cleanup();
        let _ = std::fs::remove_file(&self.file);
    }
}

/// Attaches `file` to a free loop device with partition scanning (`direct`:
/// its reads bypass the page cache of the file): the device (`/dev/loopN`)
/// and its disk number. Detaching is the caller's.
pub fn attach(file: &Path, direct: bool) -> (String, u32) {
    let file = file.to_str().unwrap();
    let dev = if direct {
        run(
            "losetup",
            &["--find", "--show", "--partscan", "--direct-io=on", file],
        )
    } else {
        run("losetup", &["--find", "--show", "--partscan", file])
    };
    let number = diskseq(dev.trim_start_matches("/dev/"));
    (dev, number)
}

/// Writes one GPT partition (from sector 2048 to the end) on loop device
/// `dev`, tells the kernel (BLKPG: it may not parse the table itself),
/// waits for the partition's node and makes ext4 on it: the node.
pub fn one_ext4_partition(dev: &str) -> String {
    use std::io::Write;
    let mut sfdisk = Command::new(tool("sfdisk").expect("sfdisk not installed"))
        .args(["-q", dev])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    sfdisk
        .stdin
        .take()
        .unwrap()
        .write_all(b"label: gpt\nstart=2048, type=L\n")
        .unwrap();
    assert!(sfdisk.wait().unwrap().success());
    // The kernel may have read the new table itself meanwhile.
    let _ = Command::new(tool("partx").expect("partx not installed"))
        .args(["-a", dev])
        .output();
    let part = format!("{dev}p1");
    for _ in 0..100 {
        if Path::new(&part).exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    run("mkfs.ext4", &["-q", "-F", &part]);
    part
}

/// Writes `bytes` at `offset` of the block device `dev`, and syncs.
pub fn write_dev(dev: &str, offset: u64, bytes: &[u8]) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().write(true).open(dev).unwrap();
    f.write_all_at(bytes, offset).unwrap();
    f.sync_all().unwrap();
}

/// `n` bytes at `offset` of the block device `dev`.
pub fn read_dev(dev: &str, offset: u64, n: usize) -> Vec<u8> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::open(dev).unwrap();
    let mut b = vec![0; n];
    f.read_exact_at(&mut b, offset).unwrap();
    b
}

/// A sparse file of `size` bytes at `path`.
pub fn sparse_file(path: &Path, size: u64) {
    std::fs::File::create(path).unwrap().set_len(size).unwrap();
}

/// A csi-proxy process (the benches'), killed when dropped.
pub struct Server(pub Child);

impl Server {
    /// Starts the csi-proxy binary `bin` with `flags`, its log in `log`,
    /// and waits (20 s at most) until it says it is ready.
    pub fn start(bin: &str, flags: &[String], log: &Path) -> Server {
        let server = Server(
            Command::new(bin)
                .args(flags)
                .stderr(std::fs::File::create(log).unwrap())
                .stdout(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let deadline = Instant::now() + Duration::from_secs(20);
        while !std::fs::read_to_string(log)
            .unwrap_or_default()
            .contains("csi-proxy ready")
        {
            assert!(Instant::now() < deadline, "server not ready");
            std::thread::sleep(Duration::from_millis(20));
        }
        server
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The `diskseq` of a block device (csi-proxy's disk number).
pub fn diskseq(name: &str) -> u32 {
    std::fs::read_to_string(format!("/sys/block/{name}/diskseq"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// This process's mounts, (`major:minor`, mount point).
pub fn mounts() -> Vec<(String, PathBuf)> {
    mounts_of("self")
}

/// The mounts of process `pid` (a number or `self`), (`major:minor`,
/// mount point), read as bytes (a mount point need not be UTF-8; the
/// kernel escapes space, tab, newline and backslash as `\NNN`).
pub fn mounts_of(pid: &str) -> Vec<(String, PathBuf)> {
    use std::os::unix::ffi::OsStringExt;
    let info = std::fs::read(format!("/proc/{pid}/mountinfo")).unwrap_or_default();
    let unescape = |f: &[u8]| {
        let mut out = Vec::new();
        let mut i = 0;
        while i < f.len() {
            let oct = f
                .get(i + 1..i + 4)
                .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
            match (f[i], oct) {
                (b'\\', Some(d)) => {
                    out.push(d.iter().fold(0u8, |a, c| a.wrapping_mul(8) + (c - b'0')));
                    i += 4;
                }
                (c, _) => {
                    out.push(c);
                    i += 1;
                }
            }
        }
        PathBuf::from(std::ffi::OsString::from_vec(out))
    };
    info.split(|&b| b == b'\n')
        .filter_map(|l| {
            let f: Vec<&[u8]> = l.split(|&b| b == b' ').collect();
            (f.len() > 4).then(|| (String::from_utf8_lossy(f[2]).into_owned(), unescape(f[4])))
        })
        .collect()
}

/// Is `path` a mount point (per /proc/self/mountinfo)?
pub fn is_mount_point(path: &Path) -> bool {
    mounts().iter().any(|(_, at)| at == path)
}

/// Does the mount table of process `pid` have a mount at `at`?
pub fn mounted_in(pid: u32, at: &Path) -> bool {
    mounts_of(&pid.to_string()).iter().any(|(_, m)| m == at)
}

/// For `pre_exec`: moves the child into a mount namespace of its own, a
/// private copy of the parent's (mounts made on either side stay there).
/// Only system calls, nothing allocated.
pub fn private_mount_namespace() -> std::io::Result<()> {
    use nix::mount::{mount, MsFlags};
    // SAFETY: unshare takes no pointers.
    if unsafe { libc::unshare(libc::CLONE_NEWNS) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )?;
    Ok(())
}

/// A process that holds `node` (ext4) mounted at `at` in a mount namespace
/// of its own (a private copy of this test's, where the proxy cannot see
/// that mount), once the mount is there.
pub fn mount_in_another_namespace(node: &Path, at: &Path) -> std::process::Child {
    use std::os::unix::process::CommandExt;
    std::fs::create_dir_all(at).unwrap();
    let (node_c, at_c) = (node.to_path_buf(), at.to_path_buf());
    let mut cmd = Command::new(tool("sleep").unwrap_or_else(|| "/bin/sleep".into()));
    cmd.arg("120");
    // SAFETY: between fork and exec only system calls are made (unshare,
    // mount); nix passes these short paths through a stack buffer, so
    // nothing is allocated in the child.
    unsafe {
        cmd.pre_exec(move || {
            private_mount_namespace()?;
            nix::mount::mount(
                Some(&node_c),
                &at_c,
                Some("ext4"),
                nix::mount::MsFlags::empty(),
                None::<&str>,
            )?;
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    for _ in 0..200 {
        if mounted_in(child.id(), at) {
            return child;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("the other namespace never mounted {at:?}");
}

/// The device node of a disk's first partition.
pub fn partition_node(d: &LoopDisk) -> PathBuf {
    [format!("/dev/{}p1", d.name), format!("/dev/{}1", d.name)]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .expect("the partition node")
}

/// statvfs total bytes of the filesystem at `path`.
pub fn fs_total(path: &Path) -> u64 {
    let st = nix::sys::statvfs::statvfs(path).unwrap();
    st.blocks() as u64 * st.fragment_size() as u64
}

/// Whether a test that hangs disks runs here (root, loop devices,
/// /dev/fuse, python3-fusepy); CI installs them (scripts/setup.sh), so
/// there it must.
pub fn hang_tests_run() -> bool {
    if can_run() && can_hang() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI must run this test: needs root, loop devices, /dev/fuse and python3-fusepy"
    );
    eprintln!("skipping: needs root, loop devices, /dev/fuse and python3-fusepy");
    false
}

/// A FUSE file system (`storage/hangfs.py`) serving one file whose reads
/// and writes wait while a marker file exists.
pub struct HangFs {
    mnt: std::path::PathBuf,
    marker: std::path::PathBuf,
    server: Child,
}

impl HangFs {
    pub fn new(root: &Path, size: u64) -> HangFs {
        let back = root.join("backing.img");
        std::fs::File::create(&back).unwrap().set_len(size).unwrap();
        let mnt = root.join("hangfs");
        std::fs::create_dir_all(&mnt).unwrap();
        let marker = root.join("hang");
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../csi-proxy/tests/storage/hangfs.py"
        );
        let server = Command::new("/usr/bin/python3")
            .arg(script)
            .args([&back, &marker, &mnt])
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while !mnt.join("disk.img").exists() {
            assert!(Instant::now() < deadline, "the FUSE server did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        HangFs {
            mnt,
            marker,
            server,
        }
    }

    pub fn file(&self) -> std::path::PathBuf {
        self.mnt.join("disk.img")
    }

    pub fn hang(&self) {
        std::fs::write(&self.marker, b"").unwrap();
    }

    pub fn release(&self) {
        let _ = std::fs::remove_file(&self.marker);
    }
}

impl Drop for HangFs {
    fn drop(&mut self) {
        self.release();
        let _ = Command::new("fusermount").arg("-u").arg(&self.mnt).status();
        let _ = self.server.kill();
        let _ = self.server.wait();
        // Still mounted when the file was busy (a reader left behind):
        // lazily, so no dead mount is left.
        let _ = Command::new("umount")
            .arg("-l")
            .arg(&self.mnt)
            .stderr(Stdio::null())
            .status();
    }
}

/// Whether FUSE and the helper's Python module are here.
pub fn can_hang() -> bool {
    Path::new("/dev/fuse").exists()
        && Command::new("/usr/bin/python3")
            .args(["-c", "import fusepy"])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
}
