//! Checks on the real-Windows tier's harness that run here, on Linux, so
//! that mistakes its first run on Windows found (issue 33) do not come
//! back unnoticed:
//! - in `.github/workflows/windows.yml`, every step of the real-Windows job
//!   after the Windows-features step runs `if: ${{ !cancelled() }}` (a
//!   failed features step must not skip the tests);
//! - `.gitattributes` keeps LF in the files tests compare byte for byte or
//!   parse by lines, and the index holds them with LF (the runners check
//!   out with `core.autocrlf=true`);
//! - `scripts/real-windows.ps1` runs the suite with `--no-fail-fast` (a
//!   failing binary must not keep the `real_windows_*` ones from running)
//!   and one test thread (those tests share the host).
//!
//! Each checker is also run against a broken sample, so a check that
//! cannot fail is caught too.
#![cfg(not(windows))]

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// Files that tests compare byte for byte or read line by line.
const EXACT_FILES: &[&str] = &[
    "crates/csi-proxy-api/tests/wire_contract.expected.json",
    "crates/csi-proxy-ffi/include/csi_proxy.h",
    "crates/csi-proxy-host/src/wmi_schema/published.txt",
    "docs/security.md",
];

const NOT_CANCELLED: &str = "if: ${{ !cancelled() }}";

fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// The steps of job `job` in a workflow: each step's lines, keys
/// unindented to the step's own level (`name: ...`, `if: ...`).
fn steps(workflow: &str, job: &str) -> Vec<Vec<String>> {
    let lines: Vec<&str> = workflow.lines().collect();
    let job_line = lines
        .iter()
        .position(|l| l.trim_end() == format!("  {job}:"))
        .unwrap_or_else(|| panic!("no job {job}"));
    let steps_line = (job_line + 1..lines.len())
        .find(|&i| lines[i].trim_end() == "    steps:")
        .unwrap_or_else(|| panic!("job {job} has no steps"));
    let mut out: Vec<Vec<String>> = Vec::new();
    let mut item = None;
    for line in &lines[steps_line + 1..] {
        let t = line.trim_start();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let n = indent(line);
        let item_indent = *item.get_or_insert(n);
        if n < item_indent {
            break;
        }
        if n == item_indent {
            let Some(first) = t.strip_prefix("- ") else {
                break;
            };
            out.push(vec![first.trim_end().to_string()]);
        } else if n >= item_indent + 2 {
            let step = out.last_mut().expect("a step line before the first item");
            step.push(line[item_indent + 2..].trim_end().to_string());
        }
    }
    out
}

/// The names of the steps after the features step that may be skipped by
/// an earlier failure (no `if: ${{ !cancelled() }}` of their own).
fn steps_skipped_after_features(workflow: &str) -> Vec<String> {
    let steps = steps(workflow, "real-windows");
    let name = |s: &Vec<String>| {
        s.iter()
            .find_map(|l| l.strip_prefix("name: "))
            .unwrap_or("(unnamed)")
            .to_string()
    };
    let features = steps
        .iter()
        .position(|s| name(s).starts_with("Windows features"))
        .expect("the real-Windows job has a \"Windows features\" step");
    steps[features + 1..]
        .iter()
        .filter(|s| !s.iter().any(|l| l == NOT_CANCELLED))
        .map(name)
        .collect()
}

#[test]
fn every_step_after_the_features_step_runs_unless_cancelled() {
    let skipped = steps_skipped_after_features(&read(".github/workflows/windows.yml"));
    assert!(
        skipped.is_empty(),
        "steps of .github/workflows/windows.yml after the Windows-features step without `{NOT_CANCELLED}`: {skipped:?}"
    );
}

#[test]
fn the_step_checker_finds_a_step_without_the_condition() {
    let sample = "\
jobs:
  real-windows:
    runs-on: windows-2022
    steps:
      - name: Check out
        uses: actions/checkout@0000000000000000000000000000000000000000
      # a comment
      - name: Windows features (Hyper-V PowerShell)
        run: ./scripts/real-windows.ps1 -Step features
      - name: Tests, MSVC target
        run: |
          ./scripts/real-windows.ps1 -Step tests-msvc
          if: ${{ !cancelled() }}
      - name: Tests, GNU target
        if: ${{ !cancelled() }}
        run: ./scripts/real-windows.ps1 -Step tests-gnu
      - if: ${{ !cancelled() }}
        name: Upload
        uses: actions/upload-artifact@0000000000000000000000000000000000000000
  other:
    steps:
      - name: Not this job
";
    assert_eq!(steps(sample, "real-windows").len(), 5);
    // The MSVC step's `if:` is a line of its script, not a key.
    assert_eq!(
        steps_skipped_after_features(sample),
        vec!["Tests, MSVC target".to_string()]
    );
}

