//! Blocking jobs per caller: a caller whose calls hang (on a lease, a hung
//! disk, a tool that never exits) holds at most [`PER_CALLER`] threads of
//! the blocking pool, over all its connections; past that its calls are
//! answered `Unavailable` at once, and every other caller still has the
//! pool (each connection is bounded too:
//! `csi_proxy_http2::driver::MAX_JOBS_PER_CONNECTION`).
//!
//! A caller is its uid and pod (Linux) or its user SID (Windows): kernel
//! identities, taken when the connection is accepted. A caller with
//! neither (a Windows pipe client without a guard) is its pid.

use super::Caller;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Blocking jobs one caller may hold at a time.
pub const PER_CALLER: usize = 64;

/// Who a budget belongs to.
type Key = (Option<u32>, Option<String>, Option<String>, Option<u32>);

fn key(c: &Caller) -> Key {
    let pid = match (c.uid, &c.sid) {
        (None, None) => c.pid,
        _ => None,
    };
    (c.uid, c.pod_uid.clone(), c.sid.clone(), pid)
}

/// The caller as host state keyed per caller sees it
/// (`csi_proxy_host::on_behalf`): the same identity as its job budget.
pub fn owner(c: &Caller) -> std::sync::Arc<str> {
    let (uid, pod, sid, pid) = key(c);
    let mut s = String::new();
    let parts = [
        ("uid", uid.map(|u| u.to_string())),
        ("pod", pod),
        ("sid", sid),
        ("pid", pid.map(|p| p.to_string())),
    ];
    for (k, v) in parts {
        if let Some(v) = v {
            if !s.is_empty() {
                s.push(' ');
            }
            s.push_str(&format!("{k}={v}"));
        }
    }
    if s.is_empty() {
        s.push_str("unknown");
    }
    std::sync::Arc::from(s)
}

/// One caller's slots.
#[derive(Clone, Debug)]
pub struct Jobs(Arc<Semaphore>);

impl Jobs {
    /// The slots of `caller` (shared by all its connections).
    pub fn of(caller: &Caller) -> Jobs {
        static ALL: Mutex<Option<HashMap<Key, Arc<Semaphore>>>> = Mutex::new(None);
        let mut g = ALL.lock().unwrap_or_else(|p| p.into_inner());
        let map = g.get_or_insert_with(HashMap::new);
        if map.len() >= 4096 {
            // Budgets no connection holds any more.
            map.retain(|_, s| Arc::strong_count(s) > 1);
        }
        let s = map
            .entry(key(caller))
            .or_insert_with(|| Arc::new(Semaphore::new(PER_CALLER)));
        Jobs(s.clone())
    }

    /// A slot for one blocking job, held until the job ends; `None` when
    /// the caller holds all of its own.
    pub fn take(&self) -> Option<OwnedSemaphorePermit> {
        self.0.clone().try_acquire_owned().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_caller_spends_only_its_own_slots() {
        let a = Caller {
            uid: Some(1000),
            ..Caller::default()
        };
        let b = Caller {
            uid: Some(1000),
            pod_uid: Some("p".into()),
            ..Caller::default()
        };
        let held: Vec<_> = (0..PER_CALLER)
            .map(|_| Jobs::of(&a).take().unwrap())
            .collect();
        assert!(Jobs::of(&a).take().is_none());
        assert!(Jobs::of(&b).take().is_some());
        drop(held);
        assert!(Jobs::of(&a).take().is_some());
    }
}
