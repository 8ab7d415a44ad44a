//! Fuzz `csi_proxy_host::storage::parse::content`: a device built from
//! arbitrary bytes (its size, and the regions read from its start and its
//! end), then `identify`, `describe` and `first_nonzero_in_write_span`.
//! None may panic; every signature found lies inside the device, and the
//! first non-zero byte reported is inside the device.
//!
//! Input: 8 bytes of size (little-endian), 2 bytes splitting the rest
//! into head and tail; the size is folded so that most inputs describe a
//! device just larger than what they carry, where the two regions meet
//! or overlap as on small disks.
#![no_main]

use csi_proxy_host::storage::parse::content::{
    describe, first_nonzero_in_write_span, identify, Device, HEAD_LEN, TAIL_LEN,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 10 {
        return;
    }
    let raw = u64::from_le_bytes(data[..8].try_into().unwrap());
    let split = usize::from(u16::from_le_bytes([data[8], data[9]]));
    let rest = &data[10..];
    let (head, tail) = rest.split_at(split.min(rest.len()));
    let (head, tail) = (&head[..head.len().min(HEAD_LEN)], &tail[..tail.len().min(TAIL_LEN)]);
    // Mostly sizes near what was given (so that tail offsets land in the
    // bytes), sometimes anything up to u64::MAX.
    let size = if raw & 1 == 0 {
        (head.len().max(tail.len()) as u64).saturating_add((raw >> 1) % 4_194_304)
    } else {
        raw
    };
    let dev = Device::new(head, tail, size);
    let found = identify(&dev);
    for f in &found {
        assert!(f.offset < size, "{f:?} beyond a device of {size} bytes");
    }
    let _ = describe(&found);
    if let Some(o) = first_nonzero_in_write_span(&dev) {
        assert!(o < size);
    }
});
