//! The error texts public CSI drivers match, in one table.
//!
//! Some Windows drivers read csi-proxy's error *text* to tell a harmless
//! condition from a failure (aws-ebs-csi-driver: "nothing is mounted at the
//! staging path" from GetVolumeIDFromTargetPath). For each such condition
//! our message keeps its own wording first and then carries, verbatim,
//! every phrase a driver matches, taken from upstream's text for the same
//! condition. The gRPC code is ours (`NotFound`), not upstream's `Unknown`:
//! no driver in the catalog reads the code (docs/compatibility.md).
//!
//! [`PHRASES`] is the one place such phrases live; each names the upstream
//! release it comes from and every driver expression known to match it
//! (copied from the driver's source, with its file and commit). Operations
//! add them with [`message`], only for a condition the backend *proved*
//! (`storage::target::NotMounted`); nothing else in the crate writes them.
//!
//! Every other error of such a call goes through [`neutralise`]: the
//! fragments without which no catalog expression can match
//! ([`DriverMatch::anchors`]) are escaped wherever they appear (a client
//! path naming a directory `because it does not exist`), so a real
//! failure never reads as the harmless condition.

use crate::Error;

/// A condition a driver recognises by its text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Condition {
    /// GetVolumeIDFromTargetPath of an existing directory (or file) that is
    /// not a volume mount point: a plain staging directory.
    NotAMountPoint,
    /// GetVolumeIDFromTargetPath of a path that does not exist (nor, maybe,
    /// its parent).
    TargetMissing,
}

/// How a driver tests the text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatchKind {
    /// Go `regexp.MatchString(expression, err.Error())` (RE2 syntax).
    GoRegexp,
}

/// One driver's test of csi-proxy's error text, copied from its source.
#[derive(Clone, Copy, Debug)]
pub struct DriverMatch {
    /// The driver's repository.
    pub driver: &'static str,
    /// The commit the expression was read at.
    pub commit: &'static str,
    /// The file and function holding it.
    pub file: &'static str,
    pub kind: MatchKind,
    /// The expression, verbatim.
    pub expression: &'static str,
    /// Literal fragments of which every match of `expression` holds at
    /// least one (one per alternative); each holds a space.
    /// [`neutralise`] escapes them, so nothing else can match.
    pub anchors: &'static [&'static str],
    /// What the driver does when it matches.
    pub on_match: &'static str,
}

/// A phrase our message carries for a condition.
#[derive(Clone, Copy, Debug)]
pub struct Phrase {
    pub condition: Condition,
    /// Upstream releases whose message for the condition holds the phrase.
    pub upstream: &'static str,
    /// The phrase; `{path}` stands for the path found missing, shown by
    /// [`phrase_path`] (escaped, no whitespace, capped).
    pub text: &'static str,
    /// The driver expressions it satisfies.
    pub matched_by: &'static [DriverMatch],
}

/// aws-ebs-csi-driver, `handleGetDeviceNameFromMountError`: a match means
/// "no device mounted here" (`"", 0, nil`); NodeStageVolume then mounts,
/// NodeUnstageVolume answers OK. Any other text fails both with Internal.
const AWS_EBS: DriverMatch = DriverMatch {
    driver: "kubernetes-sigs/aws-ebs-csi-driver",
    commit: "429e202e589798e55c0f8ddcc81b2850b7f000d0",
    file: "pkg/mounter/mount_windows.go handleGetDeviceNameFromMountError",
    kind: MatchKind::GoRegexp,
    expression: r"(Get-Item -Path \S+).Target, output: , error: <nil>|because it does not exist",
    anchors: AWS_EBS_ANCHORS,
    on_match: "not mounted: NodeStage mounts, NodeUnstage returns OK",
};

/// amazon-ecs-agent's copy of the EBS driver for Windows
/// (`ecs-agent/daemonimages/csidriver`, csi-proxy client v1.1.3, pipes).
const ECS_AGENT: DriverMatch = DriverMatch {
    driver: "aws/amazon-ecs-agent",
    commit: "8dfceca6cf380a83c3007349317566f2862f0673",
    file: "ecs-agent/daemonimages/csidriver/driver/mount_windows.go GetDeviceNameFromMount",
    kind: MatchKind::GoRegexp,
    expression: r"(Get-Item -Path \S+).Target, output: , error: <nil>|because it does not exist",
    anchors: AWS_EBS_ANCHORS,
    on_match: "not mounted: NodeStage mounts, NodeUnstage returns OK",
};

/// The literal parts of aws-ebs's two alternatives.
const AWS_EBS_ANCHORS: &[&str] = &[", output: , error: <nil>", "because it does not exist"];

