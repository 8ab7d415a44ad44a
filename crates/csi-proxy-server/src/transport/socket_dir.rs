//! The Unix socket directory and the directories on the way to it.
//!
//! Whoever can write in the socket directory can create the socket names
//! before the proxy binds them (clients would then talk to an impostor) or
//! replace them; whoever can rename an entry on the way to it can swap the
//! whole directory. So, checked at start-up, before anything is bound:
//!
//! - the socket directory must be owned by the proxy's effective user
//!   (root only when the proxy runs as root) and not writable by group or
//!   others, sticky bit or not;
//! - every directory on the way (each component of the path, symlinks
//!   followed one at a time the way the kernel does) must be owned by root
//!   or the proxy's user and not writable by group or others, unless it has
//!   the sticky bit (like `/tmp`): there only an entry's owner can rename or
//!   remove it, and the entry we go through must itself be owned by root or
//!   the proxy's user;
//! - every symlink followed must be owned by root or the proxy's user.
//!
//! ACLs are not inspected: a directory whose ACL grants write access to
//! someone else passes this check.

use nix::unistd::geteuid;
use std::ffi::OsString;
use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Component, Path, PathBuf};

/// How many symlinks one walk may follow (the kernel's limit).
const MAX_LINKS: u32 = 40;

/// Create the socket directory if needed (mode 0755) and refuse it unless
/// it, and the way to it, can only be changed by root and this user (see
/// the module documentation). Errors name the directory at fault and why.
pub fn prepare_dir(dir: &Path) -> io::Result<()> {
    prepare_dir_as(dir, geteuid().as_raw())
}

/// [`prepare_dir`] for the user `me`.
fn prepare_dir_as(dir: &Path, me: u32) -> io::Result<()> {
    let abs = std::path::absolute(dir)?;
    let found = match resolve(&abs, me)? {
        Some(found) => found,
        None => {
            // Only what is missing below a checked directory is created.
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create(&abs)
                .map_err(|e| {
                    io::Error::new(
                        e.kind(),
                        format!("create socket directory {}: {e}", dir.display()),
                    )
                })?;
            resolve(&abs, me)?.ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("socket directory {} vanished after creation", dir.display()),
                )
            })?
        }
    };
    let (real, meta) = found;
    let named = if real == abs {
        format!("socket directory {}", dir.display())
    } else {
        format!(
            "socket directory {} (resolved to {})",
            dir.display(),
            real.display()
        )
    };
    if !meta.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::NotADirectory,
            format!("{named} is not a directory"),
        ));
    }
    if meta.uid() != me {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{named} is owned by uid {}, not by the proxy's user (uid {me}): \
                 its owner could replace the sockets",
                meta.uid()
            ),
        ));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{named} is writable by group or others (mode {:04o}): other users could \
                 create the socket names before the proxy binds them, sticky bit or not; \
                 use a directory only uid {me} can write (e.g. mode 0755)",
                meta.mode() & 0o7777
            ),
        ));
    }
    Ok(())
}

/// One step of a path walk.
enum Step {
    Root,
    Parent,
    Name(OsString),
}

/// The steps of `p`, last first (to be popped).
fn steps_reversed(p: &Path) -> Vec<Step> {
    let mut steps: Vec<Step> = p
        .components()
        .filter_map(|c| match c {
            Component::RootDir => Some(Step::Root),
            Component::ParentDir => Some(Step::Parent),
            Component::Normal(n) => Some(Step::Name(n.to_owned())),
            Component::CurDir | Component::Prefix(_) => None,
        })
        .collect();
    steps.reverse();
    steps
}

