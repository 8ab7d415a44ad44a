//! Windows machinery shared by every group's backend: Win32/HRESULT error
//! mapping, the WMI COM worker type (each group runs its own: COM threads
//! with warm connections, every wait bounded by the call's deadline), and
//! the long form of a path (the roots' one spelling).

pub mod errors;
pub mod long_path;
pub mod wmi;
