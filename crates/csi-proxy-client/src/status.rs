//! The status of a call that failed in the transport, not at the proxy.
//!
//! tonic reports a connection that breaks under a call (broken pipe, reset,
//! EOF before the answer) as `Unknown` ("transport error"), and a request
//! dropped because its connection closed as `Cancelled`. Drivers retry
//! neither, yet such a call was lost by the transport and a retry on a new
//! connection is the right answer: gRPC's code for it is `Unavailable`.
//! Every error out of [`ProxyChannel`](crate::ProxyChannel), of the call and
//! of the answer's body, goes through [`from_error`], which reads the error's
//! source chain (the types hyper, h2 and the OS report, never the message
//! text).

use std::error::Error as StdError;
use std::io;
use std::sync::Arc;
use tonic::{Code, Status};

/// An error as the transport reports it.
pub(crate) type BoxError = Box<dyn StdError + Send + Sync + 'static>;

/// The status of a failed call: tonic's, unless the source chain shows the
/// connection broke or an HTTP/2 reset or GOAWAY ended the stream; then the
/// code gRPC gives that (`Unavailable` for a lost connection). The original
/// status stays the source of the new one.
pub(crate) fn from_error(err: impl Into<BoxError>) -> Status {
    let status = Status::from_error(err.into());
    let Some((code, cause)) = transport_code(&status) else {
        return status;
    };
    if code == status.code() {
        return status;
    }
    let mut mapped = Status::new(code, format!("the connection to csi-proxy failed: {cause}"));
    mapped.set_source(Arc::new(status));
    mapped
}

