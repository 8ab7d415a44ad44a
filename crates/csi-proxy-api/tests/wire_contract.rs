//! Pins the wire contract of every group/version.
//!
//! Each version's compiled `FileDescriptorSet` is rendered into a canonical,
//! deterministic description (package, service, methods with gRPC paths and
//! input/output messages, messages with every field's name, number, type,
//! label and JSON name, enums with their values) and compared with:
//!
//! 1. `tests/wire_contract.expected.json`, checked into the crate. Any change
//!    to the protos that touches the wire shows up as a diff here. To accept
//!    a deliberate change, regenerate the file with
//!    `UPDATE_WIRE_CONTRACT=1 cargo test -p csi-proxy-api --test wire_contract`
//!    and review the diff. Never regenerate it just to make the test pass:
//!    existing clients depend on every byte of this contract.
//! 2. The upstream inventory `shared/upstream-api.json` (outside the
//!    repository, next to it), field by field. Skipped with a note when the
//!    file is absent.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt::Write as _;
use std::path::PathBuf;

use csi_proxy_api::{ApiVersion, API_VERSIONS};
use prost::Message as _;
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{DescriptorProto, FieldDescriptorProto, FileDescriptorProto, FileDescriptorSet};
use serde_json::{json, Value};

const EXPECTED: &str = "tests/wire_contract.expected.json";
const UPDATE_ENV: &str = "UPDATE_WIRE_CONTRACT";

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The single file compiled for `api`.
fn file_of(api: &ApiVersion) -> FileDescriptorProto {
    let fds = FileDescriptorSet::decode(api.file_descriptor_set())
        .unwrap_or_else(|e| panic!("{api}: descriptor does not decode: {e}"));
    let mut files = fds.file;
    assert_eq!(
        files.len(),
        1,
        "{api}: expected one file in the descriptor set"
    );
    files.remove(0)
}

fn scalar_name(t: Type) -> &'static str {
    match t {
        Type::Double => "double",
        Type::Float => "float",
        Type::Int64 => "int64",
        Type::Uint64 => "uint64",
        Type::Int32 => "int32",
        Type::Fixed64 => "fixed64",
        Type::Fixed32 => "fixed32",
        Type::Bool => "bool",
        Type::String => "string",
        Type::Bytes => "bytes",
        Type::Uint32 => "uint32",
        Type::Sfixed32 => "sfixed32",
        Type::Sfixed64 => "sfixed64",
        Type::Sint32 => "sint32",
        Type::Sint64 => "sint64",
        Type::Group => "group",
        Type::Message => "message",
        Type::Enum => "enum",
    }
}

/// Type name relative to the file's package: `.v1.DiskLocation` -> `DiskLocation`.
fn short_type_name(file: &FileDescriptorProto, full: &str) -> String {
    let prefix = format!(".{}.", file.package());
    full.strip_prefix(&prefix)
        .unwrap_or_else(|| panic!("{}: type {full} outside the package", file.name()))
        .to_owned()
}

/// Finds a (possibly nested) message by its package-relative dotted name.
fn find_message<'a>(file: &'a FileDescriptorProto, short: &str) -> Option<&'a DescriptorProto> {
    let mut parts = short.split('.');
    let first = parts.next()?;
    let mut msg = file.message_type.iter().find(|m| m.name() == first)?;
    for part in parts {
        msg = msg.nested_type.iter().find(|m| m.name() == part)?;
    }
    Some(msg)
}

fn is_map_entry(msg: &DescriptorProto) -> bool {
    msg.options
        .as_ref()
        .is_some_and(prost_types::MessageOptions::map_entry)
}

/// Type of a field: scalar name, message/enum short name, or `map<K,V>`.
/// Returns (type, kind, `is_map`) where kind is "message", "enum" or `None`.
fn field_type(
    file: &FileDescriptorProto,
    f: &FieldDescriptorProto,
) -> (String, Option<&'static str>, bool) {
    match f.r#type() {
        Type::Message => {
            let short = short_type_name(file, f.type_name());
            let msg = find_message(file, &short)
                .unwrap_or_else(|| panic!("{}: unknown message {short}", file.name()));
            if is_map_entry(msg) {
                let key = &msg.field[0];
                let value = &msg.field[1];
                assert_eq!((key.name(), key.number()), ("key", 1));
                assert_eq!((value.name(), value.number()), ("value", 2));
                let (k, _, _) = field_type(file, key);
                let (v, _, _) = field_type(file, value);
                (format!("map<{k},{v}>"), None, true)
            } else {
                (short, Some("message"), false)
            }
        }
        Type::Enum => (short_type_name(file, f.type_name()), Some("enum"), false),
        t => (scalar_name(t).to_owned(), None, false),
    }
}

