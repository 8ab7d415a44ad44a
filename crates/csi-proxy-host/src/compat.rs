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
//! add them with [`message`]; nothing else in the crate writes them.

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
    /// What the driver does when it matches.
    pub on_match: &'static str,
}

/// A phrase our message carries for a condition.
#[derive(Clone, Copy, Debug)]
pub struct Phrase {
    pub condition: Condition,
    /// Upstream releases whose message for the condition holds the phrase.
    pub upstream: &'static str,
    /// The phrase; `{path}` stands for the target path as the client sent it.
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
    on_match: "not mounted: NodeStage mounts, NodeUnstage returns OK",
};

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

/// Our message `ours` for `condition` at `path`, followed by every phrase
/// of [`PHRASES`] for that condition.
pub fn message(condition: Condition, ours: &str, path: &str) -> String {
    let mut out = ours.to_string();
    for p in PHRASES.iter().filter(|p| p.condition == condition) {
        out.push_str(&format!(
            " (csi-proxy {} said: {})",
            p.upstream,
            p.text.replace("{path}", path)
        ));
    }
    out
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
}
