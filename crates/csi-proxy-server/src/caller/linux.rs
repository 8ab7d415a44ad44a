//! Linux: peer credentials and `/proc/<pid>`.

use super::{cgroup, Caller};
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
    if let Some(pid) = pid {
        let proc = PathBuf::from(format!("/proc/{pid}"));
        // Unreadable for another user's process when the proxy is not root.
        caller.exe = std::fs::read_link(proc.join("exe"))
            .ok()
            .map(|p| p.to_string_lossy().into_owned());
        if let Ok(text) = std::fs::read_to_string(proc.join("cgroup")) {
            let pod = cgroup::parse(&text);
            caller.pod_uid = pod.pod_uid;
            caller.container_id = pod.container_id;
        }
    }
    caller
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
    }
}
