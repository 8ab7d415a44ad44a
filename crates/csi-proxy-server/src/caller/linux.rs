//! Linux: peer credentials and `/proc/<pid>`.
//!
//! The pid-reuse window is closed where the kernel can (Linux 6.5+): a
//! pidfd of the peer (`SO_PEERPIDFD`) is taken before `/proc/<pid>` is
//! read, and asked afterwards whether that process still exists. A pid is
//! reused only once its process is gone (reaped), so if it still exists,
//! what was read is its; if not, the exe and cgroup fields are dropped.

use super::{cgroup, Caller};
use std::os::fd::{AsRawFd, OwnedFd};
#[cfg(test)]
use std::path::Path;
use std::path::PathBuf;

pub(super) fn identify(stream: &tokio::net::UnixStream) -> Caller {
    let Ok(cred) = stream.peer_cred() else {
        return Caller::default();
    };
    let pid = cred
        .pid()
        .and_then(|p| u32::try_from(p).ok())
        .filter(|p| *p > 0);
    let mut caller = Caller {
        pid,
        uid: Some(cred.uid()),
        gid: Some(cred.gid()),
        ..Caller::default()
    };
    let Some(pid) = pid else {
        return caller;
    };
    let pidfd = peer_pidfd(stream);
    let proc = PathBuf::from(format!("/proc/{pid}"));
    // Unreadable for another user's process when the proxy is not root.
    caller.exe = std::fs::read_link(proc.join("exe"))
        .ok()
        .map(|p| p.to_string_lossy().into_owned());
    caller.own_mount_ns = same_file(
        &proc.join("ns/mnt"),
        std::path::Path::new("/proc/self/ns/mnt"),
    );
    if super::hashes_executables() {
        caller.exe_sha256 = exe_digest(&proc.join("exe"));
    }
    if let Ok(text) = std::fs::read_to_string(proc.join("cgroup")) {
        let pod = cgroup::parse(&text, &cgroup::kubepods_roots());
        caller.pod_uid = pod.pod_uid;
        caller.container_id = pod.container_id;
    }
    if pidfd.as_ref().is_some_and(|fd| !exists(fd)) {
        // Gone: the pid may already name another process.
        caller.exe = None;
        caller.exe_sha256 = None;
        caller.own_mount_ns = None;
        caller.pod_uid = None;
        caller.container_id = None;
    }
    caller
}

/// Whether two paths name the same file (namespaces compare so).
fn same_file(a: &std::path::Path, b: &std::path::Path) -> Option<bool> {
    use std::os::unix::fs::MetadataExt;
    let (a, b) = (std::fs::metadata(a).ok()?, std::fs::metadata(b).ok()?);
    Some(a.dev() == b.dev() && a.ino() == b.ino())
}

/// Executables larger than this are not hashed (`exe_sha256` left out).
const MAX_HASHED: u64 = 512 << 20;

/// Digests already computed, by the file's identity and change times.
type DigestKey = (u64, u64, u64, i64, i64, i64, i64);
static DIGESTS: std::sync::Mutex<Vec<(DigestKey, String)>> = std::sync::Mutex::new(Vec::new());
/// Most digests kept.
const DIGESTS_KEPT: usize = 64;

/// SHA-256 of the file the kernel maps as the process's executable: the
/// `/proc/<pid>/exe` link is opened (the file itself, in whatever mount
/// namespace, even deleted), never its path text. Cached by device,
/// inode, size and modification and change times: a file rewritten in
/// place changes its change time, which no caller can set.
fn exe_digest(link: &std::path::Path) -> Option<String> {
    use std::io::Read;
    use std::os::unix::fs::MetadataExt;
    let mut f = std::fs::File::open(link).ok()?;
    let m = f.metadata().ok()?;
    if !m.is_file() || m.len() > MAX_HASHED {
        return None;
    }
    let key = (
        m.dev(),
        m.ino(),
        m.len(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec(),
    );
    let kept = |k: &DigestKey| {
        DIGESTS
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .find(|(c, _)| c == k)
            .map(|(_, d)| d.clone())
    };
    if let Some(d) = kept(&key) {
        return Some(d);
    }
    let mut h = super::sha256::Sha256::default();
    let mut buf = vec![0u8; 256 << 10];
    let mut total = 0u64;
    loop {
        let n = f.read(&mut buf).ok()?;
        if n == 0 {
            break;
        }
        total += n as u64;
        if total > MAX_HASHED {
            return None;
        }
        h.update(&buf[..n]);
    }
    // Changed while read: no digest rather than one of a mixture.
    let after = f.metadata().ok()?;
    if (
        after.len(),
        after.mtime(),
        after.mtime_nsec(),
        after.ctime(),
        after.ctime_nsec(),
    ) != (
        m.len(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec(),
    ) {
        return None;
    }
    let d = h.hex();
    let mut all = DIGESTS.lock().unwrap_or_else(|p| p.into_inner());
    if all.len() >= DIGESTS_KEPT {
        all.remove(0);
    }
    all.push((key, d.clone()));
    Some(d)
}

/// A pidfd of the process that connected (`None` before Linux 6.5).
fn peer_pidfd(stream: &tokio::net::UnixStream) -> Option<OwnedFd> {
    nix::sys::socket::getsockopt(stream, nix::sys::socket::sockopt::PeerPidfd).ok()
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

    #[tokio::test]
    async fn a_socket_pair_names_this_process() {
        let (a, _b) = tokio::net::UnixStream::pair().unwrap();
        let c = identify(&a);
        assert_eq!(c.pid, Some(std::process::id()));
        assert_eq!(c.uid, Some(nix::unistd::geteuid().as_raw()));
        assert_eq!(c.gid, Some(nix::unistd::getegid().as_raw()));
        let exe = std::env::current_exe().unwrap();
        assert_eq!(c.exe.as_deref(), Some(exe.to_str().unwrap()));
        assert_eq!(c.own_mount_ns, Some(true));
        let mut h = super::super::sha256::Sha256::default();
        h.update(&std::fs::read(&exe).unwrap());
        assert_eq!(exe_digest(Path::new("/proc/self/exe")), Some(h.hex()));
        // Linux 6.5+: the peer's pidfd names a live process.
        if let Some(fd) = peer_pidfd(&a) {
            assert!(exists(&fd));
        }
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
        let c = identify(&stream);
        assert!(c.pid.is_some() && c.uid.is_some(), "{c:?}");
        if peer_pidfd(&stream).is_some() {
            assert_eq!(c.exe, None, "{c:?}");
        }
    }
}
