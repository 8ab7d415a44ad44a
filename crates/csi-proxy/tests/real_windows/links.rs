//! Links the hostile tests plant: directory symlinks (`CreateSymbolicLinkW`),
//! junctions (`FSCTL_SET_REPARSE_POINT` with a mount-point reparse buffer)
//! and volume mount points (`SetVolumeMountPointW`), made by the test
//! itself, never through the proxy. Wine's `CreateSymbolicLinkW` reports
//! success and creates nothing and its `FSCTL_SET_REPARSE_POINT` fails, so
//! every maker here checks that the link exists afterwards.

use std::io;
use std::os::windows::fs::OpenOptionsExt;
use std::os::windows::io::AsRawHandle;
use std::path::Path;

use windows_sys::Win32::Storage::FileSystem::{
    DeleteVolumeMountPointW, GetVolumeNameForVolumeMountPointW, GetVolumePathNamesForVolumeNameW,
    SetVolumeMountPointW, FILE_FLAG_BACKUP_SEMANTICS, FILE_FLAG_OPEN_REPARSE_POINT,
};
use windows_sys::Win32::System::Ioctl::FSCTL_SET_REPARSE_POINT;
use windows_sys::Win32::System::IO::DeviceIoControl;

/// `IO_REPARSE_TAG_MOUNT_POINT` (junctions and volume mount points).
const IO_REPARSE_TAG_MOUNT_POINT: u32 = 0xA000_0003;

/// `s` as a NUL-terminated UTF-16 string.
pub fn wide_z(s: &str) -> Vec<u16> {
    s.encode_utf16().chain(std::iter::once(0)).collect()
}

fn is_link(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink())
}

/// A directory symlink at `link` storing `target` (as given).
pub fn symlink_dir(link: &Path, target: &Path) -> io::Result<()> {
    std::os::windows::fs::symlink_dir(target, link)?;
    if !is_link(link) {
        return Err(io::Error::other(format!(
            "CreateSymbolicLinkW {link:?} reported success but created no link"
        )));
    }
    Ok(())
}

/// A junction at `link` (a new directory) to the absolute directory
/// `target`.
pub fn junction(link: &Path, target: &Path) -> io::Result<()> {
    std::fs::create_dir(link)?;
    let made = set_mount_point_reparse(link, target);
    if made.is_err() || !is_link(link) {
        let _ = std::fs::remove_dir(link);
        return Err(made.err().unwrap_or_else(|| {
            io::Error::other(format!(
                "FSCTL_SET_REPARSE_POINT {link:?} reported success but made no junction"
            ))
        }));
    }
    Ok(())
}

