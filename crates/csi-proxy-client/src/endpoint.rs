//! Where the proxy's endpoints are, and in which order versions are tried.

use csi_proxy_api::{compare_versions, ApiVersion, Group, API_VERSIONS};
use std::cmp::Ordering;
use std::path::{Path, PathBuf};

/// Default prefix of the Windows pipe names: the pipe of a group/version is
/// `<prefix><group>-<version>`, e.g. `\\.\pipe\csi-proxy-filesystem-v1`.
pub const DEFAULT_PIPE_PREFIX: &str = r"\\.\pipe\csi-proxy-";

/// The socket directory the proxy uses by default on Unix (the same rule as
/// the server's `-socket-dir` default): `/run/csi-proxy` for root, otherwise
/// `$XDG_RUNTIME_DIR/csi-proxy` if that variable holds an absolute path,
/// otherwise `/tmp/csi-proxy-<uid>`. The effective user id decides, as it
/// does for the server.
#[cfg(unix)]
#[must_use]
pub fn default_socket_dir() -> PathBuf {
    socket_dir_for(
        nix::unistd::geteuid().as_raw(),
        std::env::var_os("XDG_RUNTIME_DIR").as_deref(),
    )
}

/// [`default_socket_dir`] for a given effective uid and `XDG_RUNTIME_DIR`.
#[cfg(unix)]
pub(crate) fn socket_dir_for(uid: u32, xdg_runtime_dir: Option<&std::ffi::OsStr>) -> PathBuf {
    if uid == 0 {
        return PathBuf::from("/run/csi-proxy");
    }
    match xdg_runtime_dir {
        Some(d) if Path::new(d).is_absolute() => Path::new(d).join("csi-proxy"),
        _ => PathBuf::from(format!("/tmp/csi-proxy-{uid}")),
    }
}

/// The Unix socket of `api` in `dir`: `<dir>/csi-proxy-<group>-<version>.sock`.
#[must_use]
pub fn socket_path(dir: &Path, api: ApiVersion) -> PathBuf {
    dir.join(format!("{}.sock", api.endpoint_name()))
}

/// The named pipe of `api` for a pipe name prefix: `<prefix><group>-<version>`.
/// With [`DEFAULT_PIPE_PREFIX`] this is [`ApiVersion::pipe_name`].
#[must_use]
pub fn pipe_path(prefix: &str, api: ApiVersion) -> PathBuf {
    PathBuf::from(format!("{prefix}{}-{}", api.group.as_str(), api.version))
}

/// Which version of a group [`Client::connect_newest`](crate::Client::connect_newest)
/// tries first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum VersionPreference {
    /// Kubernetes' version priority: stable (GA) versions first, then beta,
    /// then alpha; within each level the higher major version, then the
    /// higher alpha/beta number. A stable `v1` is preferred over `v2alpha1`,
    /// but an alpha version is still used when nothing more stable is
    /// served. Filesystem: v1, v1beta2, v1beta1, v2alpha1, v1alpha1.
    #[default]
    Stable,
    /// Strictly newest first, by [`compare_versions`] (alpha versions of a
    /// newer major version included): v2alpha1, v1, v1beta2, v1beta1,
    /// v1alpha1. Opt in to this to get e.g. `RmdirContents` of filesystem
    /// v2alpha1 whenever it is served.
    Newest,
}

/// Stability level of a version: alpha 0, beta 1, GA 2.
fn level(version: &str) -> u8 {
    if version.contains("alpha") {
        0
    } else if version.contains("beta") {
        1
    } else {
        2
    }
}

impl VersionPreference {
    /// Orders two versions of one group: `Less` means `a` is tried first.
    #[must_use]
    pub fn cmp(self, a: &str, b: &str) -> Ordering {
        let newest_first = compare_versions(b, a);
        match self {
            VersionPreference::Newest => newest_first,
            VersionPreference::Stable => level(b).cmp(&level(a)).then(newest_first),
        }
    }

