//! The klog line format, output selection and the size-capped file.

use super::*;
use std::ffi::OsString;

/// A `MakeWriter` collecting everything into a shared buffer.
#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Buffer {
    fn text(&self) -> String {
        String::from_utf8(self.0.lock().expect("lock").clone()).expect("utf-8")
    }
}

impl Write for Buffer {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().expect("lock").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Buffer {
    type Writer = Buffer;
    fn make_writer(&'a self) -> Buffer {
        self.clone()
    }
}

fn cli(args: &[&str]) -> Cli {
    let mut argv = vec![OsString::from("csi-proxy")];
    argv.extend(args.iter().map(OsString::from));
    Cli::try_parse_args(argv).expect("test flags parse")
}

fn capture(v: u8, emit: impl FnOnce()) -> String {
    capture_as(LineFormat::Text, v, emit)
}

fn capture_as(format: LineFormat, v: u8, emit: impl FnOnce()) -> String {
    let buf = Buffer::default();
    let filter = filter_for(v, None).expect("filter");
    tracing::subscriber::with_default(subscriber(filter, buf.clone(), format), emit);
    buf.text()
}

#[test]
fn json_line_format() {
    let out = capture_as(LineFormat::Json, 6, || {
        tracing::info!(
            count = 3,
            path = "C:\\a \"b\"",
            ok = true,
            ratio = 0.5,
            "hello {}",
            "world"
        );
        tracing::debug!(code = ?tonic_code(), "debug line");
        tracing::error!(error = %io::Error::other("boom"), "failed");
        let span = tracing::info_span!("request", method = "Mount");
        let _entered = span.enter();
        tracing::warn!("inside");
    });
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    assert_eq!(lines.len(), 4, "{out}");
    let first = &lines[0];
    assert!(first["ts"].as_f64().unwrap() > 1.7e9, "{first}");
    assert!(
        first["caller"].as_str().unwrap().starts_with("tests.rs:"),
        "{first}"
    );
    assert_eq!(first["msg"], "hello world");
    assert_eq!(first["v"], 0);
    assert_eq!(first["count"], 3);
    assert_eq!(first["path"], "C:\\a \"b\"");
    assert_eq!(first["ok"], true);
    assert_eq!(first["ratio"], 0.5);
    assert_eq!(lines[1]["v"], 4);
    assert_eq!(lines[1]["code"], "Some(7)");
    assert_eq!(lines[2]["err"], "boom");
    assert!(lines[2].get("v").is_none(), "error lines carry no v");
    assert_eq!(lines[3]["span"], "method=Mount");
}

fn tonic_code() -> Option<u8> {
    Some(7)
}

/// Checks `Lmmdd hh:mm:ss.uuuuuu <tid> logging.rs:<n>] ` and returns the rest.
fn check_header(line: &str, letter: char) -> &str {
    let b = line.as_bytes();
    assert_eq!(line.chars().next(), Some(letter), "{line}");
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    assert!(digits(1..5), "mmdd: {line}");
    assert_eq!(b[5], b' ', "{line}");
    assert!(
        digits(6..8) && digits(9..11) && digits(12..14) && digits(15..21),
        "{line}"
    );
    assert_eq!(
        (b[8], b[11], b[14], b[21]),
        (b':', b':', b'.', b' '),
        "{line}"
    );
    let month: u32 = line[1..3].parse().expect("month");
    assert!((1..=12).contains(&month), "{line}");
    let rest = line[22..].trim_start();
    let (tid, rest) = rest.split_once(' ').expect("thread id");
    assert!(
        !tid.is_empty() && tid.bytes().all(|c| c.is_ascii_digit()),
        "{line}"
    );
    let (location, rest) = rest.split_once("] ").expect("`] ` separator");
    let (file, lineno) = location.split_once(':').expect("file:line");
    assert_eq!(file, "tests.rs", "{line}");
    assert!(lineno.parse::<u32>().is_ok(), "{line}");
    rest
}

#[test]
fn klog_line_format() {
    let out = capture(0, || {
        tracing::info!(count = 3, path = "C:\\a b", ok = true, "hello {}", "world");
        tracing::warn!(name = "plain", "careful");
        tracing::error!(err = %io::Error::other("boom"), "failed");
        let span = tracing::info_span!("request", method = "Mount");
        let _entered = span.enter();
        tracing::info!("inside");
    });
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    assert_eq!(
        check_header(lines[0], 'I'),
        r#"hello world count=3 path="C:\\a b" ok=true"#
    );
    assert_eq!(check_header(lines[1], 'W'), "careful name=plain");
    assert_eq!(check_header(lines[2], 'E'), "failed err=boom");
    assert_eq!(check_header(lines[3], 'I'), "inside method=Mount");
    assert!(out.ends_with('\n'));
}

/// A client's path holding a newline, a quote and `a=b`, through every way a
/// value reaches a line: a string, `%` (Display), `?` (Debug), the message
/// and a span's fields. One line comes out, with no field but ours.
#[test]
fn klog_values_cannot_forge_a_line_or_a_field() {
    let hostile = "/p\nI0101 00:00:00.000000 1 fake.go:1] forged\" a=b";
    let out = capture(0, || {
        let span = tracing::info_span!("request", path = %hostile, dbg = ?hostile);
        let _entered = span.enter();
        tracing::info!(path = hostile, shown = %hostile, debug = ?hostile, "got {hostile}");
    });
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 1, "{out}");
    let rest = check_header(lines[0], 'I');
    let quoted = r#""/p\nI0101 00:00:00.000000 1 fake.go:1] forged\" a=b""#;
    let debug = r#""\"/p\\nI0101 00:00:00.000000 1 fake.go:1] forged\\\" a=b\"""#;
    assert_eq!(
        rest,
        format!(
            r#"got /p\nI0101 00:00:00.000000 1 fake.go:1] forged" a=b path={quoted} shown={quoted} debug={debug} path={quoted} dbg={debug}"#
        )
    );
}

