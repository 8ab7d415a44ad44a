//! The safe core of library mode: a host and every versioned service over
//! it, called in-process through the server's own dispatch (the same
//! decoding, validation, confinement and error mapping as over a pipe or
//! socket; no transport).

use crate::extras;
use csi_proxy_api::{newest, Group, API_VERSIONS};
use csi_proxy_host::path::{Flavor, PathPolicy};
use csi_proxy_host::{Host, HostOptions};
use csi_proxy_server::dispatch::{Code, Reply, VersionedService};
use std::collections::HashMap;

/// What a library host is made from: the allowed roots (the kubelet path
/// first, then the working directories, duplicates dropped, as the
/// binary's `-kubelet-path` and `-working-dir`) and the host options of the
/// binary's flags.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Options {
    pub kubelet_path: String,
    pub working_dirs: Vec<String>,
    pub host: HostOptions,
}

impl Options {
    /// The allowed roots: the kubelet path, then the working directories;
    /// empty and repeated entries dropped.
    pub fn roots(&self) -> Vec<String> {
        let mut roots: Vec<String> = Vec::new();
        for root in std::iter::once(&self.kubelet_path).chain(&self.working_dirs) {
            let root = root.trim();
            if !root.is_empty() && !roots.iter().any(|r| r == root) {
                roots.push(root.to_string());
            }
        }
        roots
    }
}

/// A host and its services: what a `CsiProxyHost *` points to. Shared by
/// any number of threads (every call takes `&self`).
pub struct Library {
    /// Every group/version's service, by group and version.
    services: HashMap<(Group, &'static str), VersionedService>,
    /// The operations beyond the proto methods ([`crate::extras`]).
    extras: extras::Extras,
}

/// The failure of creating a library host: a gRPC code and a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub code: Code,
    pub message: String,
}

impl Library {
    /// The real host of this OS over `options`, as the binary builds it.
    pub fn open(options: &Options) -> Result<Library, Failure> {
        let invalid = |what: &str, e: csi_proxy_host::Error| Failure {
            code: Code::InvalidArgument,
            message: format!("{what}: {e}"),
        };
        let roots = options.roots();
        if roots.is_empty() {
            return Err(Failure {
                code: Code::InvalidArgument,
                message: "no kubelet path and no working directory: nothing would be allowed"
                    .to_string(),
            });
        }
        let policy = PathPolicy::new(Flavor::NATIVE, roots)
            .map_err(|e| invalid("invalid kubelet path or working directory", e))?;
        let host = Host::os_with(policy, &options.host).map_err(|e| {
            invalid(
                "invalid volume fs type, allowed, protected or unprotected services or service name",
                e,
            )
        })?;
        Ok(Library::over(&host))
    }

    /// The services of every group/version over `host`.
    pub fn over(host: &Host) -> Library {
        let services = API_VERSIONS
            .into_iter()
            .map(|v| {
                (
                    (v.group, v.version),
                    csi_proxy_server::service(host, v, false),
                )
            })
            .collect();
        Library {
            services,
            extras: extras::Extras::new(host),
        }
    }

    /// Call `method` of `group` with the protobuf-encoded `request`.
    ///
    /// `group` is a group name (`filesystem`: its newest version) or
    /// `group/version` (`filesystem/v1`). `method` is a method of that
    /// version's service (`PathExists`) or, with a bare group name, one of
    /// the group's [`crate::extras`] operations. The reply is the encoded
    /// response, or a gRPC code and message: the same as over a pipe.
    pub fn call(&self, group: &str, method: &str, request: &[u8]) -> Reply {
        let (name, version) = match group.split_once('/') {
            Some((g, v)) => (g, Some(v)),
            None => (group, None),
        };
        let Some(g) = Group::parse(name) else {
            return Reply::error(
                Code::Unimplemented,
                format!(
                    "unknown API group {:?} (known: {})",
                    capped(group),
                    Group::ALL.map(Group::as_str).join(", ")
                ),
            );
        };
        let api = match version {
            None => newest(g),
            Some(v) => match csi_proxy_api::find(g, v) {
                Some(api) => api,
                None => {
                    return Reply::error(
                        Code::Unimplemented,
                        format!("unknown version {:?} of API group {}", capped(v), g),
                    )
                }
            },
        };
        if version.is_none() {
            if let Some(reply) = self.extras.call(g, method, request) {
                return reply;
            }
        }
        let service = &self.services[&(api.group, api.version)];
        service.call(&api.grpc_path(method), request).wait()
    }
}

/// A caller's name, cut short for a message.
fn capped(s: &str) -> String {
    s.chars().take(64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_are_the_kubelet_path_then_the_working_dirs_without_repeats() {
        let o = Options {
            kubelet_path: " /var/lib/kubelet ".into(),
            working_dirs: vec!["".into(), "/var/lib/kubelet".into(), "/work".into()],
            host: HostOptions::default(),
        };
        assert_eq!(o.roots(), ["/var/lib/kubelet", "/work"]);
    }

    #[test]
    fn newest_versions_are_the_last_of_each_group() {
        let got: Vec<String> = Group::ALL.map(|g| newest(g).to_string()).to_vec();
        assert_eq!(
            got,
            [
                "disk/v1",
                "filesystem/v2alpha1",
                "iscsi/v1alpha2",
                "smb/v1",
                "system/v1alpha1",
                "volume/v2alpha1"
            ]
        );
    }
}