/// Walk the absolute path `abs` one component at a time from `/`,
/// following symlinks as the kernel would, and check every directory looked
/// into and every entry gone through. Returns the real path and the
/// metadata of the last component, or `None` if some component does not
/// exist (yet).
fn resolve(abs: &Path, me: u32) -> io::Result<Option<(PathBuf, fs::Metadata)>> {
    let mut todo = steps_reversed(abs);
    let mut cur = PathBuf::from("/");
    let mut meta = lstat(&cur)?;
    let mut links = 0;
    while let Some(step) = todo.pop() {
        match step {
            Step::Root => {
                cur = PathBuf::from("/");
                meta = lstat(&cur)?;
            }
            Step::Parent => {
                // `cur` is a real path whose ancestors were all checked on
                // the way down.
                cur.pop();
                meta = lstat(&cur)?;
            }
            Step::Name(name) => {
                check_way(&cur, &meta, me)?;
                let next = cur.join(&name);
                let m = match fs::symlink_metadata(&next) {
                    Ok(m) => m,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
                    Err(e) => {
                        return Err(io::Error::new(
                            e.kind(),
                            format!("inspect {}: {e}", next.display()),
                        ))
                    }
                };
                if m.file_type().is_symlink() {
                    // A directory is checked when it is looked into (or as
                    // the socket directory); a link only here.
                    if m.uid() != 0 && m.uid() != me {
                        return Err(io::Error::new(
                            io::ErrorKind::PermissionDenied,
                            format!(
                                "symlink {} (on the way to the socket directory) is owned by uid \
                                 {}, not by root or the proxy's user (uid {me}): its owner could \
                                 replace it",
                                next.display(),
                                m.uid()
                            ),
                        ));
                    }
                    links += 1;
                    if links > MAX_LINKS {
                        return Err(io::Error::other(format!(
                            "too many symlinks on the way to the socket directory {}",
                            abs.display()
                        )));
                    }
                    let target = fs::read_link(&next)?;
                    // Resolved relative to `cur`, the directory holding it.
                    todo.extend(steps_reversed(&target));
                } else {
                    cur = next;
                    meta = m;
                }
            }
        }
    }
    Ok(Some((cur, meta)))
}

/// `dir` is looked into on the way to the socket directory: it must be a
/// directory owned by root or `me`, and only root and `me` may rename its
/// entries (not writable by group or others, or sticky).
fn check_way(dir: &Path, meta: &fs::Metadata, me: u32) -> io::Result<()> {
    if !meta.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::NotADirectory,
            format!(
                "{} (on the way to the socket directory) is not a directory",
                dir.display()
            ),
        ));
    }
    if meta.uid() != 0 && meta.uid() != me {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} (on the way to the socket directory) is owned by uid {}, not by root or the \
                 proxy's user (uid {me}): its owner could replace the socket directory",
                dir.display(),
                meta.uid()
            ),
        ));
    }
    let mode = meta.mode();
    if mode & 0o022 != 0 && mode & 0o1000 == 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} (on the way to the socket directory) is writable by group or others without \
                 the sticky bit (mode {:04o}): other users could replace the socket directory",
                dir.display(),
                mode & 0o7777
            ),
        ));
    }
    Ok(())
}

