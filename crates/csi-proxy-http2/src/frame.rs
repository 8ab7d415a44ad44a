//! HTTP/2 frames (RFC 9113 §4 and §6): splitting a byte stream into frames,
//! checking each frame's fixed layout, and writing the frames a server sends.
//! No I/O and no connection state: the connection (`conn.rs`) decides what a
//! frame means.

/// Frame types.
pub const DATA: u8 = 0x0;
pub const HEADERS: u8 = 0x1;
pub const PRIORITY: u8 = 0x2;
pub const RST_STREAM: u8 = 0x3;
pub const SETTINGS: u8 = 0x4;
pub const PUSH_PROMISE: u8 = 0x5;
pub const PING: u8 = 0x6;
pub const GOAWAY: u8 = 0x7;
pub const WINDOW_UPDATE: u8 = 0x8;
pub const CONTINUATION: u8 = 0x9;
/// The largest stream id (31 bits).
pub const MAX_STREAM_ID: u32 = 0x7fff_ffff;

/// Flags.
pub const END_STREAM: u8 = 0x1;
pub const ACK: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;
pub const PADDED: u8 = 0x8;
pub const PRIORITY_FLAG: u8 = 0x20;

/// Settings identifiers.
pub const SETTINGS_HEADER_TABLE_SIZE: u16 = 0x1;
pub const SETTINGS_ENABLE_PUSH: u16 = 0x2;
pub const SETTINGS_MAX_CONCURRENT_STREAMS: u16 = 0x3;
pub const SETTINGS_INITIAL_WINDOW_SIZE: u16 = 0x4;
pub const SETTINGS_MAX_FRAME_SIZE: u16 = 0x5;
pub const SETTINGS_MAX_HEADER_LIST_SIZE: u16 = 0x6;

/// The client connection preface.
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// Length of a frame header.
pub const HEADER_LEN: usize = 9;
/// The smallest and largest allowed SETTINGS_MAX_FRAME_SIZE.
pub const MIN_MAX_FRAME_SIZE: u32 = 16_384;
pub const MAX_MAX_FRAME_SIZE: u32 = (1 << 24) - 1;
/// The largest flow-control window.
pub const MAX_WINDOW: u32 = (1 << 31) - 1;

/// HTTP/2 error codes (RFC 9113 §7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum ErrorCode {
    NoError = 0x0,
    Protocol = 0x1,
    Internal = 0x2,
    FlowControl = 0x3,
    StreamClosed = 0x5,
    FrameSize = 0x6,
    RefusedStream = 0x7,
    Cancel = 0x8,
    Compression = 0x9,
    EnhanceYourCalm = 0xb,
}

/// A fatal connection error: the connection sends GOAWAY with `code` and closes.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("HTTP/2 {code:?} error: {reason}")]
pub struct ConnError {
    pub code: ErrorCode,
    pub reason: String,
}

impl ConnError {
    pub fn new(code: ErrorCode, reason: impl Into<String>) -> Self {
        ConnError {
            code,
            reason: reason.into(),
        }
    }
}

pub(crate) fn protocol(reason: &str) -> ConnError {
    ConnError::new(ErrorCode::Protocol, reason)
}

pub(crate) fn frame_size(reason: &str) -> ConnError {
    ConnError::new(ErrorCode::FrameSize, reason)
}

/// A frame header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Head {
    pub len: usize,
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
}

/// A frame split off a buffer: header, payload, bytes consumed.
pub type Split<'a> = (Head, &'a [u8], usize);

/// Split the next frame off `buf`: `Ok(None)` if `buf` does not hold a whole
/// frame yet, else the header, the payload and the bytes consumed. A frame
/// longer than `max_len` (our SETTINGS_MAX_FRAME_SIZE) is an error before its
/// payload is even read.
pub fn split(buf: &[u8], max_len: u32) -> Result<Option<Split<'_>>, ConnError> {
    if buf.len() < HEADER_LEN {
        return Ok(None);
    }
    let len = u32::from_be_bytes([0, buf[0], buf[1], buf[2]]);
    if len > max_len {
        return Err(frame_size(&format!(
            "frame of {len} bytes exceeds the maximum frame size {max_len}"
        )));
    }
    let len = len as usize;
    let end = HEADER_LEN + len;
    if buf.len() < end {
        return Ok(None);
    }
    let head = Head {
        len,
        kind: buf[3],
        flags: buf[4],
        // The reserved bit is ignored on receipt.
        stream: u32::from_be_bytes([buf[5], buf[6], buf[7], buf[8]]) & 0x7fff_ffff,
    };
    Ok(Some((head, &buf[HEADER_LEN..end], end)))
}

