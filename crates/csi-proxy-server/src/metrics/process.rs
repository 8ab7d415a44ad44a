//! Process metrics, read at scrape time, with the names Prometheus' client
//! libraries use: `process_cpu_seconds_total`,
//! `process_resident_memory_bytes`, `process_virtual_memory_bytes`,
//! `process_open_fds`, `process_max_fds`, `process_start_time_seconds`.
//!
//! Linux reads `/proc/self`; Windows asks the process APIs (as Go's client
//! does there: resident = working set, virtual = private bytes, open fds =
//! open handles). A value that cannot be read is left out of the scrape.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// One reading of the process.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Reading {
    pub cpu_seconds: Option<f64>,
    pub resident_bytes: Option<f64>,
    pub virtual_bytes: Option<f64>,
    pub open_fds: Option<f64>,
    pub max_fds: Option<f64>,
    pub start_time_seconds: Option<f64>,
}

#[derive(Debug)]
pub(super) struct ProcessCollector {}

impl ProcessCollector {
    pub(super) fn new() -> Self {
        ProcessCollector {}
    }
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let r = read();
        if let Some(v) = r.cpu_seconds {
            let c = ConstCounter::new(v);
            let e = encoder.encode_descriptor(
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds",
                None,
                c.metric_type(),
            )?;
            c.encode(e)?;
        }
        let gauges = [
            (
                "process_resident_memory_bytes",
                "Resident memory size in bytes",
                r.resident_bytes,
            ),
            (
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes",
                r.virtual_bytes,
            ),
            (
                "process_open_fds",
                "Number of open file descriptors (handles on Windows)",
                r.open_fds,
            ),
            (
                "process_max_fds",
                "Maximum number of open file descriptors",
                r.max_fds,
            ),
            (
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds",
                r.start_time_seconds,
            ),
        ];
        for (name, help, value) in gauges {
            if let Some(v) = value {
                let g = ConstGauge::new(v);
                let e = encoder.encode_descriptor(name, help, None, g.metric_type())?;
                g.encode(e)?;
            }
        }
        Ok(())
    }
}

#[cfg(target_os = "linux")]
pub(super) fn read() -> Reading {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let boot = std::fs::read_to_string("/proc/stat").ok().and_then(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("btime "))
            .and_then(|v| v.trim().parse::<f64>().ok())
    });
    // SAFETY: sysconf only reads its integer argument.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    // SAFETY: as above.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as f64;
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes only the struct we pass.
    let max_fds = (unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0)
        .then_some(lim.rlim_cur as f64);
    let open_fds = std::fs::read_dir("/proc/self/fd")
        .ok()
        .map(|d| d.count().saturating_sub(1) as f64); // the directory handle itself
    let mut r = parse_stat(&stat, ticks, page, boot);
    r.open_fds = open_fds;
    r.max_fds = max_fds;
    r
}

/// `/proc/self/stat`: fields after the command name (which may hold
/// spaces and parentheses, so split after the last `)`).
#[cfg(any(target_os = "linux", test))]
pub(super) fn parse_stat(stat: &str, ticks: f64, page: f64, boot: Option<f64>) -> Reading {
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return Reading::default();
    };
    // rest[0] is field 3 (state).
    let f: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| f.get(n - 3).and_then(|v| v.parse::<f64>().ok());
    let valid_ticks = ticks > 0.0;
    Reading {
        cpu_seconds: match (field(14), field(15)) {
            (Some(u), Some(s)) if valid_ticks => Some((u + s) / ticks),
            _ => None,
        },
        virtual_bytes: field(23),
        resident_bytes: field(24).map(|p| p * page),
        start_time_seconds: match (field(22), boot) {
            (Some(start), Some(boot)) if valid_ticks => Some(boot + start / ticks),
            _ => None,
        },
        open_fds: None,
        max_fds: None,
    }
}

#[cfg(windows)]
pub(super) fn read() -> Reading {
    win::read()
}

#[cfg(not(any(target_os = "linux", windows)))]
pub(super) fn read() -> Reading {
    Reading::default()
}

