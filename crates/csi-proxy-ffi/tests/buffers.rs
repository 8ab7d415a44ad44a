//! `csi_proxy_buffer_free` frees the whole buffer whether the caller gives
//! its length or 0: counted by a global allocator of this test binary (one
//! test only, so nothing else allocates meanwhile).

use csi_proxy::{csi_proxy_buffer_free, csi_proxy_call, CsiProxyBuffer};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is passed to the system allocator unchanged; only the
// live byte count is kept beside it.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::SeqCst);
        // SAFETY: as the caller's contract.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::SeqCst);
        // SAFETY: as the caller's contract.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static A: Counting = Counting;

/// A buffer of the library: the error message of a call without a host.
fn buffer() -> CsiProxyBuffer {
    let mut out = CsiProxyBuffer {
        ptr: std::ptr::null_mut(),
        len: 0,
    };
    // SAFETY: a NULL host is refused with a message in `out`.
    let code = unsafe {
        csi_proxy_call(
            std::ptr::null(),
            std::ptr::null(),
            0,
            std::ptr::null(),
            0,
            std::ptr::null(),
            0,
            &mut out,
        )
    };
    assert_eq!(code, 3);
    assert!(!out.ptr.is_null() && out.len > 0);
    out
}

#[test]
fn a_buffer_freed_with_length_0_or_its_length_is_freed_whole() {
    // Warm up whatever the first call allocates once.
    let b = buffer();
    // SAFETY: freed once.
    unsafe { csi_proxy_buffer_free(b.ptr, b.len) };
    for len_given in [None, Some(0)] {
        let before = LIVE.load(Ordering::SeqCst);
        for _ in 0..1000 {
            let b = buffer();
            // SAFETY: a buffer of the library, freed once.
            unsafe { csi_proxy_buffer_free(b.ptr, len_given.unwrap_or(b.len)) };
        }
        let after = LIVE.load(Ordering::SeqCst);
        assert!(
            after - before < 1024,
            "{len_given:?}: {} bytes still allocated after 1000 buffers",
            after - before
        );
    }
    // NULL is ignored.
    // SAFETY: NULL is allowed.
    unsafe { csi_proxy_buffer_free(std::ptr::null_mut(), 5) };
}
