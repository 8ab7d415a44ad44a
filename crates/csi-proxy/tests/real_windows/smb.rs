//! An SMB share of a local directory made with `NetShareAdd` for the SMB
//! tests, removed (`NetShareDel`, then the directory) on drop; and ending
//! a user's server sessions (`NetSessionDel`), so that the next access
//! logs on again.

use super::account::{net_error, wide};
use std::io;
use std::path::{Path, PathBuf};
use windows_sys::Win32::Storage::FileSystem::{
    NetSessionDel, NetShareAdd, NetShareDel, SHARE_INFO_2, STYPE_DISKTREE,
};

/// NERR_NoSuchSession: nothing to end.
const NERR_NO_SUCH_SESSION: u32 = 2312;

pub struct Share {
    pub name: String,
    pub dir: PathBuf,
}

impl Share {
    /// Shares `dir` (created if missing) as `name`, unlimited users, the
    /// default share security (access decided by the directory's ACL).
    pub fn create(name: &str, dir: &Path) -> io::Result<Share> {
        std::fs::create_dir_all(dir)?;
        let mut n = wide(name);
        let mut d = wide(&dir.display().to_string());
        let mut remark = wide("csi-proxy real-Windows test");
        let info = SHARE_INFO_2 {
            shi2_netname: n.as_mut_ptr(),
            shi2_type: STYPE_DISKTREE,
            shi2_remark: remark.as_mut_ptr(),
            shi2_permissions: 0,
            shi2_max_uses: u32::MAX,
            shi2_current_uses: 0,
            shi2_path: d.as_mut_ptr(),
            shi2_passwd: std::ptr::null_mut(),
        };
        let mut parm = 0u32;
        // SAFETY: level 2 with a SHARE_INFO_2 whose strings are
        // NUL-terminated and alive for the call; local machine.
        let status = unsafe {
            NetShareAdd(
                std::ptr::null(),
                2,
                (&info as *const SHARE_INFO_2).cast(),
                &mut parm,
            )
        };
        if status != 0 {
            let _ = std::fs::remove_dir_all(dir);
            return Err(net_error(&format!("NetShareAdd {name}"), status));
        }
        Ok(Share {
            name: name.into(),
            dir: dir.into(),
        })
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        let n = wide(&self.name);
        // SAFETY: a NUL-terminated share name; local machine.
        unsafe { NetShareDel(std::ptr::null(), n.as_ptr(), 0) };
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Ends every session `user` has with this machine's SMB server; the
/// client must log on again (with the credential it holds) to go on.
pub fn end_sessions(user: &str) -> io::Result<()> {
    let u = wide(user);
    // SAFETY: a NUL-terminated user name; any client; local server.
    let status = unsafe { NetSessionDel(std::ptr::null(), std::ptr::null(), u.as_ptr()) };
    match status {
        0 | NERR_NO_SUCH_SESSION => Ok(()),
        s => Err(net_error(&format!("NetSessionDel {user}"), s)),
    }
}
