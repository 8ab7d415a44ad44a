//! Node-critical services: the set StopService refuses (and StartService,
//! for remote-access services an operator may have disabled on purpose),
//! whoever asks.
//!
//! The check is by name only and comes before any lookup, so a protected
//! name is `PermissionDenied` whether or not that service exists on this
//! node: a client learns nothing about the node from it.
//!
//! The set: the built-in table of this OS ([`WINDOWS`], [`LINUX`]), plus
//! the operator's `-protected-services`, minus `-unprotect-services` (which
//! applies to the built-in and flag entries only), plus, always, this
//! csi-proxy's own service (`-service-name`, and on Linux the unit it runs
//! under, from its cgroup) and the services it depends on (read once from
//! the service manager by [`super::System`]). Names compare as the OS does:
//! case-insensitively on Windows, as exact unit names on Linux
//! (`kubelet` is `kubelet.service`). A built-in entry ending in `*` is a
//! prefix (`systemd-*`); so is an operator's.

use super::plan::Plan;
use super::validate::ServiceName;
use crate::path::{shown, Flavor};
use crate::{Error, Result};

/// What a protection refuses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Guarded {
    /// StopService (and stopping it as a dependent with `force`).
    Stop,
    /// StopService, and StartService too: remote-access services, which a
    /// node may keep disabled on purpose.
    StartAndStop,
    /// StopService while iSCSI sessions are logged in
    /// (`FailedPrecondition` naming them): stopping the daemon would cut
    /// the disks of running pods off.
    StopWhileIscsiSessions,
}

/// The operation asked for (defined with the plan it walks).
pub use super::plan::Op;

mod tables;

pub use tables::{builtin, ends_the_manager, Builtin, ENDS_THE_MANAGER, LINUX, WINDOWS};

/// Where a protection comes from (named in the refusal).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Source {
    Builtin(&'static str),
    Flag,
    Own,
    Dependency(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Rule {
    /// Comparison key of the name (see [`Protection::key`]), or the prefix.
    key: String,
    prefix: bool,
    guarded: Guarded,
    source: Source,
}

/// What the check lets through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Allowed,
    /// Allowed only while no iSCSI session is logged in.
    UnlessIscsiSessions,
}

/// The protected set of one node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Protection {
    flavor: Flavor,
    rules: Vec<Rule>,
    /// Names the operator took out (keys); they beat built-in prefixes.
    unprotected: Vec<String>,
}

impl Protection {
    /// The built-in set of `flavor`.
    pub fn builtin(flavor: Flavor) -> Protection {
        let rules = builtin(flavor)
            .iter()
            .map(|b| {
                let (stem, prefix) = split_prefix(b.name);
                Rule {
                    key: key_of(stem, prefix, flavor),
                    prefix,
                    guarded: b.guarded,
                    source: Source::Builtin(b.why),
                }
            })
            .collect();
        Protection {
            flavor,
            rules,
            unprotected: Vec::new(),
        }
    }

    /// Nothing protected (tests of the layers above, and an explicit
    /// opt-out by a library user).
    pub fn none(flavor: Flavor) -> Protection {
        Protection {
            flavor,
            rules: Vec::new(),
            unprotected: Vec::new(),
        }
    }

