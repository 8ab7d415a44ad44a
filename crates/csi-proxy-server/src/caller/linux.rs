//! Linux: peer credentials and `/proc/<pid>`.
//!
//! The pid-reuse window is closed where the kernel can (Linux 6.5+): a
//! pidfd of the peer (`SO_PEERPIDFD`) is taken before `/proc/<pid>` is
//! read, and asked afterwards whether that process still exists. A pid is
//! reused only once its process is gone (reaped), so if it still exists,
//! what was read is its; if not, the exe and cgroup fields are dropped.
//! On every kernel the pid is also bound to its start time
//! (`/proc/<pid>/stat` field 22, [`super::started`]): the same before and
//! after the reads, and not later than the accept; otherwise the caller is
//! unknown.

use super::{cgroup, digest, started, Caller};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
#[cfg(test)]
use std::path::Path;
use std::path::PathBuf;
use std::time::Instant;

/// The identity of the client of the socket `sock`: `/proc` is read on
/// the blocking pool, in identification slots ([`super::slots`]); the
/// executable's digest, when a rule needs it, is waited for without a
/// thread or a slot ([`digest::exe_digest`]); then the process is checked
/// to be the same one (again in slots). `None`: no slot or thread in time.
/// `accepted`: when the connection was accepted ([`boot_ticks`]).
pub(super) async fn identify(
    sock: OwnedFd,
    until: Instant,
    accepted: Option<u64>,
    uid: Option<u32>,
) -> Option<Caller> {
    let gathered = super::slots::blocking(uid, move || gather(&sock, accepted)).await?;
    let mut g = match gathered {
        Ok(g) => g,
        Err(caller) => return Some(*caller),
    };
    let digest = match (g.hash.take(), g.exe.take()) {
        (Some((who, class)), Some(exe)) => Some(digest::exe_digest(exe, who, class, until).await),
        // Not a regular file, or gone: no digest (a rule on it refuses).
        (Some(_), None) => Some(Ok(None)),
        (None, _) => None,
    };
    super::slots::blocking(uid, move || conclude(g, digest)).await
}

/// What [`gather`] read of the process, to [`conclude`] after the digest.
pub(super) struct Gathered {
    caller: Caller,
    /// Who pays for the digest, when one is needed.
    hash: Option<(digest::Spender, digest::Class)>,
    /// The executable as found, to hash (taken when a digest is needed).
    exe: Option<digest::Exe>,
    /// Its device and inode, to find it again in [`conclude`].
    exe_id: Option<(u64, u64)>,
    proc: PathBuf,
    pidfd: Option<OwnedFd>,
    before: Option<u64>,
    accepted: Option<u64>,
}

/// The blocking reads (`/proc`) before the digest; `Err`: all there is.
fn gather(sock: &impl AsFd, accepted: Option<u64>) -> Result<Gathered, Box<Caller>> {
    use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
    let Ok(cred) = getsockopt(sock, PeerCredentials) else {
        return Err(Box::default());
    };
    let pid = u32::try_from(cred.pid()).ok().filter(|p| *p > 0);
    let mut caller = Caller {
        pid,
        uid: Some(cred.uid()),
        gid: Some(cred.gid()),
        ..Caller::default()
    };
    let Some(pid) = pid else {
        return Err(Box::new(caller));
    };
    let pidfd = peer_pidfd(sock);
    let proc = PathBuf::from(format!("/proc/{pid}"));
    let before = start_time(&proc);
    // Unreadable for another user's process when the proxy is not root.
    caller.exe = std::fs::read_link(proc.join("exe"))
        .ok()
        .map(|p| p.to_string_lossy().into_owned());
    caller.own_mount_ns = same_file(
        &proc.join("ns/mnt"),
        std::path::Path::new("/proc/self/ns/mnt"),
    );
    if let Ok(text) = std::fs::read_to_string(proc.join("cgroup")) {
        let pod = cgroup::parse(&text, &cgroup::kubepods_roots());
        caller.pod_uid = pod.pod_uid;
        caller.container_id = pod.container_id;
    }
    // Paid from the budget of its pod (whatever uid it runs as: root in a
    // container may take any uid, red team 40ident), or outside a pod of
    // its uid.
    let hash = super::hashes_executables().then(|| {
        (
            digest::spender(caller.uid, &caller.pod_uid),
            super::hash_class(caller.uid, &caller.pod_uid),
        )
    });
    let exe = hash
        .as_ref()
        .and_then(|_| digest::Exe::of(&proc.join("exe")));
    let exe_id = exe.as_ref().map(digest::Exe::id);
    Ok(Gathered {
        caller,
        hash,
        exe,
        exe_id,
        proc,
        pidfd,
        before,
        accepted,
    })
}

