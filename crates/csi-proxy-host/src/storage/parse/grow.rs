//! Reading a variable-length answer (an IOCTL descriptor whose size the
//! caller cannot know in advance): ask with a first buffer size, and while
//! the parser says the answer is truncated, ask again with more room. The
//! loop is platform-neutral so that it is tested here with the real parsers
//! and a simulated device; the Windows backend supplies the IOCTL.

use super::ParseError;

/// Why [`read_growing`] failed.
#[derive(Debug, PartialEq, Eq)]
pub enum GrowError<E> {
    /// The device refused a request.
    Ask(E),
    /// The answer could not be parsed, or was still truncated at `max`.
    Parse(ParseError),
}

/// Asks `ask(size)` for at most `size` bytes, starting with `first`, and
/// parses the answer with `parse`. A [`ParseError::Truncated`] answer is
/// asked for again with the room the parser says it needs, at least double
/// the last size, never more than `max`. `ask` returning `Ok(None)` means
/// the device does not support the request: the result is `Ok(None)`.
pub fn read_growing<T, E>(
    first: usize,
    max: usize,
    mut ask: impl FnMut(usize) -> Result<Option<Vec<u8>>, E>,
    parse: impl Fn(&[u8]) -> Result<T, ParseError>,
) -> Result<Option<T>, GrowError<E>> {
    let mut size = first.clamp(1, max.max(1));
    loop {
        let Some(out) = ask(size).map_err(GrowError::Ask)? else {
            return Ok(None);
        };
        match parse(&out) {
            Ok(v) => return Ok(Some(v)),
            // A driver may fill the buffer or return just the header (whose
            // size field is the full length): more room, doubling at least.
            Err(ParseError::Truncated { need, .. }) if size < max => {
                size = need.max(size.saturating_mul(2)).min(max);
            }
            Err(e) => return Err(GrowError::Parse(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::parse::device_id::{page83_id, parse_storage_device_id_descriptor};
    use crate::storage::parse::fixtures::{device_id_descriptor, FixtureId};

    /// A device whose answer is `full`: it returns the first `size` bytes
    /// (as a driver that fills the caller's buffer does), and records the
    /// sizes it was asked with.
    fn device(full: &[u8], asked: &mut Vec<usize>, size: usize) -> Result<Option<Vec<u8>>, ()> {
        asked.push(size);
        Ok(Some(full[..size.min(full.len())].to_vec()))
    }

    /// 40 identifiers of 64 bytes (80 each with their header): a
    /// descriptor of 3212 bytes, past the first 1 KiB buffer.
    fn large() -> (Vec<FixtureId>, Vec<u8>) {
        let ids: Vec<FixtureId> = (0..40u8)
            .map(|i| FixtureId::new(1, 3, u32::from(i % 3), &[i; 64]))
            .collect();
        let full = device_id_descriptor(&ids);
        assert!(full.len() > 3 * 1024, "{}", full.len());
        (ids, full)
    }

    #[test]
    fn a_descriptor_past_the_first_buffer_is_asked_for_again() {
        let (ids, full) = large();
        let mut asked = Vec::new();
        let got = read_growing(
            1024,
            1 << 20,
            |size| device(&full, &mut asked, size),
            parse_storage_device_id_descriptor,
        )
        .unwrap()
        .unwrap();
        let want: Vec<_> = ids.iter().map(FixtureId::identifier).collect();
        assert_eq!(got, want);
        // 1 KiB, then at least double each time until it fits.
        assert_eq!(asked[0], 1024);
        assert!(
            asked.len() >= 2 && *asked.last().unwrap() >= full.len(),
            "{asked:?}"
        );
        assert!(asked.windows(2).all(|w| w[1] >= 2 * w[0]), "{asked:?}");
        // The page-83 id comes from the first device-associated identifier.
        assert_eq!(page83_id(&got).as_deref(), Some(&*"00".repeat(64)));
    }

    #[test]
    fn a_header_only_answer_is_asked_for_with_its_announced_size() {
        // A driver that returns only the 12-byte header (Size = the full
        // length) when the buffer is too small, the whole answer otherwise.
        let (ids, full) = large();
        let mut asked = Vec::new();
        let got = read_growing(
            1024,
            1 << 20,
            |size| {
                asked.push(size);
                Ok::<_, ()>(Some(if size >= full.len() {
                    full.clone()
                } else {
                    full[..12].to_vec()
                }))
            },
            parse_storage_device_id_descriptor,
        )
        .unwrap()
        .unwrap();
        assert_eq!(got.len(), ids.len());
        assert!(asked.len() >= 2, "{asked:?}");
    }

    #[test]
    fn the_maximum_bounds_the_asks() {
        let (_, full) = large();
        let mut asked = Vec::new();
        let err = read_growing(
            1024,
            2048,
            |size| device(&full, &mut asked, size),
            parse_storage_device_id_descriptor,
        )
        .unwrap_err();
        assert!(
            matches!(err, GrowError::Parse(ParseError::Truncated { .. })),
            "{err:?}"
        );
        assert_eq!(asked, vec![1024, 2048]);
    }

    #[test]
    fn unsupported_and_refused_requests_end_at_once() {
        let mut calls = 0;
        let none = read_growing(
            1024,
            1 << 20,
            |_| {
                calls += 1;
                Ok::<_, ()>(None)
            },
            parse_storage_device_id_descriptor,
        );
        assert_eq!(none, Ok(None));
        let refused = read_growing(
            1024,
            1 << 20,
            |_| {
                calls += 1;
                Err::<Option<Vec<u8>>, _>("access denied")
            },
            parse_storage_device_id_descriptor,
        );
        assert_eq!(refused, Err(GrowError::Ask("access denied")));
        assert_eq!(calls, 2);
    }
}
