//! The server side of one HTTP/2 connection carrying unary gRPC calls, as a
//! state machine without I/O: bytes go in through [`Connection::receive`],
//! complete requests come out of [`Connection::next_request`], replies go in
//! through [`Connection::respond`], and the bytes to send accumulate in
//! [`Connection::output`]. The async driver (`driver.rs`) only moves bytes
//! and runs handlers; the fuzz target feeds this type directly.
//!
//! What it implements: the connection preface, SETTINGS (and their ACK),
//! PING, GOAWAY in both directions, RST_STREAM, WINDOW_UPDATE and flow
//! control in both directions, HEADERS with padding and priority,
//! CONTINUATION, DATA with padding; PRIORITY and unknown frame types are
//! ignored. Header blocks are decoded in order for every stream, even for
//! streams that are refused, so the HPACK dynamic table never falls out of
//! step with the client's. `:authority` is never interpreted.

use super::frame::{self, ConnError, ErrorCode, Head};
use super::hpack::{self, RequestHead};
use crate::dispatch::Reply;
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;
use tonic::Code;

/// Limits a connection enforces and announces.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// SETTINGS_MAX_CONCURRENT_STREAMS.
    pub max_streams: u32,
    /// The largest request message (the gRPC payload, without its prefix).
    pub max_request: usize,
    /// The largest header block (compressed, all CONTINUATIONs together) and
    /// the largest decoded header list.
    pub max_header_block: usize,
    /// The connection-level receive window.
    pub conn_window: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_streams: 128,
            max_request: 4 << 20,
            max_header_block: 64 << 10,
            conn_window: 16 << 20,
        }
    }
}

/// A complete request, ready for its handler.
#[derive(Debug, PartialEq, Eq)]
pub struct Request {
    pub stream: u32,
    pub path: String,
    pub message: Vec<u8>,
    pub timeout: Option<Duration>,
}

const DEFAULT_WINDOW: i64 = 65_535;
const DEFAULT_MAX_FRAME: usize = frame::MIN_MAX_FRAME_SIZE as usize;
const HPACK_TABLE_SIZE: usize = 4096;

#[derive(Debug)]
enum Phase {
    /// Waiting for the client preface: `n` bytes of it seen.
    Preface(usize),
    /// Preface seen; the first frame must be SETTINGS.
    FirstSettings,
    Open,
}

/// A header block being collected across CONTINUATION frames.
struct PendingBlock {
    stream: u32,
    end_stream: bool,
    self_dependent: bool,
    block: Vec<u8>,
}

enum StreamState {
    /// Request headers seen, collecting the message.
    Receiving {
        path: String,
        timeout: Option<Duration>,
        body: Vec<u8>,
    },
    /// The request is with its handler.
    Running,
    /// The client reset the stream while its handler runs: nothing will be
    /// sent, but the stream keeps its place under the concurrency limit
    /// until the handler is done (so resets cannot pile up work).
    Cancelled,
    /// The reply waits for flow-control window: DATA from `pos`, then the
    /// trailers.
    Sending {
        data: Vec<u8>,
        pos: usize,
        trailers: Vec<u8>,
    },
}

struct Stream {
    state: StreamState,
    /// What we may still send on this stream.
    send_window: i64,
    /// What the client may still send on this stream.
    recv_window: i64,
}

/// The server side of one HTTP/2 connection. See the module docs.
pub struct Connection {
    limits: Limits,
    phase: Phase,
    out: Vec<u8>,
    decoder: loona_hpack::Decoder<'static>,
    pending_block: Option<PendingBlock>,
    streams: BTreeMap<u32, Stream>,
    ready: VecDeque<Request>,
    /// The highest stream id the client has opened.
    last_stream: u32,
    peer_max_frame: usize,
    peer_initial_window: i64,
    send_window: i64,
    recv_window: i64,
    recv_unacked: i64,
    /// Our GOAWAY: streams above this id are refused.
    goaway_sent: Option<u32>,
    peer_goaway: bool,
    closed: bool,
}