/// Strip the padding of a DATA or HEADERS payload whose PADDED flag is set.
pub fn unpad(flags: u8, payload: &[u8]) -> Result<&[u8], ConnError> {
    if flags & PADDED == 0 {
        return Ok(payload);
    }
    let (&pad, rest) = payload
        .split_first()
        .ok_or_else(|| frame_size("padded frame without a pad length"))?;
    let pad = pad as usize;
    if pad > rest.len() {
        return Err(protocol("padding is longer than the frame payload"));
    }
    Ok(&rest[..rest.len() - pad])
}

/// The header block fragment of a HEADERS payload, padding and priority
/// fields removed, and whether the priority fields make the stream depend on
/// itself (a stream error).
pub fn headers_fragment<'a>(head: &Head, payload: &'a [u8]) -> Result<(&'a [u8], bool), ConnError> {
    let mut rest = unpad(head.flags, payload)?;
    let mut self_dependent = false;
    if head.flags & PRIORITY_FLAG != 0 {
        if rest.len() < 5 {
            return Err(frame_size("HEADERS priority fields truncated"));
        }
        let dep = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) & 0x7fff_ffff;
        self_dependent = dep == head.stream;
        rest = &rest[5..];
    }
    Ok((rest, self_dependent))
}

/// One setting of a SETTINGS payload.
pub fn settings(payload: &[u8]) -> Result<impl Iterator<Item = (u16, u32)> + '_, ConnError> {
    if !payload.len().is_multiple_of(6) {
        return Err(frame_size("SETTINGS payload is not a multiple of 6 bytes"));
    }
    Ok(payload.chunks_exact(6).map(|c| {
        (
            u16::from_be_bytes([c[0], c[1]]),
            u32::from_be_bytes([c[2], c[3], c[4], c[5]]),
        )
    }))
}

/// A 4-byte big-endian value (RST_STREAM code, WINDOW_UPDATE increment with
/// the reserved bit cleared).
pub fn u31(payload: &[u8]) -> u32 {
    u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]) & 0x7fff_ffff
}

/// Append a frame header.
pub fn put_head(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    debug_assert!(len <= MAX_MAX_FRAME_SIZE as usize);
    let l = (len as u32).to_be_bytes();
    out.extend_from_slice(&[l[1], l[2], l[3], kind, flags]);
    out.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
}

/// Append a whole frame.
pub fn put_frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    put_head(out, payload.len(), kind, flags, stream);
    out.extend_from_slice(payload);
}

/// Append a SETTINGS frame with `values`.
pub fn put_settings(out: &mut Vec<u8>, values: &[(u16, u32)]) {
    put_head(out, values.len() * 6, SETTINGS, 0, 0);
    for (id, v) in values {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&v.to_be_bytes());
    }
}

/// Append a WINDOW_UPDATE frame.
pub fn put_window_update(out: &mut Vec<u8>, stream: u32, increment: u32) {
    put_frame(out, WINDOW_UPDATE, 0, stream, &increment.to_be_bytes());
}

/// Append a RST_STREAM frame.
pub fn put_rst(out: &mut Vec<u8>, stream: u32, code: ErrorCode) {
    put_frame(out, RST_STREAM, 0, stream, &(code as u32).to_be_bytes());
}

/// Append a GOAWAY frame.
pub fn put_goaway(out: &mut Vec<u8>, last_stream: u32, code: ErrorCode, debug: &[u8]) {
    put_head(out, 8 + debug.len(), GOAWAY, 0, 0);
    out.extend_from_slice(&last_stream.to_be_bytes());
    out.extend_from_slice(&(code as u32).to_be_bytes());
    out.extend_from_slice(debug);
}

