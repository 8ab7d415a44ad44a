//! The confined filesystem: splitting paths below their roots (every OS),
//! and on Linux the real operations with links planted inside the roots
//! that lead outside (never followed, same answer whether their target
//! exists or not), deep trees and mount points.

use super::*;

#[test]
fn located_below_the_most_specific_root() {
    let policy = PathPolicy::new(Flavor::Unix, ["/k", "/k/plugins/x", "/w"]).unwrap();
    let l = locate(&policy, "/k/plugins/x/a/b").unwrap();
    assert_eq!(l.root, 1);
    assert_eq!(l.rel(), ["a", "b"]);
    let l = locate(&policy, "/k/plugins/y").unwrap();
    assert_eq!((l.root, l.rel()), (0, vec!["plugins", "y"]));
    let l = locate(&policy, "/w/").unwrap();
    assert!(l.is_root() && l.name().is_none() && l.parent().is_none());
    let w = PathPolicy::new(Flavor::Windows, [r"C:\var\lib\kubelet", r"d:\"]).unwrap();
    let l = locate(&w, r"c:\VAR\lib\kubelet\pods\x").unwrap();
    assert_eq!((l.root, l.rel()), (0, vec!["pods", "x"]));
    let l = locate(&w, r"D:\a").unwrap();
    assert_eq!((l.root, l.rel()), (1, vec!["a"]));
}

#[test]
fn parents_walk_up_to_the_root() {
    let policy = PathPolicy::new(Flavor::Unix, ["/k"]).unwrap();
    let l = locate(&policy, "/k/a/b").unwrap();
    let p = l.parent().unwrap();
    assert_eq!((p.path(), p.rel()), ("/k/a", vec!["a"]));
    let r = p.parent().unwrap();
    assert_eq!(r.path(), "/k");
    assert!(r.is_root() && r.parent().is_none());
    let w = PathPolicy::new(Flavor::Windows, [r"C:\"]).unwrap();
    let l = locate(&w, r"C:\a").unwrap();
    assert_eq!(l.parent().unwrap().path(), r"C:\");
    let u = PathPolicy::new(Flavor::Unix, ["/"]).unwrap();
    assert_eq!(locate(&u, "/a").unwrap().parent().unwrap().path(), "/");
}

#[cfg(target_os = "linux")]
mod real {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;
    use std::path::{Path, PathBuf};

    struct Tree {
        _dir: tempfile::TempDir,
        root: PathBuf,
        outside: PathBuf,
        fs: Confined,
    }

    impl Tree {
        fn new() -> Tree {
            let dir = fast_tempdir();
            let root = dir.path().join("root");
            let outside = dir.path().join("outside");
            fs::create_dir_all(root.join("a/b")).unwrap();
            fs::create_dir_all(outside.join("sub")).unwrap();
            fs::write(outside.join("secret"), b"s").unwrap();
            fs::write(outside.join("sub/deep"), b"d").unwrap();
            fs::write(root.join("a/file"), b"f").unwrap();
            symlink(&outside, root.join("out")).unwrap();
            symlink(outside.join("missing"), root.join("out-missing")).unwrap();
            symlink(root.join("a"), root.join("in")).unwrap();
            symlink("a/b", root.join("rel-in")).unwrap();
            let policy = PathPolicy::new(Flavor::Unix, [root.to_str().unwrap()]).unwrap();
            Tree {
                fs: Confined::new(policy),
                _dir: dir,
                root,
                outside,
            }
        }
        fn at(&self, rel: &str) -> Located {
            let p = if rel.is_empty() {
                self.root.to_str().unwrap().to_string()
            } else {
                format!("{}/{rel}", self.root.display())
            };
            self.fs.locate(&p).unwrap()
        }
        /// Every path, type and content below `outside`.
        fn outside_snapshot(&self) -> Vec<(PathBuf, String)> {
            snapshot(&self.outside)
        }
    }

    /// A temporary directory on tmpfs where there is one: this machine's
    /// disk is mounted with `discard`, so every rmdir waits for a trim.
    pub(super) fn fast_tempdir() -> tempfile::TempDir {
        match Path::new("/dev/shm").is_dir() {
            true => tempfile::tempdir_in("/dev/shm").unwrap(),
            false => tempfile::tempdir().unwrap(),
        }
    }

    fn snapshot(dir: &Path) -> Vec<(PathBuf, String)> {
        let mut out = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                let md = fs::symlink_metadata(&p).unwrap();
                let what = if md.file_type().is_symlink() {
                    format!("link {:?}", fs::read_link(&p).unwrap())
                } else if md.is_dir() {
                    stack.push(p.clone());
                    "dir".to_string()
                } else {
                    format!("file {:?}", fs::read(&p).unwrap())
                };
                out.push((p, what));
            }
        }
        out.sort();
        out
    }

    fn code(e: &Error) -> &'static str {
        match e {
            Error::Io { source, .. } => match source.kind() {
                io::ErrorKind::NotFound => "notfound",
                io::ErrorKind::AlreadyExists => "exists",
                _ => "other",
            },
            Error::PermissionDenied(_) => "denied",
            Error::NotFound(_) => "notfound",
            Error::AlreadyExists(_) => "exists",
            Error::FailedPrecondition(_) => "precondition",
            Error::InvalidArgument(_) => "invalid",
            _ => "other",
        }
    }

    #[test]
    fn kinds_without_following() {
        let t = Tree::new();
        assert_eq!(t.fs.kind(&t.at("a")).unwrap(), Some(Kind::Dir));
        assert_eq!(t.fs.kind(&t.at("a/file")).unwrap(), Some(Kind::File));
        assert_eq!(t.fs.kind(&t.at("out")).unwrap(), Some(Kind::Link));
        assert_eq!(t.fs.kind(&t.at("out-missing")).unwrap(), Some(Kind::Link));
        assert_eq!(t.fs.kind(&t.at("nothing")).unwrap(), None);
        assert_eq!(t.fs.kind(&t.at("a/file/below")).unwrap(), None);
        assert!(t.fs.exists(&t.at("out-missing")).unwrap());
        assert!(!t.fs.exists(&t.at("a/nothing")).unwrap());
        assert!(t.fs.exists(&t.at("")).unwrap());
    }

    #[test]
    fn links_in_the_chain_are_refused_whatever_they_lead_to() {
        let t = Tree::new();
        for p in [
            "out/secret",
            "out/nothing",
            "out-missing/x",
            "in/file",
            "rel-in/x",
        ] {
            let e = t.fs.exists(&t.at(p)).unwrap_err();
            assert_eq!(code(&e), "denied", "{p}: {e}");
            assert!(!e.to_string().contains("outside"), "{p}: {e}");
            let k = t.fs.kind(&t.at(p)).unwrap_err();
            assert_eq!(code(&k), "denied", "{p}");
        }
    }

    #[test]
    fn link_destinations_only_inside_the_roots() {
        let t = Tree::new();
        let d = t.fs.link_destination(&t.at("in")).unwrap().unwrap();
        assert_eq!(d.rel(), ["a"]);
        let d = t.fs.link_destination(&t.at("rel-in")).unwrap().unwrap();
        assert_eq!(d.rel(), ["a", "b"]);
        assert_eq!(t.fs.link_destination(&t.at("out")).unwrap(), None);
        assert_eq!(t.fs.link_destination(&t.at("out-missing")).unwrap(), None);
        assert_eq!(t.fs.link_destination(&t.at("a")).unwrap(), None);
        assert_eq!(t.fs.link_destination(&t.at("nothing")).unwrap(), None);
    }

    #[test]
    fn mkdir_never_creates_through_a_link() {
        let t = Tree::new();
        let before = t.outside_snapshot();
        t.fs.mkdir_all(&t.at("x/y/z")).unwrap();
        assert!(t.root.join("x/y/z").is_dir());
        t.fs.mkdir_all(&t.at("x/y/z")).unwrap();
        for p in ["out/new", "out/sub/new", "out-missing/new", "in/new"] {
            let e = t.fs.mkdir_all(&t.at(p)).unwrap_err();
            assert_eq!(code(&e), "denied", "{p}: {e}");
        }
        // A final link is accepted only when it leads to a directory inside.
        t.fs.mkdir_all(&t.at("in")).unwrap();
        t.fs.mkdir_all(&t.at("rel-in")).unwrap();
        for p in ["out", "out-missing"] {
            let e = t.fs.mkdir_all(&t.at(p)).unwrap_err();
            assert_eq!(code(&e), "exists", "{p}: {e}");
        }
        let e = t.fs.mkdir_all(&t.at("a/file/x")).unwrap_err();
        assert_eq!(code(&e), "exists", "{e}");
        assert_eq!(t.outside_snapshot(), before);
        assert!(!t.root.join("a/new").exists());
    }

    #[test]
    fn removal_never_follows_links() {
        let t = Tree::new();
        let before = t.outside_snapshot();
        // The links themselves go; what they point to stays.
        t.fs.remove(&t.at("out")).unwrap();
        t.fs.remove_all(&t.at("out-missing")).unwrap();
        symlink(&t.outside, t.root.join("a/b/out")).unwrap();
        fs::create_dir_all(t.root.join("a/b/c/d")).unwrap();
        symlink(t.outside.join("sub"), t.root.join("a/b/c/d/l")).unwrap();
        t.fs.remove_contents(&t.at("a/b")).unwrap();
        assert!(t.root.join("a/b").is_dir());
        assert_eq!(fs::read_dir(t.root.join("a/b")).unwrap().count(), 0);
        symlink(&t.outside, t.root.join("a/out2")).unwrap();
        t.fs.remove_all(&t.at("a")).unwrap();
        assert!(!t.root.join("a").exists());
        assert_eq!(t.outside_snapshot(), before);
        // Missing: success for remove_all, NotFound for remove.
        t.fs.remove_all(&t.at("gone/x")).unwrap();
        assert_eq!(code(&t.fs.remove(&t.at("gone")).unwrap_err()), "notfound");
        // Through a link in the chain: refused.
        symlink(&t.outside, t.root.join("out")).unwrap();
        for p in ["out/sub", "out/secret"] {
            assert_eq!(code(&t.fs.remove_all(&t.at(p)).unwrap_err()), "denied");
            assert_eq!(code(&t.fs.remove(&t.at(p)).unwrap_err()), "denied");
            assert_eq!(code(&t.fs.remove_contents(&t.at(p)).unwrap_err()), "denied");
        }
        assert_eq!(t.outside_snapshot(), before);
        // Roots are never removed.
        assert_eq!(code(&t.fs.remove_all(&t.at("")).unwrap_err()), "denied");
    }

    #[test]
    fn non_empty_directories_need_force() {
        let t = Tree::new();
        let e = t.fs.remove(&t.at("a")).unwrap_err();
        assert!(
            matches!(&e, Error::Io { source, .. } if source.kind() == io::ErrorKind::DirectoryNotEmpty),
            "{e}"
        );
        t.fs.remove(&t.at("a/file")).unwrap();
        t.fs.remove(&t.at("a/b")).unwrap();
        t.fs.remove(&t.at("a")).unwrap();
    }

    #[test]
    fn symlinks_are_made_beneath_the_root() {
        let t = Tree::new();
        let src = t.fs.policy().check(t.at("a").path()).unwrap();
        t.fs.symlink(&src, &t.at("a/b/link")).unwrap();
        assert_eq!(
            fs::read_link(t.root.join("a/b/link")).unwrap(),
            t.root.join("a")
        );
        let e = t.fs.symlink(&src, &t.at("a/b/link")).unwrap_err();
        assert_eq!(code(&e), "exists");
        let before = t.outside_snapshot();
        let e = t.fs.symlink(&src, &t.at("out/planted")).unwrap_err();
        assert_eq!(code(&e), "denied");
        assert_eq!(t.outside_snapshot(), before);
    }

    #[test]
    fn deep_trees_are_removed_without_recursion() {
        let t = Tree::new();
        let depth = 20_000;
        deep_tree(&t.root.join("deep"), depth);
        t.fs.remove_all(&t.at("deep")).unwrap();
        assert!(!t.root.join("deep").exists());
        deep_tree(&t.root.join("deep2"), depth);
        t.fs.remove_contents(&t.at("deep2")).unwrap();
        assert_eq!(fs::read_dir(t.root.join("deep2")).unwrap().count(), 0);
    }

    /// `depth` nested directories `d`, built with *at calls (the path would
    /// be far longer than PATH_MAX).
    pub(super) fn deep_tree(top: &Path, depth: usize) {
        use nix::fcntl::{openat, OFlag};
        use nix::sys::stat::{mkdirat, Mode};
        fs::create_dir(top).unwrap();
        let mut fd =
            nix::fcntl::open(top, OFlag::O_RDONLY | OFlag::O_DIRECTORY, Mode::empty()).unwrap();
        for i in 0..depth {
            mkdirat(&fd, "d", Mode::from_bits_truncate(0o755)).unwrap();
            if i % 1000 == 0 {
                let f = openat(
                    &fd,
                    "f",
                    OFlag::O_CREAT | OFlag::O_WRONLY,
                    Mode::from_bits_truncate(0o644),
                )
                .unwrap();
                drop(f);
            }
            fd = openat(
                &fd,
                "d",
                OFlag::O_RDONLY | OFlag::O_DIRECTORY,
                Mode::empty(),
            )
            .unwrap();
        }
    }

    #[test]
    fn a_missing_root_is_created_by_mkdir_only() {
        let dir = fast_tempdir();
        let root = dir.path().join("later/root");
        let policy = PathPolicy::new(Flavor::Unix, [root.to_str().unwrap()]).unwrap();
        let fs = Confined::new(policy);
        let p = fs.locate(&format!("{}/a/b", root.display())).unwrap();
        assert!(!fs.exists(&p).unwrap());
        assert_eq!(fs.kind(&p).unwrap(), None);
        fs.remove_all(&p).unwrap();
        assert!(!root.exists());
        fs.mkdir_all(&p).unwrap();
        assert!(root.join("a/b").is_dir());
        assert!(fs.exists(&p).unwrap());
    }

    #[test]
    fn mount_points_are_never_crossed_by_removal() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipping: needs root to mount");
            return;
        }
        let t = Tree::new();
        let mnt = t.root.join("a/b/mnt");
        fs::create_dir_all(&mnt).unwrap();
        nix::mount::mount(
            Some("tmpfs"),
            &mnt,
            Some("tmpfs"),
            nix::mount::MsFlags::empty(),
            None::<&str>,
        )
        .unwrap();
        fs::write(mnt.join("precious"), b"p").unwrap();
        let r1 = t.fs.remove_all(&t.at("a"));
        let r2 = t.fs.remove_contents(&t.at("a/b"));
        let r3 = t.fs.remove_all(&t.at("a/b/mnt"));
        // Emptying the mounted directory itself is what was asked for.
        let still = mnt.join("precious").exists();
        let r4 = t.fs.remove_contents(&t.at("a/b/mnt"));
        let emptied = !mnt.join("precious").exists();
        nix::mount::umount(&mnt).unwrap();
        for r in [r1, r2, r3] {
            assert_eq!(code(&r.unwrap_err()), "precondition");
        }
        assert!(still);
        r4.unwrap();
        assert!(emptied);
    }

    #[test]
    fn open_dir_and_create_dir() {
        let t = Tree::new();
        let d = t.fs.create_dir(&t.at("a/new")).unwrap();
        assert!(d.is_empty().unwrap());
        assert!(!d.mount_state().unwrap().mount_root);
        t.fs.create_dir(&t.at("a/new")).unwrap();
        for (p, want) in [
            ("in", "precondition"),
            ("a/file", "precondition"),
            ("out/x", "denied"),
        ] {
            let e = t.fs.create_dir(&t.at(p)).unwrap_err();
            assert_eq!(code(&e), want, "{p}: {e}");
        }
        for (p, want) in [
            ("in", "precondition"),
            ("out", "precondition"),
            ("out/sub", "denied"),
            ("nothing", "notfound"),
        ] {
            let e = t.fs.open_dir(&t.at(p)).unwrap_err();
            assert_eq!(code(&e), want, "{p}: {e}");
        }
        let n = t.fs.open_nearest_dir(&t.at("a/b/c/d")).unwrap();
        assert!(!n.mount_state().unwrap().mount_root);
        assert_eq!(
            code(&t.fs.open_nearest_dir(&t.at("out/x")).unwrap_err()),
            "denied"
        );
        let (parent, name) = t.fs.open_parent(&t.at("a/b")).unwrap();
        assert_eq!(name, "b");
        assert!(!parent.is_empty().unwrap());
    }
}