/// The Windows process APIs; all the unsafe code of this module.
#[cfg(windows)]
mod win {
    use super::Reading;
    use windows_sys::Win32::Foundation::FILETIME;
    use windows_sys::Win32::System::ProcessStatus::{
        GetProcessMemoryInfo, PROCESS_MEMORY_COUNTERS, PROCESS_MEMORY_COUNTERS_EX,
    };
    use windows_sys::Win32::System::Threading::{
        GetCurrentProcess, GetProcessHandleCount, GetProcessTimes,
    };

    /// Seconds between 1601-01-01 (FILETIME's epoch) and 1970-01-01.
    const EPOCH_DIFFERENCE: f64 = 11_644_473_600.0;

    fn ticks(t: &FILETIME) -> f64 {
        ((u64::from(t.dwHighDateTime) << 32) | u64::from(t.dwLowDateTime)) as f64
    }

    pub(super) fn read() -> Reading {
        let mut r = Reading {
            // Go's client reports this constant on Windows.
            max_fds: Some(16_777_216.0),
            ..Reading::default()
        };
        // SAFETY: a pseudo handle for this process; never closed.
        let me = unsafe { GetCurrentProcess() };
        let zero = FILETIME {
            dwLowDateTime: 0,
            dwHighDateTime: 0,
        };
        let (mut created, mut exited, mut kernel, mut user) = (zero, zero, zero, zero);
        // SAFETY: four valid FILETIME out pointers and our own process handle.
        if unsafe { GetProcessTimes(me, &mut created, &mut exited, &mut kernel, &mut user) } != 0 {
            r.cpu_seconds = Some((ticks(&kernel) + ticks(&user)) / 1e7);
            r.start_time_seconds = Some(ticks(&created) / 1e7 - EPOCH_DIFFERENCE);
        }
        // SAFETY: PROCESS_MEMORY_COUNTERS_EX is plain data; zero is valid.
        let mut mem: PROCESS_MEMORY_COUNTERS_EX = unsafe { std::mem::zeroed() };
        mem.cb = size_of::<PROCESS_MEMORY_COUNTERS_EX>() as u32;
        // SAFETY: `mem` is writable and `cb` says its size; the _EX struct
        // starts with the plain one, as the API documents.
        let ok = unsafe {
            GetProcessMemoryInfo(
                me,
                (&mut mem as *mut PROCESS_MEMORY_COUNTERS_EX).cast::<PROCESS_MEMORY_COUNTERS>(),
                mem.cb,
            )
        };
        if ok != 0 {
            r.resident_bytes = Some(mem.WorkingSetSize as f64);
            r.virtual_bytes = Some(mem.PrivateUsage as f64);
        }
        let mut handles = 0u32;
        // SAFETY: a valid out pointer and our own process handle.
        if unsafe { GetProcessHandleCount(me, &mut handles) } != 0 {
            r.open_fds = Some(f64::from(handles));
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_line_with_spaces_in_the_name() {
        let stat = "1234 (csi (proxy) x) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 \
                    4 0 1000 123456789 300 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0";
        let r = parse_stat(stat, 100.0, 4096.0, Some(1_700_000_000.0));
        assert_eq!(r.cpu_seconds, Some(3.0));
        assert_eq!(r.virtual_bytes, Some(123_456_789.0));
        assert_eq!(r.resident_bytes, Some(300.0 * 4096.0));
        assert_eq!(r.start_time_seconds, Some(1_700_000_010.0));
        assert_eq!(
            parse_stat("garbage", 100.0, 4096.0, None),
            Reading::default()
        );
    }

    #[test]
    fn this_process_can_be_read() {
        let r = read();
        assert!(r.cpu_seconds.is_some_and(|c| c >= 0.0), "{r:?}");
        assert!(r.resident_bytes.is_some_and(|b| b > 0.0), "{r:?}");
        // Wine's GetProcessHandleCount reports 0 handles: only real
        // Windows (and Linux) can show a positive count.
        let min_fds = if cfg!(windows) { 0.0 } else { 1.0 };
        assert!(r.open_fds.is_some_and(|n| n >= min_fds), "{r:?}");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let start = r.start_time_seconds.expect("start time");
        assert!(
            start <= now + 1.0 && start > now - 86_400.0 * 365.0,
            "{start} vs {now}"
        );
    }
}