impl Connection {
    pub fn new(limits: Limits) -> Self {
        let mut decoder = loona_hpack::Decoder::new();
        decoder.set_max_allowed_table_size(HPACK_TABLE_SIZE);
        Connection {
            limits,
            phase: Phase::Preface(0),
            out: Vec::new(),
            decoder,
            pending_block: None,
            streams: BTreeMap::new(),
            ready: VecDeque::new(),
            last_stream: 0,
            peer_max_frame: DEFAULT_MAX_FRAME,
            peer_initial_window: DEFAULT_WINDOW,
            send_window: DEFAULT_WINDOW,
            recv_window: DEFAULT_WINDOW,
            recv_unacked: 0,
            goaway_sent: None,
            peer_goaway: false,
            closed: false,
        }
    }

    /// The stream receive window we announce: a whole maximal request and
    /// its prefix fit, with room to notice one that is too large.
    fn stream_window(&self) -> u32 {
        let w = self.limits.max_request.saturating_add(5 + 1024);
        w.min(frame::MAX_WINDOW as usize) as u32
    }

    /// Whether the client preface has arrived.
    pub fn preface_received(&self) -> bool {
        !matches!(self.phase, Phase::Preface(_))
    }

    /// Bytes to send to the client; the caller drains it.
    pub fn output(&mut self) -> &mut Vec<u8> {
        &mut self.out
    }

    /// Streams not yet answered completely.
    pub fn open_streams(&self) -> usize {
        self.streams.len()
    }

    /// Whether the connection should be closed once the output is written:
    /// after a fatal error, or after either side's GOAWAY once every stream
    /// is answered.
    pub fn is_done(&self) -> bool {
        self.closed || ((self.goaway_sent.is_some() || self.peer_goaway) && self.streams.is_empty())
    }

    /// The next complete request.
    pub fn next_request(&mut self) -> Option<Request> {
        self.ready.pop_front()
    }

    /// Start a graceful shutdown: announce GOAWAY, refuse new streams, and
    /// finish those already open.
    pub fn go_away(&mut self) {
        if self.goaway_sent.is_none() && !self.closed {
            self.goaway_sent = Some(self.last_stream);
            if self.preface_received() {
                frame::put_goaway(&mut self.out, self.last_stream, ErrorCode::NoError, b"");
            } else {
                self.closed = true;
            }
        }
    }

    /// Take in received bytes; returns how many were consumed (the rest is
    /// an incomplete frame to be given again with more bytes). On error the
    /// GOAWAY is already in the output and the connection is done.
    pub fn receive(&mut self, input: &[u8]) -> Result<usize, ConnError> {
        if self.closed {
            return Ok(input.len());
        }
        match self.receive_inner(input) {
            Ok(n) => Ok(n),
            Err(e) => {
                if self.preface_received() {
                    frame::put_goaway(&mut self.out, self.last_stream, e.code, e.reason.as_bytes());
                }
                self.closed = true;
                self.streams.clear();
                self.ready.clear();
                Err(e)
            }
        }
    }

    fn receive_inner(&mut self, input: &[u8]) -> Result<usize, ConnError> {
        let mut used = 0;
        if let Phase::Preface(seen) = self.phase {
            let want = &frame::PREFACE[seen..];
            let n = want.len().min(input.len());
            if input[..n] != want[..n] {
                return Err(ConnError::new(
                    ErrorCode::Protocol,
                    "the client did not send the HTTP/2 connection preface",
                ));
            }
            used = n;
            if seen + n < frame::PREFACE.len() {
                self.phase = Phase::Preface(seen + n);
                return Ok(used);
            }
            self.phase = Phase::FirstSettings;
            self.send_server_preface();
        }
        while let Some((head, payload, n)) =
            frame::split(&input[used..], frame::MIN_MAX_FRAME_SIZE)?
        {
            used += n;
            self.frame(head, payload)?;
            if self.closed {
                return Ok(input.len());
            }
        }
        Ok(used)
    }

    fn send_server_preface(&mut self) {
        let settings = [
            (
                frame::SETTINGS_MAX_CONCURRENT_STREAMS,
                self.limits.max_streams,
            ),
            (frame::SETTINGS_INITIAL_WINDOW_SIZE, self.stream_window()),
            (
                frame::SETTINGS_MAX_HEADER_LIST_SIZE,
                self.limits.max_header_block as u32,
            ),
            (frame::SETTINGS_ENABLE_PUSH, 0),
        ];
        frame::put_settings(&mut self.out, &settings);
        let extra = i64::from(self.limits.conn_window) - DEFAULT_WINDOW;
        if extra > 0 {
            frame::put_window_update(&mut self.out, 0, extra as u32);
            self.recv_window += extra;
        }
    }

