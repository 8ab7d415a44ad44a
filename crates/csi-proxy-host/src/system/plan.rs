//! What a start or stop would do beyond the service named: the units the
//! service manager starts, stops or triggers with it, found by walking its
//! dependency graph before anything is asked of it. Platform-neutral: each
//! backend answers one unit at a time ([`UnitDeps`]), the walk is here.
//!
//! One walk to a fixed point, over three steps:
//!
//! - **start** a unit: what it pulls in is started (systemd `Requires=`,
//!   `Requisite=`, `Wants=`, `BindsTo=`, `Upholds=`; Windows the services
//!   it depends on, `+Group` entries expanded to the group's members);
//!   what it conflicts with is stopped (`Conflicts=` both ways); and, when
//!   it is not running yet (or is the service asked for), what the manager
//!   starts once it ends or fails (`OnSuccess=`, `OnFailure=`) is started.
//! - **stop** a unit: what stops with it is stopped (the units that have
//!   `Requires=`, `Requisite=`, `BindsTo=` or `PartOf=` on it, those it
//!   names in `PropagatesStopTo=`; Windows the dependent services); what it
//!   pulls in is stopped if that unit has `StopWhenUnneeded=yes`; and what
//!   it triggers (`OnSuccess=`, `OnFailure=`) is started.
//! - A stop reached through a conflict changes only running units: such a
//!   unit that is not running is walked on (what stops with it may run)
//!   but not recorded, and triggers nothing.
//!
//! Every unit carries the actions the manager itself takes for it
//! (systemd `SuccessAction=`, `FailureAction=`, `StartLimitAction=`,
//! `JobTimeoutAction=`; Windows failure actions that reboot or run a
//! command): [`Plan::refuse_actions`] refuses a plan that changes a unit
//! with one.
//!
//! Default-deny: a unit whose effect the walk cannot follow carries the
//! reasons in [`UnitDeps::unmodelled`] (systemd: a unit that is not a
//! service, target or slice, such as a `.path`, `.timer`, `.socket`,
//! `.automount`, `.mount`, `.swap`, `.device`; `OnSuccessJobMode=` or
//! `OnFailureJobMode=` other than `replace`/`fail`; `AllowIsolate=yes`;
//! Windows: a driver, a service with trigger-start information), and
//! [`Plan::refuse_unmodelled`] refuses a plan that would start or stop
//! one, rather than enumerate what each could do.

use crate::path::shown;
use crate::{Error, Result};
use std::collections::{HashMap, VecDeque};

/// The operation asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Start,
    Stop,
}

impl Op {
    /// The verb of messages ("start", "stop").
    pub fn verb(self) -> &'static str {
        match self {
            Op::Start => "start",
            Op::Stop => "stop",
        }
    }
}

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
    /// Stopped by the manager once no unit that pulls it in runs
    /// (`StopWhenUnneeded=yes`).
    pub stop_when_unneeded: bool,
    /// What the manager itself does on this unit's success, failure, start
    /// limit or job timeout, for every such setting that is not `none`
    /// (`"SuccessAction=exit"`, `"failure action: reboot"`).
    pub actions: Vec<String>,
    /// Why the unit is not a service StartService/StopService may act on
    /// (a driver, another unit type); `None` for a service.
    pub not_a_service: Option<String>,
    /// Why the walk cannot tell what starting or stopping this unit does
    /// (it triggers other units, isolates, is a mount...): a plan that
    /// changes it is refused ([`Plan::refuse_unmodelled`]).
    pub unmodelled: Vec<String>,
}

/// A unit a plan touches: its names, whether it is active, and the
/// manager's own actions for it (see [`UnitDeps::actions`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Unit {
    pub names: Vec<String>,
    pub active: bool,
    pub actions: Vec<String>,
    /// See [`UnitDeps::unmodelled`].
    pub unmodelled: Vec<String>,
}

/// What a start or stop of one service would do.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// The service itself, by every name it has (its id first).
    pub target: Vec<String>,
    /// The manager's own actions for the service itself.
    pub target_actions: Vec<String>,
    /// Why the service itself is not one the API may act on.
    pub not_a_service: Option<String>,
    /// Why the walk cannot follow what the service itself does.
    pub target_unmodelled: Vec<String>,
    /// Units started with it (not the service itself), including those
    /// the manager starts when a unit of the plan ends or fails.
    pub started: Vec<Unit>,
    /// Units stopped with it (not the service itself).
    pub stopped: Vec<Unit>,
    /// The service manager's configuration generation the plan was made
    /// on, when it tells (systemd: when it last loaded its units); the
    /// backend refuses to act on another one.
    pub generation: Option<u64>,
}

