//! Windows machinery shared by every group's backend: Win32/HRESULT error
//! mapping and the WMI COM worker (one warm connection per namespace on a
//! dedicated COM thread).

pub mod errors;
pub mod wmi;
