//! Records what `-version`, the start-up log line and `csi_proxy_build_info`
//! say about this build: the git commit (read from the repository's files,
//! no program is run; `CSI_PROXY_COMMIT` overrides it, e.g. for builds from
//! a source tarball) and the target triple.

use std::fs;
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-env-changed=CSI_PROXY_COMMIT");
    let target = std::env::var("TARGET").unwrap_or_else(|_| "unknown".into());
    println!("cargo:rustc-env=CSI_PROXY_TARGET={target}");
    let commit = match std::env::var("CSI_PROXY_COMMIT") {
        Ok(c) if !c.trim().is_empty() => c.trim().to_string(),
        _ => git_commit().unwrap_or_else(|| "unknown".into()),
    };
    println!("cargo:rustc-env=CSI_PROXY_COMMIT={commit}");
}

/// The commit HEAD points at, following `.git` files (worktrees), symbolic
/// refs, `commondir` and `packed-refs`.
fn git_commit() -> Option<String> {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR")?);
    let dot_git = manifest
        .ancestors()
        .map(|d| d.join(".git"))
        .find(|p| p.exists())?;
    let git_dir = if dot_git.is_file() {
        let text = fs::read_to_string(&dot_git).ok()?;
        let rel = text.trim().strip_prefix("gitdir:")?.trim().to_string();
        let base = dot_git.parent()?;
        base.join(rel)
    } else {
        dot_git
    };
    let common = match fs::read_to_string(git_dir.join("commondir")) {
        Ok(c) => git_dir.join(c.trim()),
        Err(_) => git_dir.clone(),
    };
    let head_file = git_dir.join("HEAD");
    println!("cargo:rerun-if-changed={}", head_file.display());
    let head = fs::read_to_string(&head_file).ok()?;
    let head = head.trim();
    let Some(reference) = head.strip_prefix("ref:").map(str::trim) else {
        return valid(head);
    };
    for dir in [&git_dir, &common] {
        let file = dir.join(reference);
        if file.is_file() {
            println!("cargo:rerun-if-changed={}", file.display());
            return valid(fs::read_to_string(file).ok()?.trim());
        }
    }
    packed(&common.join("packed-refs"), reference)
}

fn packed(file: &Path, reference: &str) -> Option<String> {
    println!("cargo:rerun-if-changed={}", file.display());
    let text = fs::read_to_string(file).ok()?;
    text.lines()
        .filter_map(|l| l.split_once(' '))
        .find(|(_, name)| *name == reference)
        .and_then(|(hash, _)| valid(hash))
}

fn valid(hash: &str) -> Option<String> {
    (hash.len() >= 40 && hash.bytes().all(|b| b.is_ascii_hexdigit())).then(|| hash.to_string())
}
