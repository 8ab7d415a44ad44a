//! Virtual disks for the real-Windows tier: VHDX files made and attached
//! with the Virtual Disk API (`virtdisk.dll`: no Hyper-V, no PowerShell),
//! detached and deleted on drop. Wine's `virtdisk.dll` exports
//! `CreateVirtualDisk` and `AttachVirtualDisk` only as unimplemented stubs
//! (calling one aborts the process), so [`api_status`] says so under wine
//! and no test calls them there.

use std::io;
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};
use std::path::{Path, PathBuf};

use windows_sys::Win32::Foundation::{FreeLibrary, HANDLE};
use windows_sys::Win32::Storage::Vhd::{
    AttachVirtualDisk, CreateVirtualDisk, DetachVirtualDisk, GetVirtualDiskPhysicalPath,
    ResizeVirtualDisk, ATTACH_VIRTUAL_DISK_FLAG_NO_DRIVE_LETTER, ATTACH_VIRTUAL_DISK_PARAMETERS,
    ATTACH_VIRTUAL_DISK_VERSION_1, CREATE_VIRTUAL_DISK_FLAG_NONE, CREATE_VIRTUAL_DISK_PARAMETERS,
    CREATE_VIRTUAL_DISK_VERSION_2, DETACH_VIRTUAL_DISK_FLAG_NONE, RESIZE_VIRTUAL_DISK_FLAG_NONE,
    RESIZE_VIRTUAL_DISK_PARAMETERS, RESIZE_VIRTUAL_DISK_VERSION_1, VIRTUAL_DISK_ACCESS_NONE,
    VIRTUAL_STORAGE_TYPE, VIRTUAL_STORAGE_TYPE_DEVICE_VHDX, VIRTUAL_STORAGE_TYPE_VENDOR_MICROSOFT,
};
use windows_sys::Win32::System::LibraryLoader::{
    GetProcAddress, LoadLibraryExW, LOAD_LIBRARY_SEARCH_SYSTEM32,
};

use super::links::wide_z;

pub const MIB: u64 = 1 << 20;

/// The calls this module makes.
const CALLS: [&str; 5] = [
    "CreateVirtualDisk",
    "AttachVirtualDisk",
    "DetachVirtualDisk",
    "GetVirtualDiskPhysicalPath",
    "ResizeVirtualDisk",
];

fn check(what: &str, code: u32) -> io::Result<()> {
    if code == 0 {
        return Ok(());
    }
    let e = io::Error::from_raw_os_error(code as i32);
    Err(io::Error::new(e.kind(), format!("{what}: {e}")))
}

/// `Ok` when the Virtual Disk API can be used here; else why not.
/// `virtdisk.dll` is loaded from System32 and every call this module
/// makes must be exported; under wine those exports are stubs.
pub fn api_status() -> Result<(), String> {
    let name = wide_z("virtdisk.dll");
    // SAFETY: a NUL-terminated name, no file handle, a documented flag.
    let lib = unsafe {
        LoadLibraryExW(
            name.as_ptr(),
            std::ptr::null_mut(),
            LOAD_LIBRARY_SEARCH_SYSTEM32,
        )
    };
    if lib.is_null() {
        return Err(format!(
            "virtdisk.dll cannot be loaded: {}",
            io::Error::last_os_error()
        ));
    }
    let missing: Vec<&str> = CALLS
        .iter()
        .copied()
        .filter(|call| {
            let c = std::ffi::CString::new(*call).unwrap();
            // SAFETY: a loaded module and a NUL-terminated ASCII name.
            unsafe { GetProcAddress(lib, c.as_ptr().cast()) }.is_none()
        })
        .collect();
    // SAFETY: the module loaded above, released once.
    unsafe { FreeLibrary(lib) };
    if !missing.is_empty() {
        return Err(format!("virtdisk.dll does not export {missing:?}"));
    }
    if super::under_wine() {
        return Err(
            "wine's virtdisk.dll exports CreateVirtualDisk and AttachVirtualDisk as \
             unimplemented stubs (calling one aborts the process)"
                .into(),
        );
    }
    Ok(())
}

/// A VHDX file, attached as a disk while this lives (without drive
/// letters); detached and deleted on drop.
pub struct Vhd {
    // Fields drop in this order: the handle closes before the file goes.
    handle: OwnedHandle,
    file: VhdFile,
    disk: Option<u32>,
    size: u64,
}

/// The file, deleted on drop.
struct VhdFile(PathBuf);

impl Drop for VhdFile {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_file(&self.0) {
            eprintln!("remove {:?}: {e}", self.0);
        }
    }
}

