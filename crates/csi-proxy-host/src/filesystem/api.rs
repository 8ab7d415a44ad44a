use super::*;
use crate::confined::locate;
use crate::path::PathPolicy;
use crate::Error;

/// The Filesystem API over a backend: every path is checked against the
/// [`PathPolicy`] (syntax, inside an allowed root) and located below its
/// root before the backend is called; a rejected request touches nothing.
/// The backend resolves the rest beneath the root's handle
/// ([`crate::confined`]).
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
}

fn refuse_root(op: &str, p: &Located) -> Result<()> {
    if p.is_root() {
        return Err(Error::PermissionDenied(format!(
            "{op} {}: refusing to remove or empty an allowed root directory itself",
            p.shown()
        )));
    }
    Ok(())
}

impl<B: FilesystemBackend> FilesystemApi for Filesystem<B> {
    fn path_exists(&self, req: PathExistsRequest) -> Result<PathExistsResponse> {
        let p = locate(&self.policy, &req.path)?;
        Ok(PathExistsResponse {
            exists: self.backend.exists(&p)?,
        })
    }

    fn mkdir(&self, req: MkdirRequest) -> Result<MkdirResponse> {
        let p = locate(&self.policy, &req.path)?;
        // The backend says when the directory was there already: the only
        // step of this call, so the call changed nothing.
        let (made, unchanged) = crate::effect::observe(|| self.backend.mkdir_all(&p));
        made?;
        if unchanged {
            crate::effect::nothing_changed();
        }
        Ok(MkdirResponse {})
    }

    fn rmdir(&self, req: RmdirRequest) -> Result<RmdirResponse> {
        let p = locate(&self.policy, &req.path)?;
        refuse_root("rmdir", &p)?;
        // One entry is a few system calls (answered on the caller's worker);
        // a tree may take long: the server runs that on its blocking pool.
        if req.force && crate::inline::active() {
            return Err(crate::inline::would_block("removing a tree"));
        }
        if req.force {
            self.backend.remove_all(&p)?;
        } else {
            self.backend.remove(&p)?;
        }
        Ok(RmdirResponse {})
    }

    fn rmdir_contents(&self, req: RmdirContentsRequest) -> Result<RmdirContentsResponse> {
        // The directory itself stays, but emptying the kubelet directory (or
        // another allowed root) is never wanted.
        let p = locate(&self.policy, &req.path)?;
        refuse_root("rmdir contents", &p)?;
        self.backend.remove_contents(&p)?;
        Ok(RmdirContentsResponse {})
    }

    fn create_symlink(&self, req: CreateSymlinkRequest) -> Result<CreateSymlinkResponse> {
        // The link stores the source path as given: inside the roots, and
        // not through a link below its root (its last component may be
        // anything, e.g. a staging directory linked to an SMB share, or
        // nothing yet). What the stored text leads to later is checked by
        // whoever follows it; csi-proxy itself never follows links in a
        // parent chain. The link is created beneath the target's root.
        let source = locate(&self.policy, &req.source_path)?;
        self.backend.exists(&source)?;
        let target = locate(&self.policy, &req.target_path)?;
        if target.is_root() {
            return Err(Error::PermissionDenied(format!(
                "create symlink at {}: the link cannot replace an allowed root",
                target.shown()
            )));
        }
        self.backend.symlink(source.checked(), &target)?;
        Ok(CreateSymlinkResponse {})
    }

    fn is_symlink(&self, req: IsSymlinkRequest) -> Result<IsSymlinkResponse> {
        let p = locate(&self.policy, &req.path)?;
        Ok(IsSymlinkResponse {
            is_symlink: self.backend.is_symlink(&p)?,
        })
    }

    fn path_valid(&self, req: PathValidRequest) -> Result<PathValidResponse> {
        let p = locate(&self.policy, &req.path)?;
        Ok(PathValidResponse {
            valid: self.backend.valid(&p)?,
        })
    }
}
