//! Linux (and other Unix) filesystem backend over std.

use super::FilesystemBackend;
use crate::path::{Link, LinkReader, OsLinks};
use std::fs;
use std::io;

/// The real filesystem of this host.
#[derive(Clone, Copy, Debug, Default)]
pub struct OsFilesystem;

impl LinkReader for OsFilesystem {
    fn read_link(&self, path: &str) -> io::Result<Link> {
        OsLinks.read_link(path)
    }
    fn is_link_free(&self, path: &str) -> bool {
        OsLinks.is_link_free(path)
    }
}

impl FilesystemBackend for OsFilesystem {
    fn exists(&self, path: &str) -> io::Result<bool> {
        match fs::symlink_metadata(path) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn create_dir_all(&self, path: &str) -> io::Result<()> {
        fs::create_dir_all(path)
    }

    fn remove(&self, path: &str) -> io::Result<()> {
        if fs::symlink_metadata(path)?.is_dir() {
            fs::remove_dir(path)
        } else {
            fs::remove_file(path)
        }
    }

    fn remove_all(&self, path: &str) -> io::Result<()> {
        if fs::symlink_metadata(path)?.is_dir() {
            fs::remove_dir_all(path)
        } else {
            fs::remove_file(path)
        }
    }

    fn remove_contents(&self, path: &str) -> io::Result<()> {
        for entry in fs::read_dir(path)? {
            let entry = entry?;
            if entry.file_type()?.is_dir() {
                fs::remove_dir_all(entry.path())?;
            } else {
                fs::remove_file(entry.path())?;
            }
        }
        Ok(())
    }

    fn symlink_dir(&self, points_to: &str, link: &str) -> io::Result<()> {
        std::os::unix::fs::symlink(points_to, link)
    }

    fn is_link_to_existing(&self, path: &str) -> io::Result<bool> {
        match fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_symlink() => Ok(fs::metadata(path).is_ok()),
            Ok(_) => Ok(false),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use crate::filesystem::{Filesystem, FilesystemApi, IsSymlinkRequest, PathExistsRequest};
    use crate::path::{Flavor, PathPolicy};
    use std::os::unix::fs::symlink;

    /// The OS backend with the one-call proof switched off: every answer
    /// comes from the component walk.
    struct Walking;

    impl LinkReader for Walking {
        fn read_link(&self, path: &str) -> io::Result<Link> {
            OsLinks.read_link(path)
        }
    }

    impl FilesystemBackend for Walking {
        fn exists(&self, path: &str) -> io::Result<bool> {
            OsFilesystem.exists(path)
        }
        fn create_dir_all(&self, _: &str) -> io::Result<()> {
            unreachable!()
        }
        fn remove(&self, _: &str) -> io::Result<()> {
            unreachable!()
        }
        fn remove_all(&self, _: &str) -> io::Result<()> {
            unreachable!()
        }
        fn remove_contents(&self, _: &str) -> io::Result<()> {
            unreachable!()
        }
        fn symlink_dir(&self, _: &str, _: &str) -> io::Result<()> {
            unreachable!()
        }
        fn is_link_to_existing(&self, path: &str) -> io::Result<bool> {
            OsFilesystem.is_link_to_existing(path)
        }
    }

    /// PathExists and IsSymlink answer the same (values and error codes)
    /// with and without the one-call proof, for every shape of path.
    #[test]
    fn the_link_free_proof_changes_no_answer() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().to_str().unwrap().to_string();
        let root = format!("{base}/root");
        let outside = format!("{base}/outside");
        for d in ["a/b/c", "d"] {
            fs::create_dir_all(format!("{root}/{d}")).unwrap();
        }
        fs::create_dir_all(&outside).unwrap();
        fs::write(format!("{root}/a/file"), b"x").unwrap();
        symlink(format!("{root}/a/b"), format!("{root}/in")).unwrap();
        symlink("b", format!("{root}/a/rel")).unwrap();
        symlink(&outside, format!("{root}/out")).unwrap();
        symlink(format!("{root}/nothing"), format!("{root}/dangling")).unwrap();
        // A root that is itself reached through a link.
        symlink(&root, format!("{base}/rootlink")).unwrap();
        let paths = [
            "",
            "/a",
            "/a/b",
            "/a/b/c",
            "/a/b/c/missing",
            "/a/file",
            "/a/file/below",
            "/in",
            "/in/c",
            "/a/rel/c",
            "/out",
            "/out/x",
            "/dangling",
            "/missing",
            "/d/../a",
        ];
        for root_as_given in [root.clone(), format!("{base}/rootlink")] {
            let policy = PathPolicy::new(Flavor::Unix, [root_as_given.as_str()]).unwrap();
            let fast = Filesystem::new(policy.clone(), OsFilesystem);
            let slow = Filesystem::new(policy, Walking);
            for p in paths {
                let path = format!("{root_as_given}{p}");
                let code = |e: crate::Error| std::mem::discriminant(&e);
                let a = fast.path_exists(PathExistsRequest { path: path.clone() });
                let b = slow.path_exists(PathExistsRequest { path: path.clone() });
                assert_eq!(
                    a.as_ref().map(|r| r.exists).map_err(|e| e.to_string()),
                    b.as_ref().map(|r| r.exists).map_err(|e| e.to_string()),
                    "PathExists {path}"
                );
                let a = fast.is_symlink(IsSymlinkRequest { path: path.clone() });
                let b = slow.is_symlink(IsSymlinkRequest { path: path.clone() });
                assert_eq!(
                    a.map(|r| r.is_symlink).map_err(code),
                    b.map(|r| r.is_symlink).map_err(code),
                    "IsSymlink {path}"
                );
            }
        }
    }
}
