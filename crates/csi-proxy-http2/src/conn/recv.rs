//! The request side: HEADERS, CONTINUATION and DATA frames, header blocks,
//! request bodies and their flow control.

use super::streams::{Closure, Receiving, Stream, StreamState};
use super::{protocol, Connection, PendingBlock};
use crate::budget::Body;
use crate::fields::{self, BlockError, BlockKind, HeaderCheck, Method};
use crate::frame::{self, ConnError, ErrorCode, Head};
use crate::service::{Code, Reply};
use crate::Request;
use std::borrow::Cow;

/// What a DATA frame does to its stream.
enum Action {
    /// More bytes than the announced content-length.
    Malformed,
    /// More than the largest request.
    TooLarge,
    /// The whole body in this frame.
    Whole,
    /// Appended to the body.
    Held,
    /// The process-wide budget cannot hold it.
    OverBudget,
}

impl Connection {
    pub(super) fn data(&mut self, head: Head, payload: &[u8]) -> Result<(), ConnError> {
        let id = head.stream;
        if id == 0 {
            return Err(protocol("DATA on stream 0"));
        }
        if id > self.last_stream {
            return Err(protocol("DATA on an idle stream"));
        }
        // Flow control counts the whole payload, padding included.
        let len = head.len;
        if len as i64 > self.recv_window {
            return Err(ConnError::new(
                ErrorCode::FlowControl,
                "the client overran the connection window",
            ));
        }
        self.recv_window -= len as i64;
        let data = frame::unpad(head.flags, payload)?;
        let padding = len - data.len();
        let end = head.flags & frame::END_STREAM != 0;
        let Some(s) = self.streams.get_mut(&id) else {
            // A closed stream: the bytes are discarded, so given back.
            self.release(len);
            if self.closed_streams.find(id) != Some(Closure::Reset) {
                frame::put_rst(self.out.back(), id, ErrorCode::StreamClosed);
                self.closed_streams.record(id, Closure::Reset);
            }
            return Ok(());
        };
        if len as i64 > s.recv_window {
            return Err(ConnError::new(
                ErrorCode::FlowControl,
                "the client overran a stream window",
            ));
        }
        s.recv_window -= len as i64;
        s.held_window += len;
        let StreamState::Receiving(r) = &mut s.state else {
            // The client already ended its side (or reset the stream).
            self.reset(id, ErrorCode::StreamClosed);
            return Ok(());
        };
        let total = r.body.len() + data.len();
        let action = if r.content_length.is_some_and(|cl| total as u64 > cl) {
            Action::Malformed
        } else if total > self.limits.max_request + 5 {
            Action::TooLarge
        } else if end && r.body.is_empty() {
            // The whole message in one frame (every ordinary call): consumed
            // at once, never held.
            Action::Whole
        } else if r.body.push(data, &self.budget) {
            Action::Held
        } else {
            Action::OverBudget
        };
        // Padding never counts against the request: give it back.
        s.held_window -= padding;
        s.recv_window += padding as i64;
        if padding > 0 {
            frame::put_window_update(self.out.back(), id, padding as u32);
            self.release(padding);
        }
        match action {
            Action::Malformed => self.reset(id, ErrorCode::Protocol),
            Action::TooLarge => {
                let msg = format!(
                    "request message larger than the limit of {} bytes",
                    self.limits.max_request
                );
                self.reply_now(id, &Reply::error(Code::ResourceExhausted, msg), !end);
            }
            Action::OverBudget => {
                let msg = "the server holds too many request bytes; try again later";
                self.reply_now(id, &Reply::error(Code::ResourceExhausted, msg), !end);
            }
            Action::Whole => self.finish_request(id, Cow::Borrowed(data)),
            Action::Held if end => self.finish_body(id),
            Action::Held => {}
        }
        Ok(())
    }

