//! The server side of one HTTP/2 connection carrying unary gRPC calls, as a
//! state machine without I/O: bytes go in through [`Connection::receive`],
//! complete requests come out of [`Connection::next_request`], replies go in
//! through [`Connection::respond`], and the bytes to send accumulate in
//! [`Connection::output`]. The async driver (`driver.rs`) only moves bytes,
//! runs handlers and keeps time; the fuzz target feeds this type directly.
//!
//! What it implements: the connection preface, SETTINGS (and their ACK),
//! PING, GOAWAY in both directions, RST_STREAM, WINDOW_UPDATE and flow
//! control in both directions, HEADERS with padding and priority,
//! CONTINUATION, DATA with padding, the RFC 9113 stream states (frames on
//! closed streams are answered STREAM_CLOSED; recently closed streams are
//! remembered) and the §8 request checks (a malformed request is reset with
//! PROTOCOL_ERROR). Header blocks are decoded in order for every stream,
//! even refused ones, so the HPACK dynamic table never falls out of step
//! with the client's. `:authority` is never interpreted.
//!
//! Work and memory per connection are bounded: one call of `receive` takes
//! at most a batch of frames or bytes and stops early once the output is
//! over its cap; request bytes are held only within the connection window,
//! which is given back only as bodies are consumed or discarded, and only
//! within the process-wide [`BodyBudget`]; a body that stalls is answered
//! after the receive timeout.

mod control;
mod recv;
mod send;
mod streams;

use crate::budget::BodyBudget;
use crate::buf::Buffer;
use crate::frame::{self, ConnError, ErrorCode, Head};
use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};
use streams::{ClosedStreams, Closure, Stream, StreamState};

/// Limits a connection enforces and announces.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// SETTINGS_MAX_CONCURRENT_STREAMS.
    pub max_streams: u32,
    /// The largest request message (the gRPC payload, without its prefix).
    pub max_request: usize,
    /// The largest header block (compressed, all CONTINUATIONs together) and
    /// the largest decoded header list (SETTINGS_MAX_HEADER_LIST_SIZE).
    pub max_header_block: usize,
    /// CONTINUATION frames per header block, empty ones included.
    pub max_continuations: usize,
    /// The connection receive window: the most request bytes the client
    /// can have in flight or held here.
    pub conn_window: u32,
    /// Stop taking frames while this much output waits for the client.
    pub max_output: usize,
    /// Frames taken per call of [`Connection::receive`].
    pub batch_frames: usize,
    /// Bytes taken per call of [`Connection::receive`] (a frame that
    /// crosses the mark is still taken whole).
    pub batch_bytes: usize,
    /// A request body must arrive within this long of its headers.
    pub receive_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_streams: 128,
            max_request: 4 << 20,
            max_header_block: 64 << 10,
            max_continuations: 128,
            conn_window: 9 << 20,
            max_output: 256 << 10,
            batch_frames: 32,
            batch_bytes: 16 << 10,
            receive_timeout: Duration::from_secs(30),
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
    continuations: usize,
    block: Vec<u8>,
}

/// The server side of one HTTP/2 connection. See the module docs.
pub struct Connection {
    limits: Limits,
    phase: Phase,
    out: Buffer,
    decoder: crate::hpack::Decoder,
    pending_block: Option<PendingBlock>,
    streams: BTreeMap<u32, Stream>,
    closed_streams: ClosedStreams,
    ready: VecDeque<Request>,
    /// The highest stream id the client has opened.
    last_stream: u32,
    peer_max_frame: usize,
    peer_initial_window: i64,
    /// What we may still send on the connection.
    send_window: i64,
    /// What the client may still send on the connection.
    recv_window: i64,
    /// Received bytes consumed or discarded and not yet given back.
    released: u32,
    /// Streams whose reply waits for window.
    sending: usize,
    budget: BodyBudget,
    /// The driver's clock, for receive deadlines.
    now: Instant,
    /// The last `receive` stopped with whole frames left (work budget or
    /// output cap).
    paused: bool,
    /// Our GOAWAY: streams above this id are refused.
    goaway_sent: Option<u32>,
    /// The first GOAWAY of a graceful shutdown went out with the drain
    /// PING; the final one waits for its ACK.
    draining: bool,
    peer_goaway: bool,
    failed: bool,
}

/// The opaque data of the PING sent with the first GOAWAY of a graceful
/// shutdown (keepalive PINGs carry a counter that starts at 1).
const DRAIN_PING: [u8; 8] = *b"\0drain\0\0";

impl Connection {
    /// A connection with its own, unlimited, body budget (tests, fuzzing).
    pub fn new(limits: Limits) -> Self {
        Connection::with_budget(limits, BodyBudget::new(usize::MAX))
    }

