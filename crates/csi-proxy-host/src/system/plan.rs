//! What a start or stop would do beyond the service named: the units the
//! service manager stops or starts with it, found by walking its
//! dependency graph before anything is asked of it. Platform-neutral: each
//! backend answers one unit at a time ([`UnitDeps`]), the walk is here.
//!
//! - **Stop**: every unit stopped with the service, transitively (systemd:
//!   the units that have `Requires=`, `Requisite=`, `BindsTo=` or
//!   `PartOf=` on it, and those it names in `PropagatesStopTo=`; Windows:
//!   the dependent services); and the units the manager starts when any of
//!   those goes down (systemd `OnSuccess=`, `OnFailure=`), taken as starts
//!   (below; of the units they stop through a conflict, the running ones).
//! - **Start**: every unit started with it, transitively (systemd:
//!   `Requires=`, `Requisite=`, `Wants=`, `BindsTo=`, `Upholds=`; Windows:
//!   the services it depends on), and every unit any of those conflicts
//!   with (`Conflicts=` both ways) together with what stops with that one.

use super::protect::Op;
use crate::{Error, Result};
use std::collections::{BTreeSet, VecDeque};

/// Most units one plan may take in: beyond it the call is refused
/// (`FailedPrecondition`) rather than half-checked.
pub const MAX_UNITS: usize = 1024;

/// One unit as the service manager describes it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UnitDeps {
    /// Every name of the unit: its id first, then its aliases.
    pub names: Vec<String>,
    /// Running, starting, stopping or with a job queued (anything but
    /// plainly stopped).
    pub active: bool,
    /// Units stopped when this one stops.
    pub stops: Vec<String>,
    /// Units started when this one starts.
    pub pulls: Vec<String>,
    /// Units stopped when this one starts (`Conflicts=` either way).
    pub conflicts: Vec<String>,
    /// Units the manager starts when this one stops or fails.
    pub triggers: Vec<String>,
}

/// A unit a plan touches: its names and whether it is active.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unit {
    pub names: Vec<String>,
    pub active: bool,
}

/// What a start or stop of one service would do.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// The service itself, by every name it has (its id first).
    pub target: Vec<String>,
    /// Units started with it (not the service itself): for a stop, the
    /// units started when the stopped ones go down.
    pub started: Vec<Unit>,
    /// Units stopped with it (not the service itself).
    pub stopped: Vec<Unit>,
}

/// Walk the graph from `root` for `op`, asking `unit` for each unit once.
pub fn plan(root: &str, op: Op, mut unit: impl FnMut(&str) -> Result<UnitDeps>) -> Result<Plan> {
    let mut seen = Seen::default();
    let first = unit(root)?;
    seen.insert(root, &first);
    let mut p = Plan {
        target: first.names.clone(),
        ..Plan::default()
    };
    match op {
        Op::Stop => {
            let mut queue: VecDeque<String> = first.stops.iter().cloned().collect();
            let mut stopped: Vec<(Unit, UnitDeps)> = Vec::new();
            walk(&mut queue, &mut seen, &mut unit, |u| &u.stops, &mut stopped)?;
            let mut triggered: VecDeque<String> = first.triggers.iter().cloned().collect();
            for (u, deps) in stopped {
                triggered.extend(deps.triggers);
                p.stopped.push(u);
            }
            // What the manager starts as they go down is a start of its own.
            starts(
                &mut triggered,
                VecDeque::new(),
                true,
                &mut seen,
                &mut unit,
                &mut p,
            )?;
        }
        Op::Start => {
            let mut queue: VecDeque<String> = first.pulls.iter().cloned().collect();
            let conflicts: VecDeque<String> = first.conflicts.iter().cloned().collect();
            starts(&mut queue, conflicts, false, &mut seen, &mut unit, &mut p)?;
        }
    }
    Ok(p)
}

/// The units `queue` names and what they pull in, as started; the units
/// any of them (or `conflicts`) conflicts with, with what stops with
/// those, as stopped (`only_running`: the running ones only).
fn starts(
    queue: &mut VecDeque<String>,
    mut conflicts: VecDeque<String>,
    only_running: bool,
    seen: &mut Seen,
    unit: &mut impl FnMut(&str) -> Result<UnitDeps>,
    p: &mut Plan,
) -> Result<()> {
    let mut started: Vec<(Unit, UnitDeps)> = Vec::new();
    walk(queue, seen, unit, |u| &u.pulls, &mut started)?;
    for (u, deps) in started {
        conflicts.extend(deps.conflicts);
        p.started.push(u);
    }
    // What conflicts is stopped, with everything that stops with it.
    let mut stopped: Vec<Unit> = Vec::new();
    walk(&mut conflicts, seen, unit, |u| &u.stops, &mut stopped)?;
    p.stopped
        .extend(stopped.into_iter().filter(|u| u.active || !only_running));
    Ok(())
}

/// Units already taken in, by every name (a unit reached through an
/// alias is the same unit).
#[derive(Default)]
struct Seen {
    names: BTreeSet<String>,
    count: usize,
}

impl Seen {
    fn contains(&self, name: &str) -> bool {
        self.names.contains(name)
    }

    fn insert(&mut self, asked: &str, u: &UnitDeps) {
        self.count += 1;
        self.names.insert(asked.to_string());
        self.names.extend(u.names.iter().cloned());
    }
}

trait Collect {
    fn collect(&mut self, u: Unit, deps: UnitDeps);
}

impl Collect for Vec<Unit> {
    fn collect(&mut self, u: Unit, _: UnitDeps) {
        self.push(u);
    }
}

impl Collect for Vec<(Unit, UnitDeps)> {
    fn collect(&mut self, u: Unit, deps: UnitDeps) {
        self.push((u, deps));
    }
}

