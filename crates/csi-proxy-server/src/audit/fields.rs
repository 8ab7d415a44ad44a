//! A request's fields by proto name, as JSON, rendered with the API's own
//! descriptors (no generated code per message: one renderer for all 139
//! methods) from the request **as the server decoded it**: the dispatcher
//! hands over the message its handler decoded with the generated code
//! (prost), encoded again ([`crate::dispatch::Seen`]). That encoding is
//! canonical (unknown fields dropped, a field sent twice merged as the
//! handler merged it, each field once), so what is logged is what ran; the
//! client's own bytes are never parsed here. Anything else (an unknown
//! field, a wire type that does not fit) is refused, not guessed at: the
//! fuzz target `audit_render` checks that every request prost decodes
//! renders, with prost's values. Fields listed in
//! [`csi_proxy_api::secrets::SECRET_FIELDS`] (every version's) are written
//! `"<redacted>"`.
//!
//! proto3 semantics: every declared field is written, with its default when
//! it is absent from the wire (a disk number 0 is a disk number). Strings
//! longer than [`MAX_STRING`] bytes are cut (the length is kept), so a
//! hostile request cannot blow up the audit log more than its own size.

use super::json;
use csi_proxy_api::secrets::{is_secret, REDACTED};
use csi_proxy_api::ApiVersion;
use prost::Message as _;
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{DescriptorProto, FieldDescriptorProto, FileDescriptorProto, FileDescriptorSet};
use std::collections::HashMap;
use std::fmt::Write as _;

/// Longest string value written whole.
pub const MAX_STRING: usize = 4096;
/// Deepest message nesting followed.
const MAX_DEPTH: u32 = 16;

/// The descriptors of the group/versions seen so far (decoded on first use).
#[derive(Default)]
pub struct Schemas {
    files: HashMap<ApiVersion, Option<FileDescriptorProto>>,
}

/// The secret values a request carried, to scrub from error messages.
pub type Secrets = Vec<String>;

impl Schemas {
    /// Append the request of `method` of `api`, as the server decoded it
    /// and encoded it again (`None`: it could not be decoded, nothing ran),
    /// as a JSON object (`null` if there is none); returns the secrets seen.
    pub fn request(
        &mut self,
        out: &mut String,
        api: ApiVersion,
        method: &str,
        bytes: Option<&[u8]>,
    ) -> Secrets {
        let file = self.files.entry(api).or_insert_with(|| {
            let fds = FileDescriptorSet::decode(api.file_descriptor_set()).ok()?;
            fds.file.into_iter().next()
        });
        let mut secrets = Vec::new();
        let (Some(file), Some(bytes)) = (file.as_ref(), bytes) else {
            out.push_str("null");
            return secrets;
        };
        let input = file
            .service
            .iter()
            .flat_map(|s| &s.method)
            .find(|m| m.name() == method)
            .map(|m| m.input_type().to_string());
        let msg = input.as_deref().and_then(|t| find_message(file, t));
        let start = out.len();
        let ok = msg.is_some_and(|m| {
            Decoder {
                file,
                secrets: &mut secrets,
            }
            .message(out, m, bytes, 0)
            .is_some()
        });
        if !ok {
            out.truncate(start);
            out.push_str("null");
        }
        secrets
    }
}

/// The message named `.pkg.Name` or `.pkg.Outer.Inner`.
fn find_message<'a>(file: &'a FileDescriptorProto, full: &str) -> Option<&'a DescriptorProto> {
    let rel = full
        .strip_prefix('.')?
        .strip_prefix(file.package())?
        .strip_prefix('.')?;
    let mut parts = rel.split('.');
    let top = parts.next()?;
    let mut m = file.message_type.iter().find(|m| m.name() == top)?;
    for p in parts {
        m = m.nested_type.iter().find(|n| n.name() == p)?;
    }
    Some(m)
}

/// One field's value as read from the wire.
enum Raw<'a> {
    Varint(u64),
    Fixed64(u64),
    Fixed32(u32),
    Bytes(&'a [u8]),
}