    fn frame(&mut self, head: Head, payload: &[u8]) -> Result<(), ConnError> {
        if matches!(self.phase, Phase::FirstSettings) {
            if head.kind != frame::SETTINGS || head.flags & frame::ACK != 0 {
                return Err(ConnError::new(
                    ErrorCode::Protocol,
                    "the first frame after the preface must be SETTINGS",
                ));
            }
            self.phase = Phase::Open;
        }
        if let Some(p) = &self.pending_block {
            if head.kind != frame::CONTINUATION || head.stream != p.stream {
                return Err(ConnError::new(
                    ErrorCode::Protocol,
                    "a header block was interrupted by another frame",
                ));
            }
        }
        match head.kind {
            frame::DATA => self.data(head, payload),
            frame::HEADERS => self.headers(head, payload),
            frame::CONTINUATION => self.continuation(head, payload),
            frame::PRIORITY => {
                if head.stream == 0 {
                    return Err(protocol("PRIORITY on stream 0"));
                }
                if head.len != 5 {
                    return Err(ConnError::new(ErrorCode::FrameSize, "PRIORITY length"));
                }
                Ok(())
            }
            frame::RST_STREAM => {
                if head.stream == 0 {
                    return Err(protocol("RST_STREAM on stream 0"));
                }
                if head.len != 4 {
                    return Err(ConnError::new(ErrorCode::FrameSize, "RST_STREAM length"));
                }
                if head.stream > self.last_stream {
                    return Err(protocol("RST_STREAM on an idle stream"));
                }
                match self.streams.get_mut(&head.stream) {
                    Some(s) if matches!(s.state, StreamState::Running) => {
                        s.state = StreamState::Cancelled;
                    }
                    _ => {
                        self.streams.remove(&head.stream);
                    }
                }
                Ok(())
            }
            frame::SETTINGS => self.settings(head, payload),
            frame::PUSH_PROMISE => Err(protocol("a client cannot push")),
            frame::PING => {
                if head.stream != 0 {
                    return Err(protocol("PING on a stream"));
                }
                if head.len != 8 {
                    return Err(ConnError::new(ErrorCode::FrameSize, "PING length"));
                }
                if head.flags & frame::ACK == 0 {
                    frame::put_frame(&mut self.out, frame::PING, frame::ACK, 0, payload);
                }
                Ok(())
            }
            frame::GOAWAY => {
                if head.stream != 0 {
                    return Err(protocol("GOAWAY on a stream"));
                }
                if head.len < 8 {
                    return Err(ConnError::new(ErrorCode::FrameSize, "GOAWAY length"));
                }
                self.peer_goaway = true;
                Ok(())
            }
            frame::WINDOW_UPDATE => self.window_update(head, payload),
            // Unknown frame types are ignored (RFC 9113 §4.1).
            _ => Ok(()),
        }
    }

    fn settings(&mut self, head: Head, payload: &[u8]) -> Result<(), ConnError> {
        if head.stream != 0 {
            return Err(protocol("SETTINGS on a stream"));
        }
        if head.flags & frame::ACK != 0 {
            if head.len != 0 {
                return Err(ConnError::new(
                    ErrorCode::FrameSize,
                    "SETTINGS ACK with a payload",
                ));
            }
            return Ok(());
        }
        for (id, value) in frame::settings(payload)? {
            match id {
                frame::SETTINGS_ENABLE_PUSH if value > 1 => {
                    return Err(protocol("SETTINGS_ENABLE_PUSH must be 0 or 1"));
                }
                frame::SETTINGS_INITIAL_WINDOW_SIZE => {
                    if value > frame::MAX_WINDOW {
                        return Err(ConnError::new(
                            ErrorCode::FlowControl,
                            "SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1",
                        ));
                    }
                    let delta = i64::from(value) - self.peer_initial_window;
                    self.peer_initial_window = i64::from(value);
                    for s in self.streams.values_mut() {
                        s.send_window += delta;
                        if s.send_window > i64::from(frame::MAX_WINDOW) {
                            return Err(ConnError::new(
                                ErrorCode::FlowControl,
                                "a stream window grew above 2^31-1",
                            ));
                        }
                    }
                }
                frame::SETTINGS_MAX_FRAME_SIZE => {
                    if !(frame::MIN_MAX_FRAME_SIZE..=frame::MAX_MAX_FRAME_SIZE).contains(&value) {
                        return Err(protocol("SETTINGS_MAX_FRAME_SIZE out of range"));
                    }
                    self.peer_max_frame = value as usize;
                }
                // The encoder never uses the dynamic table, so the peer's
                // table size does not matter; the rest needs no action.
                _ => {}
            }
        }
        frame::put_frame(&mut self.out, frame::SETTINGS, frame::ACK, 0, &[]);
        self.pump();
        Ok(())
    }