    pub(super) fn headers(&mut self, head: Head, payload: &[u8]) -> Result<(), ConnError> {
        if head.stream == 0 {
            return Err(protocol("HEADERS on stream 0"));
        }
        let (fragment, self_dependent) = frame::headers_fragment(&head, payload)?;
        self.check_block_size(fragment.len())?;
        let end_stream = head.flags & frame::END_STREAM != 0;
        if head.flags & frame::END_HEADERS != 0 {
            self.header_block(head.stream, end_stream, self_dependent, fragment)
        } else {
            self.pending_block = Some(PendingBlock {
                stream: head.stream,
                end_stream,
                self_dependent,
                continuations: 0,
                block: fragment.to_vec(),
            });
            Ok(())
        }
    }

    pub(super) fn continuation(&mut self, head: Head, payload: &[u8]) -> Result<(), ConnError> {
        let Some(mut p) = self.pending_block.take() else {
            return Err(protocol("CONTINUATION without HEADERS"));
        };
        p.continuations += 1;
        if p.continuations > self.limits.max_continuations {
            return Err(ConnError::new(
                ErrorCode::EnhanceYourCalm,
                format!(
                    "more than {} CONTINUATION frames in one header block",
                    self.limits.max_continuations
                ),
            ));
        }
        self.check_block_size(p.block.len() + payload.len())?;
        p.block.extend_from_slice(payload);
        if head.flags & frame::END_HEADERS != 0 {
            self.header_block(p.stream, p.end_stream, p.self_dependent, &p.block)
        } else {
            self.pending_block = Some(p);
            Ok(())
        }
    }

    fn check_block_size(&self, len: usize) -> Result<(), ConnError> {
        if len > self.limits.max_header_block {
            // The block cannot be skipped without desynchronising HPACK.
            return Err(ConnError::new(
                ErrorCode::EnhanceYourCalm,
                format!(
                    "header block larger than {} bytes",
                    self.limits.max_header_block
                ),
            ));
        }
        Ok(())
    }

    /// Decode a complete block (whatever happens to its stream, so that the
    /// HPACK state stays in step) and check it as `kind` asks.
    fn decode(&mut self, block: &[u8], kind: BlockKind) -> Result<HeaderCheck, ConnError> {
        let mut check = HeaderCheck::new(kind);
        let limit = self.limits.max_header_block;
        fields::decode_block(&mut self.decoder, block, limit, |n, v| check.field(n, v)).map_err(
            |e| match e {
                BlockError::Compression(why) => ConnError::new(ErrorCode::Compression, why),
                BlockError::TooLarge => ConnError::new(
                    ErrorCode::EnhanceYourCalm,
                    format!("header list larger than {limit} bytes"),
                ),
            },
        )?;
        check.finish();
        Ok(check)
    }

    /// A complete header block on stream `id`: a new request, trailers, or
    /// a block on a stream that is no longer open.
    fn header_block(
        &mut self,
        id: u32,
        end_stream: bool,
        self_dependent: bool,
        block: &[u8],
    ) -> Result<(), ConnError> {
        if id.is_multiple_of(2) {
            return Err(protocol("a client opened an even-numbered stream"));
        }
        if id > self.last_stream {
            let check = self.decode(block, BlockKind::Request)?;
            return self.open(id, end_stream, self_dependent, check);
        }
        let check = self.decode(block, BlockKind::Trailers)?;
        let receiving = matches!(
            self.streams.get(&id).map(|s| &s.state),
            Some(StreamState::Receiving(_))
        );
        if receiving {
            // Trailers: they end the request, and carry no pseudo-headers.
            if !end_stream || check.malformed.is_some() {
                self.reset(id, ErrorCode::Protocol);
            } else {
                self.finish_body(id);
            }
            return Ok(());
        }
        let how = match self.streams.get(&id) {
            Some(_) => Some(Closure::Finished),
            None => self.closed_streams.find(id),
        };
        match how {
            // Frames sent before our reset reached the client.
            Some(Closure::Reset) => Ok(()),
            Some(Closure::Finished) => Err(ConnError::new(
                ErrorCode::StreamClosed,
                "HEADERS on a stream the client had ended",
            )),
            None => Err(protocol("HEADERS on a stream id that is not new")),
        }
    }

