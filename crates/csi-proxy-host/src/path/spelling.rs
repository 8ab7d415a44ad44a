//! One spelling of each allowed root: its long form.
//!
//! Windows gives most long names an 8.3 short alias (`RUNNER~1` for
//! `runneradmin`), and an operator can configure a root through one
//! (GitHub's Windows runners have `%TEMP%` = `C:\Users\RUNNER~1\...`). Every
//! comparison with a root is lexical: [`PathPolicy::check`] on client
//! paths, and the host-volume rule on the access paths Windows reports,
//! which are always long. So each root is respelled in its long form at
//! start-up ([`PathPolicy::with_os_long_roots`]), and a client must name
//! paths below it in the long form too (a short component in a client
//! path is refused as outside the roots, as before).
//!
//! The pure part is here: given the OS's long form of a path (Windows:
//! `GetLongPathNameW`), [`long_root`] expands the longest existing leading
//! part of a root and keeps the rest as written. A part that does not exist
//! at start-up cannot be looked up and keeps its spelling (documented in
//! docs/security.md).

use super::{case, rules, shown, Flavor, PathPolicy};
use crate::error::{Error, Result};

/// Could `short` be the 8.3 alias of a different long name? Such aliases
/// always carry a `~` (`PROGRA~1`, wine's `LONGD~6D`).
fn may_be_short_alias(short: &str) -> bool {
    short.contains('~')
}

/// The long form of `root` (normalised, as [`PathPolicy`] keeps it):
/// `long_of(p)` is the OS's long spelling of the existing path `p`, `None`
/// if it cannot say (missing, no access). The longest leading part of the
/// root that `long_of` answers for is expanded; components it spells only
/// in another case keep the configured spelling. An answer that is not
/// the same path with short components expanded (another drive, another
/// number of components, a component that was not a short alias) is
/// refused rather than trusted.
pub fn long_root(
    flavor: Flavor,
    root: &str,
    mut long_of: impl FnMut(&str) -> Option<String>,
) -> Result<String> {
    if flavor != Flavor::Windows {
        return Ok(root.to_string());
    }
    let (drive, comps) = rules::split(flavor, root);
    for n in (1..=comps.len()).rev() {
        let prefix = rules::join(flavor, &drive, &comps[..n]);
        let Some(long) = long_of(&prefix) else {
            continue;
        };
        let refused = || {
            Error::InvalidArgument(format!(
                "allowed root {}: the system spells {} as {}, which is not the same path with its short (8.3) names expanded",
                shown(root),
                shown(&prefix),
                shown(&long)
            ))
        };
        let long = long.trim_end_matches('\\');
        // The whole-path limit is PathPolicy::new's to apply, with its own
        // message.
        let long = rules::normalize(flavor, long, false).map_err(|_| refused())?;
        let (long_drive, long_comps) = rules::split(flavor, &long);
        if !case::eq_ignore_case(&long_drive, &drive) || long_comps.len() != n {
            return Err(refused());
        }
        let mut out = Vec::with_capacity(comps.len());
        for (written, long) in comps[..n].iter().zip(long_comps) {
            if case::eq_ignore_case(written, &long) {
                out.push(written.clone());
            } else if may_be_short_alias(written) {
                out.push(long);
            } else {
                return Err(refused());
            }
        }
        out.extend_from_slice(&comps[n..]);
        return Ok(rules::join(flavor, &drive, &out));
    }
    Ok(root.to_string())
}

impl PathPolicy {
    /// This policy with every root in its long form ([`long_root`] with
    /// `long_of`); roots that turn out to be one are kept once.
    pub fn with_long_roots(&self, mut long_of: impl FnMut(&str) -> Option<String>) -> Result<Self> {
        let roots = self
            .roots
            .iter()
            .map(|r| long_root(self.flavor, r, &mut long_of))
            .collect::<Result<Vec<_>>>()?;
        PathPolicy::new(self.flavor, roots)
    }

