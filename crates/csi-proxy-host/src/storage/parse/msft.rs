//! The return codes of the Windows Storage Management API (`MSFT_*` WMI
//! methods) → host [`Error`] kinds, in one place.
//!
//! MSFT methods report failure in their `ReturnValue` (uint32), not as an
//! HRESULT. Codes and texts are Microsoft's "Storage Management API Common
//! Return Codes". 0 is success and 4096 means an `MSFT_StorageJob` was
//! started (the caller waits for it); both are handled before this mapping.

use crate::Error;

/// `ReturnValue` of a method that completed.
pub const SUCCESS: u32 = 0;
/// `ReturnValue` of a method that started an `MSFT_StorageJob`.
pub const JOB_STARTED: u32 = 4096;
/// `MSFT_Disk.Initialize`: the disk is already initialized.
pub const DISK_ALREADY_INITIALIZED: u32 = 41001;
/// `MSFT_Disk.CreatePartition`: the partition was created but the requested
/// access path (drive letter) is in use; for us, success.
pub const ACCESS_PATH_IN_USE: u32 = 42002;

/// Microsoft's text for a return code.
pub fn return_code_text(code: u32) -> Option<&'static str> {
    Some(match code {
        0 => "success",
        1 => "not supported",
        2 => "unspecified error",
        3 => "timeout",
        4 => "failed",
        5 => "invalid parameter",
        6 => "in use / disk is in use",
        7 => "not supported on x86 running in an x64 environment",
        8 => "object not found",
        4096 => "method parameters checked, job started",
        4097 => "size not supported",
        4098 => "timeout not supported",
        4099 => "the device is busy",
        40000 => "not enough available capacity",
        40001 => "access denied",
        40002 => "there are not enough resources to complete the operation",
        40003 => "cache out of date",
        40004 => "an unexpected I/O error has occurred",
        40005 => "specify a size with either Size or UseMaximumSize",
        40006 => "the object or object type requested does not exist in the cache",
        40007 => "the request failed due to a fatal device hardware error",
        40018 => "the object is managed by the Failover Clustering component",
        41000 => "the disk has not been initialized",
        41001 => "the disk is already initialized",
        41002 => "the disk is read-only",
        41003 => "the disk is offline",
        41004 => "the disk's partition limit has been reached",
        41005 => "the partition alignment is not valid",
        41006 => "the parameter is not valid for this type of partition",
        41007 => "cannot clear with OEM partitions present",
        41008 => "cannot clear with data partitions present",
        41009 => "the operation is not supported on a critical disk",
        41010 => "the partition type is not valid",
        41011 => "only the first 2 TB are usable on MBR disks",
        41012 => "the offset is not valid",
        41013 => "cannot convert the style of a disk with data or other known partitions",
        41014 => "the disk is not large enough to support a GPT partition style",
        42000 => "the partition was deleted, although its access path was not",
        42001 => "the extended partition still contains other partitions",
        42002 => "the requested access path is already in use",
        42004 => "cannot assign an access path to a hidden partition",
        42005 => "cannot remove the volume GUID path",
        42006 => "cannot remove the drive letter of a boot or paging-file partition",
        42007 => "the access path is not valid",
        42008 => "cannot shrink a partition containing a volume with errors",
        42009 => "cannot resize a partition containing an unknown file system",
        42010 => "the operation is not allowed on a system or critical partition",
        42011 => "the operation is only supported on data partitions",
        42012 => "cannot assign multiple drive letters to a partition",
        42013 => "cannot assign a drive letter to this type of partition",
        43000 => "the specified cluster size is invalid",
        43001 => "the specified file system is not supported",
        43002 => "the volume cannot be quick formatted",
        43003 => "the number of clusters exceeds 32 bits",
        43005 => "the cluster size must be a multiple of the disk's physical sector size",
        43006 => "cannot perform the operation while the drive is read-only",
        43013 => "cannot open the drive for direct access",
        43014 => "cannot determine the file system of the drive",
        46000 => "the storage provider cannot connect to the storage provider",
        46001 => "the storage provider cannot connect to the storage subsystem",
        _ => return None,
    })
}

