//! Device notifications on Windows: `CM_Register_Notification` for the disk
//! and volume device interface classes (`GUID_DEVINTERFACE_DISK`,
//! `GUID_DEVINTERFACE_VOLUME`). Every arrival or removal bumps one counter;
//! the inventory compares it before each call ([`super::SeqEvents`]) and
//! scans everything when it moved.
//!
//! `CM_Register_Notification` (Windows 8 and later) is looked up at run
//! time in `cfgmgr32.dll`, loaded from System32 only: wine 8.0 does not
//! export it, and a load-time import would stop the whole executable from
//! starting there. Without it the inventory has no event source and every
//! call scans.
//!
//! Every `unsafe` of the notifications is here.

use super::{EventSource, Pending, SeqEvents};
use std::ffi::c_void;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use windows_sys::core::GUID;
use windows_sys::Win32::Devices::DeviceAndDriverInstallation::{
    CM_NOTIFY_ACTION, CM_NOTIFY_ACTION_DEVICEINTERFACEARRIVAL,
    CM_NOTIFY_ACTION_DEVICEINTERFACEREMOVAL, CM_NOTIFY_EVENT_DATA, CM_NOTIFY_FILTER,
    CM_NOTIFY_FILTER_TYPE_DEVICEINTERFACE, CONFIGRET, CR_SUCCESS, HCMNOTIFICATION,
    PCM_NOTIFY_CALLBACK,
};
use windows_sys::Win32::System::Ioctl::{GUID_DEVINTERFACE_DISK, GUID_DEVINTERFACE_VOLUME};
use windows_sys::Win32::System::LibraryLoader::{
    GetProcAddress, LoadLibraryExW, LOAD_LIBRARY_SEARCH_SYSTEM32,
};

type RegisterFn = unsafe extern "system" fn(
    *const CM_NOTIFY_FILTER,
    *const c_void,
    PCM_NOTIFY_CALLBACK,
    *mut HCMNOTIFICATION,
) -> CONFIGRET;
type UnregisterFn = unsafe extern "system" fn(HCMNOTIFICATION) -> CONFIGRET;

#[derive(Clone, Copy)]
struct Api {
    register: RegisterFn,
    unregister: UnregisterFn,
}

/// The two functions, if this Windows has them (looked up once).
fn api() -> Option<Api> {
    static API: OnceLock<Option<Api>> = OnceLock::new();
    *API.get_or_init(|| {
        let name = crate::wide::nul_terminated("cfgmgr32.dll").expect("no NUL");
        // SAFETY: `name` is a NUL-terminated UTF-16 string that outlives the
        // call; no file handle is passed. The module is never freed, so the
        // function pointers below stay valid for the life of the process.
        let module =
            unsafe { LoadLibraryExW(name.as_ptr(), std::ptr::null_mut(), LOAD_LIBRARY_SEARCH_SYSTEM32) };
        if module.is_null() {
            return None;
        }
        // SAFETY: `module` is a loaded module; the names are NUL-terminated
        // ASCII.
        let (reg, unreg) = unsafe {
            (
                GetProcAddress(module, c"CM_Register_Notification".as_ptr().cast()),
                GetProcAddress(module, c"CM_Unregister_Notification".as_ptr().cast()),
            )
        };
        let (reg, unreg) = (reg?, unreg?);
        // SAFETY: the exports have exactly these signatures (cfgmgr32.h,
        // as declared by windows-sys); only the pointer types change.
        Some(unsafe {
            Api {
                register: std::mem::transmute::<unsafe extern "system" fn() -> isize, RegisterFn>(
                    reg,
                ),
                unregister: std::mem::transmute::<
                    unsafe extern "system" fn() -> isize,
                    UnregisterFn,
                >(unreg),
            }
        })
    })
}

/// Whether an action is an interface arrival or removal (the only ones a
/// device-interface filter delivers; anything else is not counted).
pub fn counts(action: CM_NOTIFY_ACTION) -> bool {
    action == CM_NOTIFY_ACTION_DEVICEINTERFACEARRIVAL
        || action == CM_NOTIFY_ACTION_DEVICEINTERFACEREMOVAL
}