    /// This policy with its roots as this OS spells them for good: on
    /// Windows each root's short (8.3) components expanded with
    /// `GetLongPathNameW`; elsewhere unchanged. Run once at start-up, before
    /// the roots are opened or compared (idempotent).
    pub fn with_os_long_roots(&self) -> Result<Self> {
        #[cfg(windows)]
        {
            let long = self.with_long_roots(crate::win::long_path::long_path_name)?;
            for (configured, long) in self.roots.iter().zip(long.roots()) {
                if configured != long {
                    tracing::info!(
                        configured = %configured,
                        long = %long,
                        "allowed root taken in its long form (short names expanded)"
                    );
                }
            }
            Ok(long)
        }
        #[cfg(not(windows))]
        {
            Ok(self.clone())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A file system with `C:\Users\runneradmin\AppData\Local\Temp\k` and
    /// the 8.3 aliases `RUNNER~1` and `APPDAT~1`; answers like
    /// `GetLongPathNameW` (each existing component in its long form).
    fn runner(path: &str) -> Option<String> {
        let aliases: HashMap<&str, &str> = [("runner~1", "runneradmin"), ("appdat~1", "AppData")]
            .into_iter()
            .collect();
        let tree = [
            "c:",
            "users",
            "runneradmin",
            "appdata",
            "local",
            "temp",
            "k",
        ];
        let long: Vec<String> = path
            .split('\\')
            .enumerate()
            .map(|(i, c)| {
                let c = c.to_ascii_lowercase();
                let c = aliases
                    .get(c.as_str())
                    .map_or(c, |l| l.to_ascii_lowercase());
                (tree.get(i) == Some(&c.as_str())).then_some(c)
            })
            .collect::<Option<_>>()?;
        let spelled = [
            "C:",
            "Users",
            "runneradmin",
            "AppData",
            "Local",
            "Temp",
            "k",
        ];
        Some(spelled[..long.len()].join("\\"))
    }

    #[test]
    fn short_components_are_expanded_long_ones_kept_as_written() {
        let cases = [
            (
                r"C:\Users\RUNNER~1\AppData\Local\Temp\k",
                r"C:\Users\runneradmin\AppData\Local\Temp\k",
            ),
            (
                r"c:\users\RUNNER~1\APPDAT~1\local\temp\k",
                r"c:\users\runneradmin\AppData\local\temp\k",
            ),
            (
                r"C:\Users\runneradmin\AppData\Local\Temp\k",
                r"C:\Users\runneradmin\AppData\Local\Temp\k",
            ),
            (r"C:\USERS\RUNNERADMIN", r"C:\USERS\RUNNERADMIN"),
            // Missing below an existing part: that part expanded, the rest
            // kept.
            (
                r"C:\Users\RUNNER~1\AppData\Local\Temp\k\missing\KUBELE~1",
                r"C:\Users\runneradmin\AppData\Local\Temp\k\missing\KUBELE~1",
            ),
            // Nothing the OS can answer for: as written.
            (r"D:\var\lib\KUBELE~1", r"D:\var\lib\KUBELE~1"),
            (r"C:\", r"C:\"),
        ];
        for (root, want) in cases {
            assert_eq!(
                long_root(Flavor::Windows, root, runner).unwrap(),
                want,
                "{root}"
            );
        }
    }

    #[test]
    fn a_policy_of_short_roots_checks_the_long_paths_windows_reports() {
        let short =
            PathPolicy::new(Flavor::Windows, [r"C:\Users\RUNNER~1\AppData\Local\Temp\k"]).unwrap();
        let mount = r"C:\Users\runneradmin\AppData\Local\Temp\k\m0";
        assert!(
            short.check(mount).is_err(),
            "the spelling mismatch this fixes"
        );
        let long = short.with_long_roots(runner).unwrap();
        assert_eq!(long.roots(), [r"C:\Users\runneradmin\AppData\Local\Temp\k"]);
        // Two spellings of one root are kept once.
        let both = PathPolicy::new(
            Flavor::Windows,
            [
                r"C:\Users\RUNNER~1\AppData\Local\Temp\k",
                r"C:\Users\runneradmin\AppData\Local\Temp\k",
            ],
        )
        .unwrap();
        assert_eq!(both.roots().len(), 2);
        assert_eq!(both.with_long_roots(runner).unwrap(), long);
        assert!(!long.check(mount).unwrap().is_root());
        assert!(long
            .check(r"C:\USERS\RUNNERADMIN\appdata\local\temp\K")
            .unwrap()
            .is_root());
        // Client paths spelled short stay outside, as they always were.
        assert!(long
            .check(r"C:\Users\RUNNER~1\AppData\Local\Temp\k\m0")
            .is_err());
        // Idempotent.
        assert_eq!(long.with_long_roots(runner).unwrap(), long);
    }

    #[test]
    fn an_answer_that_is_not_the_same_path_is_refused() {
        let root = r"C:\Users\RUNNER~1\k";
        for answer in [
            r"D:\Users\runneradmin\k",
            r"C:\Users\runneradmin",
            r"C:\Users\runneradmin\k\extra",
            r"C:\Other\runneradmin\k",
            r"\\?\C:\Users\runneradmin\k",
            r"C:\Users\runner..\k",
            "",
        ] {
            let e = long_root(Flavor::Windows, root, |_| Some(answer.to_string())).unwrap_err();
            assert!(matches!(e, Error::InvalidArgument(_)), "{answer}: {e:?}");
            assert!(e.to_string().contains("short (8.3) names"), "{answer}: {e}");
        }
        // The answer's trailing separator is no difference.
        assert_eq!(
            long_root(Flavor::Windows, root, |_| Some(
                r"C:\Users\runneradmin\k\".into()
            ))
            .unwrap(),
            r"C:\Users\runneradmin\k"
        );
    }

    #[test]
    fn a_long_form_past_the_length_limit_fails_the_policy() {
        let root = r"C:\XXXXXX~1\YYYYYY~1\k";
        let long = format!(r"C:\{}\{}\k", "x".repeat(200), "y".repeat(200));
        let short = PathPolicy::new(Flavor::Windows, [root]).unwrap();
        let e = short
            .with_long_roots(|p| (p == root).then(|| long.clone()))
            .unwrap_err();
        assert!(e.to_string().contains("invalid allowed root"), "{e}");
        assert!(e.to_string().contains("longer than 260 bytes"), "{e}");
    }

    #[test]
    fn unix_roots_are_never_respelled() {
        assert_eq!(
            long_root(Flavor::Unix, "/var/lib/KUBELE~1", |_| Some("/x".into())).unwrap(),
            "/var/lib/KUBELE~1"
        );
    }
}
