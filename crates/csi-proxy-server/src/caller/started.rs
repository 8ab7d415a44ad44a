//! A pid bound to its process's start time (pure; unit-tested on Linux).
//!
//! A pid names a process only while that process lives: once it is gone,
//! the pid can name another. So the start time of the process behind the
//! connection's pid is taken when the connection is accepted (Windows:
//! `GetProcessTimes` on a handle opened at accept), and every later lookup
//! that opens the pid again to read its executable or token compares the
//! start time it finds with that one. Any difference, or a start time that
//! cannot be read on either side, makes the caller unknown: it keeps only
//! what the kernel bound to the connection itself (Linux uid and gid, the
//! pid as a number), every field read from the process is dropped, and
//! [`PROCESS_CHANGED`] says so in its audit line (a policy rule on any
//! such field refuses it).
//!
//! On Linux the start time is `/proc/<pid>/stat` field 22 (clock ticks
//! since boot): it must be the same before and after the reads, and not
//! later than the accept ([`started_by`]).

use super::Caller;

/// The audit text of a caller whose pid names another process by now.
pub const PROCESS_CHANGED: &str =
    "the process behind the connection's pid is not the one that connected (start time differs or unreadable): identity unknown";

/// Whether the process found at a lookup (`now`) is the one recorded at
/// accept (`then`): both known and equal.
pub fn same_process(then: Option<u64>, now: Option<u64>) -> bool {
    matches!((then, now), (Some(a), Some(b)) if a == b)
}

/// Whether a process that started at `start` (clock ticks since boot)
/// existed by `accepted` (the same unit): a later one took the pid after
/// the connection was accepted.
pub fn started_by(start: Option<u64>, accepted: Option<u64>) -> bool {
    match (start, accepted) {
        (Some(s), Some(a)) => s <= a,
        // No accept time taken: nothing to compare with.
        (Some(_), None) => true,
        (None, _) => false,
    }
}

/// Drops every field read from the process, keeps what the kernel bound to
/// the connection (pid, uid, gid) and says why.
pub fn forget_process(caller: &mut Caller) {
    *caller = Caller {
        pid: caller.pid,
        uid: caller.uid,
        gid: caller.gid,
        incomplete: Some(PROCESS_CHANGED),
        ..Caller::default()
    };
}

/// Field 22 (`starttime`) of a `/proc/<pid>/stat` line. The name (field 2)
/// is in parentheses and may hold spaces and parentheses itself: fields
/// are counted after the last `)`.
pub fn stat_start_time(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // After the name comes field 3 (state); field 22 is the 20th from there.
    rest.split_ascii_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_same_known_start_time_is_the_same_process() {
        assert!(same_process(
            Some(133_000_000_000_000_000),
            Some(133_000_000_000_000_000)
        ));
        assert!(!same_process(
            Some(133_000_000_000_000_000),
            Some(133_000_000_000_000_001)
        ));
        assert!(!same_process(None, Some(1)));
        assert!(!same_process(Some(1), None));
        assert!(!same_process(None, None));
    }

    #[test]
    fn a_process_started_after_the_accept_is_another() {
        assert!(started_by(Some(100), Some(100)));
        assert!(started_by(Some(99), Some(100)));
        assert!(!started_by(Some(101), Some(100)));
        assert!(!started_by(None, Some(100)));
        assert!(started_by(Some(5), None));
    }

    #[test]
    fn an_unknown_caller_keeps_only_the_kernel_credentials() {
        let mut c = Caller {
            pid: Some(7),
            uid: Some(1000),
            gid: Some(1000),
            sid: Some("S-1-5-18".into()),
            exe: Some("/bin/x".into()),
            exe_sha256: Some("ab".into()),
            own_mount_ns: Some(true),
            pod_uid: Some("p".into()),
            container_id: Some("c".into()),
            session_id: Some(0),
            in_job: Some(true),
            incomplete: None,
        };
        forget_process(&mut c);
        assert_eq!(
            c,
            Caller {
                pid: Some(7),
                uid: Some(1000),
                gid: Some(1000),
                incomplete: Some(PROCESS_CHANGED),
                ..Caller::default()
            }
        );
    }

    #[test]
    fn start_time_is_field_22_whatever_the_name() {
        let tail = "S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 4242 19 20";
        for name in ["bash", "a b", "x) S 9 9 (y", ")", "(("] {
            let line = format!("123 ({name}) {tail}");
            assert_eq!(stat_start_time(&line), Some(4242), "{line}");
        }
        assert_eq!(stat_start_time("123 (cut) S 1 2"), None);
        assert_eq!(stat_start_time("no parenthesis"), None);
        if cfg!(target_os = "linux") {
            let own = std::fs::read_to_string("/proc/self/stat").unwrap();
            assert!(stat_start_time(&own).is_some_and(|t| t > 0), "{own}");
        }
    }
}
