//! The start-up check of `-state-dir` (used on Linux only: format
//! records): it must be outside every allowed
//! root, both as written and with its links resolved, since a plugin
//! writes inside the roots and could plant records or links there (a
//! planted record lets FormatVolume write over unidentified data; a planted
//! link, before records were opened without following links, made it
//! truncate a host file).

use std::path::{Component, Path, PathBuf};

/// Why the state directory is refused.
#[derive(Debug, PartialEq, Eq)]
pub struct InsideRoot {
    state: String,
    root: String,
    how: &'static str,
}

impl std::fmt::Display for InsideRoot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "-state-dir {} is inside the allowed root {}{}: a plugin could write its records; choose a directory outside -kubelet-path and -working-dir",
            self.state, self.root, self.how
        )
    }
}

impl std::error::Error for InsideRoot {}

/// `path` made absolute and lexically normal (`.` dropped, `..` taken
/// back).
fn lexical(path: &Path) -> PathBuf {
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(path)
    };
    let mut out = PathBuf::new();
    for c in abs.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    out
}

/// `path` with every link resolved: its longest existing ancestor
/// canonicalized, the rest appended.
fn resolved(path: &Path) -> PathBuf {
    let path = lexical(path);
    let mut existing = path.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(c) = std::fs::canonicalize(existing) {
            let mut out = c;
            out.extend(rest.iter().rev());
            return out;
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                existing = parent;
            }
            _ => return path,
        }
    }
}

/// Whether `inner` is `outer` or below it (component by component).
fn within(inner: &Path, outer: &Path) -> bool {
    inner.starts_with(outer)
}

/// Refuse a state directory inside any of `roots`, as written or through
/// links (in the state directory's path or the roots'). An empty state
/// directory (keep nothing) passes.
pub fn check(state: &Path, roots: &[String]) -> Result<(), InsideRoot> {
    if state.as_os_str().is_empty() {
        return Ok(());
    }
    let states = [("", lexical(state)), (" (links resolved)", resolved(state))];
    for root in roots {
        let root_path = Path::new(root);
        for r in [lexical(root_path), resolved(root_path)] {
            for (how, s) in &states {
                if within(s, &r) {
                    return Err(InsideRoot {
                        state: state.display().to_string(),
                        root: root.clone(),
                        how,
                    });
                }
            }
        }
    }
    Ok(())
}

/// The state directory, checked by identity and opened once at start-up
/// (Linux): the handle the format records are kept beneath, so that a path
/// swapped later does not matter.
///
/// The path check ([`check`]) compares text, and text is not what the
/// kernel resolves: `out/link/../state` is `kubelet/state` when `link`
/// points into the root, and a bind mount makes one directory reachable
/// under two unrelated paths. So the directory is refused when, compared
/// by `(st_dev, st_ino)`:
/// - it, or any directory reached by walking `..` from its open handle, is
///   an allowed root (the root's own bind-mount source included: the same
///   inode);
/// - a mount of its filesystem (`/proc/self/mountinfo`) makes it, or a
///   part of it, reachable under a root: the mount's subtree of the
///   filesystem and the state dir's are one within the other.
///
/// The longest existing ancestor is checked before anything is created
/// (a refused directory is never made), the directory itself once made.
pub fn open(state: &Path, roots: &[String]) -> anyhow::Result<Option<std::fs::File>> {
    use anyhow::Context as _;
    if state.as_os_str().is_empty() {
        return Ok(None);
    }
    check(state, roots)?;
    let refused = |why: String| InsideRoot {
        state: state.display().to_string(),
        root: why,
        how: "",
    };
    let mut existing = state.to_path_buf();
    let ancestor = loop {
        match open_dir(&existing) {
            Ok(f) => break f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if !existing.pop() {
                    return Err(e).context("-state-dir: no ancestor exists");
                }
            }
            Err(e) => return Err(e).with_context(|| format!("-state-dir {}", state.display())),
        }
    };
    // An ancestor: only what would hold the state dir counts (a root
    // below the ancestor is no root below the state dir).
    identity::check(&ancestor, roots, false).map_err(refused)?;
    std::fs::create_dir_all(state)
        .with_context(|| format!("cannot create -state-dir {}", state.display()))?;
    let dir =
        open_dir(state).with_context(|| format!("cannot open -state-dir {}", state.display()))?;
    identity::check(&dir, roots, true).map_err(refused)?;
    Ok(Some(dir))
}

fn open_dir(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(path)
}

/// Identities of directories and mounts.
mod identity {
    use std::fs::File;
    use std::os::unix::fs::MetadataExt as _;
    use std::os::unix::io::AsRawFd as _;
    use std::path::{Path, PathBuf};

