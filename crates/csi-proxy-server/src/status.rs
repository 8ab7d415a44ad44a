//! Host errors → gRPC status, in exactly one place.
//!
//! Upstream answers every failure with `Unknown`; no client can depend on
//! that, so precise codes are compatible and far more useful.

use csi_proxy_host::Error;
use std::io::ErrorKind;
use tonic::{Code, Status};

/// The status code for an I/O error kind.
pub fn io_code(kind: ErrorKind) -> Code {
    match kind {
        ErrorKind::NotFound => Code::NotFound,
        ErrorKind::PermissionDenied => Code::PermissionDenied,
        ErrorKind::AlreadyExists => Code::AlreadyExists,
        ErrorKind::DirectoryNotEmpty
        | ErrorKind::NotADirectory
        | ErrorKind::IsADirectory
        | ErrorKind::ResourceBusy
        | ErrorKind::ReadOnlyFilesystem
        | ErrorKind::CrossesDevices => Code::FailedPrecondition,
        ErrorKind::InvalidInput | ErrorKind::InvalidFilename => Code::InvalidArgument,
        ErrorKind::Unsupported => Code::Unimplemented,
        ErrorKind::StorageFull | ErrorKind::QuotaExceeded | ErrorKind::OutOfMemory => {
            Code::ResourceExhausted
        }
        ErrorKind::TimedOut => Code::DeadlineExceeded,
        ErrorKind::Interrupted | ErrorKind::WouldBlock => Code::Unavailable,
        _ => Code::Internal,
    }
}

/// The status of a request message that does not decode (bad wire format,
/// a `string` field that is not UTF-8, ...): the client's fault, so
/// `InvalidArgument`. The message names the field and the problem, never
/// the bytes.
pub fn undecodable_request(err: &prost::DecodeError) -> Status {
    Status::new(
        Code::InvalidArgument,
        format!("the request message does not decode: {err}"),
    )
}

/// Whether `err` says the process or the system has no descriptor (or
/// handle) left: EMFILE, ENFILE; on Windows ERROR_TOO_MANY_OPEN_FILES,
/// ERROR_NO_SYSTEM_RESOURCES.
pub fn out_of_descriptors(err: &std::io::Error) -> bool {
    #[cfg(unix)]
    const CODES: &[i32] = &[libc::EMFILE, libc::ENFILE];
    #[cfg(windows)]
    const CODES: &[i32] = &[4, 1450];
    err.raw_os_error().is_some_and(|c| CODES.contains(&c))
}

/// Convert a host error into the status sent to the client. The message
/// keeps the OS error text. Running out of descriptors is
/// `ResourceExhausted` (worth retrying later), whatever the operation.
pub fn from_host(err: Error) -> Status {
    let code = match &err {
        Error::InvalidArgument(_) => Code::InvalidArgument,
        Error::PermissionDenied(_) => Code::PermissionDenied,
        Error::NotFound(_) => Code::NotFound,
        Error::AlreadyExists(_) => Code::AlreadyExists,
        Error::FailedPrecondition(_) => Code::FailedPrecondition,
        Error::Unimplemented(_) => Code::Unimplemented,
        Error::Aborted(_) => Code::Aborted,
        Error::DeadlineExceeded(_) => Code::DeadlineExceeded,
        Error::Unavailable(_) => Code::Unavailable,
        Error::Internal(_) => Code::Internal,
        Error::Io { source, .. } if out_of_descriptors(source) => Code::ResourceExhausted,
        Error::Io { source, .. } => io_code(source.kind()),
    };
    Status::new(code, err.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;

    #[test]
    fn every_variant_has_its_code() {
        let cases = [
            (Error::InvalidArgument("x".into()), Code::InvalidArgument),
            (Error::PermissionDenied("x".into()), Code::PermissionDenied),
            (Error::NotFound("x".into()), Code::NotFound),
            (Error::AlreadyExists("x".into()), Code::AlreadyExists),
            (
                Error::FailedPrecondition("x".into()),
                Code::FailedPrecondition,
            ),
            (Error::Unimplemented("x".into()), Code::Unimplemented),
            (Error::Aborted("x".into()), Code::Aborted),
            (Error::DeadlineExceeded("x".into()), Code::DeadlineExceeded),
            (Error::Internal("x".into()), Code::Internal),
            (
                Error::io("rmdir", "/a", io::Error::from(ErrorKind::NotFound)),
                Code::NotFound,
            ),
            (
                Error::io("rmdir", "/a", io::Error::from(ErrorKind::DirectoryNotEmpty)),
                Code::FailedPrecondition,
            ),
            (
                Error::io("x", "/a", io::Error::from(ErrorKind::PermissionDenied)),
                Code::PermissionDenied,
            ),
            (
                Error::io("x", "/a", io::Error::other("boom")),
                Code::Internal,
            ),
            (
                Error::io("open", "/a", descriptors_exhausted()),
                Code::ResourceExhausted,
            ),
        ];
        for (err, code) in cases {
            let text = err.to_string();
            let status = from_host(err);
            assert_eq!(status.code(), code, "{text}");
            assert_eq!(status.message(), text);
        }
    }

    #[test]
    fn undecodable_requests_are_invalid_argument_without_the_bytes() {
        use prost::Message;
        #[derive(Clone, PartialEq, prost::Message)]
        struct Req {
            #[prost(string, tag = "1")]
            path: String,
        }
        // Field 1, length 10: "/k/secret" plus a lone 0xff.
        let bad_utf8 = b"\x0a\x0a/k/secret\xff";
        // A length running past the end; a wire type that is not one.
        for bytes in [&bad_utf8[..], b"\x0a\x05/k", b"\x0f"] {
            let err = Req::decode(bytes).unwrap_err();
            let s = undecodable_request(&err);
            assert_eq!(s.code(), Code::InvalidArgument, "{}", s.message());
            assert!(
                s.message()
                    .starts_with("the request message does not decode: "),
                "{}",
                s.message()
            );
            assert!(!s.message().contains("secret"), "{}", s.message());
        }
        let s = undecodable_request(&Req::decode(&bad_utf8[..]).unwrap_err());
        assert!(s.message().contains("Req.path"), "{}", s.message());
        assert!(s.message().contains("UTF-8"), "{}", s.message());
    }

    fn descriptors_exhausted() -> io::Error {
        #[cfg(unix)]
        return io::Error::from_raw_os_error(libc::EMFILE);
        #[cfg(windows)]
        return io::Error::from_raw_os_error(4);
    }

    #[test]
    fn descriptor_exhaustion_is_recognised() {
        #[cfg(unix)]
        let other = libc::ECONNABORTED;
        #[cfg(windows)]
        let other = 64;
        assert!(out_of_descriptors(&descriptors_exhausted()));
        assert!(!out_of_descriptors(&io::Error::from_raw_os_error(other)));
        assert!(!out_of_descriptors(&io::Error::other("x")));
    }

    #[test]
    fn io_message_names_operation_and_path() {
        let s = from_host(Error::io(
            "mkdir",
            "/var/lib/kubelet/x",
            io::Error::from(ErrorKind::AlreadyExists),
        ));
        assert!(
            s.message().starts_with("mkdir \"/var/lib/kubelet/x\""),
            "{}",
            s.message()
        );
    }
}