fn walk(
    queue: &mut VecDeque<String>,
    seen: &mut Seen,
    unit: &mut impl FnMut(&str) -> Result<UnitDeps>,
    next: impl Fn(&UnitDeps) -> &Vec<String>,
    out: &mut impl Collect,
) -> Result<()> {
    while let Some(name) = queue.pop_front() {
        if seen.contains(&name) {
            continue;
        }
        if seen.count >= MAX_UNITS {
            return Err(Error::FailedPrecondition(format!(
                "the service manager's dependency graph from this service reaches more than {MAX_UNITS} units: refused rather than checked in part"
            )));
        }
        let deps = unit(&name)?;
        seen.insert(&name, &deps);
        queue.extend(next(&deps).iter().filter(|n| !seen.contains(n)).cloned());
        let mut names = deps.names.clone();
        if names.is_empty() {
            names.push(name);
        }
        out.collect(
            Unit {
                names,
                active: deps.active,
            },
            deps,
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// `(id, aliases, active, stops, pulls, conflicts)`.
    type Spec<'a> = (
        &'a str,
        &'a [&'a str],
        bool,
        &'a [&'a str],
        &'a [&'a str],
        &'a [&'a str],
    );

    fn graph(units: &[Spec<'_>]) -> BTreeMap<String, UnitDeps> {
        let mut g = BTreeMap::new();
        for (id, aliases, active, stops, pulls, conflicts) in units {
            let v = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
            let mut names = vec![id.to_string()];
            names.extend(v(aliases));
            let u = UnitDeps {
                names: names.clone(),
                active: *active,
                stops: v(stops),
                pulls: v(pulls),
                conflicts: v(conflicts),
                triggers: Vec::new(),
            };
            for n in names {
                g.insert(n, u.clone());
            }
        }
        g
    }

    fn ask(g: &BTreeMap<String, UnitDeps>) -> impl FnMut(&str) -> Result<UnitDeps> + '_ {
        |n| {
            Ok(g.get(n).cloned().unwrap_or(UnitDeps {
                names: vec![n.to_string()],
                ..UnitDeps::default()
            }))
        }
    }

    fn ids(units: &[Unit]) -> Vec<&str> {
        units.iter().map(|u| u.names[0].as_str()).collect()
    }

    #[test]
    fn a_stop_reaches_dependents_of_dependents_once() {
        let g = graph(&[
            ("a", &[], true, &["b"], &[], &[]),
            ("b", &["b-alias"], true, &["c", "a"], &[], &[]),
            ("c", &[], false, &["kubelet", "b-alias"], &[], &[]),
            ("kubelet", &[], true, &[], &[], &[]),
        ]);
        let p = plan("a", Op::Stop, ask(&g)).unwrap();
        assert_eq!(p.target, ["a"]);
        assert_eq!(ids(&p.stopped), ["b", "c", "kubelet"]);
        assert!(p.started.is_empty());
        assert_eq!(p.stopped[0].names, ["b", "b-alias"]);
        assert!(!p.stopped[1].active);
    }

    #[test]
    fn a_start_reaches_what_it_pulls_in_and_what_that_conflicts_with() {
        let g = graph(&[
            ("x", &[], false, &[], &["y"], &[]),
            ("y", &[], false, &[], &["z"], &[]),
            ("z", &[], false, &[], &[], &["base"]),
            ("base", &[], true, &["kubelet"], &[], &[]),
            ("kubelet", &[], true, &[], &[], &[]),
        ]);
        let p = plan("x", Op::Start, ask(&g)).unwrap();
        assert_eq!(ids(&p.started), ["y", "z"]);
        assert_eq!(ids(&p.stopped), ["base", "kubelet"]);
    }

    #[test]
    fn a_stop_starts_what_its_units_trigger() {
        let mut g = graph(&[
            ("a", &[], true, &["b"], &[], &[]),
            ("b", &[], true, &[], &[], &[]),
            ("exit", &[], false, &[], &["systemd-exit"], &["idle"]),
            ("idle", &[], false, &[], &[], &[]),
        ]);
        g.get_mut("b").unwrap().triggers = vec!["exit".into()];
        let p = plan("a", Op::Stop, ask(&g)).unwrap();
        assert_eq!(ids(&p.stopped), ["b"]);
        assert_eq!(ids(&p.started), ["exit", "systemd-exit"]);
    }

    #[test]
    fn the_target_is_named_by_all_its_names() {
        let g = graph(&[("systemd-udevd", &["udev"], true, &[], &[], &[])]);
        let p = plan("udev", Op::Stop, ask(&g)).unwrap();
        assert_eq!(p.target, ["systemd-udevd", "udev"]);
    }

    #[test]
    fn a_graph_past_the_cap_is_refused() {
        let mut n = 0usize;
        let e = plan("u0", Op::Stop, |_| {
            n += 1;
            Ok(UnitDeps {
                names: vec![format!("u{}", n - 1)],
                active: true,
                stops: vec![format!("u{n}")],
                ..UnitDeps::default()
            })
        })
        .unwrap_err();
        assert!(matches!(e, Error::FailedPrecondition(_)), "{e}");
        assert!(n <= MAX_UNITS + 1, "{n}");
    }

    #[test]
    fn errors_of_the_manager_end_the_walk() {
        let e = plan("a", Op::Stop, |n| {
            if n == "a" {
                Ok(UnitDeps {
                    names: vec!["a".into()],
                    stops: vec!["b".into()],
                    ..UnitDeps::default()
                })
            } else {
                Err(Error::Internal("bus".into()))
            }
        })
        .unwrap_err();
        assert!(matches!(e, Error::Internal(_)));
    }
}
