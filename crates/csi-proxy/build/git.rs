//! What the build knows of its git checkout: the commit HEAD points at
//! (read from the repository's files) and whether tracked files differ
//! from it (`git status`). Shared by build.rs and its tests
//! (src/version.rs). Without a `.git` (a source tarball), both are unknown.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A checkout found above a directory.
pub struct Checkout {
    /// The work tree (the directory holding `.git`).
    pub work_tree: PathBuf,
    pub git_dir: PathBuf,
    /// Where refs live (`commondir` of a linked worktree).
    pub common: PathBuf,
}

/// The checkout holding `dir`, following a `.git` file (worktrees).
pub fn checkout(dir: &Path) -> Option<Checkout> {
    let dot_git = dir
        .ancestors()
        .map(|d| d.join(".git"))
        .find(|p| p.exists())?;
    let work_tree = dot_git.parent()?.to_path_buf();
    let git_dir = if dot_git.is_file() {
        let text = fs::read_to_string(&dot_git).ok()?;
        let rel = text.trim().strip_prefix("gitdir:")?.trim().to_string();
        work_tree.join(rel)
    } else {
        dot_git
    };
    let common = match fs::read_to_string(git_dir.join("commondir")) {
        Ok(c) => git_dir.join(c.trim()),
        Err(_) => git_dir.clone(),
    };
    Some(Checkout {
        work_tree,
        git_dir,
        common,
    })
}

impl Checkout {
    /// The commit HEAD points at, following symbolic refs and
    /// `packed-refs`; every file read is added to `watch`.
    pub fn commit(&self, watch: &mut Vec<PathBuf>) -> Option<String> {
        let head_file = self.git_dir.join("HEAD");
        watch.push(head_file.clone());
        let head = fs::read_to_string(&head_file).ok()?;
        let head = head.trim();
        let Some(reference) = head.strip_prefix("ref:").map(str::trim) else {
            return valid(head);
        };
        for dir in [&self.git_dir, &self.common] {
            let file = dir.join(reference);
            if file.is_file() {
                watch.push(file.clone());
                return valid(fs::read_to_string(file).ok()?.trim());
            }
        }
        let packed = self.common.join("packed-refs");
        watch.push(packed.clone());
        let text = fs::read_to_string(packed).ok()?;
        text.lines()
            .filter_map(|l| l.split_once(' '))
            .find(|(_, name)| *name == reference)
            .and_then(|(hash, _)| valid(hash))
    }

    /// `clean` when no tracked file differs from HEAD (untracked files do
    /// not count), `dirty` when one does, `unknown` when `git` cannot say.
    /// `--no-optional-locks`: asking must not rewrite the index (which
    /// build.rs watches).
    pub fn tree_state(&self, watch: &mut Vec<PathBuf>) -> &'static str {
        watch.push(self.git_dir.join("index"));
        let out = Command::new("git")
            .arg("-C")
            .arg(&self.work_tree)
            .args([
                "--no-optional-locks",
                "status",
                "--porcelain",
                "--untracked-files=no",
            ])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output();
        match out {
            Ok(o) if o.status.success() => match o.stdout.is_empty() {
                true => "clean",
                false => "dirty",
            },
            _ => "unknown",
        }
    }
}

fn valid(hash: &str) -> Option<String> {
    (hash.len() >= 40 && hash.bytes().all(|b| b.is_ascii_hexdigit())).then(|| hash.to_string())
}
