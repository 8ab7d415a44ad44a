//! What a disk or a volume holds, identified from its first and last bytes
//! before anything is written over it: filesystems, volume-manager and RAID
//! members, encrypted containers, swap, partition tables.
//!
//! A destructive operation (PartitionDisk on a disk without a partition
//! table, FormatVolume) reads [`HEAD_LEN`] bytes from the start and
//! [`TAIL_LEN`] bytes from the end of the device through the handle it
//! already holds ([`read_regions`]), and [`identify`] names every signature
//! found there. The probes look where libblkid looks (the start and the end
//! of the device; some formats keep their metadata only at the end), and
//! the names are the `TYPE` (or `PTTYPE`) values `blkid -p` prints, so an
//! operator can compare the two.
//!
//! Pure code: no I/O beyond the read callback, every read bounds-checked,
//! so it is compiled and tested on every platform and fuzzed.

mod probes;
#[cfg(test)]
mod tests;

use std::io;

/// Bytes read from the start of a device: past the furthest signature a
/// probe looks for from the start (a LUKS2 secondary header after 4 MiB of
/// primary metadata, VMFS at 2 MiB, UDF anchors on 4 KiB sectors at 1 MiB)
/// and the first MiB a partition table is written over.
pub const HEAD_LEN: usize = (4 << 20) + 4096;

/// Bytes read from the end of a device: the metadata kept at the end (ZFS
/// labels 2 and 3, md 0.90/1.0 superblocks, DDF and vendor RAID anchors up
/// to Promise's furthest copy 3087 sectors from the end, the backup GPT
/// header) and the last MiB a partition table is written over.
pub const TAIL_LEN: usize = 2 << 20;

/// Bytes read first where only "is anything there?" is asked
/// (IsVolumeFormatted): the signatures of every common filesystem lie in
/// them, so a formatted volume costs this much; only when nothing is found
/// are the whole regions read. A probe that needs bytes not read answers
/// nothing, so what is found here is found in the whole regions too.
pub const QUICK_LEN: usize = 128 << 10;

/// Whether anything is identified in the first [`QUICK_LEN`] bytes of a
/// device of `size` bytes (`read_at` as for [`read_regions`]).
pub fn quick_found(
    size: u64,
    mut read_at: impl FnMut(u64, &mut [u8]) -> io::Result<()>,
) -> io::Result<bool> {
    let len = usize::try_from(size.min(QUICK_LEN as u64)).unwrap_or(QUICK_LEN);
    let mut head = vec![0u8; len];
    read_at(0, &mut head)?;
    Ok(!identify(&Device::new(&head, &[], size)).is_empty())
}

/// The span at each end that PartitionDisk writes over and checks for
/// zeros.
pub const WRITE_SPAN: usize = 1 << 20;

/// The first bytes of a region that FormatVolume requires to be zero,
/// whole, when nothing is identified in it (see [`zero_check_spans`]).
pub const ZERO_HEAD: u64 = 64 << 20;

/// Beyond [`ZERO_HEAD`], [`ZERO_SAMPLE`] bytes are checked at every
/// multiple of this offset (4 GiB: every 256 MiB, and every GiB, added
/// more than 100 ms to the check of an empty 1 TiB disk; see the storage
/// bench's `ONLY=check`).
pub const ZERO_SAMPLE_EVERY: u64 = 4 << 30;

/// The bytes checked at each multiple of [`ZERO_SAMPLE_EVERY`].
pub const ZERO_SAMPLE: u64 = 4096;

