//! klog-compatible logging on top of `tracing`.
//!
//! Lines look like klog's:
//! `I0102 15:04:05.123456    4242 server.rs:42] message key=value`,
//! where the first letter is the severity (`I` info/debug/trace, `W`, `E`);
//! with `-logging-format=json`, like Kubernetes components' JSON lines
//! (`json`). Both render one event's fields read by one visitor (`fields`).
//! Text lines escape what could forge a line or a field (`escape`).
//! Output selection follows klog's `-logtostderr`, `-alsologtostderr`,
//! `-log_file`, `-log_dir` and `-log_file_max_size` flags.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::Context as _;
use tracing::Subscriber;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::EnvFilter;

use crate::cli::Cli;

mod escape;
mod fields;
mod json;
mod klog;
use json::JsonFormat;
use klog::{KlogFields, KlogFormat};

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
    let format = match cli.logging_format.as_str() {
        "json" => LineFormat::Json,
        _ => LineFormat::Text,
    };
    subscriber(filter, output, format)
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

/// The line format (`-logging-format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LineFormat {
    Text,
    Json,
}

impl<S, N> tracing_subscriber::fmt::FormatEvent<S, N> for LineFormat
where
    S: Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    N: for<'a> tracing_subscriber::fmt::FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &tracing_subscriber::fmt::FmtContext<'_, S, N>,
        writer: tracing_subscriber::fmt::format::Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        match self {
            LineFormat::Text => KlogFormat.format_event(ctx, writer, event),
            LineFormat::Json => JsonFormat.format_event(ctx, writer, event),
        }
    }
}

/// The subscriber: `filter`, the line `format`, and `output`.
fn subscriber<W>(filter: EnvFilter, output: W, format: LineFormat) -> impl Subscriber + Send + Sync
where
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .fmt_fields(KlogFields)
        .event_format(format)
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

#[cfg(test)]
mod tests;
