//! Filesystem v1alpha1, v1beta1, v1beta2, v1, v2alpha1.

use super::routing;
use crate::dispatch::Routes;
use crate::wire::{request, response};
use csi_proxy_api::filesystem::{v1, v1alpha1, v1beta1, v1beta2, v2alpha1};
use csi_proxy_host::filesystem::{self as fs, FilesystemApi};
use std::sync::Arc;

crate::catalog::filesystem_table!(routing!());

// Requests. The old versions' PathContext is ignored, as upstream does.
request!([v1alpha1, v1beta1, v1beta2, v1, v2alpha1] PathExistsRequest => fs::PathExistsRequest { path });
request!([v1alpha1, v1beta1, v1beta2, v1, v2alpha1] MkdirRequest => fs::MkdirRequest { path });
request!([v1alpha1, v1beta1, v1beta2, v1, v2alpha1] RmdirRequest => fs::RmdirRequest { path, force });
request!([v2alpha1] RmdirContentsRequest => fs::RmdirContentsRequest { path });
request!([v1alpha1, v1beta1] LinkPathRequest => fs::CreateSymlinkRequest { source_path, target_path });
request!([v1beta2, v1, v2alpha1] CreateSymlinkRequest => fs::CreateSymlinkRequest { source_path, target_path });
request!([v1alpha1, v1beta1] IsMountPointRequest => fs::IsSymlinkRequest { path });
request!([v1beta2, v1, v2alpha1] IsSymlinkRequest => fs::IsSymlinkRequest { path });

// Responses. The old versions' `error` fields stay empty: errors travel as
// gRPC status only.
response!([v1alpha1, v1beta1] fs::PathExistsResponse => PathExistsResponse { exists } fill);
response!([v1beta2, v1, v2alpha1] fs::PathExistsResponse => PathExistsResponse { exists } exact);
response!([v1alpha1, v1beta1] fs::MkdirResponse => MkdirResponse {} fill);
response!([v1beta2, v1, v2alpha1] fs::MkdirResponse => MkdirResponse {} exact);
response!([v1alpha1, v1beta1] fs::RmdirResponse => RmdirResponse {} fill);
response!([v1beta2, v1, v2alpha1] fs::RmdirResponse => RmdirResponse {} exact);
response!([v2alpha1] fs::RmdirContentsResponse => RmdirContentsResponse {} exact);
response!([v1alpha1, v1beta1] fs::CreateSymlinkResponse => LinkPathResponse {} fill);
response!([v1beta2, v1, v2alpha1] fs::CreateSymlinkResponse => CreateSymlinkResponse {} exact);
response!([v1alpha1, v1beta1] fs::IsSymlinkResponse => IsMountPointResponse { is_mount_point = is_symlink } fill);
response!([v1beta2, v1, v2alpha1] fs::IsSymlinkResponse => IsSymlinkResponse { is_symlink } exact);