/// The same values in a JSON line: valid JSON, each value whole.
#[test]
fn json_values_stay_whole() {
    let hostile = "/p\n\" a=b\u{1b}";
    let out = capture_as(LineFormat::Json, 0, || {
        let span = tracing::info_span!("request", path = %hostile);
        let _entered = span.enter();
        tracing::info!(shown = %hostile, "got {hostile}");
    });
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 1, "{out}");
    let line: serde_json::Value = serde_json::from_str(lines[0]).expect("JSON");
    assert_eq!(line["shown"], hostile);
    assert_eq!(line["msg"], format!("got {hostile}"));
    assert_eq!(line["span"], r#"path="/p\n\" a=b\x1b""#);
    assert!(line.get("a").is_none(), "{line}");
}

#[test]
fn verbosity_levels() {
    let emit = || {
        tracing::info!("i");
        tracing::debug!("d");
        tracing::trace!("t");
    };
    let count = |v| capture(v, emit).lines().count();
    assert_eq!(count(0), 1);
    assert_eq!(count(3), 1);
    assert_eq!(count(4), 2);
    assert_eq!(count(5), 2);
    assert_eq!(count(6), 3);
    assert_eq!(default_directives(2), "info,csi_proxy=info");
    assert_eq!(default_directives(5), "info,csi_proxy=debug");
    assert_eq!(default_directives(7), "info,csi_proxy=trace");
    assert_eq!(default_directives(9), "trace,csi_proxy=trace");
}

#[test]
fn rust_log_overrides() {
    let buf = Buffer::default();
    let filter = filter_for(0, Some("debug")).expect("filter");
    tracing::subscriber::with_default(subscriber(filter, buf.clone(), LineFormat::Text), || {
        tracing::debug!("d");
    });
    assert_eq!(buf.text().lines().count(), 1);
    assert!(filter_for(0, Some("  ")).is_ok());
    let err = filter_for(0, Some("=[")).expect_err("bad RUST_LOG");
    assert!(format!("{err:#}").contains("RUST_LOG"), "{err:#}");
}

