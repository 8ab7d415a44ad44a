//! Service Control Manager error codes → host error kinds (pure, so the
//! table is tested on every OS).

use crate::{Error, Result};

/// `ERROR_SERVICE_ALREADY_RUNNING`: StartService on a running service.
pub const ALREADY_RUNNING: i32 = 1056;
/// `ERROR_SERVICE_NOT_ACTIVE`: a stop control to a stopped service.
pub const NOT_ACTIVE: i32 = 1062;
/// `ERROR_SERVICE_CANNOT_ACCEPT_CTRL`: the service is starting or stopping.
pub const CANNOT_ACCEPT_CTRL: i32 = 1061;
/// `ERROR_SERVICE_DOES_NOT_EXIST`.
pub const DOES_NOT_EXIST: i32 = 1060;
/// `ERROR_DEPENDENT_SERVICES_RUNNING`.
pub const DEPENDENT_SERVICES_RUNNING: i32 = 1051;

/// The host error for a failed SCM call on service `name`, or `None` when
/// the code is not a service-specific one (the generic Win32 mapping
/// applies).
pub fn service_error(code: i32, op: &str, name: &str, os_text: &str) -> Option<Error> {
    let msg = |what: &str| format!("{op} service {name:?}: {what} ({os_text})");
    Some(match code {
        // SERVICE_DOES_NOT_EXIST, INVALID_NAME-like "no such service"
        DOES_NOT_EXIST => Error::NotFound(msg("the service does not exist")),
        // ACCESS_DENIED
        5 => Error::PermissionDenied(msg("access denied")),
        // SERVICE_DISABLED
        1058 => Error::FailedPrecondition(msg("the service is disabled")),
        DEPENDENT_SERVICES_RUNNING => Error::FailedPrecondition(msg(
            "dependent services are running; stop them first or set force",
        )),
        // SERVICE_REQUEST_TIMEOUT, SERVICE_NO_THREAD, SERVICE_DATABASE_LOCKED,
        // SERVICE_DEPENDENCY_FAIL, SERVICE_LOGON_FAILED, SERVICE_MARKED_FOR_DELETE,
        // SERVICE_DEPENDENCY_DELETED, CIRCULAR_DEPENDENCY,
        // SERVICE_CANNOT_ACCEPT_CTRL, SERVICE_NOT_ACTIVE, EXCEPTION_IN_SERVICE,
        // PROCESS_ABORTED, SERVICE_SPECIFIC_ERROR
        1053 | 1054 | 1055 | 1068 | 1069 | 1072 | 1075 | 1059 | 1061 | 1062 | 1064 | 1067
        | 1066 => Error::FailedPrecondition(msg("the service cannot do this now")),
        _ => return None,
    })
}

/// `Ok` for the codes that mean "already done" for `op` (start: already
/// running; stop: not active).
pub fn already_done(code: i32, starting: bool) -> bool {
    (starting && code == ALREADY_RUNNING) || (!starting && code == NOT_ACTIVE)
}

/// Check a Win32 service state number (1..=7, the proto numbering).
pub fn state(v: u32) -> Result<super::ServiceStatus> {
    super::ServiceStatus::from_i32(v as i32)
        .filter(|s| *s != super::ServiceStatus::Unknown)
        .ok_or_else(|| Error::Internal(format!("the SCM reported unknown service state {v}")))
}

/// Check a Win32 start type number (0..=4).
pub fn start_type(v: u32) -> Result<super::StartType> {
    super::StartType::from_i32(v as i32)
        .ok_or_else(|| Error::Internal(format!("the SCM reported unknown start type {v}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_map_to_kinds() {
        assert!(matches!(
            service_error(1060, "get", "x", "t"),
            Some(Error::NotFound(_))
        ));
        assert!(matches!(
            service_error(5, "stop", "x", "t"),
            Some(Error::PermissionDenied(_))
        ));
        for c in [1058, 1051, 1053, 1069, 1072, 1075, 1061] {
            assert!(
                matches!(
                    service_error(c, "start", "x", "t"),
                    Some(Error::FailedPrecondition(_))
                ),
                "{c}"
            );
        }
        assert!(service_error(2, "start", "x", "t").is_none());
        let e = service_error(1051, "stop", "svc", "os text")
            .unwrap()
            .to_string();
        assert!(
            e.contains("svc") && e.contains("os text") && e.contains("force"),
            "{e}"
        );
        assert!(already_done(1056, true) && !already_done(1056, false));
        assert!(already_done(1062, false) && !already_done(1062, true));
        assert_eq!(state(4).unwrap(), super::super::ServiceStatus::Running);
        assert!(state(0).is_err() && state(8).is_err());
        assert_eq!(start_type(3).unwrap(), super::super::StartType::Manual);
        assert!(start_type(5).is_err());
    }
}