/// Every phrase drivers match, per condition.
pub const PHRASES: &[Phrase] = &[
    // Upstream's getTarget ran `(Get-Item -Path $Env:mountpath).Target`;
    // a directory that is no link prints nothing and succeeds.
    Phrase {
        condition: Condition::NotAMountPoint,
        upstream: "v1.2.x, v2.0.0-alpha.1",
        text: "error getting volume from mount. cmd: (Get-Item -Path $Env:mountpath).Target, output: , error: <nil>",
        matched_by: &[AWS_EBS, ECS_AGENT],
    },
    // The same command on a missing path: PowerShell's ItemNotFound error.
    Phrase {
        condition: Condition::TargetMissing,
        upstream: "v1.2.x, v2.0.0-alpha.1",
        text: "Get-Item : Cannot find path '{path}' because it does not exist.",
        matched_by: &[AWS_EBS, ECS_AGENT],
    },
];

/// Bytes of a path shown in a phrase, counted after escaping, before it
/// is cut with `...`.
pub const PHRASE_PATH_BYTES: usize = 512;

/// The longest message of a [`Condition`] (bytes): the gRPC transport
/// sends at most this much text (`csi-proxy-http2`'s `hpack::MAX_MESSAGE`;
/// a test holds them equal), so [`message`] cuts our own wording, never
/// a phrase, to fit; socket and library mode (C ABI, uncut) then carry the
/// same text.
pub const MAX_MESSAGE_BYTES: usize = 2048;

/// A path as a phrase shows it: escaped like our own messages
/// ([`crate::error::escaped`]: single backslashes, format, separator and
/// invisible characters as `\u{..}`), spaces too (so it holds no
/// whitespace: `\S+` spans it, and it cannot add words to the phrase), cut
/// on a character with `...` so that the escaped part holds at most
/// [`PHRASE_PATH_BYTES`].
pub fn phrase_path(path: &str) -> String {
    use crate::error::{escaped, Spaces};
    let whole = escaped(path, Spaces::Escape);
    if whole.len() <= PHRASE_PATH_BYTES {
        return whole;
    }
    // The longest prefix (in characters) whose escaped text fits: each
    // character escapes on its own, so the length grows with the prefix.
    let ends: Vec<usize> = path.char_indices().map(|(i, _)| i).collect();
    let (mut lo, mut hi) = (0, ends.len());
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if escaped(&path[..ends[mid]], Spaces::Escape).len() <= PHRASE_PATH_BYTES {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    format!("{}...", escaped(&path[..ends[lo]], Spaces::Escape))
}

/// Our message `ours` for `condition` at `path` (the path found missing),
/// followed by every phrase of [`PHRASES`] for that condition. `ours` is
/// [`neutralise`]d first: only the phrases carry what drivers match. The
/// whole fits [`MAX_MESSAGE_BYTES`] with every phrase whole: `ours` is cut
/// (with `...`) when it is too long.
pub fn message(condition: Condition, ours: &str, path: &str) -> String {
    let path = phrase_path(path);
    let mut phrases = String::new();
    for p in PHRASES.iter().filter(|p| p.condition == condition) {
        phrases.push_str(&format!(
            " (csi-proxy {} said: {})",
            p.upstream,
            p.text.replace("{path}", &path)
        ));
    }
    let mut out = cut(&neutral_text(ours), MAX_MESSAGE_BYTES - phrases.len());
    out.push_str(&phrases);
    out
}

/// `text` if it holds at most `max` bytes, else its longest prefix ending
/// on a character that fits with `...` after it. (A prefix of text with no
/// anchor holds none, and `...` completes none.)
fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max.saturating_sub(3);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &text[..end])
}

/// Every anchor of the catalog, once each.
fn anchors() -> impl Iterator<Item = &'static str> {
    let mut seen: Vec<&'static str> = Vec::new();
    for p in PHRASES {
        for m in p.matched_by {
            for a in m.anchors {
                if !seen.contains(a) {
                    seen.push(a);
                }
            }
        }
    }
    seen.into_iter()
}

/// `text` with every catalog anchor in it escaped (its whitespace as
/// `\u{..}`), until none is left: no catalog expression matches the result.
/// Text without anchors is returned unchanged.
pub fn neutral_text(text: &str) -> String {
    use crate::error::{escaped, Spaces};
    let mut out = text.to_string();
    // Each round removes at least one space (every anchor holds one), so
    // this ends.
    while let Some(a) = anchors().find(|a| out.contains(a)) {
        out = out.replace(a, &escaped(a, Spaces::Escape));
    }
    out
}

