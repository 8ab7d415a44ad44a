//! The new mount API calls the CIFS backend needs (`fsopen`, `fsconfig`,
//! `fsmount`, `move_mount`), as raw system calls: options are handed to the
//! kernel one key at a time, so a password is never part of an option
//! string that needs escaping, a command line or a file.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use zeroize::Zeroizing;

/// The attributes of every mount: `MOUNT_ATTR_*` are u64 in libc, but
/// `fsmount` takes an unsigned int (a u64 through the variadic `syscall`
/// would be two arguments on 32-bit targets).
const MOUNT_ATTRS: libc::c_uint =
    (libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV) as libc::c_uint;

fn cstr(s: &str) -> io::Result<CString> {
    CString::new(s)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in a mount option"))
}

/// A filesystem context of type `fs_type`.
pub fn fsopen(fs_type: &str) -> io::Result<OwnedFd> {
    let t = cstr(fs_type)?;
    // SAFETY: `t` is a valid NUL-terminated string for the call.
    let fd = unsafe { libc::syscall(libc::SYS_fsopen, t.as_ptr(), libc::FSOPEN_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Set the string option `key` of a context.
pub fn set_string(ctx: &OwnedFd, key: &str, value: &str) -> io::Result<()> {
    let k = cstr(key)?;
    // The value may be a password: its C copy is wiped when dropped.
    let mut v = Zeroizing::new(Vec::with_capacity(value.len() + 1));
    if value.as_bytes().contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "NUL in a mount option",
        ));
    }
    v.extend_from_slice(value.as_bytes());
    v.push(0);
    // SAFETY: both strings are NUL-terminated and alive for the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_fsconfig,
            ctx.as_raw_fd(),
            libc::FSCONFIG_SET_STRING,
            k.as_ptr(),
            v.as_ptr(),
            0,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Set the flag option `key` of a context.
pub fn set_flag(ctx: &OwnedFd, key: &str) -> io::Result<()> {
    let k = cstr(key)?;
    // SAFETY: the key is NUL-terminated; flags take no value.
    let r = unsafe {
        libc::syscall(
            libc::SYS_fsconfig,
            ctx.as_raw_fd(),
            libc::FSCONFIG_SET_FLAG,
            k.as_ptr(),
            std::ptr::null::<libc::c_char>(),
            0,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Create the superblock (this is where the share is contacted) and a
/// detached `nosuid,nodev` mount of it.
pub fn create_and_mount(ctx: &OwnedFd) -> io::Result<OwnedFd> {
    // SAFETY: no pointers are passed.
    let r = unsafe {
        libc::syscall(
            libc::SYS_fsconfig,
            ctx.as_raw_fd(),
            libc::FSCONFIG_CMD_CREATE,
            std::ptr::null::<libc::c_char>(),
            std::ptr::null::<libc::c_char>(),
            0,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: no pointers are passed.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_fsmount,
            ctx.as_raw_fd(),
            libc::FSMOUNT_CLOEXEC,
            MOUNT_ATTRS,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Attach the detached mount `mnt` onto the directory `dir` (an open
/// directory descriptor: the mount lands on what was opened, not on a path
/// looked up again).
pub fn attach(mnt: &OwnedFd, dir: &OwnedFd) -> io::Result<()> {
    let empty = c"";
    // SAFETY: both descriptors are open; the paths are empty C strings as
    // MOVE_MOUNT_F_EMPTY_PATH and MOVE_MOUNT_T_EMPTY_PATH require.
    let r = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            mnt.as_raw_fd(),
            empty.as_ptr(),
            dir.as_raw_fd(),
            empty.as_ptr(),
            libc::MOVE_MOUNT_F_EMPTY_PATH | libc::MOVE_MOUNT_T_EMPTY_PATH,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
