//! klog-compatible logging on top of `tracing`.
//!
//! Lines look like klog's:
//! `I0102 15:04:05.123456    4242 server.rs:42] message key=value`,
//! where the first letter is the severity (`I` info/debug/trace, `W`, `E`).
//! Output selection follows klog's `-logtostderr`, `-alsologtostderr`,
//! `-log_file`, `-log_dir` and `-log_file_max_size` flags.

use std::fmt::{self, Write as _};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields, MakeWriter};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::EnvFilter;

use crate::cli::Cli;

/// File name used under `-log_dir` when `-log_file` is not given.
pub const LOG_DIR_FILE_NAME: &str = "csi-proxy.log";

static VERBOSITY: AtomicU8 = AtomicU8::new(0);

/// The klog `-v` level given to [`init`] (0 before it runs).
pub fn verbosity() -> u8 {
    VERBOSITY.load(Ordering::Relaxed)
}

/// Keeps the log file open; flushes it when dropped. Hold it for the life of
/// the process.
#[must_use = "dropping the guard flushes the log; keep it until exit"]
pub struct LogGuard {
    file: Option<Arc<CappedFile>>,
}

impl Drop for LogGuard {
    fn drop(&mut self) {
        if let Some(file) = &self.file {
            file.sync();
        }
        let _ = io::stderr().flush();
    }
}

/// Installs the global klog-style logger described by `cli`.
///
/// Verbosity: `-v` 0-3 logs INFO, 4-5 DEBUG, 6 and more TRACE for the
/// csi-proxy crates; other crates stay at INFO below `-v=8`. A non-empty
/// `RUST_LOG` replaces this filter. Also routes `log` records to `tracing`.
pub fn init(cli: &Cli) -> anyhow::Result<LogGuard> {
    let rust_log = std::env::var("RUST_LOG").ok();
    let filter = filter_for(cli.v, rust_log.as_deref())?;
    let output = output_for(cli)?;
    let guard = LogGuard {
        file: output.file.clone(),
    };
    VERBOSITY.store(cli.v, Ordering::Relaxed);
    subscriber(filter, output)
        .try_init()
        .context("cannot install the logger (one is already installed)")?;
    Ok(guard)
}

/// The level filter for `-v`, or `RUST_LOG` when it is set and non-empty.
fn filter_for(v: u8, rust_log: Option<&str>) -> anyhow::Result<EnvFilter> {
    match rust_log.map(str::trim).filter(|s| !s.is_empty()) {
        Some(directives) => EnvFilter::try_new(directives)
            .with_context(|| format!("invalid RUST_LOG {directives:?}")),
        None => EnvFilter::try_new(default_directives(v))
            .context("internal error: bad default log filter"),
    }
}

/// `EnvFilter` directives for klog verbosity `v`.
fn default_directives(v: u8) -> String {
    let ours = match v {
        0..=3 => "info",
        4..=5 => "debug",
        _ => "trace",
    };
    let others = if v >= 8 { ours } else { "info" };
    // Target prefixes match every `csi_proxy*` crate.
    format!("{others},csi_proxy={ours}")
}

/// Where log lines go.
#[derive(Clone)]
struct Output {
    stderr: bool,
    file: Option<Arc<CappedFile>>,
}

/// Picks the outputs like klog: stderr only while `-logtostderr` (default);
/// otherwise `-log_file`, else `<log_dir>/csi-proxy.log`, else stderr; plus
/// stderr with `-alsologtostderr`.
fn output_for(cli: &Cli) -> anyhow::Result<Output> {
    let non_empty = |p: &Option<PathBuf>| p.clone().filter(|p| !p.as_os_str().is_empty());
    let path = if cli.logtostderr {
        None
    } else {
        non_empty(&cli.log_file)
            .or_else(|| non_empty(&cli.log_dir).map(|d| d.join(LOG_DIR_FILE_NAME)))
    };
    let file = match path {
        Some(path) => {
            let cap = cli.log_file_max_size.saturating_mul(1024 * 1024);
            let file = CappedFile::open(&path, cap)
                .with_context(|| format!("cannot open log file {}", path.display()))?;
            Some(Arc::new(file))
        }
        None => None,
    };
    Ok(Output {
        stderr: file.is_none() || cli.alsologtostderr,
        file,
    })
}

/// The subscriber: `filter`, the klog line format, and `output`.
fn subscriber<W>(filter: EnvFilter, output: W) -> impl Subscriber + Send + Sync
where
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .event_format(KlogFormat)
        .with_writer(output)
        .finish()
}

impl<'a> MakeWriter<'a> for Output {
    type Writer = OutputWriter<'a>;

    fn make_writer(&'a self) -> Self::Writer {
        OutputWriter(self)
    }
}

/// Writes each formatted line to stderr and/or the file.
struct OutputWriter<'a>(&'a Output);

