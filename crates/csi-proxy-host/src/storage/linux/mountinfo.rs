//! Reading `/proc/<pid>/mountinfo`: streamed as bytes (the lines are parsed
//! by `storage::parse::mountinfo`), with bounds on a line, a table and a
//! whole scan, so a namespace with a huge mount table costs a bounded read
//! and an error, never unbounded memory.

use std::io::{self, BufRead, BufReader, Read};

pub use crate::storage::parse::mountinfo::{of_device, Mount};
use crate::storage::parse::mountinfo::{parse_line, Malformed};

/// Longest line read: a mount point and a root of `PATH_MAX` bytes, each
/// escaped to four times its size, plus long filesystem options.
pub const MAX_LINE: u64 = 1 << 20;
/// Largest table read (a node with thousands of mounts has a few MiB).
pub const MAX_TABLE: u64 = 64 << 20;

/// The mounts of this process's mount namespace.
pub fn read() -> io::Result<Vec<Mount>> {
    let f = std::fs::File::open("/proc/self/mountinfo")?;
    let (mut out, mut unbounded) = (Vec::new(), u64::MAX);
    scan(f, &mut unbounded, |m| out.push(m))?;
    Ok(out)
}

/// Gives every mount of the table `r` to `each`, reading at most
/// [`MAX_TABLE`] bytes and at most `budget` (which it decreases by what it
/// read). An I/O error, a table or line too long, or a line that is not an
/// entry is an error: the table is then unknown, not empty.
pub fn scan(r: impl Read, budget: &mut u64, mut each: impl FnMut(Mount)) -> io::Result<()> {
    let mut r = BufReader::with_capacity(64 * 1024, r);
    let mut line = Vec::new();
    let mut total = 0u64;
    for number in 1.. {
        line.clear();
        let limit = MAX_LINE.min(*budget).min(MAX_TABLE - total) + 1;
        let n = (&mut r).take(limit).read_until(b'\n', &mut line)? as u64;
        if n == 0 {
            return Ok(());
        }
        if n == limit {
            let what = if n > MAX_LINE {
                format!("line {number} is longer than {MAX_LINE} bytes")
            } else if total + n > MAX_TABLE {
                format!("the table is larger than {} MiB", MAX_TABLE >> 20)
            } else {
                "the scan's read budget is spent".to_string()
            };
            *budget = budget.saturating_sub(n);
            return Err(io::Error::new(io::ErrorKind::InvalidData, what));
        }
        total += n;
        *budget = budget.saturating_sub(n);
        let text = line.strip_suffix(b"\n").unwrap_or(&line);
        if text.is_empty() {
            continue;
        }
        let m = parse_line(text).map_err(|reason| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                Malformed {
                    line: number,
                    reason,
                },
            )
        })?;
        each(m);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &[u8] = b"22 1 254:0 / / rw shared:1 - ext4 /dev/vda rw\n";

    fn all(r: &[u8], budget: &mut u64) -> io::Result<Vec<Mount>> {
        let mut out = Vec::new();
        scan(r, budget, |m| out.push(m))?;
        Ok(out)
    }

    #[test]
    fn reads_our_own_mounts() {
        let m = read().unwrap();
        assert!(m.iter().any(|m| m.mount_point == b"/"));
    }

    #[test]
    fn streams_and_counts() {
        let mut t = LINE.to_vec();
        t.extend_from_slice(b"23 22 7:1 / /mnt/\xff rw - ext4 /dev/loop0p1 rw");
        let mut budget = 1000;
        let m = all(&t, &mut budget).unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(m[1].mount_point, b"/mnt/\xff");
        assert_eq!(budget, 1000 - t.len() as u64);
    }

    #[test]
    fn bounds_are_errors_not_truncation() {
        // The budget ends inside the second line.
        let t = [LINE, LINE].concat();
        let mut budget = LINE.len() as u64 + 5;
        let e = all(&t, &mut budget).unwrap_err();
        assert!(e.to_string().contains("budget"), "{e}");
        assert_eq!(budget, 0);
        // Exactly enough budget is enough.
        let mut budget = t.len() as u64;
        assert_eq!(all(&t, &mut budget).unwrap().len(), 2);
        // One line longer than MAX_LINE.
        let mut long = b"22 1 254:0 / /".to_vec();
        long.resize(MAX_LINE as usize + 10, b'a');
        long.extend_from_slice(b" rw - ext4 x rw\n");
        let e = all(&long, &mut { u64::MAX }).unwrap_err();
        assert!(e.to_string().contains("longer than"), "{e}");
        // A malformed line names itself.
        let t = [LINE, b"junk\n", LINE].concat();
        let e = all(&t, &mut { u64::MAX }).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(e.to_string().starts_with("line 2:"), "{e}");
    }

    #[test]
    fn a_table_larger_than_the_cap_is_an_error() {
        // A reader that repeats one line forever.
        struct Endless(usize);
        impl Read for Endless {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                for b in buf.iter_mut() {
                    *b = LINE[self.0 % LINE.len()];
                    self.0 += 1;
                }
                Ok(buf.len())
            }
        }
        let mut n = 0usize;
        let e = scan(Endless(0), &mut { u64::MAX }, |_| n += 1).unwrap_err();
        assert!(e.to_string().contains("larger than 64 MiB"), "{e}");
        assert_eq!(n as u64, MAX_TABLE / LINE.len() as u64);
    }
}