impl Plan {
    /// `PermissionDenied` when the plan changes a unit for which the
    /// manager itself takes an action (exit, reboot, power off, run a
    /// command...): the service asked for, every unit started that is not
    /// running yet, and every unit stopped (for a start, the running ones).
    pub fn refuse_actions(&self, asked: &str, op: Op) -> Result<()> {
        let refuse = |unit: &str, actions: &[String], how: &str| {
            Error::PermissionDenied(format!(
                "{} service {}: refused, {how} {} ({}): a unit for which the service manager itself exits, reboots, powers off or runs a command is never started or stopped through csi-proxy",
                op.verb(),
                shown(asked),
                shown(unit),
                actions.join(", ")
            ))
        };
        if !self.target_actions.is_empty() {
            let name = self.target.first().map_or(asked, String::as_str);
            return Err(refuse(
                name,
                &self.target_actions,
                "the service manager has actions set for",
            ));
        }
        for u in self.started.iter().filter(|u| !u.active) {
            if !u.actions.is_empty() {
                return Err(refuse(&u.names[0], &u.actions, "it would start"));
            }
        }
        for u in &self.stopped {
            if op == Op::Start && !u.active {
                continue;
            }
            if !u.actions.is_empty() {
                return Err(refuse(&u.names[0], &u.actions, "it would stop"));
            }
        }
        Ok(())
    }

    /// `PermissionDenied` when the plan changes a unit whose effect the
    /// walk cannot follow ([`UnitDeps::unmodelled`]): the service asked
    /// for, every unit started that is not running yet, and every unit
    /// stopped (for a start, the running ones). Default-deny: what the
    /// plan cannot reason about is refused.
    pub fn refuse_unmodelled(&self, asked: &str, op: Op) -> Result<()> {
        let refuse = |how: &str, unit: &str, why: &[String]| {
            Error::PermissionDenied(format!(
                "{} service {}: refused, {how} {} ({}): csi-proxy cannot tell what that would start or stop in turn, so it never does it",
                op.verb(),
                shown(asked),
                shown(unit),
                why.join("; ")
            ))
        };
        if !self.target_unmodelled.is_empty() {
            let name = self.target.first().map_or(asked, String::as_str);
            return Err(Error::PermissionDenied(format!(
                "{} service {}: refused, {} itself has {}: csi-proxy cannot tell what that would start or stop in turn, so it never does it",
                op.verb(),
                shown(asked),
                shown(name),
                self.target_unmodelled.join("; ")
            )));
        }
        for u in self.started.iter().filter(|u| !u.active) {
            if !u.unmodelled.is_empty() {
                return Err(refuse("it would start", &u.names[0], &u.unmodelled));
            }
        }
        for u in &self.stopped {
            if op == Op::Start && !u.active {
                continue;
            }
            if !u.unmodelled.is_empty() {
                return Err(refuse("it would stop", &u.names[0], &u.unmodelled));
            }
        }
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Start,
    /// `must_run`: reached through a conflict (only a running unit changes).
    Stop {
        must_run: bool,
    },
    /// Stopped only if the unit has `StopWhenUnneeded=yes`.
    StopIfUnneeded {
        must_run: bool,
    },
}

/// Walk the graph from `root` for `op`, asking `unit` for each unit once.
pub fn plan(root: &str, op: Op, unit: impl FnMut(&str) -> Result<UnitDeps>) -> Result<Plan> {
    let mut w = Walk {
        what: format!("{} service {}", op.verb(), shown(root)),
        unit,
        units: Vec::new(),
        index: HashMap::new(),
        started: Vec::new(),
        stopped: HashMap::new(),
    };
    let first = w.get(root)?;
    let mut p = Plan {
        target: w.units[first].names.clone(),
        target_actions: w.units[first].actions.clone(),
        not_a_service: w.units[first].not_a_service.clone(),
        target_unmodelled: w.units[first].unmodelled.clone(),
        ..Plan::default()
    };
    let mut queue: VecDeque<(String, Step)> = VecDeque::new();
    queue.push_back((
        root.to_string(),
        match op {
            Op::Start => Step::Start,
            Op::Stop => Step::Stop { must_run: false },
        },
    ));
    while let Some((name, step)) = queue.pop_front() {
        let i = w.get(&name)?;
        let is_root = i == first;
        let u = &w.units[i];
        let entry = Unit {
            names: u.names.clone(),
            active: u.active,
            actions: u.actions.clone(),
            unmodelled: u.unmodelled.clone(),
        };
        let mut next = Vec::new();
        match step {
            Step::Start => {
                if w.started.contains(&i) {
                    continue;
                }
                w.started.push(i);
                next.extend(u.pulls.iter().map(|n| (n.clone(), Step::Start)));
                next.extend(
                    u.conflicts
                        .iter()
                        .map(|n| (n.clone(), Step::Stop { must_run: true })),
                );
                // Starting what runs already triggers nothing.
                if is_root || !u.active {
                    next.extend(u.triggers.iter().map(|n| (n.clone(), Step::Start)));
                }
                if !is_root {
                    p.started.push(entry);
                }
            }
            Step::Stop { must_run } | Step::StopIfUnneeded { must_run } => {
                if matches!(step, Step::StopIfUnneeded { .. }) && !u.stop_when_unneeded {
                    continue;
                }
                // Walked once, or twice when first reached through a
                // conflict and then as a plain stop.
                match w.stopped.get(&i) {
                    Some(&seen_must_run) if seen_must_run <= must_run => continue,
                    _ => {}
                }
                let recorded_before = w.stopped.get(&i).is_some_and(|m| !*m || u.active);
                w.stopped.insert(i, must_run);
                let changes = !must_run || u.active;
                next.extend(u.stops.iter().map(|n| (n.clone(), Step::Stop { must_run })));
                next.extend(
                    u.pulls
                        .iter()
                        .map(|n| (n.clone(), Step::StopIfUnneeded { must_run })),
                );
                if changes {
                    next.extend(u.triggers.iter().map(|n| (n.clone(), Step::Start)));
                    if !is_root && !recorded_before {
                        p.stopped.push(entry);
                    }
                }
            }
        }
        queue.extend(next);
    }
    Ok(p)
}

struct Walk<F> {
    /// The operation and service (for the messages).
    what: String,
    unit: F,
    /// Every unit asked for once.
    units: Vec<UnitDeps>,
    /// Every name (asked and reported) → its unit.
    index: HashMap<String, usize>,
    started: Vec<usize>,
    /// Unit → whether it was walked as a stop through a conflict only.
    stopped: HashMap<usize, bool>,
}

impl<F: FnMut(&str) -> Result<UnitDeps>> Walk<F> {
    fn get(&mut self, name: &str) -> Result<usize> {
        if let Some(&i) = self.index.get(name) {
            return Ok(i);
        }
        if self.units.len() >= MAX_UNITS {
            return Err(Error::FailedPrecondition(format!(
                "{}: refused, the service manager's dependency graph from this service reaches more than {MAX_UNITS} units, too many to check them all",
                self.what
            )));
        }
        let mut u = (self.unit)(name)?;
        if u.names.is_empty() {
            u.names.push(name.to_string());
        }
        let i = self.units.len();
        self.index.insert(name.to_string(), i);
        for n in &u.names {
            self.index.entry(n.clone()).or_insert(i);
        }
        self.units.push(u);
        Ok(i)
    }
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
                ..UnitDeps::default()
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
        // The refusal names the operation and the service first.
        assert!(
            e.to_string().contains("stop service \"u0\": refused"),
            "{e}"
        );
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