/// Whether `err`'s source chain shows a request the server never received:
/// hyper cancelled it while it was still queued (its connection closed
/// first), or the server refused its stream (`REFUSED_STREAM`, which HTTP/2
/// defines as "not processed"). Such a call is safe to send again, whatever
/// it does.
pub(crate) fn never_sent(err: &(dyn StdError + 'static)) -> bool {
    let mut next = Some(err);
    while let Some(e) = next {
        if let Some(h) = e.downcast_ref::<hyper::Error>() {
            if h.is_canceled() {
                return true;
            }
        }
        if let Some(h2) = e.downcast_ref::<h2::Error>() {
            if h2.is_remote() && h2.reason() == Some(h2::Reason::REFUSED_STREAM) {
                return true;
            }
        }
        next = e.source();
    }
    false
}

/// The code of a transport failure found in `err`'s source chain, with the
/// error that shows it; `None` when the chain holds none (or the call's own
/// deadline ended it, which stays tonic's `Cancelled`).
fn transport_code(err: &(dyn StdError + 'static)) -> Option<(Code, String)> {
    let mut next = Some(err);
    while let Some(e) = next {
        if e.is::<tonic::TimeoutExpired>() {
            return None;
        }
        if let Some(h) = e.downcast_ref::<hyper::Error>() {
            // The connection closed before the request went out or before
            // its answer was complete.
            if h.is_closed() || h.is_canceled() || h.is_incomplete_message() {
                return Some((Code::Unavailable, h.to_string()));
            }
        }
        if let Some(h2) = e.downcast_ref::<h2::Error>() {
            if let Some(code) = h2_code(h2) {
                return Some((code, h2.to_string()));
            }
        }
        if let Some(io) = e.downcast_ref::<io::Error>() {
            if connection_lost(io) {
                return Some((Code::Unavailable, io.to_string()));
            }
        }
        next = e.source();
    }
    None
}

/// The code of an HTTP/2 error: an I/O failure under it or a GOAWAY (the
/// connection is going or gone) is `Unavailable`; a stream reset has the
/// code gRPC's HTTP/2 mapping gives its reason.
fn h2_code(e: &h2::Error) -> Option<Code> {
    if let Some(io) = e.get_io() {
        return connection_lost(io).then_some(Code::Unavailable);
    }
    if e.is_go_away() {
        return Some(Code::Unavailable);
    }
    let reason = e.reason()?;
    Some(match reason {
        h2::Reason::REFUSED_STREAM => Code::Unavailable,
        h2::Reason::CANCEL => Code::Cancelled,
        h2::Reason::ENHANCE_YOUR_CALM => Code::ResourceExhausted,
        h2::Reason::INADEQUATE_SECURITY => Code::PermissionDenied,
        // NO_ERROR, PROTOCOL_ERROR, INTERNAL_ERROR, FLOW_CONTROL_ERROR,
        // SETTINGS_TIMEOUT, FRAME_SIZE_ERROR, COMPRESSION_ERROR,
        // CONNECT_ERROR, and codes HTTP/2 does not define.
        _ => Code::Internal,
    })
}

/// Whether an I/O error means the connection is gone.
fn connection_lost(e: &io::Error) -> bool {
    use io::ErrorKind::*;
    if matches!(
        e.kind(),
        BrokenPipe | ConnectionReset | ConnectionAborted | NotConnected | UnexpectedEof
    ) {
        return true;
    }
    // A pipe whose server end closed or is closing, whatever kind std
    // gives these codes.
    #[cfg(windows)]
    {
        use windows_sys::Win32::Foundation::{
            ERROR_BROKEN_PIPE, ERROR_NO_DATA, ERROR_PIPE_NOT_CONNECTED,
        };
        let code = e.raw_os_error();
        if [ERROR_BROKEN_PIPE, ERROR_NO_DATA, ERROR_PIPE_NOT_CONNECTED]
            .iter()
            .any(|c| code == Some(*c as i32))
        {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn io(kind: io::ErrorKind) -> io::Error {
        io::Error::new(kind, "the test's error")
    }

    #[test]
    fn a_lost_connection_is_unavailable() {
        use io::ErrorKind::*;
        for kind in [
            BrokenPipe,
            ConnectionReset,
            ConnectionAborted,
            NotConnected,
            UnexpectedEof,
        ] {
            // As the call reports it, and as the body of an answer does
            // (tonic's status with the error as its source).
            let st = from_error(io(kind));
            assert_eq!(st.code(), Code::Unavailable, "{kind:?}: {st:?}");
            assert!(st.message().contains("the test's error"), "{st:?}");
            let body = Status::from_error(Box::new(io(kind)));
            assert_eq!(body.code(), Code::Unknown, "tonic's own code");
            let st = from_error(body);
            assert_eq!(st.code(), Code::Unavailable, "{kind:?}: {st:?}");
            // The original status stays reachable.
            let source = st.source().and_then(|s| s.downcast_ref::<Status>());
            assert_eq!(source.map(Status::code), Some(Code::Unknown));
        }
    }

    /// An error that wraps another, like tonic's transport error and tower's
    /// buffer error wrap hyper's.
    #[derive(Debug)]
    struct Wrapper(BoxError);

    impl std::fmt::Display for Wrapper {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("transport error")
        }
    }

    impl StdError for Wrapper {
        fn source(&self) -> Option<&(dyn StdError + 'static)> {
            Some(&*self.0)
        }
    }

    #[test]
    fn the_whole_source_chain_is_read() {
        let deep = Wrapper(Box::new(Wrapper(Box::new(io(io::ErrorKind::BrokenPipe)))));
        assert_eq!(from_error(deep).code(), Code::Unavailable);
        let h2 = Wrapper(Box::new(h2::Error::from(h2::Reason::REFUSED_STREAM)));
        assert_eq!(from_error(h2).code(), Code::Unavailable);
    }

    #[test]
    fn other_errors_keep_their_code() {
        // An I/O error that is not a lost connection.
        let st = from_error(Wrapper(Box::new(io(io::ErrorKind::InvalidData))));
        assert_eq!(st.code(), Code::Unknown);
        assert_eq!(st.message(), "transport error");
        // An answer of the server's, and the call's own deadline.
        let st = from_error(Status::not_found("no such path"));
        assert_eq!((st.code(), st.message()), (Code::NotFound, "no such path"));
        let st = from_error(Wrapper(Box::new(tonic::TimeoutExpired(()))));
        assert_eq!(st.code(), Code::Cancelled);
    }

    #[test]
    fn stream_resets_have_grpc_s_codes() {
        let cases = [
            (h2::Reason::REFUSED_STREAM, Code::Unavailable),
            (h2::Reason::CANCEL, Code::Cancelled),
            (h2::Reason::ENHANCE_YOUR_CALM, Code::ResourceExhausted),
            (h2::Reason::INADEQUATE_SECURITY, Code::PermissionDenied),
            (h2::Reason::NO_ERROR, Code::Internal),
            (h2::Reason::PROTOCOL_ERROR, Code::Internal),
            (h2::Reason::INTERNAL_ERROR, Code::Internal),
            (h2::Reason::FLOW_CONTROL_ERROR, Code::Internal),
            (h2::Reason::FRAME_SIZE_ERROR, Code::Internal),
        ];
        for (reason, code) in cases {
            let st = from_error(h2::Error::from(reason));
            assert_eq!(st.code(), code, "{reason:?}: {st:?}");
        }
    }
}