    /// The versions of `group` (from [`API_VERSIONS`]), most preferred first.
    #[must_use]
    pub fn order(self, group: Group) -> Vec<ApiVersion> {
        let mut v: Vec<ApiVersion> = API_VERSIONS
            .into_iter()
            .filter(|a| a.group == group)
            .collect();
        v.sort_by(|a, b| self.cmp(a.version, b.version));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use csi_proxy_api::find;
    use std::ffi::OsStr;

    fn api(group: Group, version: &str) -> ApiVersion {
        find(group, version).unwrap()
    }

    #[test]
    fn socket_paths() {
        let dir = Path::new("/run/csi-proxy");
        assert_eq!(
            socket_path(dir, api(Group::Filesystem, "v1")),
            Path::new("/run/csi-proxy/csi-proxy-filesystem-v1.sock")
        );
        assert_eq!(
            socket_path(Path::new("/x/y/"), api(Group::Volume, "v2alpha1")),
            Path::new("/x/y/csi-proxy-volume-v2alpha1.sock")
        );
        assert_eq!(
            socket_path(Path::new("rel"), api(Group::Iscsi, "v1alpha2")),
            Path::new("rel/csi-proxy-iscsi-v1alpha2.sock")
        );
        // Every version has its own socket, named after its endpoint.
        let all: std::collections::HashSet<PathBuf> =
            API_VERSIONS.iter().map(|a| socket_path(dir, *a)).collect();
        assert_eq!(all.len(), 23);
        for a in API_VERSIONS {
            let p = socket_path(dir, a);
            assert_eq!(p.parent(), Some(dir));
            assert_eq!(
                p.file_name().unwrap(),
                OsStr::new(&format!("{}.sock", a.endpoint_name()))
            );
        }
    }

    #[test]
    fn pipe_paths() {
        for a in API_VERSIONS {
            assert_eq!(
                pipe_path(DEFAULT_PIPE_PREFIX, a),
                PathBuf::from(a.pipe_name()),
                "{a}"
            );
        }
        assert_eq!(
            pipe_path(r"\\.\pipe\test-1-", api(Group::Disk, "v1beta3")),
            PathBuf::from(r"\\.\pipe\test-1-disk-v1beta3")
        );
        assert_eq!(
            pipe_path(DEFAULT_PIPE_PREFIX, api(Group::Filesystem, "v1")),
            PathBuf::from(r"\\.\pipe\csi-proxy-filesystem-v1")
        );
    }

    #[cfg(unix)]
    #[test]
    fn default_socket_dirs() {
        assert_eq!(socket_dir_for(0, None), Path::new("/run/csi-proxy"));
        assert_eq!(
            socket_dir_for(0, Some(OsStr::new("/run/user/0"))),
            Path::new("/run/csi-proxy"),
            "root ignores XDG_RUNTIME_DIR"
        );
        assert_eq!(
            socket_dir_for(1000, Some(OsStr::new("/run/user/1000"))),
            Path::new("/run/user/1000/csi-proxy")
        );
        assert_eq!(socket_dir_for(1000, None), Path::new("/tmp/csi-proxy-1000"));
        assert_eq!(
            socket_dir_for(1000, Some(OsStr::new("relative"))),
            Path::new("/tmp/csi-proxy-1000"),
            "a relative XDG_RUNTIME_DIR is ignored"
        );
        assert_eq!(
            socket_dir_for(1000, Some(OsStr::new(""))),
            Path::new("/tmp/csi-proxy-1000")
        );
    }

    #[cfg(unix)]
    #[test]
    fn default_socket_dir_follows_the_effective_user() {
        let d = default_socket_dir();
        if nix::unistd::geteuid().is_root() {
            assert_eq!(d, Path::new("/run/csi-proxy"));
        } else {
            assert!(d.is_absolute() && d.to_string_lossy().contains("csi-proxy"));
        }
    }

    fn names(p: VersionPreference, g: Group) -> Vec<&'static str> {
        p.order(g).into_iter().map(|a| a.version).collect()
    }

    #[test]
    fn stable_preference() {
        let p = VersionPreference::default();
        assert_eq!(p, VersionPreference::Stable);
        assert_eq!(
            names(p, Group::Filesystem),
            ["v1", "v1beta2", "v1beta1", "v2alpha1", "v1alpha1"]
        );
        assert_eq!(
            names(p, Group::Volume),
            ["v1", "v1beta3", "v1beta2", "v1beta1", "v2alpha1", "v1alpha1"]
        );
        assert_eq!(
            names(p, Group::Disk),
            ["v1", "v1beta3", "v1beta2", "v1beta1", "v1alpha1"]
        );
        assert_eq!(names(p, Group::Iscsi), ["v1alpha2", "v1alpha1"]);
        assert_eq!(
            names(p, Group::Smb),
            ["v1", "v1beta2", "v1beta1", "v1alpha1"]
        );
        assert_eq!(names(p, Group::System), ["v1alpha1"]);
        // Kubernetes' own example of version priority.
        let mut k = vec![
            "v11alpha2",
            "v10",
            "v3beta1",
            "v12alpha1",
            "v2",
            "v10beta3",
            "v11beta2",
            "v1",
        ];
        k.sort_by(|a, b| p.cmp(a, b));
        assert_eq!(
            k,
            [
                "v10",
                "v2",
                "v1",
                "v11beta2",
                "v10beta3",
                "v3beta1",
                "v12alpha1",
                "v11alpha2"
            ]
        );
    }

    #[test]
    fn newest_preference() {
        let p = VersionPreference::Newest;
        assert_eq!(
            names(p, Group::Filesystem),
            ["v2alpha1", "v1", "v1beta2", "v1beta1", "v1alpha1"]
        );
        assert_eq!(
            names(p, Group::Volume),
            ["v2alpha1", "v1", "v1beta3", "v1beta2", "v1beta1", "v1alpha1"]
        );
        for g in Group::ALL {
            let order = p.order(g);
            for pair in order.windows(2) {
                assert!(compare_versions(pair[0].version, pair[1].version).is_gt());
            }
        }
    }

    #[test]
    fn every_version_is_tried_once() {
        for p in [VersionPreference::Stable, VersionPreference::Newest] {
            let mut all: Vec<ApiVersion> = Group::ALL.iter().flat_map(|g| p.order(*g)).collect();
            assert_eq!(all.len(), 23);
            all.sort_by_key(|a| (a.group, a.version));
            all.dedup();
            assert_eq!(all.len(), 23);
        }
    }
}