impl Vhd {
    /// Creates `<dir>\<name>.vhdx` (dynamic, `size` bytes, a multiple of
    /// 1 MiB) and attaches it.
    pub fn create(dir: &Path, name: &str, size: u64) -> io::Result<Vhd> {
        api_status().map_err(io::Error::other)?;
        let file = dir.join(format!("{name}.vhdx"));
        let _ = std::fs::remove_file(&file);
        let storage = VIRTUAL_STORAGE_TYPE {
            DeviceId: VIRTUAL_STORAGE_TYPE_DEVICE_VHDX,
            VendorId: VIRTUAL_STORAGE_TYPE_VENDOR_MICROSOFT,
        };
        let mut params = CREATE_VIRTUAL_DISK_PARAMETERS {
            Version: CREATE_VIRTUAL_DISK_VERSION_2,
            ..Default::default()
        };
        // Block and sector sizes 0: the defaults.
        params.Anonymous.Version2.MaximumSize = size;
        let path = wide_z(&file.display().to_string());
        let mut h: HANDLE = std::ptr::null_mut();
        // SAFETY: every pointer is to a live local of the declared type;
        // no security descriptor, synchronous (no OVERLAPPED).
        let code = unsafe {
            CreateVirtualDisk(
                &storage,
                path.as_ptr(),
                VIRTUAL_DISK_ACCESS_NONE,
                std::ptr::null_mut(),
                CREATE_VIRTUAL_DISK_FLAG_NONE,
                0,
                &params,
                std::ptr::null(),
                &mut h,
            )
        };
        check(&format!("CreateVirtualDisk {file:?}"), code)?;
        // SAFETY: a new handle owned by nobody else.
        let handle = unsafe { OwnedHandle::from_raw_handle(h as _) };
        let mut vhd = Vhd {
            handle,
            file: VhdFile(file),
            disk: None,
            size,
        };
        vhd.attach()?;
        Ok(vhd)
    }

    fn raw(&self) -> HANDLE {
        self.handle.as_raw_handle() as HANDLE
    }

    /// The disk number while attached.
    pub fn disk(&self) -> u32 {
        self.disk.expect("the virtual disk is attached")
    }

    /// The virtual size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    pub fn file(&self) -> &Path {
        &self.file.0
    }

    /// Attaches the file (no drive letters for its volumes; detached when
    /// the handle closes, so a crashed test leaves nothing attached).
    pub fn attach(&mut self) -> io::Result<u32> {
        let params = ATTACH_VIRTUAL_DISK_PARAMETERS {
            Version: ATTACH_VIRTUAL_DISK_VERSION_1,
            ..Default::default()
        };
        // SAFETY: our open virtual disk handle; `params` is live.
        let code = unsafe {
            AttachVirtualDisk(
                self.raw(),
                std::ptr::null_mut(),
                ATTACH_VIRTUAL_DISK_FLAG_NO_DRIVE_LETTER,
                0,
                &params,
                std::ptr::null(),
            )
        };
        check(&format!("AttachVirtualDisk {:?}", self.file.0), code)?;
        let n = self.physical_disk()?;
        self.disk = Some(n);
        Ok(n)
    }

    /// `\\.\PhysicalDriveN` of the attached disk → N.
    fn physical_disk(&self) -> io::Result<u32> {
        let mut buf = [0u16; 260];
        let mut bytes = (buf.len() * 2) as u32;
        // SAFETY: `buf` is writable for `bytes` bytes.
        let code = unsafe { GetVirtualDiskPhysicalPath(self.raw(), &mut bytes, buf.as_mut_ptr()) };
        check("GetVirtualDiskPhysicalPath", code)?;
        let end = buf.iter().position(|&c| c == 0).unwrap_or(buf.len());
        let path = String::from_utf16_lossy(&buf[..end]);
        path.strip_prefix(r"\\.\PhysicalDrive")
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| io::Error::other(format!("unexpected physical path {path:?}")))
    }

    /// Detaches the disk (the file stays).
    pub fn detach(&mut self) -> io::Result<()> {
        // SAFETY: our open virtual disk handle.
        let code = unsafe { DetachVirtualDisk(self.raw(), DETACH_VIRTUAL_DISK_FLAG_NONE, 0) };
        check(&format!("DetachVirtualDisk {:?}", self.file.0), code)?;
        self.disk = None;
        Ok(())
    }

    /// Grows the virtual disk to `size` bytes: detached, resized, attached
    /// again (the disk number may change); returns the new disk number.
    pub fn grow(&mut self, size: u64) -> io::Result<u32> {
        self.detach()?;
        let mut params = RESIZE_VIRTUAL_DISK_PARAMETERS {
            Version: RESIZE_VIRTUAL_DISK_VERSION_1,
            ..Default::default()
        };
        params.Anonymous.Version1.NewSize = size;
        // SAFETY: our open virtual disk handle; synchronous.
        let code = unsafe {
            ResizeVirtualDisk(
                self.raw(),
                RESIZE_VIRTUAL_DISK_FLAG_NONE,
                &params,
                std::ptr::null(),
            )
        };
        check(&format!("ResizeVirtualDisk {:?}", self.file.0), code)?;
        self.size = size;
        self.attach()
    }
}

impl Drop for Vhd {
    fn drop(&mut self) {
        if self.disk.is_some() {
            if let Err(e) = self.detach() {
                eprintln!("{e}");
            }
        }
    }
}