    /// The cases measured on a private `systemd --user`, as graphs.
    #[test]
    fn starts_trigger_what_their_units_start_on_success_or_failure() {
        let mut g = graph(&[
            ("oneshot", &[], false, &[], &[], &[]),
            ("systemd-exit", &[], false, &[], &[], &[]),
        ]);
        g.get_mut("oneshot").unwrap().triggers = vec!["systemd-exit".into()];
        let p = plan("oneshot", Op::Start, ask(&g)).unwrap();
        assert_eq!(ids(&p.started), ["systemd-exit"]);
        // A unit already running triggers nothing when pulled in again.
        let mut g = graph(&[
            ("x", &[], false, &[], &["running"], &[]),
            ("running", &[], true, &[], &[], &[]),
        ]);
        g.get_mut("running").unwrap().triggers = vec!["emergency".into()];
        let p = plan("x", Op::Start, ask(&g)).unwrap();
        assert_eq!(ids(&p.started), ["running"]);
    }

    #[test]
    fn a_conflict_stops_a_running_unit_and_starts_what_it_triggers() {
        let mut g = graph(&[
            ("x", &[], false, &[], &[], &["y", "idle"]),
            ("y", &[], true, &[], &[], &[]),
            ("idle", &[], false, &["idle-dependent"], &[], &[]),
            ("idle-dependent", &[], true, &[], &[], &[]),
        ]);
        g.get_mut("y").unwrap().triggers = vec!["systemd-exit".into()];
        g.get_mut("idle").unwrap().triggers = vec!["never".into()];
        let p = plan("x", Op::Start, ask(&g)).unwrap();
        // idle is not running: not recorded, triggers nothing; what stops
        // with it and runs is recorded.
        assert_eq!(ids(&p.stopped), ["y", "idle-dependent"]);
        assert_eq!(ids(&p.started), ["systemd-exit"]);
    }