/// After the digest (`None`: none was asked for): the process must still
/// be the one read, or what was read of it is dropped.
fn conclude(g: Gathered, digest: Option<Result<Option<String>, digest::Refused>>) -> Caller {
    let mut caller = g.caller;
    match digest {
        Some(Ok(d)) => caller.exe_sha256 = d,
        Some(Err(refused)) => caller.incomplete = Some(refused.reason()),
        None => {}
    }
    // The same program still: an exec since gather (same pid, same start
    // time) would have the digest name a file the process no longer runs.
    if let Some(then) = g.exe_id {
        let now = digest::Exe::of(&g.proc.join("exe")).map(|e| e.id());
        if now != Some(then) {
            caller.exe = None;
            caller.exe_sha256 = None;
            caller.incomplete = Some(EXE_CHANGED);
        }
    }
    if g.pidfd.as_ref().is_some_and(|fd| !exists(fd)) {
        // Gone: the pid may already name another process.
        caller.exe = None;
        caller.exe_sha256 = None;
        caller.own_mount_ns = None;
        caller.pod_uid = None;
        caller.container_id = None;
    } else if !started::same_process(g.before, start_time(&g.proc))
        || !started::started_by(g.before, g.accepted)
    {
        // Another process by now, or one that started after the accept.
        started::forget_process(&mut caller);
    }
    caller
}

/// The audit text of a caller whose process ran another program while it
/// was identified.
pub const EXE_CHANGED: &str =
    "the process ran another program while it was identified: its executable is unknown";

/// The start time of the process at `proc` (`/proc/<pid>`).
fn start_time(proc: &std::path::Path) -> Option<u64> {
    std::fs::read_to_string(proc.join("stat"))
        .ok()
        .and_then(|s| started::stat_start_time(&s))
}

/// Now, in clock ticks (`USER_HZ`, the unit of `/proc/<pid>/stat`'s start
/// time) since boot, suspend included (`CLOCK_BOOTTIME`, the clock the
/// kernel takes start times from). No I/O: fit for the accept loop.
pub(super) fn boot_ticks() -> Option<u64> {
    let now = nix::time::clock_gettime(nix::time::ClockId::CLOCK_BOOTTIME).ok()?;
    let hz = u64::try_from(nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK).ok()??).ok()?;
    let ns =
        u64::try_from(now.tv_sec()).ok()? * 1_000_000_000 + u64::try_from(now.tv_nsec()).ok()?;
    Some(ns / (1_000_000_000 / hz.max(1)))
}

/// Whether two paths name the same file (namespaces compare so).
fn same_file(a: &std::path::Path, b: &std::path::Path) -> Option<bool> {
    use std::os::unix::fs::MetadataExt;
    let (a, b) = (std::fs::metadata(a).ok()?, std::fs::metadata(b).ok()?);
    Some(a.dev() == b.dev() && a.ino() == b.ino())
}

/// A pidfd of the process that connected (`None` before Linux 6.5).
fn peer_pidfd(sock: &impl AsFd) -> Option<OwnedFd> {
    nix::sys::socket::getsockopt(sock, nix::sys::socket::sockopt::PeerPidfd).ok()
}

