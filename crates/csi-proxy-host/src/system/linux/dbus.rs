//! A minimal D-Bus client: enough of the wire protocol (D-Bus
//! specification, "Message Protocol") for method calls to systemd on the
//! system bus. Little-endian messages, `EXTERNAL` authentication with the
//! process's uid, blocking I/O with a timeout. No process is spawned.
//!
//! The system bus is `$DBUS_SYSTEM_BUS_ADDRESS` when set (the standard
//! override), else `unix:path=/run/dbus/system_bus_socket`; `unix:path=`
//! and `unix:abstract=` addresses are understood.

use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

/// The well-known default system bus socket.
pub const DEFAULT_SYSTEM_BUS: &str = "unix:path=/run/dbus/system_bus_socket";

/// Longest message accepted from the bus (the spec's maximum is 128 MiB; a
/// systemd reply is a few KiB).
const MAX_MESSAGE: usize = 16 << 20;

/// A value in a message body.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Byte(u8),
    Bool(bool),
    I16(i16),
    U16(u16),
    I32(i32),
    U32(u32),
    I64(i64),
    U64(u64),
    Double(f64),
    Str(String),
    Path(String),
    Sig(String),
    UnixFd(u32),
    Array(Vec<Value>),
    Struct(Vec<Value>),
    /// A dict entry `{kv}`.
    Entry(Box<Value>, Box<Value>),
    Variant(Box<Value>),
}

impl Value {
    /// The string of a `s`, `o` or `g` (through variants).
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) | Value::Path(s) | Value::Sig(s) => Some(s),
            Value::Variant(v) => v.as_str(),
            _ => None,
        }
    }

    /// The strings of an `as` (through variants).
    pub fn as_strings(&self) -> Vec<String> {
        match self {
            Value::Array(a) => a
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect(),
            Value::Variant(v) => v.as_strings(),
            _ => Vec::new(),
        }
    }

    /// The contents of a variant (itself otherwise).
    pub fn inner(&self) -> &Value {
        match self {
            Value::Variant(v) => v.inner(),
            v => v,
        }
    }
}

/// Why a call failed.
#[derive(Debug)]
pub enum CallError {
    /// The bus could not be reached or the connection broke.
    Io(io::Error),
    /// The peer answered with a D-Bus error (`name`, first string argument).
    Remote { name: String, message: String },
    /// The bus sent something this client cannot read.
    Protocol(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Io(e) => write!(f, "{e}"),
            CallError::Remote { name, message } => write!(f, "{name}: {message}"),
            CallError::Protocol(m) => write!(f, "D-Bus protocol error: {m}"),
        }
    }
}

impl From<io::Error> for CallError {
    fn from(e: io::Error) -> Self {
        CallError::Io(e)
    }
}

fn proto(m: impl Into<String>) -> CallError {
    CallError::Protocol(m.into())
}

/// The address of the system bus.
pub fn system_bus_address() -> String {
    std::env::var("DBUS_SYSTEM_BUS_ADDRESS")
        .ok()
        .filter(|a| !a.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_SYSTEM_BUS.to_string())
}

/// One authenticated connection to a bus.
#[derive(Debug)]
pub struct Connection {
    stream: UnixStream,
    serial: u32,
}

impl Connection {
    /// Connect to `address` (the first `unix:` entry of a `;` list),
    /// authenticate and say Hello.
    pub fn open(address: &str, timeout: Duration) -> Result<Connection, CallError> {
        let stream = connect(address)?;
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        let mut c = Connection { stream, serial: 0 };
        c.authenticate()?;
        c.call(
            "org.freedesktop.DBus",
            "/org/freedesktop/DBus",
            "org.freedesktop.DBus",
            "Hello",
            "",
            &[],
        )?;
        Ok(c)
    }

    fn authenticate(&mut self) -> Result<(), CallError> {
        let uid = nix::unistd::geteuid().as_raw();
        let hex: String = uid
            .to_string()
            .bytes()
            .map(|b| format!("{b:02x}"))
            .collect();
        self.stream
            .write_all(format!("\0AUTH EXTERNAL {hex}\r\n").as_bytes())?;
        let line = self.read_line()?;
        if !line.starts_with("OK ") {
            return Err(proto(format!(
                "authentication refused: {}",
                line.trim_end()
            )));
        }
        self.stream.write_all(b"BEGIN\r\n")?;
        Ok(())
    }

