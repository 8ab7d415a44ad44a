//! A minimal blocking HTTP/2 client for unary gRPC calls, for tests and
//! benchmarks: it sends exactly the bytes a test asks for (any `:authority`,
//! padding, priority fields, header blocks split over CONTINUATION frames)
//! and encodes headers the way grpc-go does, as literals with incremental
//! indexing, so that repeated requests on one connection refer to the
//! dynamic table. Not for production use: no timeouts, one call at a time.

use super::frame::{self, ErrorCode};
use super::hpack::{percent_decode, put_huffman_str, put_int, put_str, DEFAULT_TABLE_SIZE};
use std::io::{self, Read, Write};

/// How requests are framed.
#[derive(Clone, Debug, Default)]
pub struct Shape {
    /// Pad HEADERS and DATA frames with this many bytes.
    pub padding: Option<u8>,
    /// Send the priority fields in HEADERS.
    pub priority: bool,
    /// Split header blocks into fragments of at most this many bytes
    /// (HEADERS + CONTINUATION frames).
    pub fragment: Option<usize>,
    /// Never use the dynamic table (every field a literal without indexing).
    pub no_indexing: bool,
    /// Huffman-code every string literal, as grpc-go does.
    pub huffman: bool,
}

/// One response.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Response {
    /// The HTTP status (200 for every gRPC response).
    pub http_status: u16,
    /// `grpc-status`, from the trailers or a trailers-only response.
    pub grpc_status: Option<i32>,
    /// `grpc-message`, percent-decoded.
    pub grpc_message: String,
    /// The response message without its gRPC prefix, if there was one.
    pub message: Option<Vec<u8>>,
    /// The stream was reset by the server with this code.
    pub reset: Option<u32>,
}

/// The request side of a client connection: header encoding with a
/// dynamic table, and request framing. Usable with any transport (the
/// benchmark drives it from async code).
pub struct RequestEncoder {
    shape: Shape,
    table: Vec<(Vec<u8>, Vec<u8>)>,
    table_size: usize,
    next_stream: u32,
}

/// A blocking HTTP/2 connection.
pub struct RawClient<S> {
    io: S,
    enc: RequestEncoder,
    decoder: crate::hpack::Decoder,
    input: Vec<u8>,
    unacked: usize,
    /// Frame types received, in order (for tests).
    pub received: Vec<u8>,
}

/// Static-table entries the encoder uses for exact matches.
const STATIC: [(&[u8], &[u8], usize); 3] = [
    (b":method", b"POST", 3),
    (b":scheme", b"http", 6),
    (b":scheme", b"https", 7),
];

impl RequestEncoder {
    pub fn new(shape: Shape) -> Self {
        RequestEncoder {
            shape,
            table: Vec::new(),
            table_size: 0,
            next_stream: 1,
        }
    }

    /// The connection preface and an empty SETTINGS frame.
    pub fn preface() -> Vec<u8> {
        let mut out = frame::PREFACE.to_vec();
        frame::put_settings(&mut out, &[]);
        out
    }

    /// Encode one field as grpc-go would: indexed if it is in a table,
    /// else a literal with incremental indexing.
    fn encode(&mut self, out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
        let put = |out: &mut Vec<u8>, s: &[u8]| {
            if self.shape.huffman {
                put_huffman_str(out, s);
            } else {
                put_str(out, s);
            }
        };
        if self.shape.no_indexing {
            out.push(0);
            put(out, name);
            put(out, value);
            return;
        }
        if let Some(&(_, _, i)) = STATIC.iter().find(|(n, v, _)| *n == name && *v == value) {
            put_int(out, 0x80, 7, i);
            return;
        }
        if let Some(pos) = self.table.iter().position(|(n, v)| n == name && v == value) {
            put_int(out, 0x80, 7, 62 + pos);
            return;
        }
        out.push(0x40);
        put(out, name);
        put(out, value);
        let size = name.len() + value.len() + 32;
        self.table.insert(0, (name.to_vec(), value.to_vec()));
        self.table_size += size;
        while self.table_size > DEFAULT_TABLE_SIZE {
            let (n, v) = self.table.pop().expect("table holds entries");
            self.table_size -= n.len() + v.len() + 32;
        }
    }

    /// The request header block for `path`.
    pub fn request_block(
        &mut self,
        path: &str,
        authority: Option<&[u8]>,
        extra: &[(&[u8], &[u8])],
    ) -> Vec<u8> {
        let mut block = Vec::new();
        self.encode(&mut block, b":method", b"POST");
        self.encode(&mut block, b":scheme", b"http");
        self.encode(&mut block, b":path", path.as_bytes());
        if let Some(a) = authority {
            self.encode(&mut block, b":authority", a);
        }
        self.encode(&mut block, b"content-type", b"application/grpc");
        self.encode(&mut block, b"user-agent", b"grpc-go/1.60.1");
        self.encode(&mut block, b"te", b"trailers");
        for (n, v) in extra {
            self.encode(&mut block, n, v);
        }
        block
    }