fn label_name(f: &FieldDescriptorProto) -> &'static str {
    match f.label() {
        Label::Optional => "optional",
        Label::Required => "required",
        Label::Repeated => "repeated",
    }
}

fn render_field(file: &FileDescriptorProto, f: &FieldDescriptorProto) -> Value {
    assert!(
        f.oneof_index.is_none(),
        "{}: field {} is in a oneof",
        file.name(),
        f.name()
    );
    assert!(
        !f.proto3_optional(),
        "{}: field {} is proto3 optional",
        file.name(),
        f.name()
    );
    assert!(
        f.options.is_none(),
        "{}: field {} has options",
        file.name(),
        f.name()
    );
    assert!(
        f.default_value.is_none(),
        "{}: field {} has a default",
        file.name(),
        f.name()
    );
    let (ty, kind, map) = field_type(file, f);
    let mut v = json!({
        "name": f.name(),
        "number": f.number(),
        "type": ty,
        "label": label_name(f),
        "json_name": f.json_name(),
    });
    if let Some(kind) = kind {
        v["kind"] = json!(kind);
    }
    if map {
        v["map"] = json!(true);
    }
    v
}

/// Messages in declaration order; nested non-map messages follow their
/// parent as `Parent.Child`; map entry messages are folded into `map<K,V>`.
fn render_messages(
    file: &FileDescriptorProto,
    prefix: &str,
    msgs: &[DescriptorProto],
    out: &mut Vec<Value>,
) {
    for m in msgs {
        if is_map_entry(m) {
            continue;
        }
        assert!(
            m.oneof_decl.is_empty(),
            "{}: {} has a oneof",
            file.name(),
            m.name()
        );
        assert!(m.extension.is_empty() && m.extension_range.is_empty());
        assert!(
            m.enum_type.is_empty(),
            "{}: {} has nested enums",
            file.name(),
            m.name()
        );
        let name = format!("{prefix}{}", m.name());
        let fields: Vec<Value> = m.field.iter().map(|f| render_field(file, f)).collect();
        out.push(json!({ "name": name, "fields": fields }));
        render_messages(file, &format!("{name}."), &m.nested_type, out);
    }
}

/// Canonical description of one group/version.
fn render(api: &ApiVersion) -> Value {
    let file = file_of(api);
    assert_eq!(file.syntax(), "proto3", "{api}");
    assert!(file.dependency.is_empty(), "{api}: imports");
    assert!(
        file.options.is_none(),
        "{api}: file options (e.g. go_package) are not used"
    );
    assert!(file.extension.is_empty(), "{api}: extensions");
    assert_eq!(file.service.len(), 1, "{api}: one service per file");
    let service = &file.service[0];
    assert!(service.options.is_none(), "{api}: service options");

    let methods: Vec<Value> = service
        .method
        .iter()
        .map(|m| {
            assert!(
                !m.client_streaming() && !m.server_streaming(),
                "{api}: {} must be unary",
                m.name()
            );
            assert!(m.options.is_none(), "{api}: {} has options", m.name());
            json!({
                "name": m.name(),
                "grpc_path": format!("/{}.{}/{}", file.package(), service.name(), m.name()),
                "input": short_type_name(&file, m.input_type()),
                "output": short_type_name(&file, m.output_type()),
            })
        })
        .collect();

    let mut messages = Vec::new();
    render_messages(&file, "", &file.message_type, &mut messages);

    let enums: Vec<Value> = file
        .enum_type
        .iter()
        .map(|e| {
            assert!(e.options.is_none(), "{api}: enum {} has options", e.name());
            let values: Vec<Value> = e
                .value
                .iter()
                .map(|v| json!({ "name": v.name(), "number": v.number() }))
                .collect();
            json!({ "name": e.name(), "values": values })
        })
        .collect();

    json!({
        "group": api.group.as_str(),
        "version": api.version,
        "file": file.name(),
        "syntax": file.syntax(),
        "package": file.package(),
        "service": service.name(),
        "methods": methods,
        "messages": messages,
        "enums": enums,
    })
}

fn render_all() -> String {
    let all: Vec<Value> = API_VERSIONS.iter().map(render).collect();
    let mut s = serde_json::to_string_pretty(&Value::Array(all)).expect("serialise");
    s.push('\n');
    s
}