/// `e` with its message [`neutral_text`]ed, kind (and OS error) kept: for
/// every error of a call whose messages drivers match that is not one of
/// the catalog's conditions.
pub fn neutralise(e: Error) -> Error {
    match e {
        Error::InvalidArgument(m) => Error::InvalidArgument(neutral_text(&m)),
        Error::PermissionDenied(m) => Error::PermissionDenied(neutral_text(&m)),
        Error::NotFound(m) => Error::NotFound(neutral_text(&m)),
        Error::AlreadyExists(m) => Error::AlreadyExists(neutral_text(&m)),
        Error::FailedPrecondition(m) => Error::FailedPrecondition(neutral_text(&m)),
        Error::Unimplemented(m) => Error::Unimplemented(neutral_text(&m)),
        Error::Aborted(m) => Error::Aborted(neutral_text(&m)),
        Error::DeadlineExceeded(m) => Error::DeadlineExceeded(neutral_text(&m)),
        Error::Unavailable(m) => Error::Unavailable(neutral_text(&m)),
        Error::Internal(m) => Error::Internal(neutral_text(&m)),
        Error::Io { op, path, source } => {
            let path = neutral_text(&path);
            let text = source.to_string();
            let source = if neutral_text(&text) == text {
                source
            } else {
                // The OS's own text holds an anchor (none known does): its
                // kind (and so the gRPC code) is kept, its text escaped.
                std::io::Error::new(source.kind(), neutral_text(&text))
            };
            Error::Io { op, path, source }
        }
    }
}

