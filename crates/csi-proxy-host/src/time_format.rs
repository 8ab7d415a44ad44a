//! The one home of wall-clock time formatting for every crate: UTC civil
//! time from seconds since the Unix epoch (date arithmetic of our own, no
//! time-zone data), RFC 3339 with microseconds (the audit log), and the
//! local civil time the klog header shows on Unix (`localtime_r`, the one
//! `unsafe` of it).

use std::fmt::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

/// A civil (calendar) time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Civil {
    pub year: i64,
    pub month: u32,
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
}

/// UTC from seconds since the Unix epoch (Howard Hinnant's
/// civil-from-days algorithm).
pub fn civil(secs: i64) -> Civil {
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    // All values but the year are small and non-negative by construction.
    let small = |v: i64| u32::try_from(v).unwrap_or_default();
    Civil {
        year,
        month: small(month),
        day: small(day),
        hour: small(sod / 3_600),
        minute: small(sod % 3_600 / 60),
        second: small(sod % 60),
    }
}

/// The local civil time of `secs` since the Unix epoch, `None` if the
/// system cannot give it.
#[cfg(unix)]
pub fn local(secs: i64) -> Option<Civil> {
    let t = libc::time_t::try_from(secs).ok()?;
    // SAFETY: `tm` is plain data; localtime_r only writes into it.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are valid for the call.
    let res = unsafe { libc::localtime_r(&t, &mut tm) };
    if res.is_null() {
        return None;
    }
    let field = |v: libc::c_int| u32::try_from(v).ok();
    Some(Civil {
        year: i64::from(tm.tm_year) + 1900,
        month: field(tm.tm_mon)? + 1,
        day: field(tm.tm_mday)?,
        hour: field(tm.tm_hour)?,
        minute: field(tm.tm_min)?,
        second: field(tm.tm_sec)?,
    })
}

/// Append `t` as RFC 3339 UTC with microseconds:
/// `2026-11-27T04:01:15.123456Z`.
pub fn rfc3339_micros(out: &mut String, t: SystemTime) {
    let since = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let c = civil(i64::try_from(since.as_secs()).unwrap_or(i64::MAX));
    let _ = write!(
        out,
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z",
        c.year,
        c.month,
        c.day,
        c.hour,
        c.minute,
        c.second,
        since.subsec_micros()
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn rfc3339() {
        let mut out = String::new();
        rfc3339_micros(
            &mut out,
            UNIX_EPOCH + Duration::from_micros(1_709_251_198_000_007),
        );
        assert_eq!(out, "2024-02-29T23:59:58.000007Z");
    }

    #[test]
    fn civil_dates() {
        assert_eq!(
            civil(0),
            Civil {
                year: 1970,
                month: 1,
                day: 1,
                hour: 0,
                minute: 0,
                second: 0
            }
        );
        assert_eq!(civil(951_914_096).year, 2000);
        assert_eq!((civil(951_914_096).month, civil(951_914_096).day), (3, 1));
        assert_eq!(civil(1_798_761_599).year, 2026); // 2026-12-31T23:59:59Z
        assert_eq!(civil(1_798_761_600).year, 2027);
    }

    #[cfg(unix)]
    #[test]
    fn local_time_is_a_civil_time() {
        let c = local(1_709_251_198).expect("local time");
        // 2024-02-29T23:59:58Z is Feb 29 or Mar 1 in every time zone.
        assert_eq!(c.year, 2024);
        assert!(matches!((c.month, c.day), (2, 29) | (3, 1)), "{c:?}");
        assert!(c.hour < 24 && c.minute < 60 && c.second < 61);
    }
}