impl Write for OutputWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.0.stderr {
            // Nothing useful can be done if stderr is gone (e.g. a service).
            let _ = io::stderr().lock().write_all(buf);
        }
        if let Some(file) = &self.0.file {
            file.write_line(buf)?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.0.stderr {
            let _ = io::stderr().flush();
        }
        Ok(())
    }
}

/// An append-only log file that, when the next write would exceed `cap`
/// bytes, renames itself to `<file>.1` (replacing an older one) and starts
/// over. Each line goes straight to the OS (no user-space buffer), so the
/// last lines survive a kill.
struct CappedFile {
    path: PathBuf,
    /// Maximum size in bytes; 0 is unlimited.
    cap: u64,
    state: Mutex<FileState>,
}

struct FileState {
    /// `None` after a failed reopen; retried on the next write.
    file: Option<File>,
    size: u64,
}

impl CappedFile {
    /// Opens (appending) or creates `path` and its parent directories.
    fn open(path: &Path, cap: u64) -> io::Result<CappedFile> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir)?;
        }
        let file = open_append(path)?;
        let size = file.metadata()?.len();
        Ok(CappedFile {
            path: path.to_path_buf(),
            cap,
            state: Mutex::new(FileState {
                file: Some(file),
                size,
            }),
        })
    }

    fn rotated_path(&self) -> PathBuf {
        let mut name = self.path.clone().into_os_string();
        name.push(".1");
        PathBuf::from(name)
    }

    fn write_line(&self, buf: &[u8]) -> io::Result<()> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let len = buf.len() as u64;
        if self.cap > 0 && state.size > 0 && state.size.saturating_add(len) > self.cap {
            self.rotate(&mut state);
        }
        if state.file.is_none() {
            let file = open_append(&self.path)?;
            state.size = file.metadata()?.len();
            state.file = Some(file);
        }
        if let Some(file) = state.file.as_mut() {
            file.write_all(buf)?;
            state.size = state.size.saturating_add(len);
        }
        Ok(())
    }

    /// Moves the full file to `<file>.1`. If that fails (e.g. another process
    /// holds `<file>.1` open on Windows), truncates the file instead so the
    /// cap still holds.
    fn rotate(&self, state: &mut FileState) {
        // Close first: Windows cannot always rename an open file.
        state.file = None;
        state.size = 0;
        let rotated = self.rotated_path();
        let reopened = match fs::rename(&self.path, &rotated) {
            Ok(()) => open_append(&self.path),
            Err(err) => {
                let _ = writeln!(
                    io::stderr(),
                    "csi-proxy: cannot rotate log file {} to {}: {err}; truncating it",
                    self.path.display(),
                    rotated.display()
                );
                OpenOptions::new()
                    .write(true)
                    .truncate(true)
                    .create(true)
                    .open(&self.path)
            }
        };
        // On failure `file` stays `None` and the next write retries.
        state.file = reopened.ok();
    }

    fn sync(&self) {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(file) = &state.file {
            let _ = file.sync_all();
        }
    }
}

fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

/// klog line format:
/// `Lmmdd hh:mm:ss.uuuuuu threadid file:line] message key=value ...`,
/// followed by the fields of the enclosing spans.
struct KlogFormat;

impl<S, N> FormatEvent<S, N> for KlogFormat
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        let mut body = Body::default();
        event.record(&mut body);

        let letter = match *meta.level() {
            Level::ERROR => 'E',
            Level::WARN => 'W',
            _ => 'I',
        };
        let file = body
            .log_file
            .as_deref()
            .or(meta.file())
            .map_or("???", base_name);
        let line = body.log_line.or(meta.line().map(u64::from)).unwrap_or(1);
        let t = Stamp::now();
        write!(
            writer,
            "{letter}{:02}{:02} {:02}:{:02}:{:02}.{:06} {:>7} {file}:{line}] {}{}",
            t.month,
            t.day,
            t.hour,
            t.minute,
            t.second,
            t.micros,
            thread_id(),
            body.message,
            body.fields,
        )?;
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                let ext = span.extensions();
                if let Some(fields) = ext.get::<FormattedFields<N>>() {
                    if !fields.is_empty() {
                        write!(writer, " {fields}")?;
                    }
                }
            }
        }
        writeln!(writer)
    }
}

/// The message and ` key=value` fields of one event.
#[derive(Default)]
struct Body {
    message: String,
    fields: String,
    /// Source location of records bridged from the `log` crate.
    log_file: Option<String>,
    log_line: Option<u64>,
}

impl Visit for Body {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "message" => self.message.push_str(value),
            "log.file" => self.log_file = Some(value.to_string()),
            name if name.starts_with("log.") => {}
            name => {
                if needs_quotes(value) {
                    let _ = write!(self.fields, " {name}={value:?}");
                } else {
                    let _ = write!(self.fields, " {name}={value}");
                }
            }
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        if field.name() == "log.line" {
            self.log_line = Some(value);
        } else {
            self.record_debug(field, &value);
        }
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.record_str(field, &value.to_string());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        match field.name() {
            "message" => {
                let _ = write!(self.message, "{value:?}");
            }
            name if name.starts_with("log.") => {}
            name => {
                let _ = write!(self.fields, " {name}={value:?}");
            }
        }
    }
}