fn set_mount_point_reparse(link: &Path, target: &Path) -> io::Result<()> {
    let t = target.display().to_string();
    let substitute: Vec<u16> = format!(r"\??\{}\", t.trim_end_matches('\\'))
        .encode_utf16()
        .collect();
    let print: Vec<u16> = t.encode_utf16().collect();
    let (sb, pb) = (substitute.len() * 2, print.len() * 2);
    // Header (tag, data length, reserved), the four name fields, then
    // both names, each NUL-terminated.
    let data_len = 8 + sb + 2 + pb + 2;
    let mut buf = Vec::with_capacity(8 + data_len);
    buf.extend_from_slice(&IO_REPARSE_TAG_MOUNT_POINT.to_le_bytes());
    buf.extend_from_slice(&(data_len as u16).to_le_bytes());
    buf.extend_from_slice(&0u16.to_le_bytes());
    for v in [0, sb, sb + 2, pb] {
        buf.extend_from_slice(&(v as u16).to_le_bytes());
    }
    for u in substitute.iter().chain(&[0]).chain(&print).chain(&[0]) {
        buf.extend_from_slice(&u.to_le_bytes());
    }
    let dir = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_OPEN_REPARSE_POINT)
        .open(link)?;
    let mut got = 0u32;
    // SAFETY: `buf` is a complete reparse buffer of its length; no output;
    // synchronous call on our open directory.
    let ok = unsafe {
        DeviceIoControl(
            dir.as_raw_handle() as _,
            FSCTL_SET_REPARSE_POINT,
            buf.as_ptr().cast(),
            buf.len() as u32,
            std::ptr::null_mut(),
            0,
            &mut got,
            std::ptr::null_mut(),
        )
    };
    if ok == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `Ok` when this system can make both kinds of link; else what fails
/// (tried in a scratch directory under `dir`, removed again).
pub fn status(dir: &Path) -> Result<(), String> {
    let scratch = dir.join("links-probe");
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(scratch.join("target")).map_err(|e| e.to_string())?;
    let mut why = Vec::new();
    if let Err(e) = symlink_dir(&scratch.join("s"), &scratch.join("target")) {
        why.push(format!("symlink: {e}"));
    }
    if let Err(e) = junction(&scratch.join("j"), &scratch.join("target")) {
        why.push(format!("junction: {e}"));
    }
    for l in ["s", "j"] {
        let _ = std::fs::remove_dir(scratch.join(l));
    }
    let _ = std::fs::remove_dir_all(&scratch);
    if why.is_empty() {
        Ok(())
    } else {
        Err(why.join("; "))
    }
}

fn with_slash(dir: &Path) -> String {
    let mut s = dir.display().to_string();
    if !s.ends_with('\\') {
        s.push('\\');
    }
    s
}

/// Mounts `volume` (`\\?\Volume{…}\`) on the empty directory `dir`.
pub fn mount_volume(dir: &Path, volume: &str) -> io::Result<()> {
    let (d, v) = (wide_z(&with_slash(dir)), wide_z(volume));
    // SAFETY: two NUL-terminated strings alive for the call.
    if unsafe { SetVolumeMountPointW(d.as_ptr(), v.as_ptr()) } == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Removes the volume mount point at `dir` (the directory stays).
pub fn unmount_volume(dir: &Path) -> io::Result<()> {
    let d = wide_z(&with_slash(dir));
    // SAFETY: a NUL-terminated string alive for the call.
    if unsafe { DeleteVolumeMountPointW(d.as_ptr()) } == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The volume mounted at `dir` (a mount point or a drive root like `X:\`).
pub fn volume_at(dir: &Path) -> io::Result<String> {
    let d = wide_z(&with_slash(dir));
    let mut buf = [0u16; 64];
    // SAFETY: `d` is NUL-terminated; `buf` is writable for its length.
    let ok = unsafe {
        GetVolumeNameForVolumeMountPointW(d.as_ptr(), buf.as_mut_ptr(), buf.len() as u32)
    };
    if ok == 0 {
        return Err(io::Error::last_os_error());
    }
    let end = buf.iter().position(|&c| c == 0).unwrap_or(buf.len());
    Ok(String::from_utf16_lossy(&buf[..end]))
}

/// Every path where `volume` is reachable (drive roots and mount folders).
pub fn volume_paths(volume: &str) -> io::Result<Vec<String>> {
    let v = wide_z(volume);
    let mut buf = vec![0u16; 4096];
    let mut len = 0u32;
    // SAFETY: `v` is NUL-terminated; `buf` is writable for its length.
    let ok = unsafe {
        GetVolumePathNamesForVolumeNameW(v.as_ptr(), buf.as_mut_ptr(), buf.len() as u32, &mut len)
    };
    if ok == 0 {
        return Err(io::Error::last_os_error());
    }
    buf.truncate(len as usize);
    Ok(buf
        .split(|&c| c == 0)
        .filter(|s| !s.is_empty())
        .map(String::from_utf16_lossy)
        .collect())
}

/// A drive letter no volume uses now (`X:\`), from Z: down.
pub fn free_drive_letter() -> Option<String> {
    (b'G'..=b'Z')
        .rev()
        .map(|c| format!("{}:\\", c as char))
        .find(|d| !Path::new(d).exists() && volume_at(Path::new(d)).is_err())
}