    /// Open stream `id` for a request whose header block is `check`.
    fn open(
        &mut self,
        id: u32,
        end_stream: bool,
        self_dependent: bool,
        check: HeaderCheck,
    ) -> Result<(), ConnError> {
        self.last_stream = id;
        let refuse = if self_dependent || check.malformed.is_some() {
            Some(ErrorCode::Protocol)
        } else if self.goaway_sent.is_some()
            || self.peer_goaway
            || self.streams.len() >= self.limits.max_streams as usize
        {
            Some(ErrorCode::RefusedStream)
        } else {
            None
        };
        if let Some(code) = refuse {
            frame::put_rst(self.out.back(), id, code);
            self.closed_streams.record(id, Closure::Reset);
            return Ok(());
        }
        self.streams.insert(
            id,
            Stream {
                state: StreamState::Running,
                send_window: self.peer_initial_window,
                recv_window: i64::from(self.stream_window()),
                held_window: 0,
            },
        );
        let open = !end_stream;
        if check.method != Some(Method::Post) {
            self.http_error(id, 405, open);
            return Ok(());
        }
        if check.grpc != Some(true) {
            self.http_error(id, 415, open);
            return Ok(());
        }
        let path = match check.path.map(String::from_utf8) {
            Some(Ok(p)) if p.starts_with('/') => p,
            _ => {
                let msg = "malformed :path";
                self.reply_now(id, &Reply::error(Code::Unimplemented, msg), open);
                return Ok(());
            }
        };
        let timeout = match check.timeout {
            None => None,
            Some(Some(t)) => Some(t),
            Some(None) => {
                // Never echoed: a value stored once in the HPACK table could
                // be repeated by one-byte references.
                let msg = "malformed grpc-timeout";
                self.reply_now(id, &Reply::error(Code::InvalidArgument, msg), open);
                return Ok(());
            }
        };
        let deadline = self.now + self.limits.receive_timeout;
        if let Some(s) = self.streams.get_mut(&id) {
            s.state = StreamState::Receiving(Box::new(Receiving {
                path,
                timeout,
                body: Body::default(),
                content_length: check.content_length,
                deadline,
            }));
        }
        if end_stream {
            self.finish_body(id);
        }
        Ok(())
    }

    /// The client ended its side: take the body held so far.
    fn finish_body(&mut self, id: u32) {
        let Some(StreamState::Receiving(r)) = self.streams.get_mut(&id).map(|s| &mut s.state)
        else {
            return;
        };
        let body = r.body.take();
        self.finish_request(id, Cow::Owned(body));
    }

    /// The client ended its side with `body`: it must match the announced
    /// content-length and hold exactly one uncompressed message. The
    /// stream's window goes back to the client: the body is consumed.
    fn finish_request(&mut self, id: u32, body: Cow<'_, [u8]>) {
        let Some(s) = self.streams.get_mut(&id) else {
            return;
        };
        let StreamState::Receiving(r) = std::mem::replace(&mut s.state, StreamState::Running)
        else {
            return;
        };
        let held = std::mem::take(&mut s.held_window);
        self.release(held);
        let Receiving {
            path,
            timeout,
            content_length,
            ..
        } = *r;
        if content_length.is_some_and(|cl| cl != body.len() as u64) {
            self.reset(id, ErrorCode::Protocol);
            return;
        }
        let problem = if body.len() < 5 {
            Some((Code::Internal, "the request carries no message"))
        } else if body[0] != 0 {
            Some((
                Code::Unimplemented,
                "compressed request messages are not supported",
            ))
        } else {
            let len = u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize;
            (len != body.len() - 5).then_some((
                Code::Internal,
                "a unary request must carry exactly one whole message",
            ))
        };
        if let Some((code, msg)) = problem {
            self.reply_now(id, &Reply::error(code, msg), false);
            return;
        }
        let message = match body {
            Cow::Borrowed(b) => b[5..].to_vec(),
            Cow::Owned(mut b) => {
                b.drain(..5);
                b
            }
        };
        self.ready.push_back(Request {
            stream: id,
            path,
            message,
            timeout,
        });
    }
}