#[test]
fn size_cap_rotates() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("sub").join("x.log");
    let file = CappedFile::open(&path, 10).expect("open");
    file.write_line(b"aaaa\n").expect("write");
    file.write_line(b"bbbb\n").expect("write");
    assert_eq!(fs::read_to_string(&path).expect("read"), "aaaa\nbbbb\n");
    file.write_line(b"cccc\n").expect("write");
    let rotated = dir.path().join("sub").join("x.log.1");
    assert_eq!(
        fs::read_to_string(&rotated).expect("read .1"),
        "aaaa\nbbbb\n"
    );
    assert_eq!(fs::read_to_string(&path).expect("read"), "cccc\n");
    // A line bigger than the cap still gets written, alone.
    file.write_line(b"0123456789abcdef\n").expect("write");
    file.write_line(b"dd\n").expect("write");
    assert_eq!(
        fs::read_to_string(&rotated).expect("read .1"),
        "0123456789abcdef\n"
    );
    assert_eq!(fs::read_to_string(&path).expect("read"), "dd\n");
}

#[test]
fn reopening_counts_existing_size_and_zero_is_unlimited() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("x.log");
    fs::write(&path, "0123456789").expect("seed");
    let file = CappedFile::open(&path, 12).expect("open");
    file.write_line(b"abc\n").expect("write");
    assert_eq!(fs::read_to_string(&path).expect("read"), "abc\n");
    let unlimited = CappedFile::open(&dir.path().join("u.log"), 0).expect("open");
    for _ in 0..100 {
        unlimited.write_line(b"0123456789\n").expect("write");
    }
    assert!(!dir.path().join("u.log.1").exists());
}

#[test]
fn file_output_when_logtostderr_false() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("logs").join("csi-proxy.log");
    let log_file = format!("-log_file={}", path.display());
    let c = cli(&["-logtostderr=false", &log_file, "-log_file_max_size=1"]);
    let output = output_for(&c).expect("output");
    assert!(!output.stderr);
    let file = output.file.clone().expect("file output");
    assert_eq!(file.cap, 1024 * 1024);
    let guard = LogGuard {
        file: output.file.clone(),
    };
    let filter = filter_for(0, None).expect("filter");
    tracing::subscriber::with_default(subscriber(filter, output, LineFormat::Text), || {
        tracing::info!(pipe = "disk", "serving");
    });
    drop(guard);
    let text = fs::read_to_string(&path).expect("log file");
    assert_eq!(check_header(text.trim_end(), 'I'), "serving pipe=disk");
}

#[test]
fn output_selection() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path().display().to_string();
    let f = dir.path().join("f.log").display().to_string();
    let log_dir = format!("-log_dir={d}");
    let log_file = format!("-log_file={f}");

    let o = output_for(&cli(&[&log_file, &log_dir])).expect("output");
    assert!(
        o.stderr && o.file.is_none(),
        "logtostderr=true ignores files"
    );

    let o = output_for(&cli(&["-logtostderr=false"])).expect("output");
    assert!(o.stderr && o.file.is_none(), "no file configured: stderr");

    let o = output_for(&cli(&["-logtostderr=false", &log_dir])).expect("output");
    assert!(!o.stderr);
    assert_eq!(
        o.file.expect("file").path,
        dir.path().join(LOG_DIR_FILE_NAME)
    );

    let o = output_for(&cli(&[
        "-logtostderr=false",
        &log_dir,
        &log_file,
        "-alsologtostderr",
    ]))
    .expect("output");
    assert!(o.stderr);
    assert_eq!(o.file.expect("file").path, dir.path().join("f.log"));

    let o = output_for(&cli(&["-logtostderr=false", "-log_file="])).expect("output");
    assert!(o.stderr && o.file.is_none(), "empty -log_file is unset");
}

#[test]
fn unopenable_log_file_is_a_clear_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let blocker = dir.path().join("not-a-dir");
    fs::write(&blocker, "").expect("seed");
    let log_file = format!("-log_file={}", blocker.join("x.log").display());
    let err = output_for(&cli(&["-logtostderr=false", &log_file]))
        .err()
        .expect("error");
    assert!(
        format!("{err:#}").starts_with("cannot open log file"),
        "{err:#}"
    );
}
