//! Human-readable output of any response (as JSON): scalar fields as
//! `name: value` lines, lists of strings one per line, maps and lists of
//! messages as aligned tables, an empty response as `ok`.

use serde_json::{Map, Value};
use std::io::{self, Write};

pub fn human(out: &mut dyn Write, v: &Value) -> io::Result<()> {
    match v {
        Value::Object(o) if o.is_empty() => writeln!(out, "ok"),
        Value::Object(o) => {
            for (name, field) in o {
                match field {
                    Value::Array(items) if items.iter().all(|i| !i.is_object()) => {
                        writeln!(out, "{name}:")?;
                        for i in items {
                            writeln!(out, "  {}", scalar(i))?;
                        }
                    }
                    Value::Array(items) => table(out, name, None, items.iter().map(|i| (None, i)))?,
                    Value::Object(map) => table(
                        out,
                        name,
                        Some("key"),
                        map.iter().map(|(k, v)| (Some(k.as_str()), v)),
                    )?,
                    other => writeln!(out, "{name}: {}", scalar(other))?,
                }
            }
            Ok(())
        }
        other => writeln!(out, "{}", scalar(other)),
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// A table of messages (`rows`), with the map key as first column if any.
fn table<'a>(
    out: &mut dyn Write,
    name: &str,
    key: Option<&str>,
    rows: impl Iterator<Item = (Option<&'a str>, &'a Value)>,
) -> io::Result<()> {
    let rows: Vec<(Option<&str>, &Map<String, Value>)> = rows
        .filter_map(|(k, v)| v.as_object().map(|o| (k, o)))
        .collect();
    let mut columns: Vec<String> = key.map(|k| vec![k.to_string()]).unwrap_or_default();
    for (_, o) in &rows {
        for c in o.keys() {
            if !columns.contains(c) {
                columns.push(c.clone());
            }
        }
    }
    // Status rows read best in this order; other tables keep field order
    // (alphabetical: JSON objects are sorted maps).
    const FIRST: [&str; 6] = ["group", "version", "service", "state", "health", "endpoint"];
    let skip = usize::from(key.is_some());
    columns[skip..].sort_by_key(|c| FIRST.iter().position(|f| f == c).unwrap_or(FIRST.len()));
    let mut cells: Vec<Vec<String>> = vec![columns.iter().map(|c| c.to_uppercase()).collect()];
    let mut sorted = rows;
    // Map keys are disk numbers: order numerically when they are numbers.
    sorted.sort_by_key(|(k, _)| k.map(|k| (k.parse::<u64>().unwrap_or(u64::MAX), k.to_string())));
    for (k, o) in sorted {
        let mut row = Vec::new();
        if key.is_some() {
            row.push(k.unwrap_or_default().to_string());
        }
        for c in columns.iter().skip(usize::from(key.is_some())) {
            row.push(o.get(c).map(scalar).unwrap_or_default());
        }
        cells.push(row);
    }
    writeln!(out, "{name}:")?;
    let widths: Vec<usize> = (0..columns.len())
        .map(|i| {
            cells
                .iter()
                .map(|r| r[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in cells {
        let line: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        writeln!(out, "  {}", line.join("  ").trim_end())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn show(v: Value) -> String {
        let mut out = Vec::new();
        human(&mut out, &v).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn shapes() {
        assert_eq!(show(json!({})), "ok\n");
        assert_eq!(show(json!({"exists": true})), "exists: true\n");
        assert_eq!(
            show(json!({"volume_ids": ["a", "b"]})),
            "volume_ids:\n  a\n  b\n"
        );
        assert_eq!(
            show(
                json!({"disk_locations": {"10": {"Adapter": "0", "Bus": "1"}, "2": {"Adapter": "3", "Bus": "4"}}})
            ),
            "disk_locations:\n  KEY  ADAPTER  BUS\n  2    3        4\n  10   0        1\n"
        );
        assert_eq!(
            show(json!({"target_portals": [{"target_address": "10.0.0.1", "target_port": 3260}]})),
            "target_portals:\n  TARGET_ADDRESS  TARGET_PORT\n  10.0.0.1        3260\n"
        );
    }
}