/// Every driver expression of the table, once each, with the conditions it
/// must match (for the tests that run them).
pub fn catalog() -> Vec<(DriverMatch, Vec<Condition>)> {
    let mut out: Vec<(DriverMatch, Vec<Condition>)> = Vec::new();
    for p in PHRASES {
        for m in p.matched_by {
            match out
                .iter_mut()
                .find(|(o, _)| o.driver == m.driver && o.file == m.file)
            {
                Some((_, conds)) => conds.push(p.condition),
                None => out.push((*m, vec![p.condition])),
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_wording_comes_first_then_each_phrase_of_the_condition() {
        let m = message(
            Condition::TargetMissing,
            r#"target path "C:\k\x" does not exist"#,
            r"C:\k\x",
        );
        assert!(
            m.starts_with(r#"target path "C:\k\x" does not exist ("#),
            "{m}"
        );
        assert!(
            m.contains(r"Cannot find path 'C:\k\x' because it does not exist."),
            "{m}"
        );
        assert!(!m.contains("Get-Item -Path"), "{m}");
        let m = message(
            Condition::NotAMountPoint,
            "x is not a mount point",
            r"C:\k\x",
        );
        assert!(m.starts_with("x is not a mount point ("), "{m}");
        assert!(!m.contains("because it does not exist"), "{m}");
    }

    #[test]
    fn every_condition_has_a_phrase_and_every_phrase_a_driver() {
        for c in [Condition::NotAMountPoint, Condition::TargetMissing] {
            assert!(PHRASES.iter().any(|p| p.condition == c), "{c:?}");
        }
        for p in PHRASES {
            assert!(!p.matched_by.is_empty(), "{p:?}");
        }
        for (m, conds) in catalog() {
            let re = regex::Regex::new(m.expression).unwrap();
            for c in conds {
                let msg = message(c, "ours", r"C:\var\lib\kubelet\plugins\x\globalmount");
                assert!(re.is_match(&msg), "{} {c:?}: {msg}", m.driver);
                assert!(!re.is_match("ours"), "{}", m.driver);
            }
        }
        assert_eq!(catalog().len(), 2);
        assert!(catalog().iter().all(|(_, c)| c.len() == 2));
    }

    /// Every match of each catalog expression holds one of its anchors:
    /// the phrases do, and no text built from the expression's pieces
    /// matches once neutralised.
    #[test]
    fn anchors_cover_every_alternative() {
        for (m, conds) in catalog() {
            let re = regex::Regex::new(m.expression).unwrap();
            for c in conds {
                let msg = message(c, "ours", "/k/x");
                assert!(m.anchors.iter().any(|a| msg.contains(a)), "{msg}");
                let n = neutral_text(&msg);
                assert!(!re.is_match(&n), "{} still matches {n}", m.driver);
            }
            for a in m.anchors {
                assert!(a.contains(' '), "{a:?}: the escaping needs a space");
            }
        }
    }

    use proptest::strategy::Strategy;

    proptest::proptest! {
        /// Whatever a message is made of (phrases, their pieces, any
        /// characters), no catalog expression matches it neutralised; a
        /// message without anchors is unchanged.
        #[test]
        fn neutralised_text_matches_no_expression(
            parts in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::sample::select(vec![
                        "because it does not exist",
                        "because it does not",
                        " exist",
                        "(Get-Item -Path ",
                        "(Get-Item -Path x).Target, output: , error: <nil>",
                        ", output: , error: <nil>",
                        ", output: ",
                        ", error: <nil>",
                        "\\u{20}",
                        " ",
                        "\"",
                    ]).prop_map(|s: &str| s.to_string()),
                    "[ -~]{0,12}",
                    ".{0,4}",
                ],
                0..12,
            )
        ) {
            let text: String = parts.concat();
            let n = neutral_text(&text);
            for (m, _) in catalog() {
                let re = regex::Regex::new(m.expression).unwrap();
                proptest::prop_assert!(!re.is_match(&n), "{}: {:?} -> {:?}", m.driver, text, n);
            }
            if !anchors().any(|a| text.contains(a)) {
                proptest::prop_assert_eq!(n, text);
            }
        }
    }

    #[test]
    fn neutralise_keeps_kind_and_os_error() {
        let e = neutralise(Error::io(
            "open",
            "/k/because it does not exist",
            std::io::Error::from_raw_os_error(2),
        ));
        assert!(
            matches!(&e, Error::Io { op: "open", source, .. } if source.raw_os_error() == Some(2)),
            "{e:?}"
        );
        assert!(!e.to_string().contains("because it does not exist"), "{e}");
        let e = neutralise(Error::PermissionDenied(
            "x because it does not exist".into(),
        ));
        assert!(
            matches!(&e, Error::PermissionDenied(m) if m == r"x because\u{20}it\u{20}does\u{20}not\u{20}exist"),
            "{e:?}"
        );
    }

    #[test]
    fn the_phrase_path_has_no_whitespace_and_is_capped() {
        let p = phrase_path("C:\\k\\a b\u{202e}\u{2028}\u{200b}\t'\"");
        assert_eq!(p, r"C:\k\a\u{20}b\u{202e}\u{2028}\u{200b}\t'\u{22}");
        let long = "x".repeat(PHRASE_PATH_BYTES + 50);
        assert_eq!(
            phrase_path(&long),
            format!("{}...", "x".repeat(PHRASE_PATH_BYTES))
        );
        assert_eq!(
            phrase_path(&long[..PHRASE_PATH_BYTES]),
            long[..PHRASE_PATH_BYTES]
        );
        // Counted after escaping, cut on a character.
        let z = phrase_path(&"\u{200b}".repeat(200));
        assert_eq!(
            z,
            format!("{}...", r"\u{200b}".repeat(PHRASE_PATH_BYTES / 8))
        );
        let wide = phrase_path(&"\u{20000}".repeat(200));
        assert_eq!(
            wide,
            format!("{}...", "\u{20000}".repeat(PHRASE_PATH_BYTES / 4))
        );
    }

    /// Whatever our wording and the path hold, the message fits the
    /// transport's cut with every phrase whole, and still matches (red
    /// team 43b, finding 2).
    #[test]
    fn the_phrase_survives_the_transport_cut() {
        let paths = [
            "/k/".to_string() + &"\u{20000}".repeat(600),
            "/k/".to_string() + &"\u{200b}".repeat(600),
            "/k/".to_string() + &"\u{4e2d}".repeat(600),
            "/k/".to_string() + &" ".repeat(600),
            "/k/x".to_string(),
        ];
        for path in &paths {
            for ours in [
                String::new(),
                crate::error::escaped(path, crate::error::Spaces::Keep).repeat(3),
                "\u{20000}".repeat(2000),
            ] {
                for (m, conds) in catalog() {
                    let re = regex::Regex::new(m.expression).unwrap();
                    for c in conds {
                        let msg = message(c, &ours, path);
                        assert!(msg.len() <= MAX_MESSAGE_BYTES, "{}", msg.len());
                        assert!(re.is_match(&msg), "{} {c:?}: {msg}", m.driver);
                        let tail = PHRASES
                            .iter()
                            .filter(|p| p.condition == c)
                            .map(|p| p.text.replace("{path}", &phrase_path(path)))
                            .next_back()
                            .unwrap();
                        assert!(msg.ends_with(&format!("{tail})")), "{msg}");
                    }
                }
            }
        }
    }

    /// The messages use the same set: each invisible character is shown
    /// escaped, in our texts and in upstream's phrases.
    #[test]
    fn messages_escape_every_invisible_character() {
        use crate::error::{escaped, quote, Spaces};
        let s = "a\u{2800}b\u{3164}c\u{061C}d\u{E0041}e\u{00AD}";
        let want = r"a\u{2800}b\u{3164}c\u{61c}d\u{e0041}e\u{ad}";
        assert_eq!(escaped(s, Spaces::Keep), want);
        assert_eq!(quote(s), format!("\"{want}\""));
        assert_eq!(super::phrase_path(s), want);
    }
}
