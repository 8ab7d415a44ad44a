//! A secret (an SMB credential, a CHAP secret) as a BSTR, wiped when it is
//! freed.
//!
//! `BSTR::from(&str)` encodes into a temporary `Vec<u16>` that is freed
//! unwiped. Here the UTF-16 form is written once into a zeroizing buffer
//! sized beforehand (no reallocation leaves a copy behind), the BSTR is
//! allocated from it, and the BSTR's own buffer is zeroed before
//! `SysFreeString`. What COM copies out of it (the in-parameter object,
//! the marshalled call to the WMI service) is beyond this process's reach.

use windows::core::BSTR;
use windows::Win32::Foundation::SysAllocStringLen;
use zeroize::Zeroizing;

use crate::{Error, Result};

/// An owned BSTR holding a secret; zeroed, then freed, on drop.
pub(super) struct SecretBstr(BSTR);

impl SecretBstr {
    /// The UTF-16 form of `s` in a new BSTR. An embedded NUL is refused
    /// as [`crate::wide`] refuses it, without showing the secret.
    pub(super) fn new(s: &str) -> Result<SecretBstr> {
        if s.contains('\0') {
            return Err(Error::InvalidArgument(
                "a secret parameter contains a NUL character".into(),
            ));
        }
        let len = s.encode_utf16().count();
        let mut wide = Zeroizing::new(Vec::<u16>::with_capacity(len));
        // Within the capacity: the buffer is never moved.
        wide.extend(s.encode_utf16());
        debug_assert_eq!(wide.len(), len);
        // SAFETY: `wide` is a valid slice of `len` UTF-16 units, read (and
        // copied) by the call; the returned BSTR is owned by us.
        let b = unsafe { SysAllocStringLen(Some(wide.as_slice())) };
        if b.is_empty() && len > 0 {
            return Err(Error::Internal(
                "SysAllocStringLen failed for a secret parameter".into(),
            ));
        }
        Ok(SecretBstr(b))
    }

    /// The BSTR, for a VARIANT that borrows it (never frees it).
    pub(super) fn as_raw(&self) -> *const u16 {
        if self.0.is_empty() {
            std::ptr::null()
        } else {
            self.0.as_ptr()
        }
    }
}

impl SecretBstr {
    /// Zeroes the BSTR's characters (it stays allocated).
    fn wipe(&mut self) {
        let len = self.0.len();
        if len == 0 {
            return;
        }
        let p = self.0.as_ptr() as *mut u16;
        for i in 0..len {
            // SAFETY: a BSTR's buffer is `len` (SysStringLen) writable
            // UTF-16 units that this value owns until the BSTR is dropped;
            // volatile so the stores are not elided.
            unsafe { std::ptr::write_volatile(p.add(i), 0) };
        }
        std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
    }
}

impl Drop for SecretBstr {
    fn drop(&mut self) {
        self.wipe();
        // The BSTR field is dropped next: SysFreeString.
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_the_utf16_form_and_is_zeroed_before_it_is_freed() {
        let secret = "user\\:pässwörd€𝄞";
        let want: Vec<u16> = secret.encode_utf16().collect();
        let mut b = SecretBstr::new(secret).unwrap();
        assert_eq!(&*b.0, want.as_slice());
        assert_eq!(b.as_raw(), b.0.as_ptr());
        b.wipe();
        assert_eq!(b.0.len(), want.len(), "still allocated, same length");
        assert!(b.0.iter().all(|&c| c == 0), "{:?}", &*b.0);
        drop(b);
        let empty = SecretBstr::new("").unwrap();
        assert!(empty.as_raw().is_null());
    }
}
