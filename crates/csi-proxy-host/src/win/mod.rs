//! Windows machinery shared by every group's backend: Win32/HRESULT error
//! mapping, the WMI COM worker (one warm connection per namespace on a
//! dedicated COM thread), and the long form of a path (the roots' one
//! spelling).

pub mod errors;
pub mod long_path;
pub mod wmi;
