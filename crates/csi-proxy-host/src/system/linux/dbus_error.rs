//! D-Bus failures as host errors: what systemd's error replies and a
//! broken connection mean to a caller (shared by the unit calls and the
//! wait for a job).

use crate::Error;
use zbus::DBusError;

/// The name and message of a D-Bus error reply.
pub fn remote_name(e: &zbus::Error) -> Option<String> {
    remote(e).map(|(name, _)| name)
}

fn remote(e: &zbus::Error) -> Option<(String, String)> {
    match e {
        zbus::Error::MethodError(name, message, _) => {
            Some((name.to_string(), message.clone().unwrap_or_default()))
        }
        zbus::Error::FDO(f) => Some((
            f.name().to_string(),
            f.description().unwrap_or_default().to_string(),
        )),
        _ => None,
    }
}

/// A D-Bus failure as a host error. A broken connection (or an answer
/// that is not what systemd sends) is `Internal`: the shared connection
/// is made again ([`super::bus::Bus::run`]).
pub fn call_error(address: &str, what: &str, e: zbus::Error) -> Error {
    let Some((name, message)) = remote(&e) else {
        return match e {
            zbus::Error::InputOutput(io) => Error::Internal(format!(
                "{what}: the D-Bus connection to systemd at {address} failed: {io}"
            )),
            other => Error::Internal(format!("{what}: D-Bus: {other}")),
        };
    };
    remote_error(address, what, &name, &message)
}

/// A D-Bus error reply (`name`, its message) as a host error.
fn remote_error(address: &str, what: &str, name: &str, message: &str) -> Error {
    match name {
        n if n.starts_with("org.freedesktop.DBus.Error.Spawn.") => Error::FailedPrecondition(format!(
            "{what}: systemd is not reachable: the bus at {address} could not start org.freedesktop.systemd1 ({name}: {message})"
        )),
        "org.freedesktop.DBus.Error.ServiceUnknown"
        | "org.freedesktop.DBus.Error.NameHasNoOwner"
        | "org.freedesktop.DBus.Error.NoServer"
        | "org.freedesktop.DBus.Error.Disconnected" => Error::FailedPrecondition(format!(
            "{what}: systemd is not reachable: nothing answers as org.freedesktop.systemd1 on the D-Bus bus at {address} ({name}: {message})"
        )),
        "org.freedesktop.systemd1.NoSuchUnit" => Error::NotFound(format!("{what}: {message}")),
        "org.freedesktop.DBus.Error.AccessDenied"
        | "org.freedesktop.DBus.Error.InteractiveAuthorizationRequired" => {
            Error::PermissionDenied(format!("{what}: {name}: {message}"))
        }
        _ => Error::FailedPrecondition(format!("{what}: {name}: {message}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dbus_errors_map_to_kinds() {
        let r = |name: &str| remote_error("unix:path=/x", "w", name, "m");
        assert!(
            matches!(r("org.freedesktop.DBus.Error.ServiceUnknown"), Error::FailedPrecondition(m) if m.contains("systemd is not reachable"))
        );
        assert!(
            matches!(r("org.freedesktop.DBus.Error.Spawn.ChildExited"), Error::FailedPrecondition(m) if m.contains("could not start"))
        );
        assert!(matches!(
            r("org.freedesktop.systemd1.NoSuchUnit"),
            Error::NotFound(_)
        ));
        assert!(matches!(
            r("org.freedesktop.DBus.Error.AccessDenied"),
            Error::PermissionDenied(_)
        ));
        assert!(matches!(
            r("org.freedesktop.systemd1.UnitMasked"),
            Error::FailedPrecondition(_)
        ));
        // What zbus reports: error replies, and a broken connection.
        let fdo = zbus::Error::FDO(Box::new(zbus::fdo::Error::AccessDenied("no".into())));
        assert_eq!(
            remote_name(&fdo).as_deref(),
            Some("org.freedesktop.DBus.Error.AccessDenied")
        );
        assert!(
            matches!(call_error("a", "w", fdo), Error::PermissionDenied(m) if m.contains("no"))
        );
        let io = zbus::Error::InputOutput(std::sync::Arc::new(std::io::Error::from(
            std::io::ErrorKind::BrokenPipe,
        )));
        assert!(matches!(call_error("a", "w", io), Error::Internal(_)));
        assert!(matches!(
            call_error("a", "w", zbus::Error::InvalidReply),
            Error::Internal(_)
        ));
    }
}
