//! What this build is: version, git commit and target (set by build.rs).

/// The crate version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The git commit the binary was built from, or `unknown`.
pub const COMMIT: &str = env!("CSI_PROXY_COMMIT");
/// `clean` if no tracked file differed from the commit when it was built,
/// `dirty` if one did, `unknown` without git (e.g. a source tarball).
pub const TREE: &str = env!("CSI_PROXY_TREE");
/// The target triple, e.g. `x86_64-pc-windows-gnu`.
pub const TARGET: &str = env!("CSI_PROXY_TARGET");
/// What `-version` prints after the program name.
pub const LONG: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("CSI_PROXY_COMMIT"),
    ", tree ",
    env!("CSI_PROXY_TREE"),
    ", target ",
    env!("CSI_PROXY_TARGET"),
    ")"
);

/// The labels of `csi_proxy_build_info`.
pub fn build_info() -> csi_proxy_server::metrics::BuildInfo {
    csi_proxy_server::metrics::BuildInfo {
        version: VERSION.into(),
        commit: COMMIT.into(),
        target: TARGET.into(),
    }
}

#[cfg(test)]
#[path = "../build/git.rs"]
mod git;

#[cfg(test)]
mod tests {
    use super::git;
    use std::process::Command;

    fn run(dir: &std::path::Path, args: &[&str]) {
        let ok = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "-c",
                "commit.gpgsign=false",
            ])
            .args(args)
            .output()
            .unwrap()
            .status
            .success();
        assert!(ok, "git {args:?}");
    }

    #[test]
    fn a_tarball_without_git_is_unknown() {
        let dir = tempfile::tempdir().unwrap();
        let crate_dir = dir.path().join("crates/csi-proxy");
        std::fs::create_dir_all(&crate_dir).unwrap();
        assert!(git::checkout(&crate_dir).is_none());
    }

    #[test]
    #[cfg_attr(
        windows,
        ignore = "no git in the wine prefix; build/git.rs is the same code on Linux, where this runs"
    )]
    fn commit_and_clean_or_dirty_tree() {
        let dir = tempfile::tempdir().unwrap();
        let crate_dir = dir.path().join("crates/csi-proxy");
        std::fs::create_dir_all(&crate_dir).unwrap();
        std::fs::write(crate_dir.join("a.rs"), "one").unwrap();
        run(dir.path(), &["init", "-q"]);
        run(dir.path(), &["add", "."]);
        run(dir.path(), &["commit", "-q", "-m", "x"]);
        let c = git::checkout(&crate_dir).unwrap();
        let mut watch = Vec::new();
        let commit = c.commit(&mut watch).unwrap();
        assert_eq!(commit.len(), 40, "{commit}");
        assert!(watch.iter().any(|p| p.ends_with("HEAD")));
        assert_eq!(c.tree_state(&mut watch), "clean");
        // Untracked files do not count; a changed tracked file does.
        std::fs::write(crate_dir.join("new.rs"), "x").unwrap();
        assert_eq!(c.tree_state(&mut watch), "clean");
        std::fs::write(crate_dir.join("a.rs"), "two").unwrap();
        assert_eq!(c.tree_state(&mut watch), "dirty");
        // The commit again, from packed-refs.
        run(dir.path(), &["checkout", "-q", "crates/csi-proxy/a.rs"]);
        run(dir.path(), &["pack-refs", "--all"]);
        assert_eq!(c.commit(&mut watch).unwrap(), commit);
    }
}
