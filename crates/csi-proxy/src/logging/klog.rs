//! The klog line format.

use std::fmt::{self, Write as _};
use std::time::{SystemTime, UNIX_EPOCH};

use super::escape;
use super::fields::{span_fields, Body, Value};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// klog line format:
/// `Lmmdd hh:mm:ss.uuuuuu threadid file:line] message key=value ...`,
/// followed by the fields of the enclosing spans; the message escaped and
/// the values quoted as they need ([`escape`]).
pub(super) struct KlogFormat;

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
        let (file, line) = body.location(meta);
        let t = Stamp::now();
        let mut text = String::with_capacity(128);
        escape::message(&mut text, file);
        let _ = write!(text, ":{line}] ");
        escape::message(&mut text, &body.message);
        klog_fields(&mut text, &body);
        write!(
            writer,
            "{letter}{:02}{:02} {:02}:{:02}:{:02}.{:06} {:>7} {text}",
            t.month,
            t.day,
            t.hour,
            t.minute,
            t.second,
            t.micros,
            thread_id(),
        )?;
        let spans = span_fields(ctx);
        if !spans.is_empty() {
            write!(writer, " {spans}")?;
        }
        writeln!(writer)
    }
}

/// ` key=value` for every field, values escaped and quoted as they need
/// ([`escape::value`]); numbers and booleans as they are.
fn klog_fields(out: &mut String, body: &Body) {
    for (name, value) in &body.fields {
        out.push(' ');
        out.push_str(name);
        out.push('=');
        match value {
            Value::Plain(v) => out.push_str(v),
            Value::Str(v) | Value::Debug(v) => escape::value(out, v),
        }
    }
}

/// The fields of a span, as the text of [`klog_fields`] (separated by
/// spaces), kept by the subscriber for [`span_fields`]. Replaces
/// tracing-subscriber's default, which writes `%` and `?` values raw.
pub(super) struct KlogFields;

impl<'w> FormatFields<'w> for KlogFields {
    fn format_fields<R: RecordFields>(&self, mut writer: Writer<'w>, fields: R) -> fmt::Result {
        let mut body = Body::default();
        fields.record(&mut body);
        let mut out = String::new();
        if !body.message.is_empty() {
            body.fields.insert(
                0,
                ("message", Value::Str(std::mem::take(&mut body.message))),
            );
        }
        klog_fields(&mut out, &body);
        writer.write_str(out.trim_start_matches(' '))
    }
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
        csi_proxy_host::time_format::local(secs).map(|c| Stamp::of(c, micros))
    }

    /// UTC from seconds since the Unix epoch.
    fn utc(secs: i64, micros: u32) -> Stamp {
        Stamp::of(csi_proxy_host::time_format::civil(secs), micros)
    }

    fn of(c: csi_proxy_host::time_format::Civil, micros: u32) -> Stamp {
        Stamp {
            month: c.month,
            day: c.day,
            hour: c.hour,
            minute: c.minute,
            second: c.second,
            micros,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