fn varint(b: &mut &[u8]) -> Option<u64> {
    let mut v = 0u64;
    for i in 0..10 {
        let (&byte, rest) = b.split_first()?;
        *b = rest;
        v |= u64::from(byte & 0x7f) << (7 * i);
        if byte < 0x80 {
            return Some(v);
        }
    }
    None
}

fn fields(mut b: &[u8]) -> Option<Vec<(u32, Raw<'_>)>> {
    let mut out = Vec::new();
    while !b.is_empty() {
        let tag = varint(&mut b)?;
        let number = u32::try_from(tag >> 3).ok()?;
        let raw = match tag & 7 {
            0 => Raw::Varint(varint(&mut b)?),
            1 => {
                let (v, rest) = b.split_first_chunk::<8>()?;
                b = rest;
                Raw::Fixed64(u64::from_le_bytes(*v))
            }
            2 => {
                let len = usize::try_from(varint(&mut b)?).ok()?;
                if len > b.len() {
                    return None;
                }
                let (v, rest) = b.split_at(len);
                b = rest;
                Raw::Bytes(v)
            }
            5 => {
                let (v, rest) = b.split_first_chunk::<4>()?;
                b = rest;
                Raw::Fixed32(u32::from_le_bytes(*v))
            }
            _ => return None,
        };
        out.push((number, raw));
    }
    Some(out)
}

struct Decoder<'f, 's> {
    file: &'f FileDescriptorProto,
    secrets: &'s mut Secrets,
}

