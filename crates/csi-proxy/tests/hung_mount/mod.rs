//! A FUSE mount whose daemon never answers, for the tests of calls stuck
//! in a file system that hangs.
#![allow(dead_code)]

/// Whether the tests with a hung FUSE mount run here (root, /dev/fuse); in
/// CI they must.
pub fn fuse_tests_run() -> bool {
    if nix::unistd::geteuid().is_root() && std::path::Path::new("/dev/fuse").exists() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI must run this test: needs root and /dev/fuse"
    );
    eprintln!("skipping: needs root and /dev/fuse");
    false
}

/// A FUSE mount at `at` whose daemon never answers (this process holds
/// /dev/fuse and never reads it): every request under it waits. Dropped:
/// the connection is aborted (waiting calls fail) and the mount detached.
pub struct HungMount(std::path::PathBuf, Option<std::fs::File>);

impl HungMount {
    pub fn at(at: &std::path::Path) -> HungMount {
        use std::os::fd::AsRawFd;
        std::fs::create_dir_all(at).unwrap();
        let fuse = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/fuse")
            .unwrap();
        let opts = format!(
            "fd={},rootmode=40000,user_id=0,group_id=0,allow_other",
            fuse.as_raw_fd()
        );
        nix::mount::mount(
            Some("stuckfs"),
            at,
            Some("fuse.stuckfs"),
            nix::mount::MsFlags::empty(),
            Some(opts.as_str()),
        )
        .unwrap();
        HungMount(at.to_path_buf(), Some(fuse))
    }
}

impl Drop for HungMount {
    fn drop(&mut self) {
        drop(self.1.take());
        let _ = nix::mount::umount2(&self.0, nix::mount::MntFlags::MNT_DETACH);
    }
}

/// `from` bound at `at` (created), detached when dropped.
pub struct Bind(std::path::PathBuf);

impl Bind {
    pub fn at(from: &std::path::Path, at: &std::path::Path) -> Bind {
        std::fs::create_dir_all(at).unwrap();
        nix::mount::mount(
            Some(from),
            at,
            None::<&str>,
            nix::mount::MsFlags::MS_BIND,
            None::<&str>,
        )
        .unwrap();
        Bind(at.to_path_buf())
    }
}

impl Drop for Bind {
    fn drop(&mut self) {
        let _ = nix::mount::umount2(&self.0, nix::mount::MntFlags::MNT_DETACH);
    }
}