/// Whether the process behind `pidfd` still exists (a zombie counts: its
/// pid is not free yet).
fn exists(pidfd: &OwnedFd) -> bool {
    // SAFETY: pidfd_send_signal with signal 0 sends nothing, it only
    // checks; the descriptor is alive (borrowed), the info pointer null.
    let r = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            0,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    // EPERM: it exists, we may not signal it.
    r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`identify`] of a stream's client, past any deadline of its own.
    async fn identify_stream(
        s: &tokio::net::UnixStream,
        until: Instant,
        accepted: Option<u64>,
    ) -> Caller {
        let fd = s.as_fd().try_clone_to_owned().unwrap();
        identify(fd, until, accepted, None).await.expect("slots")
    }

    #[tokio::test]
    async fn a_socket_pair_names_this_process() {
        let (a, _b) = tokio::net::UnixStream::pair().unwrap();
        let until = Instant::now() + std::time::Duration::from_secs(30);
        let c = identify_stream(&a, until, boot_ticks()).await;
        assert_eq!(c.incomplete, None, "{c:?}");
        assert_eq!(c.pid, Some(std::process::id()));
        assert_eq!(c.uid, Some(nix::unistd::geteuid().as_raw()));
        assert_eq!(c.gid, Some(nix::unistd::getegid().as_raw()));
        let exe = std::env::current_exe().unwrap();
        assert_eq!(c.exe.as_deref(), Some(exe.to_str().unwrap()));
        assert_eq!(c.own_mount_ns, Some(true));
        use sha2::Digest;
        let want = digest::hex(&sha2::Sha256::digest(std::fs::read(&exe).unwrap()));
        let who = (Some(u32::MAX), None);
        let exe = digest::Exe::of(Path::new("/proc/self/exe")).unwrap();
        let got = digest::exe_digest(exe, who, digest::Class::Other, until).await;
        assert_eq!(got, Ok(Some(want)));
        // Linux 6.5+: the peer's pidfd names a live process.
        if let Some(fd) = peer_pidfd(&a) {
            assert!(exists(&fd));
        }
    }

    /// Run by [`the_digest_is_of_the_file_run_at_identification`]: waits
    /// for a line on stdin, then execs `EXEC_OTHER` (a no-op otherwise).
    #[test]
    fn exec_child() {
        use std::os::unix::process::CommandExt;
        let Some(other) = std::env::var_os("EXEC_OTHER") else {
            return;
        };
        println!("READY");
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).unwrap();
        let e = std::process::Command::new(other).arg("30").exec();
        panic!("exec: {e}");
    }

    #[tokio::test]
    async fn the_digest_is_of_the_file_run_at_identification() {
        // Red team 40async A1: the hash thread opened /proc/<pid>/exe after
        // the process had exec'd an allowed program, and the caller passed
        // an exe_sha256 rule as that program.
        use sha2::Digest;
        use std::io::{BufRead, Write};
        let dir = tempfile::tempdir().unwrap();
        let other = dir.path().join("other");
        std::fs::copy("/bin/sleep", &other).unwrap();
        let me = std::env::current_exe().unwrap();
        let mut child = std::process::Command::new(&me)
            .args(["--exact", "caller::linux::tests::exec_child", "--nocapture"])
            .env("EXEC_OTHER", &other)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        while !line.contains("READY") {
            line.clear();
            assert!(out.read_line(&mut line).unwrap() > 0, "the child ended");
        }
        let proc_exe = PathBuf::from(format!("/proc/{}/exe", child.id()));
        // Identification takes the file now ...
        let exe = digest::Exe::of(&proc_exe).unwrap();
        let then = exe.id();
        // ... the process runs another program before the hash ...
        child.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
        let deadline = Instant::now() + std::time::Duration::from_secs(10);
        while std::fs::read_link(&proc_exe).ok().as_deref() != Some(other.as_path()) {
            assert!(Instant::now() < deadline, "the child did not exec");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        // ... and the digest is still of the file taken.
        let until = Instant::now() + std::time::Duration::from_secs(30);
        let got =
            digest::exe_digest(exe, (Some(u32::MAX - 1), None), digest::Class::Other, until).await;
        let want = digest::hex(&sha2::Sha256::digest(std::fs::read(&me).unwrap()));
        let theirs = digest::hex(&sha2::Sha256::digest(std::fs::read(&other).unwrap()));
        assert_eq!(got, Ok(Some(want)));
        assert_ne!(got, Ok(Some(theirs)));
        // The same-program check sees the exec.
        assert_ne!(digest::Exe::of(&proc_exe).map(|e| e.id()), Some(then));
        let _ = child.kill();
        let _ = child.wait();
    }

    #[tokio::test]
    async fn a_process_that_started_after_the_accept_is_unknown() {
        // This process stands for one that took the pid after the accept:
        // a connection accepted at boot (tick 0) cannot be its.
        let (a, _b) = tokio::net::UnixStream::pair().unwrap();
        let until = Instant::now() + std::time::Duration::from_secs(30);
        let c = identify_stream(&a, until, Some(0)).await;
        assert_eq!(c.incomplete, Some(started::PROCESS_CHANGED), "{c:?}");
        assert_eq!(c.exe, None);
        assert_eq!(c.pod_uid, None);
        assert_eq!(c.own_mount_ns, None);
        assert_eq!(c.pid, Some(std::process::id()));
        assert_eq!(c.uid, Some(nix::unistd::geteuid().as_raw()));
        // The accept time is now or later than the process start.
        let own = std::fs::read_to_string("/proc/self/stat").unwrap();
        let start = started::stat_start_time(&own).unwrap();
        assert!(start <= boot_ticks().unwrap());
    }

    #[tokio::test]
    async fn a_client_gone_before_the_reads_keeps_only_its_credentials() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let listener = tokio::net::UnixListener::bind(&path).unwrap();
        // A client that connects and exits (and is reaped) before accept.
        let status = std::process::Command::new("python3")
            .arg("-c")
            .arg("import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])")
            .arg(&path)
            .status();
        let Ok(status) = status else {
            eprintln!("SKIPPED: needs python3 for a short-lived client");
            return;
        };
        assert!(status.success());
        let (stream, _) = listener.accept().await.unwrap();
        let c = identify_stream(&stream, Instant::now(), boot_ticks()).await;
        assert!(c.pid.is_some() && c.uid.is_some(), "{c:?}");
        if peer_pidfd(&stream).is_some() {
            assert_eq!(c.exe, None, "{c:?}");
        }
    }
}