impl Decoder<'_, '_> {
    fn message(
        &mut self,
        out: &mut String,
        m: &DescriptorProto,
        bytes: &[u8],
        depth: u32,
    ) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        let raw = fields(bytes)?;
        out.push('{');
        for (i, f) in m.field.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            json::string(out, f.name());
            out.push(':');
            let values: Vec<&Raw<'_>> = raw
                .iter()
                .filter(|(n, _)| *n as i32 == f.number())
                .map(|(_, r)| r)
                .collect();
            if is_secret(m.name(), f.name()) {
                for v in &values {
                    if let Raw::Bytes(b) = v {
                        let s = String::from_utf8_lossy(b);
                        if !s.is_empty() {
                            self.secrets.push(s.into_owned());
                        }
                    }
                }
                json::string(out, REDACTED);
                continue;
            }
            if f.label() == Label::Repeated {
                out.push('[');
                let mut first = true;
                for v in values {
                    self.repeated(out, f, v, depth, &mut first)?;
                }
                out.push(']');
            } else {
                match values.last() {
                    Some(v) => self.value(out, f, v, depth)?,
                    None => self.default(out, f),
                }
            }
        }
        out.push('}');
        Some(())
    }

    /// One wire record of a repeated field: a packed run or one element.
    fn repeated(
        &mut self,
        out: &mut String,
        f: &FieldDescriptorProto,
        v: &Raw<'_>,
        depth: u32,
        first: &mut bool,
    ) -> Option<()> {
        let packable = !matches!(
            f.r#type(),
            Type::String | Type::Bytes | Type::Message | Type::Group
        );
        let mut sep = |out: &mut String| {
            if !std::mem::take(first) {
                out.push(',');
            }
        };
        match v {
            Raw::Bytes(mut b) if packable => {
                while !b.is_empty() {
                    let item = match f.r#type() {
                        Type::Double | Type::Fixed64 | Type::Sfixed64 => {
                            let (x, rest) = b.split_first_chunk::<8>()?;
                            b = rest;
                            Raw::Fixed64(u64::from_le_bytes(*x))
                        }
                        Type::Float | Type::Fixed32 | Type::Sfixed32 => {
                            let (x, rest) = b.split_first_chunk::<4>()?;
                            b = rest;
                            Raw::Fixed32(u32::from_le_bytes(*x))
                        }
                        _ => Raw::Varint(varint(&mut b)?),
                    };
                    sep(out);
                    self.value(out, f, &item, depth)?;
                }
                Some(())
            }
            v => {
                sep(out);
                self.value(out, f, v, depth)
            }
        }
    }

    fn value(
        &mut self,
        out: &mut String,
        f: &FieldDescriptorProto,
        v: &Raw<'_>,
        depth: u32,
    ) -> Option<()> {
        match (f.r#type(), v) {
            (Type::Bool, Raw::Varint(x)) => out.push_str(if *x != 0 { "true" } else { "false" }),
            (Type::Int64, Raw::Varint(x)) => write_num(out, *x as i64),
            (Type::Int32, Raw::Varint(x)) => write_num(out, *x as i32),
            (Type::Uint64, Raw::Varint(x)) => write_num(out, *x),
            (Type::Uint32, Raw::Varint(x)) => write_num(out, *x as u32),
            (Type::Sint32 | Type::Sint64, Raw::Varint(x)) => {
                write_num(out, ((*x >> 1) as i64) ^ -((*x & 1) as i64))
            }
            (Type::Enum, Raw::Varint(x)) => self.enum_name(out, f, *x as i32),
            (Type::Fixed64, Raw::Fixed64(x)) => write_num(out, *x),
            (Type::Sfixed64, Raw::Fixed64(x)) => write_num(out, *x as i64),
            (Type::Double, Raw::Fixed64(x)) => write_float(out, f64::from_bits(*x)),
            (Type::Fixed32, Raw::Fixed32(x)) => write_num(out, *x),
            (Type::Sfixed32, Raw::Fixed32(x)) => write_num(out, *x as i32),
            (Type::Float, Raw::Fixed32(x)) => write_float(out, f64::from(f32::from_bits(*x))),
            (Type::String, Raw::Bytes(b)) => capped(out, &String::from_utf8_lossy(b)),
            (Type::Bytes, Raw::Bytes(b)) => {
                let _ = write!(out, "\"<{} bytes>\"", b.len());
            }
            (Type::Message, Raw::Bytes(b)) => {
                let m = find_message(self.file, f.type_name())?;
                self.message(out, m, b, depth + 1)?;
            }
            _ => return None,
        }
        Some(())
    }

    fn default(&mut self, out: &mut String, f: &FieldDescriptorProto) {
        match f.r#type() {
            Type::Bool => out.push_str("false"),
            Type::String => out.push_str("\"\""),
            Type::Bytes => out.push_str("\"<0 bytes>\""),
            Type::Message | Type::Group => out.push_str("null"),
            Type::Enum => self.enum_name(out, f, 0),
            _ => out.push('0'),
        }
    }

    fn enum_name(&mut self, out: &mut String, f: &FieldDescriptorProto, v: i32) {
        let name = f
            .type_name()
            .rsplit('.')
            .next()
            .and_then(|short| {
                let top = self.file.enum_type.iter();
                let nested = self.file.message_type.iter().flat_map(|m| &m.enum_type);
                top.chain(nested).find(|e| e.name() == short)
            })
            .and_then(|e| e.value.iter().find(|x| x.number() == v))
            .map(|x| x.name().to_string());
        match name {
            Some(n) => json::string(out, &n),
            None => write_num(out, v),
        }
    }
}

fn write_num(out: &mut String, v: impl std::fmt::Display) {
    let _ = write!(out, "{v}");
}

fn write_float(out: &mut String, v: f64) {
    if v.is_finite() {
        let _ = write!(out, "{v}");
    } else {
        json::string(out, &v.to_string());
    }
}

/// A string, cut at [`MAX_STRING`] bytes (on a character boundary).
fn capped(out: &mut String, s: &str) {
    if s.len() <= MAX_STRING {
        return json::string(out, s);
    }
    let mut end = MAX_STRING;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    json::string(out, &format!("{}...[{} bytes in all]", &s[..end], s.len()));
}

#[cfg(test)]
mod tests;
