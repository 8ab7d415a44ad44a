//! What this build is: version, git commit and target (set by build.rs).

/// The crate version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The git commit the binary was built from, or `unknown`.
pub const COMMIT: &str = env!("CSI_PROXY_COMMIT");
/// The target triple, e.g. `x86_64-pc-windows-gnu`.
pub const TARGET: &str = env!("CSI_PROXY_TARGET");
/// What `-version` prints after the program name.
pub const LONG: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("CSI_PROXY_COMMIT"),
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
