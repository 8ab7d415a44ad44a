//! The message and key/value fields of one event, shared by the klog text
//! format and the JSON format: each renders [`Body`] its own way.

use std::fmt::{self, Write as _};
use tracing::field::{Field, Visit};
use tracing::Subscriber;
use tracing_subscriber::fmt::{FmtContext, FormatFields, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

/// One field's value, as recorded.
pub(super) enum Value {
    /// A string: klog quotes it when it has to, JSON always.
    Str(String),
    /// A number or a boolean, written as is (valid JSON).
    Plain(String),
    /// Anything else, by its `Debug` text (a JSON string).
    Debug(String),
}

/// The message and fields of one event.
#[derive(Default)]
pub(super) struct Body {
    pub message: String,
    pub fields: Vec<(&'static str, Value)>,
    /// Source location of records bridged from the `log` crate.
    pub log_file: Option<String>,
    pub log_line: Option<u64>,
}

impl Body {
    /// The event's source file (base name) and line; records bridged from
    /// the `log` crate carry their own.
    pub fn location<'a>(&'a self, meta: &'a tracing::Metadata<'_>) -> (&'a str, u64) {
        let file = self
            .log_file
            .as_deref()
            .or(meta.file())
            .map_or("???", base_name);
        let line = self.log_line.or(meta.line().map(u64::from)).unwrap_or(1);
        (file, line)
    }

    fn plain(&mut self, field: &Field, text: String) {
        match field.name() {
            "message" => self.message.push_str(&text),
            name if name.starts_with("log.") => {}
            name => self.fields.push((name, Value::Plain(text))),
        }
    }
}

impl Visit for Body {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "message" => self.message.push_str(value),
            "log.file" => self.log_file = Some(value.to_string()),
            name if name.starts_with("log.") => {}
            name => self.fields.push((name, Value::Str(value.to_string()))),
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        if field.name() == "log.line" {
            self.log_line = Some(value);
        } else {
            self.plain(field, value.to_string());
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.plain(field, value.to_string());
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.plain(field, value.to_string());
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        if value.is_finite() {
            self.plain(field, format!("{value:?}"));
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
            name => self.fields.push((name, Value::Debug(format!("{value:?}")))),
        }
    }
}

/// The formatted fields of the spans around the event, outermost first,
/// separated by spaces (empty when there are none).
pub(super) fn span_fields<S, N>(ctx: &FmtContext<'_, S, N>) -> String
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    let mut out = String::new();
    if let Some(scope) = ctx.event_scope() {
        for span in scope.from_root() {
            let ext = span.extensions();
            if let Some(fields) = ext.get::<FormattedFields<N>>() {
                if !fields.is_empty() {
                    if !out.is_empty() {
                        out.push(' ');
                    }
                    out.push_str(fields);
                }
            }
        }
    }
    out
}

/// The file name of a source path (either separator).
pub(super) fn base_name(path: &str) -> &str {
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_names() {
        assert_eq!(base_name("crates/a/src/x.rs"), "x.rs");
        assert_eq!(base_name(r"C:\src\y.rs"), "y.rs");
        assert_eq!(base_name("z.rs"), "z.rs");
    }
}