    /// Append the frames of a unary request on a new stream; returns the
    /// stream id.
    pub fn put_request(&mut self, out: &mut Vec<u8>, block: &[u8], message: &[u8]) -> u32 {
        let id = self.next_stream;
        self.next_stream += 2;
        self.put_headers(out, id, block);
        let mut data = Vec::with_capacity(message.len() + 5);
        data.push(0);
        data.extend_from_slice(&(message.len() as u32).to_be_bytes());
        data.extend_from_slice(message);
        match self.shape.padding {
            Some(p) => {
                let mut payload = vec![p];
                payload.extend_from_slice(&data);
                payload.extend(std::iter::repeat_n(0u8, p as usize));
                frame::put_frame(
                    out,
                    frame::DATA,
                    frame::END_STREAM | frame::PADDED,
                    id,
                    &payload,
                );
            }
            None => frame::put_frame(out, frame::DATA, frame::END_STREAM, id, &data),
        }
        id
    }

    fn put_headers(&self, out: &mut Vec<u8>, id: u32, block: &[u8]) {
        let frag = self.shape.fragment.unwrap_or(usize::MAX).max(1);
        let (first, rest) = block.split_at(frag.min(block.len()));
        let mut flags = if rest.is_empty() {
            frame::END_HEADERS
        } else {
            0
        };
        let mut payload = Vec::new();
        if let Some(p) = self.shape.padding {
            flags |= frame::PADDED;
            payload.push(p);
        }
        if self.shape.priority {
            flags |= frame::PRIORITY_FLAG;
            payload.extend_from_slice(&[0x80, 0, 0, 0, 15]);
        }
        payload.extend_from_slice(first);
        if let Some(p) = self.shape.padding {
            payload.extend(std::iter::repeat_n(0u8, p as usize));
        }
        frame::put_frame(out, frame::HEADERS, flags, id, &payload);
        let mut chunks = rest.chunks(frag).peekable();
        while let Some(c) = chunks.next() {
            let f = if chunks.peek().is_none() {
                frame::END_HEADERS
            } else {
                0
            };
            frame::put_frame(out, frame::CONTINUATION, f, id, c);
        }
    }
}

impl<S: Read + Write> RawClient<S> {
    /// Send the connection preface and an empty SETTINGS frame.
    pub fn new(io: S, shape: Shape) -> io::Result<Self> {
        let mut c = RawClient {
            io,
            enc: RequestEncoder::new(shape),
            decoder: crate::hpack::Decoder::new(DEFAULT_TABLE_SIZE),
            input: Vec::new(),
            unacked: 0,
            received: Vec::new(),
        };
        c.io.write_all(&RequestEncoder::preface())?;
        Ok(c)
    }

    /// The underlying stream.
    pub fn get_ref(&self) -> &S {
        &self.io
    }

    /// Take back the underlying stream.
    pub fn into_inner(self) -> S {
        self.io
    }

    /// The request header block for `path` (see [`RequestEncoder`]).
    pub fn request_block(
        &mut self,
        path: &str,
        authority: Option<&[u8]>,
        extra: &[(&[u8], &[u8])],
    ) -> Vec<u8> {
        self.enc.request_block(path, authority, extra)
    }

    /// Send a unary call with a prepared header block and wait for its
    /// response.
    pub fn call_with_block(&mut self, block: &[u8], message: &[u8]) -> io::Result<Response> {
        let mut out = Vec::with_capacity(block.len() + message.len() + 64);
        let id = self.enc.put_request(&mut out, block, message);
        self.io.write_all(&out)?;
        self.response(id)
    }

    /// A unary call of `path` with the given `:authority` (none if `None`).
    pub fn call(
        &mut self,
        path: &str,
        authority: Option<&[u8]>,
        message: &[u8],
    ) -> io::Result<Response> {
        let block = self.enc.request_block(path, authority, &[]);
        self.call_with_block(&block, message)
    }

    /// Take the next stream id for frames a test sends itself.
    pub fn reserve_stream(&mut self) -> u32 {
        let id = self.enc.next_stream;
        self.enc.next_stream += 2;
        id
    }