    fn window_update(&mut self, head: Head, payload: &[u8]) -> Result<(), ConnError> {
        if head.len != 4 {
            return Err(ConnError::new(ErrorCode::FrameSize, "WINDOW_UPDATE length"));
        }
        let inc = i64::from(frame::u31(payload));
        let max = i64::from(frame::MAX_WINDOW);
        if head.stream == 0 {
            if inc == 0 {
                return Err(protocol("WINDOW_UPDATE with increment 0"));
            }
            self.send_window += inc;
            if self.send_window > max {
                return Err(ConnError::new(
                    ErrorCode::FlowControl,
                    "connection window above 2^31-1",
                ));
            }
        } else if head.stream > self.last_stream {
            return Err(protocol("WINDOW_UPDATE on an idle stream"));
        } else if let Some(s) = self.streams.get_mut(&head.stream) {
            if inc == 0 {
                self.reset(head.stream, ErrorCode::Protocol);
                return Ok(());
            }
            s.send_window += inc;
            if s.send_window > max {
                self.reset(head.stream, ErrorCode::FlowControl);
                return Ok(());
            }
        }
        self.pump();
        Ok(())
    }

    fn data(&mut self, head: Head, payload: &[u8]) -> Result<(), ConnError> {
        if head.stream == 0 {
            return Err(protocol("DATA on stream 0"));
        }
        if head.stream > self.last_stream {
            return Err(protocol("DATA on an idle stream"));
        }
        // Flow control counts the whole payload, padding included.
        let len = head.len as i64;
        self.recv_window -= len;
        if self.recv_window < 0 {
            return Err(ConnError::new(
                ErrorCode::FlowControl,
                "the client overran the connection window",
            ));
        }
        self.recv_unacked += len;
        if self.recv_unacked >= i64::from(self.limits.conn_window) / 2 {
            frame::put_window_update(&mut self.out, 0, self.recv_unacked as u32);
            self.recv_window += self.recv_unacked;
            self.recv_unacked = 0;
        }
        let data = frame::unpad(head.flags, payload)?;
        let padding = payload.len() - data.len();
        let end = head.flags & frame::END_STREAM != 0;
        let max_body = self.limits.max_request + 5;
        let Some(s) = self.streams.get_mut(&head.stream) else {
            // A stream we reset or answered: its late frames are ignored.
            return Ok(());
        };
        s.recv_window -= len;
        if s.recv_window < 0 {
            return Err(ConnError::new(
                ErrorCode::FlowControl,
                "the client overran a stream window",
            ));
        }
        let StreamState::Receiving { body, .. } = &mut s.state else {
            self.reset(head.stream, ErrorCode::StreamClosed);
            return Ok(());
        };
        if padding > 0 {
            // Padding never counts against the request size: give it back.
            frame::put_window_update(&mut self.out, head.stream, padding as u32);
            s.recv_window += padding as i64;
        }
        if body.len() + data.len() > max_body {
            let msg = format!(
                "request message larger than the limit of {} bytes",
                self.limits.max_request
            );
            self.reply_now(
                head.stream,
                &Reply::error(Code::ResourceExhausted, msg),
                !end,
            );
            return Ok(());
        }
        body.extend_from_slice(data);
        if end {
            self.finish_request(head.stream);
        }
        Ok(())
    }

    fn headers(&mut self, head: Head, payload: &[u8]) -> Result<(), ConnError> {
        if head.stream == 0 {
            return Err(protocol("HEADERS on stream 0"));
        }
        let (fragment, self_dependent) = frame::headers_fragment(&head, payload)?;
        let block = PendingBlock {
            stream: head.stream,
            end_stream: head.flags & frame::END_STREAM != 0,
            self_dependent,
            block: fragment.to_vec(),
        };
        self.check_block_size(block.block.len())?;
        if head.flags & frame::END_HEADERS != 0 {
            self.header_block(block)
        } else {
            self.pending_block = Some(block);
            Ok(())
        }
    }

