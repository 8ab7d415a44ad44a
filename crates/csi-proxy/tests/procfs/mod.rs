//! Reading Linux `/proc/<pid>/stat` lines, shared by the tests and the
//! benches that measure a process's CPU time.

/// utime + stime, in clock ticks (USER_HZ), of a `/proc/<pid>/stat` or
/// `/proc/<pid>/task/<tid>/stat` line.
pub fn cpu_ticks(stat: &str) -> u64 {
    // The command name may hold spaces: fields are counted after its ')'.
    // Fields 14 and 15 of the whole line (utime, stime) are 11 and 12 here.
    let rest = &stat[stat.rfind(')').expect("a stat line") + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}