    /// A connection whose held request bytes count against `budget`.
    pub fn with_budget(limits: Limits, budget: BodyBudget) -> Self {
        let decoder = crate::hpack::Decoder::new(crate::hpack::DEFAULT_TABLE_SIZE);
        Connection {
            limits,
            phase: Phase::Preface(0),
            out: Buffer::default(),
            decoder,
            pending_block: None,
            streams: BTreeMap::new(),
            closed_streams: ClosedStreams::new(2 * limits.max_streams as usize),
            ready: VecDeque::new(),
            last_stream: 0,
            peer_max_frame: DEFAULT_MAX_FRAME,
            peer_initial_window: DEFAULT_WINDOW,
            send_window: DEFAULT_WINDOW,
            recv_window: DEFAULT_WINDOW,
            released: 0,
            sending: 0,
            budget,
            now: Instant::now(),
            paused: false,
            goaway_sent: None,
            draining: false,
            peer_goaway: false,
            failed: false,
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

    /// Bytes to send to the client; the caller consumes what it wrote.
    pub fn output(&mut self) -> &mut Buffer {
        &mut self.out
    }

    /// Streams not yet answered completely (running handlers included).
    pub fn open_streams(&self) -> usize {
        self.streams.len()
    }

    /// The last [`Connection::receive`] stopped before the end of its
    /// input although whole frames were left: call it again with the rest
    /// once the output has drained.
    pub fn paused(&self) -> bool {
        self.paused
    }

    /// Set the clock used for receive deadlines (the driver's "now").
    pub fn advance_clock(&mut self, now: Instant) {
        self.now = now;
    }

    /// Whether the connection should be closed once the output is written:
    /// after a fatal error, or after either side's GOAWAY once every stream
    /// is answered.
    pub fn is_done(&self) -> bool {
        self.failed || ((self.goaway_sent.is_some() || self.peer_goaway) && self.streams.is_empty())
    }

    /// The next complete request. Requests whose stream the client reset
    /// before their handler started are dropped here.
    pub fn next_request(&mut self) -> Option<Request> {
        while let Some(req) = self.ready.pop_front() {
            match self.streams.get(&req.stream).map(|s| &s.state) {
                Some(StreamState::Running) => return Some(req),
                Some(StreamState::Cancelled) => self.close_stream(req.stream, Closure::Finished),
                _ => {}
            }
        }
        None
    }

    /// Start a graceful shutdown: announce GOAWAY, refuse new streams, and
    /// finish those already open.
    pub fn go_away(&mut self) {
        if self.goaway_sent.is_none() && !self.failed {
            self.goaway_sent = Some(self.last_stream);
            if self.preface_received() {
                frame::put_goaway(self.out.back(), self.last_stream, ErrorCode::NoError, b"");
            } else {
                self.failed = true;
            }
        }
    }

    /// Start a graceful shutdown in two steps (RFC 9113 §6.8): a GOAWAY
    /// with the largest stream id and a PING now, so requests the client
    /// sent before it saw the GOAWAY are still served; the final GOAWAY
    /// (streams above the last one refused) once the PING is answered,
    /// when every such request has arrived, or at [`Connection::go_away`]
    /// if the client never answers. Before the client preface nothing can
    /// be sent: returns false, and the caller calls again later.
    pub fn go_away_gracefully(&mut self) -> bool {
        if self.goaway_sent.is_some() || self.draining || self.failed {
            return true;
        }
        if !self.preface_received() {
            return false;
        }
        self.draining = true;
        frame::put_goaway(
            self.out.back(),
            frame::MAX_STREAM_ID,
            ErrorCode::NoError,
            b"",
        );
        frame::put_frame(self.out.back(), frame::PING, 0, 0, &DRAIN_PING);
        true
    }

    /// Whether the client has opened any stream.
    pub fn opened_streams(&self) -> bool {
        self.last_stream > 0
    }

    /// The first GOAWAY of a graceful shutdown was sent and the final one
    /// was not.
    pub fn draining(&self) -> bool {
        self.draining && self.goaway_sent.is_none()
    }

    /// Send a PING (keepalive); its ACK needs no answer.
    pub fn ping(&mut self, opaque: [u8; 8]) {
        if self.preface_received() && !self.failed {
            frame::put_frame(self.out.back(), frame::PING, 0, 0, &opaque);
        }
    }

    /// The earliest receive deadline of a stream whose body is arriving.
    pub fn next_receive_deadline(&self) -> Option<Instant> {
        self.streams
            .values()
            .filter_map(|s| match &s.state {
                StreamState::Receiving(r) => Some(r.deadline),
                _ => None,
            })
            .min()
    }

    /// Answer every stream whose body did not arrive by its deadline.
    pub fn expire_receives(&mut self) {
        let now = self.now;
        let late: Vec<u32> = self
            .streams
            .iter()
            .filter(|(_, s)| matches!(&s.state, StreamState::Receiving(r) if r.deadline <= now))
            .map(|(&id, _)| id)
            .collect();
        for id in late {
            let msg = format!(
                "the request message did not arrive within {:?}",
                self.limits.receive_timeout
            );
            self.reply_now(
                id,
                &crate::Reply::error(crate::Code::DeadlineExceeded, msg),
                true,
            );
        }
    }

    /// Take in received bytes; returns how many were consumed. The rest is
    /// an incomplete frame to be given again with more bytes, or, if
    /// [`Connection::paused`], whole frames left for the next call. On
    /// error the GOAWAY is already in the output and the connection is done.
    pub fn receive(&mut self, input: &[u8]) -> Result<usize, ConnError> {
        self.paused = false;
        if self.failed {
            return Ok(input.len());
        }
        match self.receive_inner(input) {
            Ok(n) => Ok(n),
            Err(e) => {
                if self.preface_received() {
                    frame::put_goaway(
                        self.out.back(),
                        self.last_stream,
                        e.code,
                        e.reason.as_bytes(),
                    );
                }
                self.failed = true;
                self.paused = false;
                self.streams.clear();
                self.ready.clear();
                self.pending_block = None;
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
        let (mut frames, mut bytes) = (0, 0);
        loop {
            let rest = &input[used..];
            if frames >= self.limits.batch_frames
                || bytes >= self.limits.batch_bytes
                || self.out.len() >= self.limits.max_output
            {
                // Whole frames (or a frame error) left: come back for them.
                self.paused = !matches!(frame::split(rest, frame::MIN_MAX_FRAME_SIZE), Ok(None));
                return Ok(used);
            }
            let Some((head, payload, n)) = frame::split(rest, frame::MIN_MAX_FRAME_SIZE)? else {
                return Ok(used);
            };
            used += n;
            frames += 1;
            bytes += n;
            self.frame(head, payload)?;
            if self.failed {
                return Ok(input.len());
            }
        }
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
        frame::put_settings(self.out.back(), &settings);
        let extra = i64::from(self.limits.conn_window) - DEFAULT_WINDOW;
        if extra > 0 {
            frame::put_window_update(self.out.back(), 0, extra as u32);
            self.recv_window += extra;
        }
    }

    fn frame(&mut self, head: Head, payload: &[u8]) -> Result<(), ConnError> {
        if matches!(self.phase, Phase::FirstSettings) {
            if head.kind != frame::SETTINGS || head.flags & frame::ACK != 0 {
                return Err(protocol(
                    "the first frame after the preface must be SETTINGS",
                ));
            }
            self.phase = Phase::Open;
        }
        if let Some(p) = &self.pending_block {
            if head.kind != frame::CONTINUATION || head.stream != p.stream {
                return Err(protocol("a header block was interrupted by another frame"));
            }
        }
        match head.kind {
            frame::DATA => self.data(head, payload),
            frame::HEADERS => self.headers(head, payload),
            frame::CONTINUATION => self.continuation(head, payload),
            frame::PRIORITY => self.priority(head, payload),
            frame::RST_STREAM => self.rst_stream(head, payload),
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
                    frame::put_frame(self.out.back(), frame::PING, frame::ACK, 0, payload);
                } else if self.draining && payload == DRAIN_PING {
                    // Every stream the client opened before it saw our
                    // first GOAWAY has arrived.
                    self.go_away();
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

    /// Give back `n` bytes of connection window: the client may send them
    /// again. Sent in batches, so a window update is not a frame per call.
    fn release(&mut self, n: usize) {
        self.released = self.released.saturating_add(n as u32);
        if self.released >= (self.limits.conn_window / 8).max(1) {
            frame::put_window_update(self.out.back(), 0, self.released);
            self.recv_window += i64::from(self.released);
            self.released = 0;
        }
    }

    /// Remove stream `id`: its held window goes back to the client, its
    /// body back to the budget, and the stream is remembered as closed.
    fn close_stream(&mut self, id: u32, how: Closure) {
        if let Some(s) = self.streams.remove(&id) {
            if matches!(s.state, StreamState::Sending { .. }) {
                self.sending -= 1;
            }
            self.release(s.held_window);
            self.closed_streams.record(id, how);
        }
    }

    /// Reset stream `id` with `code` (a stream error): the client's frames
    /// still in flight for it are ignored. A running handler keeps the
    /// stream's place until it is done; its reply is dropped.
    fn reset(&mut self, id: u32, code: ErrorCode) {
        frame::put_rst(self.out.back(), id, code);
        match self.streams.get_mut(&id).map(|s| &mut s.state) {
            Some(state @ StreamState::Running) => *state = StreamState::Cancelled,
            Some(StreamState::Cancelled) => {}
            Some(_) => self.close_stream(id, Closure::Reset),
            None => self.closed_streams.record(id, Closure::Reset),
        }
    }
}

fn protocol(reason: &str) -> ConnError {
    ConnError::new(ErrorCode::Protocol, reason)
}
