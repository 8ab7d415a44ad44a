//! The two exposition formats: OpenMetrics text (what `prometheus-client`
//! writes) and the Prometheus text format 0.0.4 (what upstream's Go
//! exporter serves unless asked for OpenMetrics, and what older scrapers
//! and parsers expect).

/// An exposition format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `text/plain; version=0.0.4`.
    Prometheus,
    /// `application/openmetrics-text; version=1.0.0`.
    OpenMetrics,
}

impl Format {
    /// The format a scraper asked for in its `Accept` header: OpenMetrics
    /// only when it says it takes it (Prometheus servers do).
    pub fn negotiate(accept: Option<&str>) -> Format {
        match accept {
            Some(a) if a.contains("application/openmetrics-text") => Format::OpenMetrics,
            _ => Format::Prometheus,
        }
    }

    /// The `Content-Type` of a response in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

/// Rewrite OpenMetrics text as Prometheus text: a counter family `x` is
/// described as `x_total` (its samples already carry the suffix), `info`
/// and `unknown` types become `gauge` and `untyped`, and the `# UNIT` and
/// `# EOF` lines go. Sample lines are the same in both formats.
pub(super) fn to_prometheus(open_metrics: &str) -> String {
    let mut out = String::with_capacity(open_metrics.len());
    // A HELP line waits for its TYPE line, which tells the family's name.
    let mut help: Option<(&str, &str)> = None;
    for line in open_metrics.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            flush_help(&mut out, help.take(), None);
            let (name, text) = rest.split_once(' ').unwrap_or((rest, ""));
            help = Some((name, text));
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "untyped"));
            let (renamed, kind) = match kind {
                "counter" => (format!("{name}_total"), "counter"),
                "info" => (format!("{name}_info"), "gauge"),
                "unknown" => (name.to_string(), "untyped"),
                other => (name.to_string(), other),
            };
            match help.take() {
                Some((h, text)) if h == name => {
                    flush_help(&mut out, Some((h, text)), Some(&renamed))
                }
                other => flush_help(&mut out, other, None),
            }
            out.push_str("# TYPE ");
            out.push_str(&renamed);
            out.push(' ');
            out.push_str(kind);
            out.push('\n');
        } else if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        } else {
            flush_help(&mut out, help.take(), None);
            out.push_str(line);
            out.push('\n');
        }
    }
    flush_help(&mut out, help, None);
    out
}

fn flush_help(out: &mut String, help: Option<(&str, &str)>, rename: Option<&str>) {
    if let Some((name, text)) = help {
        out.push_str("# HELP ");
        out.push_str(rename.unwrap_or(name));
        out.push(' ');
        out.push_str(text);
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_info_units_and_eof() {
        let om =
            "# HELP a_requests Requests.\n# TYPE a_requests counter\na_requests_total{x=\"1\"} 3\n\
                  # HELP b Bytes.\n# TYPE b gauge\n# UNIT b bytes\nb 5\n\
                  # HELP c Build.\n# TYPE c info\nc_info{v=\"1\"} 1\n\
                  # TYPE d unknown\nd 1\n# EOF\n";
        assert_eq!(
            to_prometheus(om),
            "# HELP a_requests_total Requests.\n# TYPE a_requests_total counter\na_requests_total{x=\"1\"} 3\n\
             # HELP b Bytes.\n# TYPE b gauge\nb 5\n\
             # HELP c_info Build.\n# TYPE c_info gauge\nc_info{v=\"1\"} 1\n\
             # TYPE d untyped\nd 1\n"
        );
    }

    #[test]
    fn negotiation() {
        assert_eq!(Format::negotiate(None), Format::Prometheus);
        assert_eq!(Format::negotiate(Some("text/plain")), Format::Prometheus);
        let prom = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(Format::negotiate(Some(prom)), Format::OpenMetrics);
    }
}