/// Append a header block as one HEADERS frame and as many CONTINUATION
/// frames as `max_frame` requires.
pub fn put_header_block(
    out: &mut Vec<u8>,
    stream: u32,
    block: &[u8],
    end_stream: bool,
    max_frame: usize,
) {
    let mut chunks = block.chunks(max_frame.max(1));
    let first = chunks.next().unwrap_or(&[]);
    let more = block.len() > first.len();
    let flags = if end_stream { END_STREAM } else { 0 } | if more { 0 } else { END_HEADERS };
    put_frame(out, HEADERS, flags, stream, first);
    let mut rest = chunks.peekable();
    while let Some(c) = rest.next() {
        let flags = if rest.peek().is_none() {
            END_HEADERS
        } else {
            0
        };
        put_frame(out, CONTINUATION, flags, stream, c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_waits_for_whole_frames_and_checks_the_length() {
        let mut f = Vec::new();
        put_frame(&mut f, PING, 0, 0, &[1, 2, 3, 4, 5, 6, 7, 8]);
        for n in 0..f.len() {
            assert_eq!(split(&f[..n], 16_384).unwrap(), None, "{n}");
        }
        let (head, payload, used) = split(&f, 16_384).unwrap().unwrap();
        assert_eq!(
            head,
            Head {
                len: 8,
                kind: PING,
                flags: 0,
                stream: 0
            }
        );
        assert_eq!(payload, &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(used, f.len());
        // The length is checked from the header alone.
        let big = [0x00, 0x40, 0x01, DATA, 0, 0, 0, 0, 1];
        assert_eq!(split(&big, 16_384).unwrap_err().code, ErrorCode::FrameSize);
        // The reserved bit of the stream id is ignored.
        let r = [0, 0, 0, DATA, 0, 0x80, 0, 0, 3];
        assert_eq!(split(&r, 16_384).unwrap().unwrap().0.stream, 3);
    }

    #[test]
    fn padding_and_priority_are_removed() {
        let head = |flags| Head {
            len: 0,
            kind: HEADERS,
            flags,
            stream: 1,
        };
        let p = [2u8, b'a', b'b', 0, 0];
        assert_eq!(unpad(PADDED, &p).unwrap(), b"ab");
        assert_eq!(unpad(0, &p).unwrap(), &p);
        assert!(unpad(PADDED, &[3, 0, 0]).is_err());
        assert!(unpad(PADDED, &[]).is_err());
        let pri = [0, 0, 0, 3, 16, b'x'];
        assert_eq!(
            headers_fragment(&head(PRIORITY_FLAG), &pri).unwrap(),
            (&b"x"[..], false)
        );
        let own = [0x80, 0, 0, 1, 16];
        assert_eq!(
            headers_fragment(&head(PRIORITY_FLAG), &own).unwrap(),
            (&b""[..], true)
        );
        let both = [1u8, 0, 0, 0, 3, 16, b'y', 0];
        assert_eq!(
            headers_fragment(&head(PRIORITY_FLAG | PADDED), &both)
                .unwrap()
                .0,
            b"y"
        );
        assert!(headers_fragment(&head(PRIORITY_FLAG), &[0, 0, 0]).is_err());
    }

    #[test]
    fn header_blocks_are_split_into_continuations() {
        let block: Vec<u8> = (0..40).collect();
        let mut out = Vec::new();
        put_header_block(&mut out, 5, &block, true, 16);
        let mut rest = &out[..];
        let mut kinds = Vec::new();
        let mut joined = Vec::new();
        while let Some((h, p, used)) = split(rest, 16).unwrap() {
            kinds.push((h.kind, h.flags, h.stream));
            joined.extend_from_slice(p);
            rest = &rest[used..];
        }
        assert!(rest.is_empty());
        assert_eq!(
            kinds,
            [
                (HEADERS, END_STREAM, 5),
                (CONTINUATION, 0, 5),
                (CONTINUATION, END_HEADERS, 5)
            ]
        );
        assert_eq!(joined, block);
        let mut one = Vec::new();
        put_header_block(&mut one, 1, b"ab", false, 16);
        assert_eq!(split(&one, 16).unwrap().unwrap().0.flags, END_HEADERS);
    }

    #[test]
    fn settings_payloads_are_whole_entries() {
        let mut f = Vec::new();
        put_settings(&mut f, &[(SETTINGS_INITIAL_WINDOW_SIZE, 7), (9, 1)]);
        let (_, p, _) = split(&f, 16_384).unwrap().unwrap();
        let v: Vec<_> = settings(p).unwrap().collect();
        assert_eq!(v, [(SETTINGS_INITIAL_WINDOW_SIZE, 7), (9, 1)]);
        assert!(settings(&p[..5]).is_err());
    }
}
