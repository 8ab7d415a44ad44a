//! Filesystem API group: version-free types, the API trait, and its one
//! implementation that validates every path before a backend touches the host.

mod api;
pub mod fake;
#[cfg(unix)]
mod linux;
#[cfg(windows)]
mod windows;

pub use api::Filesystem;

/// The real backend of this OS.
#[cfg(unix)]
pub use linux::OsFilesystem;
#[cfg(windows)]
pub use windows::OsFilesystem;

use crate::path::LinkReader;
use crate::Result;
use std::io;

/// Does a path exist (the final component is not followed)?
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PathExistsRequest {
    pub path: String,
}
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PathExistsResponse {
    pub exists: bool,
}

/// Create a directory and its missing parents.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MkdirRequest {
    pub path: String,
}
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MkdirResponse {}

/// Remove a directory (or link); with `force`, everything below it too.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RmdirRequest {
    pub path: String,
    pub force: bool,
}
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RmdirResponse {}

/// Remove everything inside a directory, keeping the directory.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RmdirContentsRequest {
    pub path: String,
}
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RmdirContentsResponse {}

/// Create a directory link at `target_path` that points to `source_path`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CreateSymlinkRequest {
    pub source_path: String,
    pub target_path: String,
}
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CreateSymlinkResponse {}

/// Is the path a link (symlink, junction or volume mount point) whose target exists?
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IsSymlinkRequest {
    pub path: String,
}
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IsSymlinkResponse {
    pub is_symlink: bool,
}

/// The version-free Filesystem API. Every versioned gRPC service of the
/// group is adapted onto this trait.
pub trait FilesystemApi: Send + Sync {
    fn path_exists(&self, req: PathExistsRequest) -> Result<PathExistsResponse>;
    fn mkdir(&self, req: MkdirRequest) -> Result<MkdirResponse>;
    fn rmdir(&self, req: RmdirRequest) -> Result<RmdirResponse>;
    fn rmdir_contents(&self, req: RmdirContentsRequest) -> Result<RmdirContentsResponse>;
    fn create_symlink(&self, req: CreateSymlinkRequest) -> Result<CreateSymlinkResponse>;
    fn is_symlink(&self, req: IsSymlinkRequest) -> Result<IsSymlinkResponse>;
}

/// Raw filesystem operations on paths that were already validated and
/// resolved by [`crate::path::PathPolicy`]. Implemented per OS and by the
/// recording fake; never called with unchecked input.
pub trait FilesystemBackend: LinkReader + Send + Sync {
    /// lstat: does anything exist at `path` (a dangling link counts)?
    fn exists(&self, path: &str) -> io::Result<bool>;
    /// mkdir -p.
    fn create_dir_all(&self, path: &str) -> io::Result<()>;
    /// Remove one entry: an empty directory, a file, or a link itself.
    fn remove(&self, path: &str) -> io::Result<()>;
    /// Remove an entry and everything below it; a link is removed, never followed.
    fn remove_all(&self, path: &str) -> io::Result<()>;
    /// Remove every entry inside the directory `path` (links are not followed).
    fn remove_contents(&self, path: &str) -> io::Result<()>;
    /// Create a directory link at `link` pointing to `points_to`.
    fn symlink_dir(&self, points_to: &str, link: &str) -> io::Result<()>;
    /// Is `path` a link (symlink, junction, mount point) whose target exists?
    fn is_link_to_existing(&self, path: &str) -> io::Result<bool>;
}

impl<T: LinkReader + ?Sized> LinkReader for std::sync::Arc<T> {
    fn read_link(&self, path: &str) -> io::Result<crate::path::Link> {
        (**self).read_link(path)
    }
    fn is_link_free(&self, path: &str) -> bool {
        (**self).is_link_free(path)
    }
}

impl<T: FilesystemBackend + ?Sized> FilesystemBackend for std::sync::Arc<T> {
    fn exists(&self, path: &str) -> io::Result<bool> {
        (**self).exists(path)
    }
    fn create_dir_all(&self, path: &str) -> io::Result<()> {
        (**self).create_dir_all(path)
    }
    fn remove(&self, path: &str) -> io::Result<()> {
        (**self).remove(path)
    }
    fn remove_all(&self, path: &str) -> io::Result<()> {
        (**self).remove_all(path)
    }
    fn remove_contents(&self, path: &str) -> io::Result<()> {
        (**self).remove_contents(path)
    }
    fn symlink_dir(&self, points_to: &str, link: &str) -> io::Result<()> {
        (**self).symlink_dir(points_to, link)
    }
    fn is_link_to_existing(&self, path: &str) -> io::Result<bool> {
        (**self).is_link_to_existing(path)
    }
}