    fn continuation(&mut self, head: Head, payload: &[u8]) -> Result<(), ConnError> {
        let Some(mut block) = self.pending_block.take() else {
            return Err(protocol("CONTINUATION without HEADERS"));
        };
        self.check_block_size(block.block.len() + payload.len())?;
        block.block.extend_from_slice(payload);
        if head.flags & frame::END_HEADERS != 0 {
            self.header_block(block)
        } else {
            self.pending_block = Some(block);
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

    /// A complete header block: decode it first, whatever happens to the
    /// stream, then act on it.
    fn header_block(&mut self, block: PendingBlock) -> Result<(), ConnError> {
        let mut fields = RequestHead::default();
        self.decoder
            .decode_with_cb(&block.block, |n, v| fields.add(n, v))
            .map_err(|e| ConnError::new(ErrorCode::Compression, e.to_string()))?;
        let id = block.stream;
        if id.is_multiple_of(2) {
            return Err(protocol("a client opened an even-numbered stream"));
        }
        if id <= self.last_stream {
            // Trailers of a request still being received, or frames of a
            // stream already closed.
            match self.streams.get(&id).map(|s| &s.state) {
                Some(StreamState::Receiving { .. }) => {
                    if !block.end_stream {
                        self.reset(id, ErrorCode::Protocol);
                    } else {
                        self.finish_request(id);
                    }
                }
                Some(_) => self.reset(id, ErrorCode::StreamClosed),
                None => {}
            }
            return Ok(());
        }
        self.last_stream = id;
        if block.self_dependent {
            frame::put_rst(&mut self.out, id, ErrorCode::Protocol);
            return Ok(());
        }
        if self.goaway_sent.is_some() || self.peer_goaway {
            frame::put_rst(&mut self.out, id, ErrorCode::RefusedStream);
            return Ok(());
        }
        if self.streams.len() >= self.limits.max_streams as usize {
            frame::put_rst(&mut self.out, id, ErrorCode::RefusedStream);
            return Ok(());
        }
        self.streams.insert(
            id,
            Stream {
                state: StreamState::Running,
                send_window: self.peer_initial_window,
                recv_window: i64::from(self.stream_window()),
            },
        );
        let open = !block.end_stream;
        if fields.list_size > self.limits.max_header_block {
            let msg = "request header list too large";
            self.reply_now(id, &Reply::error(Code::ResourceExhausted, msg), open);
            return Ok(());
        }
        if fields.method.as_deref() != Some(b"POST") {
            self.http_error(id, 405, open);
            return Ok(());
        }
        let grpc = fields.content_type.as_deref().is_some_and(|c| {
            c == b"application/grpc"
                || c.starts_with(b"application/grpc+")
                || c.starts_with(b"application/grpc;")
        });
        if !grpc {
            self.http_error(id, 415, open);
            return Ok(());
        }
        let path = match fields.path.map(String::from_utf8) {
            Some(Ok(p)) if p.starts_with('/') => p,
            _ => {
                let msg = "missing or malformed :path";
                self.reply_now(id, &Reply::error(Code::Unimplemented, msg), open);
                return Ok(());
            }
        };
        let timeout = match fields.timeout {
            None => None,
            Some(t) => match hpack::parse_timeout(&t) {
                Some(d) => Some(d),
                None => {
                    let msg = format!("malformed grpc-timeout {:?}", String::from_utf8_lossy(&t));
                    self.reply_now(id, &Reply::error(Code::InvalidArgument, msg), open);
                    return Ok(());
                }
            },
        };
        if let Some(s) = self.streams.get_mut(&id) {
            s.state = StreamState::Receiving {
                path,
                timeout,
                body: Vec::new(),
            };
        }
        if block.end_stream {
            self.finish_request(id);
        }
        Ok(())
    }

    /// The client ended its side: the body must hold exactly one
    /// uncompressed message.
    fn finish_request(&mut self, id: u32) {
        let Some(s) = self.streams.get_mut(&id) else {
            return;
        };
        let StreamState::Receiving {
            path,
            timeout,
            body,
        } = std::mem::replace(&mut s.state, StreamState::Running)
        else {
            return;
        };
        let problem = if body.len() < 5 {
            Some((Code::Internal, "the request carries no message".to_string()))
        } else if body[0] != 0 {
            Some((
                Code::Unimplemented,
                "compressed request messages are not supported".to_string(),
            ))
        } else {
            let len = u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize;
            if len != body.len() - 5 {
                Some((
                    Code::Internal,
                    "a unary request must carry exactly one whole message".to_string(),
                ))
            } else {
                None
            }
        };
        if let Some((code, msg)) = problem {
            self.reply_now(id, &Reply::error(code, msg), false);
            return;
        }
        let mut message = body;
        message.drain(..5);
        self.ready.push_back(Request {
            stream: id,
            path,
            message,
            timeout,
        });
    }

    /// Answer a stream at once; if the client has not finished sending,
    /// ask it to stop (RST_STREAM NO_ERROR, RFC 9113 §8.1).
    fn reply_now(&mut self, id: u32, reply: &Reply, client_still_sending: bool) {
        self.respond(id, reply);
        if client_still_sending {
            frame::put_rst(&mut self.out, id, ErrorCode::NoError);
            self.streams.remove(&id);
        }
    }

    fn http_error(&mut self, id: u32, status: u16, client_still_sending: bool) {
        let mut block = Vec::new();
        hpack::put_http_status(&mut block, status);
        frame::put_header_block(&mut self.out, id, &block, true, self.peer_max_frame);
        self.streams.remove(&id);
        if client_still_sending {
            frame::put_rst(&mut self.out, id, ErrorCode::NoError);
        }
    }

    fn reset(&mut self, id: u32, code: ErrorCode) {
        frame::put_rst(&mut self.out, id, code);
        self.streams.remove(&id);
    }

    /// Send the reply of stream `id`. A stream the client has reset (or one
    /// already answered, e.g. after its deadline) is ignored.
    pub fn respond(&mut self, id: u32, reply: &Reply) {
        if self.closed {
            return;
        }
        let Some(s) = self.streams.get_mut(&id) else {
            return;
        };
        match s.state {
            StreamState::Sending { .. } => return,
            StreamState::Cancelled => {
                self.streams.remove(&id);
                return;
            }
            _ => {}
        }
        let mut block = Vec::with_capacity(64);
        hpack::put_response_head(&mut block);
        if reply.code != Code::Ok {
            // Trailers-only response.
            hpack::put_grpc_status(&mut block, reply.code as i32, &reply.message);
            frame::put_header_block(&mut self.out, id, &block, true, self.peer_max_frame);
            self.streams.remove(&id);
            return;
        }
        frame::put_header_block(&mut self.out, id, &block, false, self.peer_max_frame);
        let mut data = Vec::with_capacity(5 + reply.body.len());
        data.push(0);
        data.extend_from_slice(&(reply.body.len() as u32).to_be_bytes());
        data.extend_from_slice(&reply.body);
        let mut trailers = Vec::with_capacity(16);
        hpack::put_grpc_status(&mut trailers, 0, "");
        s.state = StreamState::Sending {
            data,
            pos: 0,
            trailers,
        };
        self.send(id);
    }

    /// Send what the windows allow of every reply that is waiting.
    fn pump(&mut self) {
        let waiting: Vec<u32> = self
            .streams
            .iter()
            .filter(|(_, s)| matches!(s.state, StreamState::Sending { .. }))
            .map(|(&id, _)| id)
            .collect();
        for id in waiting {
            if self.send_window <= 0 {
                break;
            }
            self.send(id);
        }
    }

    fn send(&mut self, id: u32) {
        let Some(s) = self.streams.get_mut(&id) else {
            return;
        };
        let StreamState::Sending {
            data,
            pos,
            trailers,
        } = &mut s.state
        else {
            return;
        };
        while *pos < data.len() {
            let window = self.send_window.min(s.send_window);
            if window <= 0 {
                return;
            }
            let n = (data.len() - *pos)
                .min(self.peer_max_frame)
                .min(window as usize);
            frame::put_frame(&mut self.out, frame::DATA, 0, id, &data[*pos..*pos + n]);
            *pos += n;
            self.send_window -= n as i64;
            s.send_window -= n as i64;
        }
        let trailers = std::mem::take(trailers);
        frame::put_header_block(&mut self.out, id, &trailers, true, self.peer_max_frame);
        self.streams.remove(&id);
    }
}

fn protocol(reason: &str) -> ConnError {
    ConnError::new(ErrorCode::Protocol, reason)
}