fn git(args: &[&str]) -> Option<String> {
    // CI may run as another user than the checkout's owner: git would
    // refuse the repository as of dubious ownership.
    let out = Command::new("git")
        .args(["-c", "safe.directory=*", "-C"])
        .arg(repo())
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The files whose `git ls-files --eol` line shows CRLF in the index or
/// the work tree, or whose attributes do not say `eol: lf`.
fn crlf_risks(ls_files_eol: &str, check_attr_eol: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in ls_files_eol.lines() {
        let (info, path) = line.split_once('\t').unwrap_or((line, ""));
        if info.split_whitespace().any(|f| f.ends_with("crlf")) {
            out.push(format!("{path}: {info}"));
        }
    }
    for line in check_attr_eol.lines() {
        if !line.ends_with(": eol: lf") {
            out.push(format!("attributes: {line}"));
        }
    }
    out
}

#[test]
fn files_compared_byte_for_byte_are_checked_out_with_lf() {
    assert!(
        repo().join(".gitattributes").is_file(),
        ".gitattributes is missing: a checkout with core.autocrlf=true turns LF into CRLF"
    );
    let Some(eol) = git(&["ls-files", "--eol", "--"]
        .iter()
        .chain(EXACT_FILES)
        .copied()
        .collect::<Vec<_>>())
    else {
        eprintln!("not a git checkout (or no git): the index is not checked");
        return;
    };
    assert_eq!(eol.lines().count(), EXACT_FILES.len(), "untracked: {eol}");
    let attrs = git(&["check-attr", "eol", "--"]
        .iter()
        .chain(EXACT_FILES)
        .copied()
        .collect::<Vec<_>>())
    .expect("git check-attr");
    let risks = crlf_risks(&eol, &attrs);
    assert!(risks.is_empty(), "{risks:#?}");
}

#[test]
fn the_crlf_checker_finds_crlf_and_missing_attributes() {
    let eol = "i/lf    w/crlf  attr/text=auto eol=lf\ta.json\n\
               i/crlf  w/crlf  attr/                 \tb.h\n\
               i/lf    w/lf    attr/text=auto eol=lf\tc.md\n";
    let attrs = "a.json: eol: lf\nb.h: eol: unspecified\nc.md: eol: lf\n";
    let risks = crlf_risks(eol, attrs);
    assert_eq!(risks.len(), 3, "{risks:#?}");
    assert!(risks[0].starts_with("a.json"), "{risks:#?}");
    assert!(risks[1].starts_with("b.h"), "{risks:#?}");
    assert_eq!(risks[2], "attributes: b.h: eol: unspecified");
}

/// The arguments of the tier's `cargo test` (`$cargoArgs = @(...)` in
/// `Step-Tests`), as written: cargo's before `'--'`, the harness's after.
fn tier_cargo_args(script: &str) -> (Vec<String>, Vec<String>) {
    let start = script
        .find("$cargoArgs = @('test'")
        .expect("Step-Tests builds $cargoArgs = @('test', ...)");
    let body = &script[start + "$cargoArgs = @(".len()..];
    let mut depth = 0;
    let end = body
        .char_indices()
        .find_map(|(i, c)| {
            match c {
                '(' => depth += 1,
                ')' if depth == 0 => return Some(i),
                ')' => depth -= 1,
                _ => {}
            }
            None
        })
        .expect("the end of $cargoArgs");
    let body = &body[..end];
    let args: Vec<String> = body
        .split(',')
        .map(|a| a.trim().trim_matches('\'').to_string())
        .collect();
    match args.iter().position(|a| a == "--") {
        Some(i) => (args[..i].to_vec(), args[i + 1..].to_vec()),
        None => (args, Vec::new()),
    }
}

fn tier_command_faults(script: &str) -> Vec<&'static str> {
    let (cargo, harness) = tier_cargo_args(script);
    let mut out = Vec::new();
    if !cargo.iter().any(|a| a == "--no-fail-fast") {
        out.push("cargo test without --no-fail-fast");
    }
    if !harness.iter().any(|a| a == "--test-threads=1") {
        out.push("the test harness without --test-threads=1");
    }
    out
}

#[test]
fn the_tier_runs_every_test_binary_one_test_at_a_time() {
    let faults = tier_command_faults(&read("scripts/real-windows.ps1"));
    assert!(faults.is_empty(), "scripts/real-windows.ps1: {faults:?}");
}

#[test]
fn the_command_checker_finds_missing_flags() {
    let old = "    $cargoArgs = @('test', '--manifest-path', (Join-Path $RepoRoot 'Cargo.toml'), '--workspace',\n\
               \x20       '--locked', '--target', $Target, '--', '--show-output')\n";
    assert_eq!(
        tier_command_faults(old),
        vec![
            "cargo test without --no-fail-fast",
            "the test harness without --test-threads=1"
        ]
    );
    // After '--' the flag goes to the test binaries, not to cargo.
    let swapped =
        "$cargoArgs = @('test', '--workspace', '--', '--no-fail-fast', '--test-threads=1')";
    assert_eq!(
        tier_command_faults(swapped),
        vec!["cargo test without --no-fail-fast"]
    );
}