    /// Adds the operator's names (`-protected-services`): StopService is
    /// refused for them.
    pub fn protect<I, S>(mut self, names: I) -> Result<Protection>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        for n in names {
            let (key, prefix) = self.flag_key(n.as_ref(), "-protected-services")?;
            self.unprotected.retain(|u| *u != key);
            self.rules.push(Rule {
                key,
                prefix,
                guarded: Guarded::Stop,
                source: Source::Flag,
            });
        }
        Ok(self)
    }

    /// Takes the operator's names out of the built-in and flag entries
    /// (`-unprotect-services`). A prefix entry is removed as a whole
    /// (`systemd-*`); a name is removed, and no prefix covers it any more.
    /// The own service and its dependencies stay protected.
    pub fn unprotect<I, S>(mut self, names: I) -> Result<Protection>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        for n in names {
            let (key, prefix) = self.flag_key(n.as_ref(), "-unprotect-services")?;
            self.rules.retain(|r| {
                matches!(r.source, Source::Own | Source::Dependency(_))
                    || r.key != key
                    || r.prefix != prefix
            });
            if !prefix && !self.unprotected.contains(&key) {
                self.unprotected.push(key);
            }
        }
        Ok(self)
    }

    /// This csi-proxy's own service: always protected (Stop).
    pub fn own_service(mut self, name: &str) -> Result<Protection> {
        let n = ServiceName::parse(name, self.flavor)
            .map_err(|e| Error::InvalidArgument(format!("own service name: {e}")))?;
        self.rules.push(Rule {
            key: self.key(&n),
            prefix: false,
            guarded: Guarded::Stop,
            source: Source::Own,
        });
        Ok(self)
    }

    /// A service this csi-proxy's own service depends on (by its OS name):
    /// always protected (Stop). Names that are not valid service names
    /// (other unit types) are ignored.
    pub fn dependency(&mut self, os_name: &str, of: &str) {
        let Ok(n) = ServiceName::parse(os_name, self.flavor) else {
            return;
        };
        let key = self.key(&n);
        if self.rules.iter().any(|r| !r.prefix && r.key == key) {
            return;
        }
        self.rules.push(Rule {
            key,
            prefix: false,
            guarded: Guarded::Stop,
            source: Source::Dependency(of.to_string()),
        });
    }

    /// The own services (`-service-name`, the cgroup's unit), by name as
    /// given: whose dependencies [`super::System`] reads.
    pub fn own_keys(&self) -> impl Iterator<Item = &str> {
        self.rules
            .iter()
            .filter(|r| r.source == Source::Own)
            .map(|r| r.key.as_str())
    }

    /// The names the operator's `-unprotect-services` took out (for the
    /// start-up log).
    pub fn unprotected(&self) -> &[String] {
        &self.unprotected
    }

    /// `PermissionDenied` (naming the rule) when `op` on `name` is
    /// refused; otherwise whether it still depends on iSCSI sessions.
    pub fn check(&self, name: &ServiceName, op: Op) -> Result<Verdict> {
        self.refusal(name, op).map_err(|why| {
            Error::PermissionDenied(format!(
                "{} service {}: refused, {why}",
                op.verb(),
                shown(name.as_str())
            ))
        })
    }

    /// [`Protection::check`] with the reason alone (the service is
    /// protected..., it ends the manager...), for messages that lead with
    /// another operation.
    fn refusal(&self, name: &ServiceName, op: Op) -> std::result::Result<Verdict, String> {
        let key = self.key(name);
        if op == Op::Start && self.flavor == Flavor::Unix && ends_the_manager(&key) {
            return Err("starting it would shut down, reboot, suspend or isolate the node's service manager: such units are protected, never started through csi-proxy".to_string());
        }
        let mut verdict = Verdict::Allowed;
        for r in &self.rules {
            let hit = if r.prefix {
                key.starts_with(&r.key) && !self.unprotected.contains(&key)
            } else {
                r.key == key
            };
            if !hit {
                continue;
            }
            match (r.guarded, op) {
                (Guarded::StopWhileIscsiSessions, Op::Stop) => {
                    verdict = Verdict::UnlessIscsiSessions;
                    continue;
                }
                (Guarded::Stop | Guarded::StopWhileIscsiSessions, Op::Start) => continue,
                _ => {}
            }
            let why = match &r.source {
                Source::Builtin(why) => format!("node-critical: {why}"),
                Source::Flag => "listed by the operator in -protected-services".to_string(),
                Source::Own => "this csi-proxy's own service".to_string(),
                Source::Dependency(of) => {
                    format!("this csi-proxy's own service {} depends on it", shown(of))
                }
            };
            return Err(format!(
                "the service is protected on this node ({why}); an operator changes the set with -protected-services and -unprotect-services"
            ));
        }
        Ok(verdict)
    }

    /// Like [`Protection::check`] for a service the OS named (a dependent
    /// that a forced stop would stop too). Names that are not services
    /// (other unit types) pass.
    pub fn check_os_name(&self, os_name: &str, op: Op) -> Result<()> {
        match ServiceName::parse(os_name, self.flavor) {
            Ok(n) => self.check(&n, op).map(|_| ()).map_err(|e| match e {
                Error::PermissionDenied(m) => Error::PermissionDenied(format!(
                    "{m} (a forced stop would stop it as a dependent)"
                )),
                e => e,
            }),
            Err(_) => Ok(()),
        }
    }

    /// The check of everything a start or stop would do, once the service
    /// manager described it ([`Plan`]): every name of the service itself
    /// (its id and aliases); for a stop, every unit stopped with it, running
    /// or not (one that is stopped now may be started before the stop
    /// runs); for a start, every running unit it would stop through a
    /// conflict; for both, every unit started with it that is not running
    /// yet: no unit that ends the manager, and no protected unit at all (a
    /// protected unit never starts or stops as a side effect of a call,
    /// whatever its rule guards when asked for by name). Every refusal
    /// leads with the operation asked for and `asked`, the name as given.
    pub fn check_plan(&self, asked: &ServiceName, plan: &Plan, op: Op) -> Result<Verdict> {
        let mut verdict = Verdict::Allowed;
        let mut merge = |v: Verdict| {
            if v == Verdict::UnlessIscsiSessions {
                verdict = v;
            }
        };
        let lead = format!("{} service {}: refused", op.verb(), shown(asked.as_str()));
        for n in &plan.target {
            merge(self.check_unit(n, op).map_err(|why| {
                Error::PermissionDenied(format!(
                    "{lead}, it is {} by another name, and {why}",
                    shown(n)
                ))
            })?);
        }
        for u in &plan.started {
            // Starting what runs already changes nothing.
            if u.active {
                continue;
            }
            for n in &u.names {
                let how = match op {
                    Op::Start => "it would start",
                    Op::Stop => "the service manager would start, when it stops,",
                };
                let refuse = |why: String| {
                    Error::PermissionDenied(format!("{lead}, {how} {}: {why}", shown(n)))
                };
                self.check_unit(n, Op::Start).map_err(refuse)?;
                // A protected unit started as a side effect: refused
                // whatever its rule guards (an operator may have stopped
                // it on purpose).
                self.check_unit(n, Op::Stop).map_err(refuse)?;
            }
        }
        for u in &plan.stopped {
            if op == Op::Start && !u.active {
                continue;
            }
            for n in &u.names {
                let how = match op {
                    Op::Stop => "it would stop, as a dependent,",
                    Op::Start => "it would stop, through a conflict,",
                };
                merge(self.check_unit(n, Op::Stop).map_err(|why| {
                    Error::PermissionDenied(format!("{lead}, {how} {}: {why}", shown(n)))
                })?);
            }
        }
        Ok(verdict)
    }

    /// [`Protection::refusal`] of a unit the service manager named; names
    /// that are not services (other unit types) pass here (the plan
    /// refuses changing them: [`Plan::refuse_unmodelled`]).
    fn check_unit(&self, os_name: &str, op: Op) -> std::result::Result<Verdict, String> {
        if op == Op::Start && self.flavor == Flavor::Unix && ends_the_manager(os_name) {
            return Err("it shuts down, reboots, suspends or isolates the node's service manager: such units are protected, never started through csi-proxy".to_string());
        }
        match ServiceName::parse(os_name, self.flavor) {
            Ok(n) => self.refusal(&n, op),
            Err(_) => Ok(Verdict::Allowed),
        }
    }

    fn key(&self, name: &ServiceName) -> String {
        key_of(name.os_name(), false, self.flavor)
    }

    /// The key of a flag entry; `*` at the end makes a prefix.
    fn flag_key(&self, name: &str, flag: &str) -> Result<(String, bool)> {
        let name = name.trim();
        let (stem, prefix) = split_prefix(name);
        // A prefix is checked as a name of its own (`systemd-` is valid).
        let n = ServiceName::parse(stem, self.flavor)
            .map_err(|e| Error::InvalidArgument(format!("{flag}: {e}")))?;
        if prefix {
            Ok((key_of(stem, true, self.flavor), true))
        } else {
            Ok((self.key(&n), false))
        }
    }
}