/// Common prefix/suffix diff: enough to point at what changed.
fn text_diff(expected: &str, actual: &str) -> String {
    let e: Vec<&str> = expected.lines().collect();
    let a: Vec<&str> = actual.lines().collect();
    let prefix = e.iter().zip(&a).take_while(|(x, y)| x == y).count();
    let suffix = e[prefix..]
        .iter()
        .rev()
        .zip(a[prefix..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let mut out = format!("first difference at line {}:\n", prefix + 1);
    for line in &e[prefix.saturating_sub(3)..prefix] {
        let _ = writeln!(out, "  {line}");
    }
    for line in e[prefix..e.len() - suffix].iter().take(60) {
        let _ = writeln!(out, "- {line}");
    }
    for line in a[prefix..a.len() - suffix].iter().take(60) {
        let _ = writeln!(out, "+ {line}");
    }
    out
}

#[test]
fn wire_contract_matches_expectation_file() {
    let actual = render_all();
    let path = manifest_dir().join(EXPECTED);
    if std::env::var(UPDATE_ENV).is_ok_and(|v| v == "1") {
        std::fs::write(&path, &actual).expect("write expectation file");
        eprintln!("{UPDATE_ENV}=1: rewrote {}", path.display());
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read {}: {e}; create it on purpose with {UPDATE_ENV}=1",
            path.display()
        )
    });
    assert!(
        expected == actual,
        "the wire contract changed (see {EXPECTED}).\n{}\n\
             If, and only if, this change is deliberate, regenerate the file with \
             {UPDATE_ENV}=1 cargo test -p csi-proxy-api --test wire_contract",
        describe_change(&expected, &actual)
    );
}

/// Names the group/versions whose description changed, with a text diff of
/// each; falls back to a diff of the whole file.
fn describe_change(expected: &str, actual: &str) -> String {
    let parsed: Option<(Vec<Value>, Vec<Value>)> = serde_json::from_str(expected)
        .ok()
        .zip(serde_json::from_str(actual).ok());
    let Some((e, a)) = parsed else {
        return text_diff(expected, actual);
    };
    let id = |v: &Value| {
        format!(
            "{}/{}",
            v["group"].as_str().unwrap_or("?"),
            v["version"].as_str().unwrap_or("?")
        )
    };
    let mut out = String::new();
    if e.len() != a.len() {
        let _ = writeln!(
            out,
            "{} group/versions expected, {} found",
            e.len(),
            a.len()
        );
    }
    for (x, y) in e.iter().zip(&a) {
        if x != y {
            let x_text = serde_json::to_string_pretty(x).unwrap_or_default();
            let y_text = serde_json::to_string_pretty(y).unwrap_or_default();
            let _ = writeln!(out, "--- {} (expected) / +++ {} (actual)", id(x), id(y));
            out.push_str(&text_diff(&x_text, &y_text));
        }
    }
    if out.is_empty() {
        // Same content, different formatting.
        out = text_diff(expected, actual);
    }
    out
}

/// One line per fact, so that two descriptions compare as sets with a
/// readable difference.
fn facts_of_rendering(v: &Value) -> BTreeSet<String> {
    let id = format!(
        "{}/{}",
        v["group"].as_str().unwrap(),
        v["version"].as_str().unwrap()
    );
    let mut out = BTreeSet::new();
    out.insert(format!("{id}: package {}", v["package"].as_str().unwrap()));
    out.insert(format!("{id}: service {}", v["service"].as_str().unwrap()));
    for (i, m) in v["methods"].as_array().unwrap().iter().enumerate() {
        out.insert(format!(
            "{id}: method #{i} {} path={} request={} response={}",
            m["name"].as_str().unwrap(),
            m["grpc_path"].as_str().unwrap(),
            m["input"].as_str().unwrap(),
            m["output"].as_str().unwrap()
        ));
    }
    for m in v["messages"].as_array().unwrap() {
        let name = m["name"].as_str().unwrap();
        out.insert(format!("{id}: message {name}"));
        for (i, f) in m["fields"].as_array().unwrap().iter().enumerate() {
            out.insert(field_fact(&id, name, i, f));
        }
    }
    for e in v["enums"].as_array().unwrap() {
        let name = e["name"].as_str().unwrap();
        out.insert(format!("{id}: enum {name}"));
        for val in e["values"].as_array().unwrap() {
            out.insert(format!(
                "{id}: enum {name} value {}={}",
                val["name"].as_str().unwrap(),
                val["number"].as_i64().unwrap()
            ));
        }
    }
    out
}

fn field_fact(id: &str, message: &str, index: usize, f: &Value) -> String {
    format!(
        "{id}: message {message} field #{index} {} number={} type={} label={} json_name={} map={} kind={}",
        f["name"].as_str().unwrap(),
        f["number"].as_i64().unwrap(),
        f["type"].as_str().unwrap(),
        f["label"].as_str().unwrap(),
        f["json_name"].as_str().unwrap(),
        f.get("map").and_then(Value::as_bool).unwrap_or(false),
        f.get("kind").and_then(Value::as_str).unwrap_or("scalar"),
    )
}