/// The error for a method that returned `code` (neither [`SUCCESS`] nor a
/// job to wait for): `method` and `subject` name what was called on what,
/// `extended` is the `ExtendedStatus` text if the provider gave one.
pub fn method_error(method: &str, subject: &str, code: u32, extended: Option<&str>) -> Error {
    let text = return_code_text(code).unwrap_or("unknown return code");
    let mut msg = format!("{method} on {subject} failed: ReturnValue {code} ({text})");
    if let Some(ext) = extended.map(str::trim).filter(|e| !e.is_empty()) {
        let ext: String = ext.chars().take(500).collect();
        msg.push_str(": ");
        msg.push_str(&ext);
    }
    match code {
        1 | 7 => Error::Unimplemented(msg),
        5 | 4097 | 4098 | 40005 | 41005 | 41006 | 41010 | 41012 | 42007 | 43000 | 43005 => {
            Error::InvalidArgument(msg)
        }
        8 | 40006 => Error::NotFound(msg),
        40001 => Error::PermissionDenied(msg),
        41001 | 42002 => Error::AlreadyExists(msg),
        6 | 4099 | 40000 | 40003 | 40018 | 41000 | 41002 | 41003 | 41004 | 41007 | 41008
        | 41009 | 41011 | 41013 | 41014 | 42001 | 42004 | 42005 | 42006 | 42008 | 42009 | 42010
        | 42011 | 42012 | 42013 | 43001 | 43002 | 43003 | 43006 | 43013 | 43014 => {
            Error::FailedPrecondition(msg)
        }
        _ => Error::Internal(msg),
    }
}

/// `CIM_ConcreteJob.JobState` of a job that has finished (successfully or
/// not): 7 Completed, 8 Terminated, 9 Killed, 10 Exception.
pub fn job_finished(state: u32) -> bool {
    (7..=10).contains(&state)
}

/// The outcome of a finished job: `Ok` when it completed (state 7) with
/// error code 0.
pub fn job_result(
    method: &str,
    subject: &str,
    state: u32,
    error_code: u32,
    description: Option<&str>,
) -> Result<(), Error> {
    if state == 7 && error_code == 0 {
        return Ok(());
    }
    let what = match state {
        7 => "completed with an error",
        8 => "was terminated",
        9 => "was killed",
        10 => "failed",
        _ => "did not finish",
    };
    let mut msg = format!(
        "{method} on {subject}: the storage job {what} (JobState {state}, ErrorCode {error_code})"
    );
    if let Some(d) = description.map(str::trim).filter(|d| !d.is_empty()) {
        msg.push_str(": ");
        msg.extend(d.chars().take(500));
    }
    Err(if state == 7 && error_code != 0 {
        method_error(method, subject, error_code, description)
    } else {
        Error::Internal(msg)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_map_to_kinds() {
        let kind = |c| match method_error("Format", "volume v", c, None) {
            Error::Unimplemented(_) => "unimplemented",
            Error::InvalidArgument(_) => "invalid",
            Error::NotFound(_) => "notfound",
            Error::PermissionDenied(_) => "denied",
            Error::AlreadyExists(_) => "exists",
            Error::FailedPrecondition(_) => "precondition",
            Error::Internal(_) => "internal",
            e => panic!("{e:?}"),
        };
        assert_eq!(kind(1), "unimplemented");
        assert_eq!(kind(5), "invalid");
        assert_eq!(kind(8), "notfound");
        assert_eq!(kind(40001), "denied");
        assert_eq!(kind(41001), "exists");
        assert_eq!(kind(42002), "exists");
        assert_eq!(kind(41003), "precondition");
        assert_eq!(kind(2), "internal");
        assert_eq!(kind(99999), "internal");
    }

    #[test]
    fn message_names_method_subject_code_and_extended_status() {
        let e = method_error(
            "Resize",
            "partition 2 of disk 1",
            4097,
            Some("  too big \n"),
        );
        let m = e.to_string();
        assert!(m.contains("Resize on partition 2 of disk 1"), "{m}");
        assert!(m.contains("ReturnValue 4097 (size not supported)"), "{m}");
        assert!(m.ends_with(": too big"), "{m}");
        let m = method_error("X", "y", 12345, Some("")).to_string();
        assert!(
            m.ends_with("ReturnValue 12345 (unknown return code)"),
            "{m}"
        );
        let long = "z".repeat(2000);
        assert!(method_error("X", "y", 2, Some(&long)).to_string().len() < 700);
    }

    #[test]
    fn jobs() {
        assert!(!job_finished(4));
        assert!(job_finished(7) && job_finished(10) && !job_finished(11));
        assert!(job_result("Format", "v", 7, 0, None).is_ok());
        assert!(matches!(
            job_result("Format", "v", 7, 41003, None),
            Err(Error::FailedPrecondition(_))
        ));
        let e = job_result("Format", "v", 10, 0, Some("boom")).unwrap_err();
        assert!(matches!(e, Error::Internal(ref m) if m.contains("failed") && m.ends_with("boom")));
    }
}