fn lstat(p: &Path) -> io::Result<fs::Metadata> {
    fs::symlink_metadata(p)
        .map_err(|e| io::Error::new(e.kind(), format!("inspect {}: {e}", p.display())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, PermissionsExt};

    fn chmod(p: &Path, mode: u32) {
        fs::set_permissions(p, fs::Permissions::from_mode(mode)).unwrap();
    }

    fn me() -> u32 {
        geteuid().as_raw()
    }

    /// A private temp dir (mode 0700) to build trees in.
    fn base() -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        chmod(t.path(), 0o700);
        t
    }

    #[test]
    fn missing_dir_is_created_0755_and_accepted() {
        let t = base();
        let d = t.path().join("a/b/sock");
        prepare_dir(&d).unwrap();
        let m = fs::metadata(&d).unwrap();
        assert!(m.is_dir());
        assert_eq!(m.mode() & 0o022, 0);
        // Again, now that it exists.
        prepare_dir(&d).unwrap();
    }

    #[test]
    fn modes_of_the_socket_dir() {
        let t = base();
        let d = t.path().join("s");
        fs::create_dir(&d).unwrap();
        for ok in [0o700, 0o755, 0o750, 0o1755] {
            chmod(&d, ok);
            prepare_dir(&d).unwrap_or_else(|e| panic!("{ok:o}: {e}"));
        }
        for bad in [0o777, 0o1777, 0o775, 0o770, 0o757, 0o1770] {
            chmod(&d, bad);
            let err = prepare_dir(&d).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::PermissionDenied, "{bad:o}");
            let msg = err.to_string();
            assert!(msg.contains(&d.display().to_string()), "{msg}");
            assert!(msg.contains("writable by group or others"), "{msg}");
            assert!(msg.contains(&format!("{bad:04o}")), "{msg}");
        }
    }

    #[test]
    fn socket_dir_of_another_user_is_refused() {
        let t = base();
        let d = t.path().join("s");
        fs::create_dir(&d).unwrap();
        chmod(&d, 0o755);
        // As seen by another user: the directory is not theirs, even
        // though its way is (owned by `me`, which is root or this user).
        let other = me() + 1;
        let err = prepare_dir_as(&d, other).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::PermissionDenied);
        // (Refused on the way instead when this user is not root.)
        assert!(
            err.to_string().contains(&format!("owned by uid {}", me())),
            "{err}"
        );
    }

    #[test]
    fn a_file_is_refused() {
        let t = base();
        let f = t.path().join("f");
        fs::write(&f, b"x").unwrap();
        let err = prepare_dir(&f).unwrap_err();
        assert!(err.to_string().contains("is not a directory"), "{err}");
        let err = prepare_dir(&f.join("below")).unwrap_err();
        assert!(err.to_string().contains("is not a directory"), "{err}");
    }

    #[test]
    fn writable_parent_without_sticky_bit_is_refused() {
        let t = base();
        let parent = t.path().join("p");
        let d = parent.join("s");
        fs::create_dir_all(&d).unwrap();
        chmod(&d, 0o755);
        for bad in [0o777, 0o775] {
            chmod(&parent, bad);
            let err = prepare_dir(&d).unwrap_err();
            let msg = err.to_string();
            assert!(
                msg.starts_with(&format!("{} (on the way", parent.display())),
                "{msg}"
            );
            assert!(msg.contains("without the sticky bit"), "{msg}");
        }
        // Like /tmp: sticky and world-writable is fine on the way.
        chmod(&parent, 0o1777);
        prepare_dir(&d).unwrap();
        // A missing dir below a bad parent is refused before it is created.
        chmod(&parent, 0o777);
        let missing = parent.join("new");
        assert!(prepare_dir(&missing).is_err());
        assert!(!missing.exists());
    }

    #[test]
    fn symlinks_are_followed_and_their_way_checked() {
        let t = base();
        let real = t.path().join("real");
        let d = real.join("s");
        fs::create_dir_all(&d).unwrap();
        chmod(&d, 0o755);
        let link = t.path().join("link");
        symlink("real", &link).unwrap();
        prepare_dir(&link.join("s")).unwrap();
        // A link to the socket dir itself, and `..` after a link.
        symlink(&d, t.path().join("direct")).unwrap();
        prepare_dir(&t.path().join("direct")).unwrap();
        prepare_dir(&link.join("s/../s")).unwrap();
        // The target's way is checked: a world-writable dir holding it.
        chmod(&real, 0o777);
        let err = prepare_dir(&link.join("s")).unwrap_err();
        assert!(
            err.to_string()
                .starts_with(&format!("{} (on the way", real.display())),
            "{err}"
        );
        chmod(&real, 0o755);
        // The final check names the resolved directory.
        chmod(&d, 0o777);
        let err = prepare_dir(&t.path().join("direct")).unwrap_err();
        assert!(
            err.to_string()
                .contains(&format!("(resolved to {})", d.display())),
            "{err}"
        );
        // A loop.
        symlink("loop", t.path().join("loop")).unwrap();
        let err = prepare_dir(&t.path().join("loop")).unwrap_err();
        assert!(err.to_string().contains("too many symlinks"), "{err}");
    }

    #[test]
    fn a_symlink_of_another_user_on_the_way_is_refused() {
        if !geteuid().is_root() {
            eprintln!("skipping: needs root to give a link away");
            return;
        }
        let t = base();
        let sticky = t.path().join("tmp");
        let d = t.path().join("s");
        fs::create_dir(&sticky).unwrap();
        fs::create_dir(&d).unwrap();
        chmod(&sticky, 0o1777);
        chmod(&d, 0o755);
        let link = sticky.join("link");
        symlink(&d, &link).unwrap();
        prepare_dir(&link).unwrap();
        // In a sticky dir the link's owner may remove and recreate it.
        nix::unistd::fchownat(
            nix::fcntl::AT_FDCWD,
            &link,
            Some(65534.into()),
            None,
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .unwrap();
        let err = prepare_dir(&link).unwrap_err();
        assert!(
            err.to_string()
                .starts_with(&format!("symlink {} (on the way", link.display())),
            "{err}"
        );
    }
}