fn needs_quotes(value: &str) -> bool {
    value.is_empty()
        || value
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '"' || c == '=')
}

fn base_name(path: &str) -> &str {
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

/// OS thread id (Linux `gettid`, Windows `GetCurrentThreadId`; the process
/// id elsewhere), cached per thread.
fn thread_id() -> u64 {
    thread_local! {
        static TID: u64 = os_thread_id();
    }
    TID.with(|tid| *tid)
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn os_thread_id() -> u64 {
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    u64::try_from(tid).unwrap_or_default()
}

#[cfg(windows)]
fn os_thread_id() -> u64 {
    // SAFETY: GetCurrentThreadId has no preconditions.
    u64::from(unsafe { windows_sys::Win32::System::Threading::GetCurrentThreadId() })
}

#[cfg(not(any(target_os = "linux", target_os = "android", windows)))]
fn os_thread_id() -> u64 {
    u64::from(std::process::id())
}

/// Wall-clock time split for the klog header: local time on Unix, UTC on
/// Windows (and if the local time is unavailable).
struct Stamp {
    month: u32,
    day: u32,
    hour: u32,
    minute: u32,
    second: u32,
    micros: u32,
}

impl Stamp {
    fn now() -> Stamp {
        let since_epoch = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let secs = i64::try_from(since_epoch.as_secs()).unwrap_or(i64::MAX);
        let micros = since_epoch.subsec_micros();
        #[cfg(unix)]
        if let Some(stamp) = Stamp::local(secs, micros) {
            return stamp;
        }
        Stamp::utc(secs, micros)
    }

    #[cfg(unix)]
    fn local(secs: i64, micros: u32) -> Option<Stamp> {
        let t = libc::time_t::try_from(secs).ok()?;
        // SAFETY: `tm` is plain data; localtime_r only writes into it.
        let mut tm: libc::tm = unsafe { std::mem::zeroed() };
        // SAFETY: both pointers are valid for the call.
        let res = unsafe { libc::localtime_r(&t, &mut tm) };
        if res.is_null() {
            return None;
        }
        let field = |v: libc::c_int| u32::try_from(v).ok();
        Some(Stamp {
            month: field(tm.tm_mon)? + 1,
            day: field(tm.tm_mday)?,
            hour: field(tm.tm_hour)?,
            minute: field(tm.tm_min)?,
            second: field(tm.tm_sec)?,
            micros,
        })
    }

    /// UTC from seconds since the Unix epoch (Howard Hinnant's
    /// civil-from-days algorithm).
    fn utc(secs: i64, micros: u32) -> Stamp {
        let days = secs.div_euclid(86_400);
        let sod = secs.rem_euclid(86_400);
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z - era * 146_097;
        let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = doy - (153 * mp + 2) / 5 + 1;
        let month = if mp < 10 { mp + 3 } else { mp - 9 };
        // All values are small and non-negative by construction.
        let small = |v: i64| u32::try_from(v).unwrap_or_default();
        Stamp {
            month: small(month),
            day: small(day),
            hour: small(sod / 3_600),
            minute: small(sod % 3_600 / 60),
            second: small(sod % 60),
            micros,
        }
    }
}

#[cfg(test)]
mod tests {
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
        let buf = Buffer::default();
        let filter = filter_for(v, None).expect("filter");
        tracing::subscriber::with_default(subscriber(filter, buf.clone()), emit);
        buf.text()
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
        assert_eq!(file, "logging.rs", "{line}");
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
        assert_eq!(check_header(lines[3], 'I'), r#"inside method="Mount""#);
        assert!(out.ends_with('\n'));
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
        tracing::subscriber::with_default(subscriber(filter, buf.clone()), || {
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
        tracing::subscriber::with_default(subscriber(filter, output), || {
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

    #[test]
    fn utc_conversion() {
        let s = Stamp::utc(0, 7);
        assert_eq!(
            (s.month, s.day, s.hour, s.minute, s.second, s.micros),
            (1, 1, 0, 0, 0, 7)
        );
        // 2024-02-29T23:59:58Z
        let s = Stamp::utc(1_709_251_198, 0);
        assert_eq!(
            (s.month, s.day, s.hour, s.minute, s.second),
            (2, 29, 23, 59, 58)
        );
        // 2000-03-01T12:34:56Z
        let s = Stamp::utc(951_914_096, 0);
        assert_eq!(
            (s.month, s.day, s.hour, s.minute, s.second),
            (3, 1, 12, 34, 56)
        );
    }

    #[test]
    fn base_names() {
        assert_eq!(base_name("crates/a/src/x.rs"), "x.rs");
        assert_eq!(base_name(r"C:\src\y.rs"), "y.rs");
        assert_eq!(base_name("z.rs"), "z.rs");
    }
}