/// The spans `(offset, length)` of a region of `size` bytes that must be
/// zero for an empty volume to be formatted (or a partition created over
/// it): the first [`ZERO_HEAD`] bytes, [`ZERO_SAMPLE`] bytes at every
/// multiple of [`ZERO_SAMPLE_EVERY`], and the last [`WRITE_SPAN`] bytes;
/// sorted, not overlapping, inside the region.
pub fn zero_check_spans(size: u64) -> Vec<(u64, u64)> {
    let mut spans = vec![(0, size.min(ZERO_HEAD))];
    let mut at = ZERO_SAMPLE_EVERY;
    while at < size {
        spans.push((at, ZERO_SAMPLE.min(size - at)));
        at += ZERO_SAMPLE_EVERY;
    }
    let tail = size.min(WRITE_SPAN as u64);
    spans.push((size - tail, tail));
    let mut merged: Vec<(u64, u64)> = Vec::with_capacity(spans.len());
    for (off, len) in spans {
        if len == 0 {
            continue;
        }
        match merged.last_mut() {
            Some((o, l)) if off <= *o + *l => *l = (*l).max(off + len - *o),
            _ => merged.push((off, len)),
        }
    }
    merged
}

/// The regions of a device ([`Regions`]) and the first non-zero byte of
/// its [`zero_check_spans`] that no identified filesystem covers: what
/// FormatVolume and PartitionDisk decide on.
pub struct Scanned {
    pub regions: Regions,
    /// `None` when every byte of the spans checked is zero, or when
    /// something other than a filesystem was identified (then the spans
    /// were not read: that is refused whatever they hold).
    pub nonzero: Option<u64>,
}

/// Where the zero check of a device starts: 0 when nothing is identified;
/// when only filesystems are, the largest extent they record
/// ([`filesystem_extent`]), or 0 if any of them records none this code
/// reads (a filesystem found never stands for "the rest is nothing");
/// `None` when anything else is identified.
pub fn zero_check_from(regions: &Regions) -> Option<u64> {
    let dev = regions.device();
    let mut from = 0u64;
    for f in &regions.found {
        if f.class != Class::Filesystem {
            return None;
        }
        match filesystem_extent(f.name, &dev) {
            Some(e) => from = from.max(e),
            None => return Some(0),
        }
    }
    Some(from)
}

/// The bytes a filesystem named `name` found on `dev` records that it
/// covers from the start (see [`probes::extent`]); `None` if unknown.
pub fn filesystem_extent(name: &str, dev: &Device<'_>) -> Option<u64> {
    probes::extent(name, dev)
}

impl Scanned {
    /// Reads a device of `size` bytes as [`Regions::read`] does, then the
    /// part of its [`zero_check_spans`] from [`zero_check_from`] on: bytes
    /// already read are not read again, the others in reads of at most
    /// 1 MiB.
    pub fn read(
        size: u64,
        mut read_at: impl FnMut(u64, &mut [u8]) -> io::Result<()>,
    ) -> io::Result<Scanned> {
        let regions = Regions::read(size, &mut read_at)?;
        let nonzero = match zero_check_from(&regions) {
            Some(from) => {
                let spans: Vec<(u64, u64)> = zero_check_spans(size)
                    .into_iter()
                    .filter(|&(o, l)| o + l > from)
                    .map(|(o, l)| {
                        if o < from {
                            (from, o + l - from)
                        } else {
                            (o, l)
                        }
                    })
                    .collect();
                first_nonzero_in(&regions.device(), &spans, read_at)?
            }
            None => None,
        };
        Ok(Scanned { regions, nonzero })
    }
}

/// The first non-zero byte in `spans` of `dev`, reading what `dev` does
/// not hold through `read_at`.
pub fn first_nonzero_in(
    dev: &Device<'_>,
    spans: &[(u64, u64)],
    mut read_at: impl FnMut(u64, &mut [u8]) -> io::Result<()>,
) -> io::Result<Option<u64>> {
    const CHUNK: u64 = 1 << 20;
    let mut buf = Vec::new();
    for &(off, len) in spans {
        let mut at = off;
        while at < off + len {
            let n = CHUNK.min(off + len - at);
            let bytes = match dev.at(at, n as usize) {
                Some(b) => b,
                None => {
                    buf.resize(n as usize, 0);
                    read_at(at, &mut buf)?;
                    &buf[..]
                }
            };
            if let Some(i) = bytes.iter().position(|&b| b != 0) {
                return Ok(Some(at + i as u64));
            }
            at += n;
        }
    }
    Ok(None)
}

