//! `include/csi_proxy.h` is what cbindgen makes of `src/abi.rs` today
//! (`CSI_PROXY_BLESS=1` rewrites it). A source check: it reads the crate's
//! files by their Linux paths, so it runs on the build host only.
#![cfg(not(windows))]

use std::path::Path;

#[test]
fn the_committed_header_is_the_generated_one() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(dir.join("src/abi.rs"))
        .generate()
        .expect("cbindgen generates the header");
    let mut generated = Vec::new();
    bindings.write(&mut generated);
    let path = dir.join("include/csi_proxy.h");
    if std::env::var_os("CSI_PROXY_BLESS").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let committed = std::fs::read(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "include/csi_proxy.h is stale: run CSI_PROXY_BLESS=1 cargo test -p csi-proxy-ffi --test header\n{}",
        String::from_utf8_lossy(&generated)
    );
}
