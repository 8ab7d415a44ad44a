//! The guard: the Windows code that talks to WMI names no class, property,
//! method or parameter, and writes no query, except through
//! `wmi_schema::{names, queries}`, so that the schema check sees all of it.

use std::path::{Path, PathBuf};

/// The source trees of the code that talks to WMI.
const TREES: [&str; 5] = [
    "src/win",
    "src/storage/windows",
    "src/smb",
    "src/iscsi",
    "src/system/windows",
];

/// Text that means a WMI name or query written in place.
const FORBIDDEN: [&str; 18] = [
    "\"MSFT_",
    "\"Win32_",
    "\"CIM_",
    "SELECT ",
    "ASSOCIATORS",
    "\"__PATH\"",
    ".u32(\"",
    ".u16(\"",
    ".u64(\"",
    ".string(\"",
    ".bool(\"",
    ".object(\"",
    ".get(\"",
    ".put(\"",
    "\", Value::",
    "\", Arg::",
    "(\"ReturnValue\"",
    "(\"ExtendedStatus\"",
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if p.is_dir() {
            // Test modules in their own folders: not product code.
            if name != "tests" {
                rust_files(&p, out);
            }
        } else if name.ends_with(".rs") && name != "tests.rs" {
            out.push(p);
        }
    }
}

/// The lines of `text` that break the rule (comments and a trailing
/// `#[cfg(test)] mod tests { ... }` aside).
fn offences(text: &str) -> Vec<(usize, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let t = line.trim_start();
        if t.starts_with("#[cfg(test)]")
            && lines
                .get(i + 1)
                .is_some_and(|n| n.trim_start().starts_with("mod ") && n.trim_end().ends_with('{'))
        {
            break;
        }
        if t.starts_with("//") {
            continue;
        }
        if FORBIDDEN.iter().any(|f| line.contains(f)) {
            out.push((i + 1, line.trim().to_string()));
        }
    }
    out
}

#[test]
fn wmi_schema_guard_no_wmi_name_outside_the_names_module() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for t in TREES {
        rust_files(&root.join(t), &mut files);
    }
    assert!(files.len() >= 10, "{files:?}");
    let mut found = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for (n, line) in offences(&text) {
            found.push(format!(
                "{}:{n}: {line}",
                f.strip_prefix(root).unwrap().display()
            ));
        }
    }
    assert!(
        found.is_empty(),
        "WMI names or queries written outside wmi_schema::{{names, queries}} \
         (declare them there so the schema check covers them):\n  {}",
        found.join("\n  ")
    );
}

#[test]
fn wmi_schema_guard_sees_names_written_in_place() {
    let sample = r#"
        // SELECT in a comment is fine
        let rows = wmi.query("SELECT * FROM MSFT_Disk")?;
        let n = row.u32("Number")?;
        let a = [("Force", Value::Bool(true))];
        let ok = row.read(&disk::NUMBER)?;
        #[cfg(test)]
        mod tests {
            const Q: &str = "SELECT Number FROM MSFT_Disk";
        }
    "#;
    let lines: Vec<usize> = offences(sample).into_iter().map(|(n, _)| n).collect();
    assert_eq!(lines, [3, 4, 5]);
}