    fn read_line(&mut self) -> Result<String, CallError> {
        let mut out = Vec::new();
        let mut b = [0u8; 1];
        while !out.ends_with(b"\r\n") {
            if self.stream.read(&mut b)? == 0 {
                return Err(proto("the bus closed the connection during authentication"));
            }
            out.push(b[0]);
            if out.len() > 4096 {
                return Err(proto("authentication line too long"));
            }
        }
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    /// Call `member` and return the reply's body values.
    pub fn call(
        &mut self,
        destination: &str,
        path: &str,
        interface: &str,
        member: &str,
        signature: &str,
        args: &[Value],
    ) -> Result<Vec<Value>, CallError> {
        self.serial = self.serial.wrapping_add(1).max(1);
        let serial = self.serial;
        let msg = encode_call(
            serial,
            destination,
            path,
            interface,
            member,
            signature,
            args,
        )?;
        self.stream.write_all(&msg)?;
        loop {
            let m = self.read_message()?;
            // Signals (NameAcquired, ...) and replies to others are skipped.
            if m.reply_serial != Some(serial) {
                continue;
            }
            return match m.kind {
                2 => Ok(m.body),
                3 => Err(CallError::Remote {
                    name: m.error_name.unwrap_or_default(),
                    message: m
                        .body
                        .first()
                        .and_then(|v| v.as_str())
                        .unwrap_or_default()
                        .to_string(),
                }),
                k => Err(proto(format!("unexpected message type {k} as a reply"))),
            };
        }
    }

    fn read_message(&mut self) -> Result<Message, CallError> {
        let mut fixed = [0u8; 16];
        self.stream.read_exact(&mut fixed)?;
        if fixed[0] != b'l' {
            return Err(proto("big-endian messages are not supported"));
        }
        let body_len = u32::from_le_bytes(fixed[4..8].try_into().expect("4 bytes")) as usize;
        let fields_len = u32::from_le_bytes(fixed[12..16].try_into().expect("4 bytes")) as usize;
        let header_len = 16 + fields_len;
        let total = pad8(header_len)
            .checked_add(body_len)
            .filter(|t| *t <= MAX_MESSAGE)
            .ok_or_else(|| proto("message too large"))?;
        let mut buf = vec![0u8; total];
        buf[..16].copy_from_slice(&fixed);
        self.stream.read_exact(&mut buf[16..])?;
        decode_message(&buf)
    }
}

fn connect(address: &str) -> Result<UnixStream, CallError> {
    for entry in address.split(';') {
        let Some(rest) = entry.strip_prefix("unix:") else {
            continue;
        };
        for kv in rest.split(',') {
            if let Some(p) = kv.strip_prefix("path=") {
                return Ok(UnixStream::connect(unescape(p))?);
            }
            if let Some(name) = kv.strip_prefix("abstract=") {
                use std::os::linux::net::SocketAddrExt;
                let addr = std::os::unix::net::SocketAddr::from_abstract_name(unescape(name))?;
                return Ok(UnixStream::connect_addr(&addr)?);
            }
        }
    }
    Err(CallError::Io(io::Error::new(
        io::ErrorKind::Unsupported,
        format!("no unix:path= or unix:abstract= entry in the bus address {address:?}"),
    )))
}

/// D-Bus address values escape bytes as `%xx`.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn pad8(n: usize) -> usize {
    (n + 7) & !7
}

/// A decoded message.
#[derive(Debug)]
pub struct Message {
    pub kind: u8,
    pub reply_serial: Option<u32>,
    pub error_name: Option<String>,
    pub body: Vec<Value>,
}

// ---- encoding ----

struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    fn align(&mut self, n: usize) {
        while !self.buf.len().is_multiple_of(n) {
            self.buf.push(0);
        }
    }
    fn u32(&mut self, v: u32) {
        self.align(4);
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    fn string(&mut self, s: &str) {
        self.u32(s.len() as u32);
        self.buf.extend_from_slice(s.as_bytes());
        self.buf.push(0);
    }
    fn sig(&mut self, s: &str) {
        self.buf.push(s.len() as u8);
        self.buf.extend_from_slice(s.as_bytes());
        self.buf.push(0);
    }
    fn value(&mut self, v: &Value) -> Result<(), CallError> {
        match v {
            Value::Byte(b) => self.buf.push(*b),
            Value::Bool(b) => self.u32(u32::from(*b)),
            Value::U32(n) => self.u32(*n),
            Value::I32(n) => self.u32(*n as u32),
            Value::Str(s) | Value::Path(s) => {
                if s.contains('\0') {
                    return Err(proto("a string argument contains NUL"));
                }
                self.string(s)
            }
            Value::Sig(s) => self.sig(s),
            other => return Err(proto(format!("encoding {other:?} is not supported"))),
        }
        Ok(())
    }
}

/// Encode a method call.
pub fn encode_call(
    serial: u32,
    destination: &str,
    path: &str,
    interface: &str,
    member: &str,
    signature: &str,
    args: &[Value],
) -> Result<Vec<u8>, CallError> {
    let mut body = Writer { buf: Vec::new() };
    for a in args {
        body.value(a)?;
    }
    let mut h = Writer { buf: Vec::new() };
    h.buf.extend_from_slice(&[b'l', 1, 0, 1]);
    h.u32(body.buf.len() as u32);
    h.u32(serial);
    // The header-field array: its length is patched in afterwards.
    let len_at = h.buf.len();
    h.u32(0);
    let start = h.buf.len();
    let field = |h: &mut Writer, code: u8, sig: &str, v: Value| -> Result<(), CallError> {
        h.align(8);
        h.buf.push(code);
        h.sig(sig);
        h.value(&v)
    };
    field(&mut h, 1, "o", Value::Path(path.into()))?;
    field(&mut h, 2, "s", Value::Str(interface.into()))?;
    field(&mut h, 3, "s", Value::Str(member.into()))?;
    field(&mut h, 6, "s", Value::Str(destination.into()))?;
    if !signature.is_empty() {
        field(&mut h, 8, "g", Value::Sig(signature.into()))?;
    }
    let fields_len = (h.buf.len() - start) as u32;
    h.buf[len_at..len_at + 4].copy_from_slice(&fields_len.to_le_bytes());
    h.align(8);
    h.buf.extend_from_slice(&body.buf);
    Ok(h.buf)
}

// ---- decoding ----

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    /// Nesting depth of the value being decoded (bounded).
    depth: usize,
}

