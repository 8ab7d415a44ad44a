//! The error of every parser in this module.

/// Why a buffer or string could not be parsed.
///
/// `what` names the structure or field being read (e.g.
/// `"STORAGE_IDENTIFIER"`), so a message is useful without more context.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// The input ends before the structure does. `need` is the number of
    /// bytes the structure requires from the start of the input (saturated
    /// at `usize::MAX` when that number itself overflows), `have` the number
    /// available.
    #[error("{what} is truncated: need {need} bytes, have {have}")]
    Truncated {
        what: &'static str,
        need: usize,
        have: usize,
    },
    /// The input is long enough but its content is not acceptable.
    #[error("invalid {what}: {detail}")]
    Invalid { what: &'static str, detail: String },
}

impl ParseError {
    /// A [`ParseError::Invalid`] for `what`.
    pub fn invalid(what: &'static str, detail: impl Into<String>) -> Self {
        ParseError::Invalid {
            what,
            detail: detail.into(),
        }
    }

    /// A [`ParseError::Truncated`] for `what`.
    pub fn truncated(what: &'static str, need: usize, have: usize) -> Self {
        ParseError::Truncated { what, need, have }
    }
}

/// Rejects a negative offset or length, or an end beyond `i64::MAX`.
pub(crate) fn check_range(what: &'static str, offset: i64, length: i64) -> Result<(), ParseError> {
    if offset < 0 || length < 0 {
        return Err(ParseError::invalid(
            what,
            format!("negative offset or length ({offset}, {length})"),
        ));
    }
    if offset.checked_add(length).is_none() {
        return Err(ParseError::invalid(
            what,
            format!("offset {offset} + length {length} overflows"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_structure_and_the_sizes() {
        let e = ParseError::truncated("VOLUME_DISK_EXTENTS", 32, 8);
        assert_eq!(
            e.to_string(),
            "VOLUME_DISK_EXTENTS is truncated: need 32 bytes, have 8"
        );
        let e = ParseError::invalid("volume id", "missing braces");
        assert_eq!(e.to_string(), "invalid volume id: missing braces");
    }
}
