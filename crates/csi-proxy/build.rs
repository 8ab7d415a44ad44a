//! Records what `-version`, the start-up log line and `csi_proxy_build_info`
//! say about this build: the git commit (read from the repository's files;
//! `CSI_PROXY_COMMIT` overrides it, e.g. for builds from a source tarball),
//! whether the tree was clean (`git status`; `CSI_PROXY_TREE` overrides it)
//! and the target triple. Without a `.git`, commit and tree are `unknown`.
//! The tree state is taken again when HEAD, the index or a file under
//! crates/ changes.

#[path = "build/git.rs"]
mod git;

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-env-changed=CSI_PROXY_COMMIT");
    println!("cargo:rerun-if-env-changed=CSI_PROXY_TREE");
    let target = std::env::var("TARGET").unwrap_or_else(|_| "unknown".into());
    println!("cargo:rustc-env=CSI_PROXY_TARGET={target}");
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let checkout = git::checkout(&manifest);
    let mut watch = Vec::new();
    let commit = match std::env::var("CSI_PROXY_COMMIT") {
        Ok(c) if !c.trim().is_empty() => c.trim().to_string(),
        _ => checkout
            .as_ref()
            .and_then(|c| c.commit(&mut watch))
            .unwrap_or_else(|| "unknown".into()),
    };
    let tree = match std::env::var("CSI_PROXY_TREE") {
        Ok(t) if !t.trim().is_empty() => t.trim().to_string(),
        _ => match &checkout {
            Some(c) => {
                if let Some(crates) = manifest.parent() {
                    watch.push(crates.to_path_buf());
                }
                c.tree_state(&mut watch).to_string()
            }
            None => "unknown".into(),
        },
    };
    for file in watch {
        println!("cargo:rerun-if-changed={}", file.display());
    }
    println!("cargo:rustc-env=CSI_PROXY_COMMIT={commit}");
    println!("cargo:rustc-env=CSI_PROXY_TREE={tree}");
}