/// The callback: bumps the counter its context points to.
///
/// # Safety
/// `context` must point to a live `AtomicU64` (it is the counter of the
/// [`Notifications`] that registered this callback, and that value keeps it
/// alive until it has unregistered).
pub unsafe extern "system" fn on_interface_change(
    _notification: HCMNOTIFICATION,
    context: *const c_void,
    action: CM_NOTIFY_ACTION,
    _data: *const CM_NOTIFY_EVENT_DATA,
    _size: u32,
) -> u32 {
    if counts(action) && !context.is_null() {
        // SAFETY: guaranteed by the caller (see above).
        let counter = unsafe { &*(context as *const AtomicU64) };
        counter.fetch_add(1, Ordering::Release);
    }
    0 // ERROR_SUCCESS
}

/// A registration handle, unregistered on drop.
struct Registration {
    handle: HCMNOTIFICATION,
    unregister: UnregisterFn,
}

// SAFETY: a notification handle is not tied to the thread that registered
// it; CM_Unregister_Notification may be called from any thread.
unsafe impl Send for Registration {}

impl Drop for Registration {
    fn drop(&mut self) {
        // SAFETY: the handle came from a successful CM_Register_Notification
        // and is unregistered only here, once. Unregistering waits for
        // callbacks in progress, so the counter outlives them.
        unsafe {
            (self.unregister)(self.handle);
        }
    }
}

/// Disk and volume interface notifications, feeding one counter.
pub struct Notifications {
    // Dropped first: no callback runs once these are gone.
    registrations: Vec<Registration>,
    counter: Arc<AtomicU64>,
}

impl Notifications {
    /// Registers for disk and volume interface arrival and removal;
    /// `Unsupported` where `CM_Register_Notification` does not exist
    /// (wine).
    pub fn register() -> io::Result<Notifications> {
        let api = api().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::Unsupported,
                "cfgmgr32.dll has no CM_Register_Notification",
            )
        })?;
        let counter = Arc::new(AtomicU64::new(0));
        let mut n = Notifications {
            registrations: Vec::new(),
            counter,
        };
        for class in [GUID_DEVINTERFACE_DISK, GUID_DEVINTERFACE_VOLUME] {
            n.registrations
                .push(register_class(api, class, &n.counter)?);
        }
        Ok(n)
    }

    /// The counter the callbacks bump.
    pub fn counter(&self) -> Arc<AtomicU64> {
        self.counter.clone()
    }
}

fn register_class(api: Api, class: GUID, counter: &Arc<AtomicU64>) -> io::Result<Registration> {
    let mut filter = CM_NOTIFY_FILTER {
        cbSize: std::mem::size_of::<CM_NOTIFY_FILTER>() as u32,
        FilterType: CM_NOTIFY_FILTER_TYPE_DEVICEINTERFACE,
        ..Default::default()
    };
    filter.u.DeviceInterface.ClassGuid = class;
    let mut handle: HCMNOTIFICATION = std::ptr::null_mut();
    // SAFETY: `filter` and `handle` are live for the call; the context is
    // the counter's address, kept alive by the `Notifications` that owns
    // the returned registration (and unregisters before releasing it).
    let cr = unsafe {
        (api.register)(
            &filter,
            Arc::as_ptr(counter).cast(),
            Some(on_interface_change),
            &mut handle,
        )
    };
    if cr != CR_SUCCESS {
        return Err(io::Error::other(format!(
            "CM_Register_Notification failed with CONFIGRET {cr}"
        )));
    }
    Ok(Registration {
        handle,
        unregister: api.unregister,
    })
}

/// The inventory's event source on Windows: the notifications and the
/// sequence counter they move.
pub struct DeviceEvents {
    seq: SeqEvents<u32>,
    _notifications: Notifications,
}

impl DeviceEvents {
    /// Registers the notifications; `None` where they do not exist.
    pub fn register() -> Option<DeviceEvents> {
        match Notifications::register() {
            Ok(n) => Some(DeviceEvents {
                seq: SeqEvents::new(n.counter()),
                _notifications: n,
            }),
            Err(e) => {
                tracing::warn!(
                    "device notifications unavailable ({e}); every disk and volume list call scans the host"
                );
                None
            }
        }
    }
}

impl EventSource for DeviceEvents {
    type Key = u32;
    fn drain(&mut self) -> Pending<u32> {
        self.seq.drain()
    }
}
