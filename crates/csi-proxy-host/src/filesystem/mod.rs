//! Filesystem API group: version-free types, the API trait, and its one
//! implementation that validates every path before a backend touches the host.

mod api;
pub mod fake;
mod os;

pub use api::Filesystem;

use crate::confined::Located;
use crate::path::CheckedPath;
use crate::Result;

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

/// Can the path be used: something is there and, if it is a link into the
/// allowed roots, its destination exists (library mode's `PathValid`; no
/// proto method).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PathValidRequest {
    pub path: String,
}
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PathValidResponse {
    pub valid: bool,
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
    fn path_valid(&self, req: PathValidRequest) -> Result<PathValidResponse>;
}

/// The filesystem operations the API needs, on paths already checked and
/// located below a root. The real one is [`crate::confined::Confined`]
/// (every OS); tests of the layers above use [`fake::RecordingFilesystem`].
pub trait FilesystemBackend: Send + Sync {
    /// Does anything exist at `p` (a link counts; it is not followed)?
    fn exists(&self, p: &Located) -> Result<bool>;
    /// mkdir -p; an existing final link to a directory inside the roots is
    /// accepted.
    fn mkdir_all(&self, p: &Located) -> Result<()>;
    /// Remove one entry: an empty directory, a file, or a link itself.
    fn remove(&self, p: &Located) -> Result<()>;
    /// Remove an entry and everything below it (nothing there is success);
    /// a link is removed, never followed.
    fn remove_all(&self, p: &Located) -> Result<()>;
    /// Remove every entry inside the directory `p`; a final link is followed
    /// one hop to a directory inside the roots.
    fn remove_contents(&self, p: &Located) -> Result<()>;
    /// Create a directory link at `link` that stores `points_to`.
    fn symlink(&self, points_to: &CheckedPath, link: &Located) -> Result<()>;
    /// Is `p` a link (symlink, junction, volume mount point)? A link whose
    /// destination is inside the roots counts only if that destination
    /// exists; a link leading anywhere else counts without being looked at.
    /// Nothing at `p` is `NotFound`.
    fn is_symlink(&self, p: &Located) -> Result<bool>;
    /// Is there something at `p` that can be used: not a link, a link whose
    /// destination inside the roots exists, or a link leading elsewhere
    /// (not looked at, as [`FilesystemBackend::is_symlink`])? Nothing at
    /// `p` is `false`.
    fn valid(&self, p: &Located) -> Result<bool>;
}

impl<T: FilesystemBackend + ?Sized> FilesystemBackend for std::sync::Arc<T> {
    fn exists(&self, p: &Located) -> Result<bool> {
        (**self).exists(p)
    }
    fn mkdir_all(&self, p: &Located) -> Result<()> {
        (**self).mkdir_all(p)
    }
    fn remove(&self, p: &Located) -> Result<()> {
        (**self).remove(p)
    }
    fn remove_all(&self, p: &Located) -> Result<()> {
        (**self).remove_all(p)
    }
    fn remove_contents(&self, p: &Located) -> Result<()> {
        (**self).remove_contents(p)
    }
    fn symlink(&self, points_to: &CheckedPath, link: &Located) -> Result<()> {
        (**self).symlink(points_to, link)
    }
    fn is_symlink(&self, p: &Located) -> Result<bool> {
        (**self).is_symlink(p)
    }
    fn valid(&self, p: &Located) -> Result<bool> {
        (**self).valid(p)
    }
}
