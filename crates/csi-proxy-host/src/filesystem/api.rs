use super::*;
use crate::path::PathPolicy;
use crate::Error;

/// The Filesystem API over a backend: every path is checked against the
/// [`PathPolicy`] (syntax, allowed roots, links in the parent chain) before
/// the backend is called; a rejected request touches nothing.
pub struct Filesystem<B> {
    policy: PathPolicy,
    backend: B,
}

impl<B: FilesystemBackend> Filesystem<B> {
    pub fn new(policy: PathPolicy, backend: B) -> Self {
        Filesystem { policy, backend }
    }

    pub fn backend(&self) -> &B {
        &self.backend
    }

    pub fn policy(&self) -> &PathPolicy {
        &self.policy
    }

    /// Validate `path` and resolve links in its parent chain (and in the
    /// final component when `follow_final`).
    fn resolve(&self, path: &str, follow_final: bool) -> Result<crate::path::ResolvedPath> {
        self.policy.resolve(path, &self.backend, follow_final)
    }
}

fn refuse_root(op: &str, path: &str) -> Error {
    Error::PermissionDenied(format!(
        "{op} {path:?}: refusing to remove an allowed root directory itself"
    ))
}

impl<B: FilesystemBackend> FilesystemApi for Filesystem<B> {
    fn path_exists(&self, req: PathExistsRequest) -> Result<PathExistsResponse> {
        if self
            .policy
            .prove_link_free(&req.path, &self.backend)?
            .is_some()
        {
            return Ok(PathExistsResponse { exists: true });
        }
        let path = self.resolve(&req.path, false)?;
        let exists = self
            .backend
            .exists(path.as_str())
            .map_err(|e| Error::io("stat", &req.path, e))?;
        Ok(PathExistsResponse { exists })
    }

    fn mkdir(&self, req: MkdirRequest) -> Result<MkdirResponse> {
        let path = self.resolve(&req.path, true)?;
        self.backend
            .create_dir_all(path.as_str())
            .map_err(|e| Error::io("mkdir", &req.path, e))?;
        Ok(MkdirResponse {})
    }

    fn rmdir(&self, req: RmdirRequest) -> Result<RmdirResponse> {
        let path = self.resolve(&req.path, false)?;
        if path.is_root() {
            return Err(refuse_root("rmdir", &req.path));
        }
        if req.force {
            match self.backend.remove_all(path.as_str()) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => {
                    return Err(Error::io("rmdir (force)", &req.path, e))
                }
                _ => {}
            }
        } else {
            self.backend
                .remove(path.as_str())
                .map_err(|e| Error::io("rmdir", &req.path, e))?;
        }
        Ok(RmdirResponse {})
    }

    fn rmdir_contents(&self, req: RmdirContentsRequest) -> Result<RmdirContentsResponse> {
        // The directory itself stays, so an allowed root may be emptied only if
        // it is not a root: emptying the kubelet directory is never wanted.
        let path = self.resolve(&req.path, true)?;
        if path.is_root() {
            return Err(Error::PermissionDenied(format!(
                "rmdir contents {:?}: refusing to empty an allowed root directory",
                req.path
            )));
        }
        self.backend
            .remove_contents(path.as_str())
            .map_err(|e| Error::io("rmdir contents", &req.path, e))?;
        Ok(RmdirContentsResponse {})
    }

    fn create_symlink(&self, req: CreateSymlinkRequest) -> Result<CreateSymlinkResponse> {
        // Both ends must lie inside the allowed roots, after links are resolved.
        let source = self.policy.check(&req.source_path)?;
        self.resolve(&req.source_path, true)?;
        let target = self.resolve(&req.target_path, false)?;
        if target.is_root() {
            return Err(Error::PermissionDenied(format!(
                "create symlink at {:?}: the link cannot replace an allowed root",
                req.target_path
            )));
        }
        // The link stores the caller's (validated) source path, as asked.
        self.backend
            .symlink_dir(source.as_str(), target.as_str())
            .map_err(|e| Error::io("create symlink", &req.target_path, e))?;
        Ok(CreateSymlinkResponse {})
    }

    fn is_symlink(&self, req: IsSymlinkRequest) -> Result<IsSymlinkResponse> {
        if self
            .policy
            .prove_link_free(&req.path, &self.backend)?
            .is_some()
        {
            return Ok(IsSymlinkResponse { is_symlink: false });
        }
        let path = self.resolve(&req.path, false)?;
        let is_symlink = self
            .backend
            .is_link_to_existing(path.as_str())
            .map_err(|e| Error::io("lstat", &req.path, e))?;
        Ok(IsSymlinkResponse { is_symlink })
    }
}