/// The same facts read from one entry of upstream-api.json.
fn facts_of_upstream(u: &Value) -> BTreeSet<String> {
    let id = format!(
        "{}/{}",
        u["group"].as_str().unwrap(),
        u["version"].as_str().unwrap()
    );
    let mut out = BTreeSet::new();
    out.insert(format!(
        "{id}: package {}",
        u["proto_package"].as_str().unwrap()
    ));
    out.insert(format!("{id}: service {}", u["service"].as_str().unwrap()));
    let messages = u["messages"].as_object().unwrap();
    for (i, m) in u["methods"].as_array().unwrap().iter().enumerate() {
        out.insert(format!(
            "{id}: method #{i} {} path={} request={} response={}",
            m["name"].as_str().unwrap(),
            m["grpc_path"].as_str().unwrap(),
            m["request"].as_str().unwrap(),
            m["response"].as_str().unwrap()
        ));
        // The per-method copies of the fields must agree with the messages.
        assert_eq!(
            m["request_fields"],
            messages[m["request"].as_str().unwrap()],
            "{id}"
        );
        assert_eq!(
            m["response_fields"],
            messages[m["response"].as_str().unwrap()],
            "{id}"
        );
    }
    for (name, fields) in messages {
        out.insert(format!("{id}: message {name}"));
        for (i, f) in fields.as_array().unwrap().iter().enumerate() {
            out.insert(field_fact(&id, name, i, f));
        }
    }
    for (name, values) in u["enums"].as_object().unwrap() {
        out.insert(format!("{id}: enum {name}"));
        for (value, number) in values.as_object().unwrap() {
            out.insert(format!(
                "{id}: enum {name} value {value}={}",
                number.as_i64().unwrap()
            ));
        }
    }
    out
}

#[test]
fn wire_contract_matches_upstream_inventory() {
    let path = manifest_dir().join("../../../shared/upstream-api.json");
    let Ok(text) = std::fs::read_to_string(&path) else {
        eprintln!(
            "note: {} not found; upstream comparison skipped",
            path.display()
        );
        return;
    };
    let upstream: Value = serde_json::from_str(&text).expect("upstream-api.json parses");
    let upstream = upstream.as_array().expect("upstream-api.json is an array");

    let ours: BTreeMap<String, Value> = API_VERSIONS
        .iter()
        .map(|a| (a.to_string(), render(a)))
        .collect();
    let theirs: BTreeMap<String, &Value> = upstream
        .iter()
        .map(|u| {
            (
                format!(
                    "{}/{}",
                    u["group"].as_str().unwrap(),
                    u["version"].as_str().unwrap()
                ),
                u,
            )
        })
        .collect();
    assert_eq!(
        ours.keys().collect::<Vec<_>>(),
        theirs.keys().collect::<Vec<_>>(),
        "group/versions differ from upstream"
    );

    let mut problems = Vec::new();
    for (id, v) in &ours {
        let u = theirs[id];
        let pipe = API_VERSIONS
            .iter()
            .find(|a| a.to_string() == *id)
            .unwrap()
            .pipe_name();
        if u["pipe_name"].as_str() != Some(pipe.as_str()) {
            problems.push(format!(
                "{id}: pipe name {pipe} != upstream {}",
                u["pipe_name"]
            ));
        }
        let methods = v["methods"].as_array().unwrap().len() as u64;
        if u["method_count"].as_u64() != Some(methods) {
            problems.push(format!(
                "{id}: {methods} methods, upstream {}",
                u["method_count"]
            ));
        }
        let a = facts_of_rendering(v);
        let b = facts_of_upstream(u);
        problems.extend(b.difference(&a).map(|f| format!("missing:    {f}")));
        problems.extend(a.difference(&b).map(|f| format!("unexpected: {f}")));
    }
    assert!(
        problems.is_empty(),
        "the protos differ from upstream-api.json:\n{}",
        problems.join("\n")
    );
}

#[test]
fn grpc_paths_are_complete_and_unique() {
    let mut all = HashSet::new();
    for api in API_VERSIONS {
        let file = file_of(&api);
        assert_eq!(
            file.package(),
            api.version,
            "{api}: package must be the bare version"
        );
        let service = &file.service[0];
        assert_eq!(service.name(), api.group.service_name(), "{api}");
        assert_eq!(
            format!("{}.{}", file.package(), service.name()),
            api.service()
        );

        let names: Vec<&str> = service
            .method
            .iter()
            .map(prost_types::MethodDescriptorProto::name)
            .collect();
        assert_eq!(
            names,
            api.methods(),
            "{api}: methods() must follow the proto"
        );

        let mut here = HashSet::new();
        for m in &service.method {
            let path = format!("/{}.{}/{}", file.package(), service.name(), m.name());
            assert_eq!(path, api.grpc_path(m.name()));
            assert!(here.insert(path.clone()), "{api}: duplicate path {path}");
            assert!(
                all.insert(path.clone()),
                "{api}: path {path} used by another version"
            );
        }
    }
    assert_eq!(all.len(), 139);
}