impl<'a> Reader<'a> {
    fn align(&mut self, n: usize) -> Result<(), CallError> {
        let p = (self.pos + n - 1) & !(n - 1);
        if p > self.buf.len() {
            return Err(proto("truncated message"));
        }
        self.pos = p;
        Ok(())
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], CallError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|e| *e <= self.buf.len())
            .ok_or_else(|| proto("truncated message"))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn u32(&mut self) -> Result<u32, CallError> {
        self.align(4)?;
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4")))
    }
    fn string(&mut self) -> Result<String, CallError> {
        let n = self.u32()? as usize;
        let s = self.take(n)?;
        self.take(1)?;
        String::from_utf8(s.to_vec()).map_err(|_| proto("a string is not UTF-8"))
    }
    fn sig(&mut self) -> Result<String, CallError> {
        let n = self.take(1)?[0] as usize;
        let s = self.take(n)?;
        self.take(1)?;
        String::from_utf8(s.to_vec()).map_err(|_| proto("a signature is not UTF-8"))
    }

    /// Decode one complete type from the front of `sig`, returning the rest.
    fn value<'s>(&mut self, sig: &'s str) -> Result<(Value, &'s str), CallError> {
        self.depth += 1;
        if self.depth > 64 {
            return Err(proto("values nested too deeply"));
        }
        let c = sig
            .as_bytes()
            .first()
            .ok_or_else(|| proto("empty signature"))?;
        let rest = &sig[1..];
        let out = match c {
            b'y' => (Value::Byte(self.take(1)?[0]), rest),
            b'b' => (Value::Bool(self.u32()? != 0), rest),
            b'n' | b'q' => {
                self.align(2)?;
                let v = u16::from_le_bytes(self.take(2)?.try_into().expect("2"));
                if *c == b'n' {
                    (Value::I16(v as i16), rest)
                } else {
                    (Value::U16(v), rest)
                }
            }
            b'i' => (Value::I32(self.u32()? as i32), rest),
            b'u' => (Value::U32(self.u32()?), rest),
            b'h' => (Value::UnixFd(self.u32()?), rest),
            b'x' | b't' | b'd' => {
                self.align(8)?;
                let v = u64::from_le_bytes(self.take(8)?.try_into().expect("8"));
                match c {
                    b'x' => (Value::I64(v as i64), rest),
                    b't' => (Value::U64(v), rest),
                    _ => (Value::Double(f64::from_bits(v)), rest),
                }
            }
            b's' => (Value::Str(self.string()?), rest),
            b'o' => (Value::Path(self.string()?), rest),
            b'g' => (Value::Sig(self.sig()?), rest),
            b'v' => {
                let inner = self.sig()?;
                let (v, left) = self.value(&inner)?;
                if !left.is_empty() {
                    return Err(proto("a variant holds more than one type"));
                }
                (Value::Variant(Box::new(v)), rest)
            }
            b'a' => {
                let len = self.u32()? as usize;
                let elem_end = single_type_len(rest)?;
                let elem = &rest[..elem_end];
                self.align(alignment(elem.as_bytes()[0]))?;
                let end = self
                    .pos
                    .checked_add(len)
                    .filter(|e| *e <= self.buf.len())
                    .ok_or_else(|| proto("array runs past the message"))?;
                let mut items = Vec::new();
                while self.pos < end {
                    let (v, _) = self.value(elem)?;
                    items.push(v);
                }
                (Value::Array(items), &rest[elem_end..])
            }
            b'(' => {
                self.align(8)?;
                let mut s = rest;
                let mut items = Vec::new();
                while !s.starts_with(')') {
                    let (v, left) = self.value(s)?;
                    items.push(v);
                    s = left;
                }
                (Value::Struct(items), &s[1..])
            }
            b'{' => {
                self.align(8)?;
                let (k, s) = self.value(rest)?;
                let (v, s) = self.value(s)?;
                let s = s.strip_prefix('}').ok_or_else(|| proto("bad dict entry"))?;
                (Value::Entry(Box::new(k), Box::new(v)), s)
            }
            other => return Err(proto(format!("unknown type code {:?}", *other as char))),
        };
        self.depth -= 1;
        Ok(out)
    }
}

fn alignment(c: u8) -> usize {
    match c {
        b'y' | b'g' | b'v' => 1,
        b'n' | b'q' => 2,
        b'x' | b't' | b'd' | b'(' | b'{' => 8,
        _ => 4,
    }
}

/// Length of the first complete type in `sig`.
fn single_type_len(sig: &str) -> Result<usize, CallError> {
    let b = sig.as_bytes();
    let mut i = 0;
    let mut depth = 0i32;
    loop {
        let c = *b.get(i).ok_or_else(|| proto("incomplete signature"))?;
        i += 1;
        match c {
            b'a' => continue,
            b'(' | b'{' => depth += 1,
            b')' | b'}' => depth -= 1,
            _ => {}
        }
        if depth <= 0 {
            return Ok(i);
        }
    }
}

/// Decode a whole message.
pub fn decode_message(buf: &[u8]) -> Result<Message, CallError> {
    let mut r = Reader {
        buf,
        pos: 12,
        depth: 0,
    };
    let kind = buf[1];
    let fields_end = 16 + u32::from_le_bytes(buf[12..16].try_into().expect("4")) as usize;
    r.pos = 16;
    let mut reply_serial = None;
    let mut error_name = None;
    let mut signature = String::new();
    while r.pos < fields_end {
        r.align(8)?;
        if r.pos >= fields_end {
            break;
        }
        let code = r.take(1)?[0];
        let (v, _) = r.value("v")?;
        match (code, v.inner()) {
            (4, Value::Str(s)) => error_name = Some(s.clone()),
            (5, Value::U32(n)) => reply_serial = Some(*n),
            (8, Value::Sig(s)) => signature = s.clone(),
            _ => {}
        }
    }
    r.pos = pad8(fields_end);
    let mut body = Vec::new();
    let mut s = signature.as_str();
    while !s.is_empty() {
        r.depth = 0;
        let (v, left) = r.value(s)?;
        body.push(v);
        s = left;
    }
    Ok(Message {
        kind,
        reply_serial,
        error_name,
        body,
    })
}

#[cfg(test)]
mod tests;
