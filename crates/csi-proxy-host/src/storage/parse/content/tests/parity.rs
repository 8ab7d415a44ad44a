//! Parity with libblkid by construction: every type in `blkid-types.txt`
//! (made from util-linux's sources by scripts/blkid-types.sh) has a probe
//! or a documented reason in `probes::NOT_PROBED`.

use super::super::probes::{ALL, NOT_PROBED};
use super::super::Class;

const TYPES: &str = include_str!("../blkid-types.txt");

fn listed() -> Vec<(&'static str, &'static str)> {
    TYPES
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let mut w = l.split_whitespace();
            let chain = w.next().unwrap();
            let name = w.next().unwrap_or_else(|| panic!("no name in {l:?}"));
            assert!(matches!(chain, "superblocks" | "partitions"), "{l:?}");
            (chain, name)
        })
        .collect()
}

fn probed(chain: &str, name: &str) -> bool {
    ALL.iter()
        .any(|p| p.name == name && (p.class == Class::PartitionTable) == (chain == "partitions"))
}

#[test]
fn every_libblkid_type_has_a_probe_or_a_reason() {
    assert!(
        TYPES.lines().next().unwrap().contains("util-linux v2."),
        "the list names the util-linux version it was made from"
    );
    let types = listed();
    assert!(types.len() > 80, "{} types", types.len());
    let mut problems = Vec::new();
    for &(chain, name) in &types {
        let reason = NOT_PROBED.iter().any(|&(c, n, _)| c == chain && n == name);
        match (probed(chain, name), reason) {
            (false, false) => problems.push(format!("{chain} {name}: no probe and no reason")),
            (true, true) => problems.push(format!("{chain} {name}: a probe and a reason")),
            _ => {}
        }
    }
    for &(chain, name, why) in NOT_PROBED {
        if !types.contains(&(chain, name)) {
            problems.push(format!(
                "{chain} {name}: a reason for a type libblkid lacks"
            ));
        }
        assert!(why.len() > 20, "{name}: say why");
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