    /// Read frames until stream `id` is complete, answering SETTINGS and
    /// PING and keeping the connection window open.
    pub fn response(&mut self, id: u32) -> io::Result<Response> {
        let mut resp = Response::default();
        let mut body = Vec::new();
        let mut block: Vec<u8> = Vec::new();
        let mut block_end_stream = false;
        loop {
            let Some((head, payload, used)) = frame::split(&self.input, frame::MAX_MAX_FRAME_SIZE)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?
                .map(|(h, p, u)| (h, p.to_vec(), u))
            else {
                let mut buf = [0u8; 16 << 10];
                let n = self.io.read(&mut buf)?;
                if n == 0 {
                    return Err(io::ErrorKind::UnexpectedEof.into());
                }
                self.input.extend_from_slice(&buf[..n]);
                continue;
            };
            self.input.drain(..used);
            self.received.push(head.kind);
            let mut reply = Vec::new();
            let mut done = false;
            match head.kind {
                frame::SETTINGS if head.flags & frame::ACK == 0 => {
                    frame::put_frame(&mut reply, frame::SETTINGS, frame::ACK, 0, &[]);
                }
                frame::PING if head.flags & frame::ACK == 0 => {
                    frame::put_frame(&mut reply, frame::PING, frame::ACK, 0, &payload);
                }
                frame::GOAWAY => {
                    return Err(io::Error::new(
                        io::ErrorKind::ConnectionAborted,
                        format!(
                            "GOAWAY code {} {}",
                            frame::u31(&payload[4..8]),
                            String::from_utf8_lossy(&payload[8..])
                        ),
                    ));
                }
                frame::RST_STREAM if head.stream == id => {
                    resp.reset = Some(u32::from_be_bytes(payload[..4].try_into().unwrap()));
                    done = true;
                }
                frame::DATA => {
                    // Keep both windows open (the stream's only matters for
                    // replies larger than the initial window).
                    self.unacked += payload.len();
                    if self.unacked > 16 << 10 {
                        frame::put_window_update(&mut reply, 0, self.unacked as u32);
                        frame::put_window_update(&mut reply, head.stream, self.unacked as u32);
                        self.unacked = 0;
                    }
                    let data = frame::unpad(head.flags, &payload)
                        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                    if head.stream == id {
                        body.extend_from_slice(data);
                        done = head.flags & frame::END_STREAM != 0;
                    }
                }
                frame::HEADERS | frame::CONTINUATION => {
                    if head.kind == frame::HEADERS {
                        let frag = frame::headers_fragment(&head, &payload)
                            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?
                            .0;
                        block.extend_from_slice(frag);
                        block_end_stream = head.flags & frame::END_STREAM != 0;
                    } else {
                        block.extend_from_slice(&payload);
                    }
                    if head.flags & frame::END_HEADERS != 0 {
                        let fields = self
                            .decoder
                            .decode_all(&block)
                            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                        block.clear();
                        if head.stream == id {
                            for (n, v) in fields {
                                let v = String::from_utf8_lossy(&v);
                                match &n[..] {
                                    b":status" => resp.http_status = v.parse().unwrap_or(0),
                                    b"grpc-status" => resp.grpc_status = v.parse().ok(),
                                    b"grpc-message" => {
                                        resp.grpc_message = percent_decode(v.as_bytes())
                                    }
                                    _ => {}
                                }
                            }
                            done = block_end_stream;
                        }
                    }
                }
                _ => {}
            }
            if !reply.is_empty() {
                self.io.write_all(&reply)?;
            }
            if done {
                if body.len() >= 5 {
                    resp.message = Some(body[5..].to_vec());
                }
                return Ok(resp);
            }
        }
    }

    /// Send raw bytes (for tests of malformed input).
    pub fn send_raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.io.write_all(bytes)
    }

    /// Read until the server closes the connection; return the GOAWAY
    /// error code it sent, if any.
    pub fn read_goaway(&mut self) -> io::Result<Option<ErrorCodeNumber>> {
        let mut code = None;
        loop {
            while let Some((head, payload, used)) =
                frame::split(&self.input, frame::MAX_MAX_FRAME_SIZE)
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?
            {
                if head.kind == frame::GOAWAY && payload.len() >= 8 {
                    code = Some(frame::u31(&payload[4..8]));
                }
                self.input.drain(..used);
            }
            let mut buf = [0u8; 4096];
            match self.io.read(&mut buf) {
                Ok(0) => return Ok(code),
                Ok(n) => self.input.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return Ok(code),
                Err(e) => return Err(e),
            }
        }
    }
}

/// An HTTP/2 error code as sent on the wire.
pub type ErrorCodeNumber = u32;

/// The wire number of an error code.
pub fn code_number(c: ErrorCode) -> ErrorCodeNumber {
    c as u32
}