    /// The path of an open directory, through its `/proc/self/fd` link.
    fn fd_path(f: &File) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", f.as_raw_fd()))
    }

    /// Why `dir` (an open directory) is refused, naming the root, if it is:
    /// it is reachable from a root, or (with `below`) a part of it is.
    pub fn check(dir: &File, roots: &[String], below: bool) -> Result<(), String> {
        let ids: Vec<(u64, u64, &String)> = roots
            .iter()
            .filter_map(|r| std::fs::metadata(r).ok().map(|m| (m.dev(), m.ino(), r)))
            .collect();
        // Walk `..` from the handle: the kernel's parents, not the text's.
        let mut here = dir.try_clone().map_err(|e| e.to_string())?;
        for _ in 0..4096 {
            let m = here.metadata().map_err(|e| e.to_string())?;
            if let Some((_, _, r)) = ids.iter().find(|(d, i, _)| (*d, *i) == (m.dev(), m.ino())) {
                return Err(format!("{r} (the same directory, by device and inode, walking `..` from the opened directory)"));
            }
            let parent = File::open(fd_path(&here).join("..")).map_err(|e| e.to_string())?;
            let p = parent.metadata().map_err(|e| e.to_string())?;
            if (p.dev(), p.ino()) == (m.dev(), m.ino()) {
                break;
            }
            here = parent;
        }
        let real = std::fs::read_link(fd_path(dir)).map_err(|e| e.to_string())?;
        let mounts = mounts();
        let Some((dev, rel)) = fs_path(&mounts, &real) else {
            return Ok(());
        };
        for root in roots {
            let Ok(root_real) = std::fs::canonicalize(root) else {
                continue;
            };
            for m in mounts.iter().filter(|m| m.dev == dev) {
                let region = if m.point.starts_with(&root_real) {
                    m.root.clone()
                } else if let Ok(below) = root_real.strip_prefix(&m.point) {
                    m.root.join(below)
                } else {
                    continue;
                };
                if rel.starts_with(&region) || (below && region.starts_with(&rel)) {
                    return Err(format!(
                        "{root} (through the mount at {}: the same filesystem's {} is reachable under the root)",
                        m.point.display(),
                        region.display()
                    ));
                }
            }
        }
        Ok(())
    }

    pub struct Mount {
        dev: String,
        root: PathBuf,
        point: PathBuf,
    }

    /// `/proc/self/mountinfo`'s mounts, in order.
    fn mounts() -> Vec<Mount> {
        let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        text.lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split(' ').collect();
                Some(Mount {
                    dev: f.get(2)?.to_string(),
                    root: PathBuf::from(unescape(f.get(3)?)),
                    point: PathBuf::from(unescape(f.get(4)?)),
                })
            })
            .collect()
    }

    /// mountinfo's octal escapes (`\040` for a space) undone.
    fn unescape(s: &str) -> String {
        let b = s.as_bytes();
        let mut out = Vec::with_capacity(b.len());
        let mut i = 0;
        while i < b.len() {
            if b[i] == b'\\'
                && i + 3 < b.len()
                && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
            {
                let v = b[i + 1..i + 4]
                    .iter()
                    .fold(0u32, |v, c| v * 8 + u32::from(c - b'0'));
                out.push(v as u8);
                i += 4;
            } else {
                out.push(b[i]);
                i += 1;
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    /// The device and the path within its filesystem of the real path
    /// `real`: through the last mount whose mount point holds it.
    fn fs_path(mounts: &[Mount], real: &Path) -> Option<(String, PathBuf)> {
        let m = mounts
            .iter()
            .filter(|m| real.starts_with(&m.point))
            .max_by_key(|m| m.point.components().count())?;
        let m = mounts.iter().rev().find(|x| x.point == m.point)?;
        Some((
            m.dev.clone(),
            m.root.join(real.strip_prefix(&m.point).ok()?),
        ))
    }

    #[cfg(test)]
    #[test]
    fn mountinfo_escapes() {
        assert_eq!(unescape("/a\\040b"), "/a b");
        assert_eq!(unescape("/plain"), "/plain");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inside_a_root_as_written_or_through_a_link_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("kubelet");
        let outside = d.path().join("state");
        std::fs::create_dir_all(root.join("pods")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        let roots = [root.display().to_string()];
        assert!(check(&outside, &roots).is_ok());
        assert!(check(Path::new(""), &roots).is_ok());
        // Inside, existing or not, or by `..`.
        assert!(check(&root.join("csi-proxy"), &roots).is_err());
        assert!(check(&root, &roots).is_err());
        assert!(check(&outside.join("../kubelet/x"), &roots).is_err());
        // A link outside pointing into the root.
        let link = d.path().join("state-link");
        std::os::unix::fs::symlink(root.join("pods"), &link).unwrap();
        let e = check(&link.join("csi-proxy"), &roots).unwrap_err();
        assert!(e.to_string().contains("links resolved"), "{e}");
        // A root reached through a link: the same directory.
        let root_link = d.path().join("kubelet-link");
        std::os::unix::fs::symlink(&root, &root_link).unwrap();
        let roots = [root_link.display().to_string()];
        assert!(check(&root.join("x"), &roots).is_err());
        // A sibling whose name only starts like the root.
        assert!(check(&d.path().join("kubelet2"), &roots).is_ok());
    }
}