/// What kind of content a signature stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Class {
    /// A filesystem (mountable; FormatVolume may replace it).
    Filesystem,
    /// A member of a volume manager, RAID set, cache or pool (LVM, md,
    /// DDF, vendor RAID, ZFS, bcache, VDO, DRBD, Ceph, ...).
    Member,
    /// An encrypted container (LUKS, BitLocker).
    Crypto,
    /// A partition table.
    PartitionTable,
    /// Anything else that holds data (swap, hibernation images).
    Other,
}

impl Class {
    /// A phrase for messages.
    pub fn describe(self) -> &'static str {
        match self {
            Class::Filesystem => "filesystem",
            Class::Member => "volume-manager, RAID or pool member",
            Class::Crypto => "encrypted container",
            Class::PartitionTable => "partition table",
            Class::Other => "data area",
        }
    }
}

/// One signature found on a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Found {
    /// The name `blkid -p` reports (`TYPE`, or `PTTYPE` for partition
    /// tables), e.g. `ext4`, `LVM2_member`, `linux_raid_member`, `gpt`.
    pub name: &'static str,
    pub class: Class,
    /// Byte offset of the signature from the start of the device.
    pub offset: u64,
}

impl std::fmt::Display for Found {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({}) at byte {}",
            self.name,
            self.class.describe(),
            self.offset
        )
    }
}

/// The bytes read from a device: its first bytes, its last bytes, and its
/// size. Reads outside what was read answer `None`, so a probe never
/// mistakes an unread region for zeros.
#[derive(Clone, Copy, Debug)]
pub struct Device<'a> {
    head: &'a [u8],
    tail: &'a [u8],
    size: u64,
}