fn split_prefix(name: &str) -> (&str, bool) {
    match name.strip_suffix('*') {
        Some(stem) => (stem, true),
        None => (name, false),
    }
}

/// Comparison key: Windows names without case, Linux unit names exactly
/// (`<name>.service`; a prefix as given).
fn key_of(name: &str, prefix: bool, flavor: Flavor) -> String {
    match flavor {
        Flavor::Windows => name.to_ascii_lowercase(),
        Flavor::Unix if prefix || name.ends_with(".service") => name.to_string(),
        Flavor::Unix => format!("{name}.service"),
    }
}

/// The systemd service unit a process runs under, from its
/// `/proc/<pid>/cgroup`: the nearest `*.service` component of its path in
/// the `name=systemd` hierarchy (cgroup v1 and hybrid) or else the unified
/// one (`0::`, cgroup v2). `None` outside any service unit.
pub fn unit_of_cgroup(text: &str) -> Option<String> {
    let path_of = |want_named: bool| {
        text.lines().find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (id, ctl, path) = (f.next()?, f.next()?, f.next()?);
            let hit = if want_named {
                ctl == "name=systemd"
            } else {
                id == "0" && ctl.is_empty()
            };
            hit.then_some(path)
        })
    };
    let path = path_of(true).or_else(|| path_of(false))?;
    path.rsplit('/')
        .find(|c| c.ends_with(".service") && c.len() > ".service".len())
        .filter(|c| ServiceName::parse(c, Flavor::Unix).is_ok())
        .map(str::to_string)
}

#[cfg(test)]
mod tests;
