//! The one conversion of a Rust string to the UTF-16 the Windows API takes
//! (platform-neutral, so it is tested on Linux too). A string with an
//! embedded NUL is refused: the OS would end the string there, and act on
//! a name other than the one that was checked.

use std::io;

/// A string refused for an embedded NUL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} contains a NUL character")]
pub struct EmbeddedNul(String);

impl From<EmbeddedNul> for io::Error {
    fn from(e: EmbeddedNul) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidInput, e)
    }
}

impl From<EmbeddedNul> for crate::Error {
    fn from(e: EmbeddedNul) -> crate::Error {
        crate::Error::InvalidArgument(e.to_string())
    }
}

/// `s` as UTF-16 code units, without a terminator (a counted string:
/// `UNICODE_STRING`, a relative name).
pub fn units(s: &str) -> Result<Vec<u16>, EmbeddedNul> {
    if s.contains('\0') {
        // The string is shown in the error: cut it short.
        return Err(EmbeddedNul(s.chars().take(64).collect()));
    }
    Ok(s.encode_utf16().collect())
}

/// `s` as a NUL-terminated UTF-16 string (a `PCWSTR`).
pub fn nul_terminated(s: &str) -> Result<Vec<u16>, EmbeddedNul> {
    let mut w = units(s)?;
    w.push(0);
    Ok(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_and_terminates() {
        assert_eq!(units("aé").unwrap(), [0x61, 0xe9]);
        assert_eq!(units("𝄞").unwrap(), [0xd834, 0xdd1e]);
        assert_eq!(nul_terminated("C:\\").unwrap(), [0x43, 0x3a, 0x5c, 0]);
        assert_eq!(nul_terminated("").unwrap(), [0]);
    }

    #[test]
    fn refuses_an_embedded_nul() {
        for s in ["a\0b", "\0", "end\0"] {
            assert!(units(s).is_err(), "{s:?}");
            let e = nul_terminated(s).unwrap_err();
            assert!(e.to_string().contains("contains a NUL character"), "{e}");
            assert_eq!(
                io::Error::from(e.clone()).kind(),
                io::ErrorKind::InvalidInput
            );
            assert!(matches!(
                crate::Error::from(e),
                crate::Error::InvalidArgument(_)
            ));
        }
    }
}