    #[test]
    fn a_stop_takes_down_what_is_no_longer_needed() {
        let mut g = graph(&[
            ("w", &[], true, &[], &["kubelet", "plain"], &[]),
            ("kubelet", &[], true, &[], &[], &[]),
            ("plain", &[], true, &[], &[], &[]),
        ]);
        g.get_mut("kubelet").unwrap().stop_when_unneeded = true;
        let p = plan("w", Op::Stop, ask(&g)).unwrap();
        assert_eq!(ids(&p.stopped), ["kubelet"]);
        // Not for a start.
        let p = plan("w", Op::Start, ask(&g)).unwrap();
        assert!(p.stopped.is_empty());
    }

    #[test]
    fn a_unit_first_reached_through_a_conflict_is_recorded_when_a_stop_reaches_it() {
        let mut g = graph(&[
            ("a", &[], true, &["b"], &[], &[]),
            ("b", &[], true, &["idle"], &[], &[]),
            ("idle", &[], false, &[], &[], &[]),
            ("t", &[], false, &[], &[], &["idle"]),
        ]);
        g.get_mut("a").unwrap().triggers = vec!["t".into()];
        let p = plan("a", Op::Stop, ask(&g)).unwrap();
        assert_eq!(ids(&p.stopped), ["b", "idle"]);
    }

    #[test]
    fn actions_of_every_unit_that_changes_are_refused() {
        let mut g = graph(&[
            (
                "x",
                &[],
                false,
                &["dep"],
                &["pulled", "running"],
                &["c", "idle"],
            ),
            ("dep", &[], false, &[], &[], &[]),
            ("pulled", &[], false, &[], &[], &[]),
            ("running", &[], true, &[], &[], &[]),
            ("c", &[], true, &[], &[], &[]),
            ("idle", &[], false, &[], &[], &[]),
        ]);
        let act = |g: &mut BTreeMap<String, UnitDeps>, n: &str| {
            g.get_mut(n).unwrap().actions = vec!["SuccessAction=exit".into()];
        };
        let refused = |g: &BTreeMap<String, UnitDeps>, op: Op| {
            plan("x", op, ask(g)).unwrap().refuse_actions("x", op)
        };
        refused(&g, Op::Start).unwrap();
        refused(&g, Op::Stop).unwrap();
        // What does not change state carries no risk: a running unit
        // pulled in again, a stopped one in conflict.
        act(&mut g, "running");
        act(&mut g, "idle");
        refused(&g, Op::Start).unwrap();
        for (unit, op, how) in [
            ("x", Op::Start, "has actions set for"),
            ("pulled", Op::Start, "would start"),
            ("c", Op::Start, "would stop"),
            ("dep", Op::Stop, "would stop"),
        ] {
            let mut g = g.clone();
            act(&mut g, unit);
            let e = refused(&g, op).unwrap_err();
            let m = e.to_string();
            assert!(matches!(e, Error::PermissionDenied(_)), "{unit}: {m}");
            assert!(m.contains(how) && m.contains(unit), "{unit}: {m}");
            assert!(m.contains("SuccessAction=exit"), "{m}");
            assert!(m.starts_with(&format!("{} service", op.verb())), "{m}");
        }
    }

    #[test]
    fn units_the_walk_cannot_follow_are_refused_when_they_change() {
        let mut g = graph(&[
            ("x", &[], false, &[], &["pulled", "running"], &["c", "idle"]),
            ("pulled", &[], false, &[], &[], &[]),
            ("running", &[], true, &[], &[], &[]),
            ("c", &[], true, &[], &[], &[]),
            ("idle", &[], false, &[], &[], &[]),
        ]);
        let mark = |g: &mut BTreeMap<String, UnitDeps>, n: &str| {
            g.get_mut(n).unwrap().unmodelled = vec!["evil.path is not a service".into()];
        };
        let refused = |g: &BTreeMap<String, UnitDeps>, op: Op| {
            plan("x", op, ask(g)).unwrap().refuse_unmodelled("x", op)
        };
        refused(&g, Op::Start).unwrap();
        // Unchanged: running and pulled again, stopped and in conflict.
        mark(&mut g, "running");
        mark(&mut g, "idle");
        refused(&g, Op::Start).unwrap();
        for (unit, op, how) in [
            ("x", Op::Start, "itself has"),
            ("pulled", Op::Start, "it would start"),
            ("c", Op::Start, "it would stop"),
        ] {
            let mut g = g.clone();
            mark(&mut g, unit);
            let e = refused(&g, op).unwrap_err();
            let m = e.to_string();
            assert!(matches!(e, Error::PermissionDenied(_)), "{m}");
            assert!(m.contains(how) && m.contains(unit), "{unit}: {m}");
            assert!(m.starts_with("start service \"x\": refused"), "{m}");
        }
    }
}
