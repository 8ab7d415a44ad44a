use super::*;

/// Encode a reply the way a bus would, for the decoder.
fn reply(serial: u32, sig: &str, body: &[u8]) -> Vec<u8> {
    let mut h = Writer { buf: Vec::new() };
    h.buf.extend_from_slice(&[b'l', 2, 1, 1]);
    h.u32(body.len() as u32);
    h.u32(99);
    let len_at = h.buf.len();
    h.u32(0);
    let start = h.buf.len();
    h.align(8);
    h.buf.push(5);
    h.sig("u");
    h.u32(serial);
    h.align(8);
    h.buf.push(8);
    h.sig("g");
    h.sig(sig);
    let n = (h.buf.len() - start) as u32;
    h.buf[len_at..len_at + 4].copy_from_slice(&n.to_le_bytes());
    h.align(8);
    h.buf.extend_from_slice(body);
    h.buf
}

#[test]
fn call_encoding_matches_the_spec_layout() {
    let m = encode_call(
        7,
        "org.freedesktop.systemd1",
        "/org/freedesktop/systemd1",
        "org.freedesktop.systemd1.Manager",
        "StartUnit",
        "ss",
        &[Value::Str("a.service".into()), Value::Str("replace".into())],
    )
    .unwrap();
    assert_eq!(&m[..4], &[b'l', 1, 0, 1]);
    assert_eq!(u32::from_le_bytes(m[8..12].try_into().unwrap()), 7);
    let fields = u32::from_le_bytes(m[12..16].try_into().unwrap()) as usize;
    let body_at = pad8(16 + fields);
    let body_len = u32::from_le_bytes(m[4..8].try_into().unwrap()) as usize;
    assert_eq!(m.len(), body_at + body_len);
    // Body: "a.service" (len 9) + NUL, padded, "replace".
    assert_eq!(&m[body_at..body_at + 4], &9u32.to_le_bytes());
    assert_eq!(&m[body_at + 4..body_at + 14], b"a.service\0");
    // The message decodes back (as a call it has no reply serial).
    let d = decode_message(&m).unwrap();
    assert_eq!(d.kind, 1);
    assert_eq!(
        d.body,
        vec![Value::Str("a.service".into()), Value::Str("replace".into())]
    );
}

#[test]
fn decodes_nested_replies() {
    // a{sv} with {"Id": <"x.service">, "Job": <(7, "/job/7")>,
    // "RequiredBy": <["a", "b"]>}
    let mut b = Writer { buf: Vec::new() };
    let len_at = b.buf.len();
    b.u32(0);
    b.align(8);
    let start = b.buf.len();
    b.align(8);
    b.string("Id");
    b.sig("s");
    b.string("x.service");
    b.align(8);
    b.string("Job");
    b.sig("(uo)");
    b.align(8);
    b.u32(7);
    b.string("/job/7");
    b.align(8);
    b.string("RequiredBy");
    b.sig("as");
    b.align(4);
    let inner_at = b.buf.len();
    b.u32(0);
    let s0 = b.buf.len();
    b.string("a");
    b.string("b");
    let n = (b.buf.len() - s0) as u32;
    b.buf[inner_at..inner_at + 4].copy_from_slice(&n.to_le_bytes());
    let n = (b.buf.len() - start) as u32;
    b.buf[len_at..len_at + 4].copy_from_slice(&n.to_le_bytes());
    let msg = reply(3, "a{sv}", &b.buf);
    let d = decode_message(&msg).unwrap();
    assert_eq!(d.kind, 2);
    assert_eq!(d.reply_serial, Some(3));
    let Value::Array(entries) = &d.body[0] else {
        panic!("{:?}", d.body)
    };
    assert_eq!(entries.len(), 3);
    let Value::Entry(k, v) = &entries[2] else {
        panic!()
    };
    assert_eq!(k.as_str(), Some("RequiredBy"));
    assert_eq!(v.as_strings(), vec!["a".to_string(), "b".to_string()]);
    let Value::Entry(_, v) = &entries[1] else {
        panic!()
    };
    assert_eq!(
        v.inner(),
        &Value::Struct(vec![Value::U32(7), Value::Path("/job/7".into())])
    );
}

#[test]
fn hostile_input_is_an_error_not_a_panic() {
    let good = reply(1, "s", &[3, 0, 0, 0, b'a', b'b', b'c', 0]);
    for cut in 16..good.len() {
        let mut m = good[..cut].to_vec();
        // Keep the declared lengths: the message is truncated.
        m.resize(cut, 0);
        let _ = decode_message(&m);
    }
    // A string length far beyond the message.
    let bad = reply(1, "s", &[0xff, 0xff, 0xff, 0x7f, 0]);
    assert!(decode_message(&bad).is_err());
    // Deep nesting.
    let sig = format!("{}y", "a".repeat(70));
    let mut body = Vec::new();
    for _ in 0..70 {
        body.extend_from_slice(&1u32.to_le_bytes());
    }
    let _ = decode_message(&reply(1, &sig, &body));
    assert!(encode_call(1, "d", "/p", "i", "m", "s", &[Value::Str("a\0b".into())]).is_err());
}

#[test]
fn addresses() {
    assert_eq!(unescape("/run/dbus/system%5fbus"), "/run/dbus/system_bus");
    assert_eq!(unescape("/a%"), "/a%");
    let e = connect("tcp:host=localhost,port=1").unwrap_err();
    assert!(e.to_string().contains("no unix:path="), "{e}");
    let e = connect("unix:path=/nonexistent/csi-proxy-test-bus").unwrap_err();
    assert!(
        matches!(e, CallError::Io(ref io) if io.kind() == io::ErrorKind::NotFound),
        "{e}"
    );
}
