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
