//! Go `flag` syntax in front of clap.
//!
//! Go accepts `-name`, `-name=value` and `--name` alike; clap only knows
//! `--name` for long flags. [`normalize`] rewrites the single-dash forms of
//! known long flags so clap can parse the command lines upstream csi-proxy
//! deployments already use (`-windows-service -log_file=... -v=5`).

use std::ffi::OsString;

/// Rewrites `-name` / `-name=value` to `--name` / `--name=value` when `name`
/// is one of `long_flags`.
///
/// `args[0]` is the program name and is never rewritten. Nothing after a
/// `--` terminator is rewritten. Everything else (values, positionals,
/// `--name`, short flags such as `-h`, unknown names, non-UTF-8 arguments)
/// passes through unchanged, so clap still reports unknown flags.
///
/// A value that itself looks like a known flag (`-log_file -v`) is rewritten
/// too; Go would take it as the value, clap reports a missing value instead.
pub fn normalize(args: Vec<OsString>, long_flags: &[&str]) -> Vec<OsString> {
    let mut out = Vec::with_capacity(args.len());
    let mut terminated = false;
    for (i, arg) in args.into_iter().enumerate() {
        if i == 0 || terminated {
            out.push(arg);
            continue;
        }
        if arg == "--" {
            terminated = true;
            out.push(arg);
            continue;
        }
        out.push(rewrite(arg, long_flags));
    }
    out
}

/// Rewrites one argument if it is a single-dash form of a known long flag.
fn rewrite(arg: OsString, long_flags: &[&str]) -> OsString {
    let Some(s) = arg.to_str() else {
        return arg;
    };
    let Some(rest) = s.strip_prefix('-') else {
        return arg;
    };
    if rest.starts_with('-') {
        return arg;
    }
    let name = rest.split_once('=').map_or(rest, |(name, _)| name);
    if name.is_empty() || !long_flags.contains(&name) {
        return arg;
    }
    let mut rewritten = OsString::with_capacity(s.len() + 1);
    rewritten.push("-");
    rewritten.push(s);
    rewritten
}

#[cfg(test)]
mod tests {
    use super::*;

    const FLAGS: &[&str] = &["kubelet-path", "v", "windows-service", "log_file", "help"];

    fn run(args: &[&str]) -> Vec<String> {
        let args = args.iter().map(OsString::from).collect();
        normalize(args, FLAGS)
            .into_iter()
            .map(|a| a.into_string().expect("utf-8 in tests"))
            .collect()
    }

    #[test]
    fn table() {
        let cases: &[(&[&str], &[&str])] = &[
            // (input after the program name, expected output after it)
            (&[], &[]),
            (&["-kubelet-path", "D:\\k"], &["--kubelet-path", "D:\\k"]),
            (&["-kubelet-path=D:\\k"], &["--kubelet-path=D:\\k"]),
            (&["--kubelet-path=D:\\k"], &["--kubelet-path=D:\\k"]),
            (&["-v=4"], &["--v=4"]),
            (&["-v", "4"], &["--v", "4"]),
            (&["-v=a=b"], &["--v=a=b"]),
            (&["-windows-service"], &["--windows-service"]),
            (&["-windows-service=false"], &["--windows-service=false"]),
            (&["-help"], &["--help"]),
            // Unknown names, short flags and odd shapes stay as they are.
            (&["-unknown=1"], &["-unknown=1"]),
            (&["-h"], &["-h"]),
            (&["-V"], &["-V"]),
            (&["-"], &["-"]),
            (&["-=x"], &["-=x"]),
            (&["---v"], &["---v"]),
            (&["--v"], &["--v"]),
            (&["v"], &["v"]),
            (&["-kubelet-pathX"], &["-kubelet-pathX"]),
            // Values and positionals are left alone.
            (&["-log_file", "C:\\l.log"], &["--log_file", "C:\\l.log"]),
            (&["positional", "-v=1"], &["positional", "--v=1"]),
            // Nothing after `--` is rewritten.
            (&["-v=1", "--", "-v=2"], &["--v=1", "--", "-v=2"]),
            (&["--", "--", "-v"], &["--", "--", "-v"]),
        ];
        for (input, expected) in cases {
            let mut args = vec!["csi-proxy"];
            args.extend_from_slice(input);
            let mut want = vec!["csi-proxy".to_string()];
            want.extend(expected.iter().map(|s| s.to_string()));
            assert_eq!(run(&args), want, "input {input:?}");
        }
    }

    #[test]
    fn program_name_is_never_rewritten() {
        assert_eq!(run(&["-v"]), vec!["-v"]);
    }

    #[cfg(unix)]
    #[test]
    fn non_utf8_passes_through() {
        use std::os::unix::ffi::OsStringExt;
        let odd = OsString::from_vec(vec![b'-', b'v', 0xff]);
        let out = normalize(vec!["p".into(), odd.clone()], FLAGS);
        assert_eq!(out, vec![OsString::from("p"), odd]);
    }
}