impl<'a> Device<'a> {
    /// `head` holds bytes `0..head.len()`, `tail` the last `tail.len()`
    /// bytes of a device of `size` bytes. Lengths beyond `size` are cut
    /// to it.
    pub fn new(head: &'a [u8], tail: &'a [u8], size: u64) -> Device<'a> {
        let lim = |len: usize| usize::try_from(size).map_or(len, |s| len.min(s));
        Device {
            head: &head[..lim(head.len())],
            tail: &tail[tail.len() - lim(tail.len())..],
            size,
        }
    }

    /// The device size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The bytes read from the start.
    pub fn head(&self) -> &'a [u8] {
        self.head
    }

    /// The bytes read from the end.
    pub fn tail(&self) -> &'a [u8] {
        self.tail
    }

    /// `len` bytes at byte `off`, if they were read.
    pub fn at(&self, off: u64, len: usize) -> Option<&'a [u8]> {
        let end = off.checked_add(len as u64)?;
        if end > self.size {
            return None;
        }
        if end <= self.head.len() as u64 {
            return self.head.get(off as usize..end as usize);
        }
        let tail_start = self.size - self.tail.len() as u64;
        if off >= tail_start {
            let o = usize::try_from(off - tail_start).ok()?;
            return self.tail.get(o..o.checked_add(len)?);
        }
        None
    }

    /// `len` bytes starting `back` bytes before the end, if they were read.
    pub fn from_end(&self, back: u64, len: usize) -> Option<&'a [u8]> {
        self.at(self.size.checked_sub(back)?, len)
    }

    /// Whether `magic` is at byte `off`.
    pub fn has(&self, off: u64, magic: &[u8]) -> bool {
        self.at(off, magic.len()) == Some(magic)
    }

    pub fn u16_le(&self, off: u64) -> Option<u16> {
        self.at(off, 2).map(|b| u16::from_le_bytes([b[0], b[1]]))
    }

    pub fn u16_be(&self, off: u64) -> Option<u16> {
        self.at(off, 2).map(|b| u16::from_be_bytes([b[0], b[1]]))
    }

    pub fn u32_le(&self, off: u64) -> Option<u32> {
        self.at(off, 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub fn u32_be(&self, off: u64) -> Option<u32> {
        self.at(off, 4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub fn u64_le(&self, off: u64) -> Option<u64> {
        self.at(off, 8).map(|b| {
            let mut a = [0u8; 8];
            a.copy_from_slice(b);
            u64::from_le_bytes(a)
        })
    }

    pub fn u64_be(&self, off: u64) -> Option<u64> {
        self.at(off, 8).map(|b| {
            let mut a = [0u8; 8];
            a.copy_from_slice(b);
            u64::from_be_bytes(a)
        })
    }
}

/// The regions of one device that [`read_regions`] read, and what
/// [`identify`] found in them: what each backend keeps of a device it
/// checked.
pub struct Regions {
    pub head: Vec<u8>,
    pub tail: Vec<u8>,
    pub size: u64,
    pub found: Vec<Found>,
}

impl Regions {
    /// Reads a device of `size` bytes ([`read_regions`]) and identifies
    /// what it holds.
    pub fn read(
        size: u64,
        read_at: impl FnMut(u64, &mut [u8]) -> io::Result<()>,
    ) -> io::Result<Regions> {
        let (head, tail) = read_regions(size, read_at)?;
        let found = identify(&Device::new(&head, &tail, size));
        Ok(Regions {
            head,
            tail,
            size,
            found,
        })
    }

    pub fn device(&self) -> Device<'_> {
        Device::new(&self.head, &self.tail, self.size)
    }
}

/// Reads the regions [`identify`] looks at from a device of `size` bytes:
/// the first [`HEAD_LEN`] and the last [`TAIL_LEN`] bytes (fewer on a small
/// device; the two overlap there). `read_at(offset, buf)` fills `buf`
/// exactly.
pub fn read_regions(
    size: u64,
    mut read_at: impl FnMut(u64, &mut [u8]) -> io::Result<()>,
) -> io::Result<(Vec<u8>, Vec<u8>)> {
    let head_len = usize::try_from(size.min(HEAD_LEN as u64)).unwrap_or(HEAD_LEN);
    let tail_len = usize::try_from(size.min(TAIL_LEN as u64)).unwrap_or(TAIL_LEN);
    let mut head = vec![0u8; head_len];
    read_at(0, &mut head)?;
    let mut tail = vec![0u8; tail_len];
    read_at(size - tail_len as u64, &mut tail)?;
    Ok((head, tail))
}

/// Every signature found on the device, in the order of the probe table
/// (filesystems and containers before partition tables, as libblkid
/// reports them).
pub fn identify(dev: &Device<'_>) -> Vec<Found> {
    probes::ALL
        .iter()
        .filter_map(|p| {
            (p.find)(dev).map(|offset| Found {
                name: p.name,
                class: p.class,
                offset,
            })
        })
        .collect()
}

/// The first non-zero byte in the spans a partition table is written over
/// (the first and the last [`WRITE_SPAN`] bytes), if any.
pub fn first_nonzero_in_write_span(dev: &Device<'_>) -> Option<u64> {
    let head = &dev.head[..dev.head.len().min(WRITE_SPAN)];
    if let Some(i) = head.iter().position(|&b| b != 0) {
        return Some(i as u64);
    }
    let tail = &dev.tail[dev.tail.len() - dev.tail.len().min(WRITE_SPAN)..];
    let start = dev.size - tail.len() as u64;
    tail.iter().position(|&b| b != 0).map(|i| start + i as u64)
}

/// "an ext4 filesystem at byte 1080, ..." for a refusal message; at most
/// four entries.
pub fn describe(found: &[Found]) -> String {
    let mut parts: Vec<String> = found.iter().take(4).map(|f| f.to_string()).collect();
    if found.len() > 4 {
        parts.push(format!("{} more", found.len() - 4));
    }
    parts.join(", ")
}
