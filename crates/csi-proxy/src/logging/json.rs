//! The JSON line format of Kubernetes components (`-logging-format=json`):
//! `{"ts":1732680075.123456,"caller":"run.rs:42","msg":"...","v":0,"key":"value",...}`.
//! `ts` is seconds since the Unix epoch; info lines carry their verbosity
//! `v` (INFO and WARN 0, DEBUG 4, TRACE 6, as `-v` maps them), error lines
//! carry none and their `error` field is written `err`, as klog's
//! `ErrorS` does. Span fields follow under `span`.

use super::fields::{Body, Value};
use super::klog::base_name;
use std::fmt::{self, Write as _};
use std::time::{SystemTime, UNIX_EPOCH};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

pub(super) struct JsonFormat;

fn string(out: &mut String, s: &str) {
    csi_proxy_server::audit::json::string(out, s);
}

impl<S, N> FormatEvent<S, N> for JsonFormat
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
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let mut out = String::with_capacity(256);
        let _ = write!(
            out,
            "{{\"ts\":{}.{:06},\"caller\":",
            now.as_secs(),
            now.subsec_micros()
        );
        let file = body
            .log_file
            .as_deref()
            .or(meta.file())
            .map_or("???", base_name);
        let line = body.log_line.or(meta.line().map(u64::from)).unwrap_or(1);
        string(&mut out, &format!("{file}:{line}"));
        out.push_str(",\"msg\":");
        string(&mut out, &body.message);
        let error = *meta.level() == Level::ERROR;
        if !error {
            let v = match *meta.level() {
                Level::DEBUG => 4,
                Level::TRACE => 6,
                _ => 0,
            };
            let _ = write!(out, ",\"v\":{v}");
        }
        for (name, value) in &body.fields {
            out.push(',');
            let key = if error && *name == "error" {
                "err"
            } else {
                name
            };
            string(&mut out, key);
            out.push(':');
            match value {
                Value::Plain(v) => out.push_str(v),
                Value::Str(v) | Value::Debug(v) => string(&mut out, v),
            }
        }
        let mut spans = String::new();
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                let ext = span.extensions();
                if let Some(fields) = ext.get::<FormattedFields<N>>() {
                    if !fields.is_empty() {
                        if !spans.is_empty() {
                            spans.push(' ');
                        }
                        spans.push_str(fields);
                    }
                }
            }
        }
        if !spans.is_empty() {
            out.push_str(",\"span\":");
            string(&mut out, &spans);
        }
        out.push('}');
        writeln!(writer, "{out}")
    }
}
