//! Encoders that build valid buffers in the Windows / SCSI layouts, for
//! table tests, round-trip property tests and the fuzz seeds.

use super::bytes::put;
use super::device_id::{CodeSet, Identifier};
use super::layout::encode::{drive_layout, LayoutSlot};
use super::layout::{PartitionEntry, PartitionKind, PartitionStyle};

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// One `STORAGE_IDENTIFIER` to encode.
#[derive(Debug, Clone)]
pub(crate) struct FixtureId {
    pub code_set: u32,
    pub id_type: u32,
    pub association: u32,
    pub bytes: Vec<u8>,
}

impl FixtureId {
    pub fn new(code_set: u32, id_type: u32, association: u32, bytes: &[u8]) -> FixtureId {
        FixtureId {
            code_set,
            id_type,
            association,
            bytes: bytes.to_vec(),
        }
    }

    /// What the parser must return for it.
    pub fn identifier(&self) -> Identifier {
        Identifier {
            code_set: CodeSet::from_u32(self.code_set),
            id_type: self.id_type,
            association: self.association,
            bytes: self.bytes.clone(),
        }
    }
}

/// `STORAGE_DEVICE_ID_DESCRIPTOR` with identifiers 4-byte aligned, every
/// `NextOffset` (the last one included) set to the aligned identifier size.
pub(crate) fn device_id_descriptor(ids: &[FixtureId]) -> Vec<u8> {
    let mut buf = vec![0u8; 12];
    for id in ids {
        let start = buf.len();
        let next = align4(16 + id.bytes.len());
        buf.resize(start + next, 0);
        put(&mut buf, start, &id.code_set.to_le_bytes());
        put(&mut buf, start + 4, &id.id_type.to_le_bytes());
        put(&mut buf, start + 8, &(id.bytes.len() as u16).to_le_bytes());
        put(&mut buf, start + 10, &(next as u16).to_le_bytes());
        put(&mut buf, start + 12, &id.association.to_le_bytes());
        put(&mut buf, start + 16, &id.bytes);
    }
    let size = buf.len() as u32;
    put(&mut buf, 0, &16u32.to_le_bytes()); // sizeof(STORAGE_DEVICE_ID_DESCRIPTOR)
    put(&mut buf, 4, &size.to_le_bytes());
    put(&mut buf, 8, &(ids.len() as u32).to_le_bytes());
    buf
}

/// Raw VPD page 0x83 from `(code set, association, designator type, bytes)`.
pub(crate) fn vpd_page83(designators: &[(u8, u8, u8, &[u8])]) -> Vec<u8> {
    let mut body = Vec::new();
    for &(code_set, association, id_type, bytes) in designators {
        body.push(code_set & 0x0F);
        body.push(((association & 0x03) << 4) | (id_type & 0x0F));
        body.push(0);
        body.push(bytes.len() as u8);
        body.extend_from_slice(bytes);
    }
    vpd_page(0x83, &body)
}

/// Raw VPD page 0x80 holding `serial`.
pub(crate) fn vpd_page80(serial: &[u8]) -> Vec<u8> {
    vpd_page(0x80, serial)
}

fn vpd_page(code: u8, body: &[u8]) -> Vec<u8> {
    let mut buf = vec![0x00, code];
    buf.extend_from_slice(&(body.len() as u16).to_be_bytes());
    buf.extend_from_slice(body);
    buf
}

/// `STORAGE_DEVICE_DESCRIPTOR` with the given NUL-terminated strings after
/// the 40-byte fixed part (offset 0 for `None`).
pub(crate) fn device_descriptor(
    vendor: Option<&[u8]>,
    product: Option<&[u8]>,
    serial: Option<&[u8]>,
) -> Vec<u8> {
    let mut buf = vec![0u8; 40];
    put(&mut buf, 0, &40u32.to_le_bytes()); // Version = sizeof
    buf[8] = 0; // DeviceType: direct access
    buf[11] = 1; // CommandQueueing
    put(&mut buf, 28, &1u32.to_le_bytes()); // BusType: SCSI
    for (field, value) in [(12usize, vendor), (16, product), (24, serial)] {
        if let Some(v) = value {
            let at = buf.len() as u32;
            buf.extend_from_slice(v);
            buf.push(0);
            put(&mut buf, field, &at.to_le_bytes());
        }
    }
    let size = buf.len() as u32;
    put(&mut buf, 4, &size.to_le_bytes());
    buf
}

/// `VOLUME_DISK_EXTENTS` from `(disk, offset, length)`; at least the
/// 32-byte `sizeof` of the structure, as Windows requires.
pub(crate) fn volume_disk_extents(extents: &[(u32, i64, i64)]) -> Vec<u8> {
    let mut buf = vec![0u8; 8 + 24 * extents.len().max(1)];
    put(&mut buf, 0, &(extents.len() as u32).to_le_bytes());
    put(&mut buf, 4, &0xCCCC_CCCCu32.to_le_bytes()); // padding is garbage
    for (i, &(disk, offset, length)) in extents.iter().enumerate() {
        let at = 8 + 24 * i;
        put(&mut buf, at, &disk.to_le_bytes());
        put(&mut buf, at + 4, &0xCCCC_CCCCu32.to_le_bytes());
        put(&mut buf, at + 8, &offset.to_le_bytes());
        put(&mut buf, at + 16, &length.to_le_bytes());
    }
    buf
}

/// `STORAGE_DEVICE_NUMBER`.
pub(crate) fn storage_device_number(device_type: u32, number: u32, partition: u32) -> Vec<u8> {
    [device_type, number, partition]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect()
}

/// `GET_LENGTH_INFORMATION`.
pub(crate) fn length_info(length: i64) -> Vec<u8> {
    length.to_le_bytes().to_vec()
}

/// `DISK_GEOMETRY_EX` (40 bytes: geometry, `DiskSize`, padded `Data[1]`).
pub(crate) fn disk_geometry_ex(size: i64) -> Vec<u8> {
    let mut buf = vec![0u8; 40];
    put(&mut buf, 0, &(size / (255 * 63 * 512)).to_le_bytes()); // Cylinders
    put(&mut buf, 8, &12u32.to_le_bytes()); // MediaType: FixedMedia
    put(&mut buf, 12, &255u32.to_le_bytes()); // TracksPerCylinder
    put(&mut buf, 16, &63u32.to_le_bytes()); // SectorsPerTrack
    put(&mut buf, 20, &512u32.to_le_bytes()); // BytesPerSector
    put(&mut buf, 24, &size.to_le_bytes());
    buf
}

/// `GET_DISK_ATTRIBUTES`.
pub(crate) fn disk_attributes(attributes: u64) -> Vec<u8> {
    let mut buf = vec![0u8; 16];
    put(&mut buf, 0, &16u32.to_le_bytes());
    put(&mut buf, 8, &attributes.to_le_bytes());
    buf
}

/// What stornvme writes back for `query`: the descriptor header
/// (`Version` = `Size` = 48), the echoed protocol-specific data, and the
/// identify data at 8 + `ProtocolDataOffset` (= 48 here).
pub(crate) fn nvme_answer(query: &[u8; super::nvme::IDENTIFY_QUERY_SIZE], data: &[u8]) -> Vec<u8> {
    let mut out = query.to_vec();
    out[0..4].copy_from_slice(&48u32.to_le_bytes());
    out[4..8].copy_from_slice(&48u32.to_le_bytes());
    out[48..48 + data.len()].copy_from_slice(data);
    out
}

pub(crate) fn nvme_namespace_data(nguid: [u8; 16], eui64: [u8; 8]) -> Vec<u8> {
    let mut d = vec![0u8; super::nvme::IDENTIFY_SIZE];
    d[0..8].copy_from_slice(&0x1_0000_0000u64.to_le_bytes()); // NSZE
    d[104..120].copy_from_slice(&nguid);
    d[120..128].copy_from_slice(&eui64);
    d[26] = 0; // FLBAS: format 0
    d[130] = 9; // LBAF0.LBADS: 512-byte blocks (2 TiB with NSZE 2^32)
    d
}

pub(crate) fn nvme_controller_data(sn: &[u8; 20]) -> Vec<u8> {
    let mut d = vec![0u8; super::nvme::IDENTIFY_SIZE];
    d[0..2].copy_from_slice(&0x1414u16.to_le_bytes()); // VID (Microsoft)
    d[2..4].copy_from_slice(&0x1414u16.to_le_bytes()); // SSVID
    d[4..24].copy_from_slice(sn);
    d[24..64].copy_from_slice(&[b' '; 40]);
    d[24..50].copy_from_slice(b"MSFT NVMe Accelerator v1.0");
    d
}

/// Writes valid sample buffers as fuzz seeds when
/// `CSI_PROXY_FUZZ_SEEDS_DIR` is set:
/// `CSI_PROXY_FUZZ_SEEDS_DIR=$PWD/fuzz/seeds/storage_descriptors cargo test
/// -p csi-proxy-host --lib write_fuzz_seeds -- --ignored`.
#[test]
#[ignore = "writes files; run by hand to refresh the fuzz seeds"]
fn write_fuzz_seeds() {
    use super::guid::Guid;
    use super::layout::{BASIC_DATA, MICROSOFT_RESERVED};

    let Some(dir) = std::env::var_os("CSI_PROXY_FUZZ_SEEDS_DIR") else {
        return;
    };
    let dir = std::path::PathBuf::from(dir);
    std::fs::create_dir_all(&dir).unwrap();
    let gpt_entry = |number, offset, length, type_guid, name: &str| PartitionEntry {
        number,
        offset,
        length,
        kind: PartitionKind::Gpt {
            type_guid,
            id: Guid::from_u128(0x0f0e_0d0c_0b0a_0908_0706_0504_0302_0100 + u128::from(number)),
            attributes: 0,
            name: name.to_string(),
        },
    };
    let seeds: Vec<(&str, Vec<u8>)> = vec![
        (
            "device_id_descriptor",
            device_id_descriptor(&[
                FixtureId::new(1, 2, 0, &[0x60, 0x02, 0x24, 0x80, 0xa1, 0xb2, 0xc3, 0xd4]),
                FixtureId::new(2, 0, 0, b"MSFT    Virtual Disk    \0"),
                FixtureId::new(1, 3, 1, &[0x50, 0x01]),
            ]),
        ),
        (
            "vpd_page83",
            vpd_page83(&[
                (1, 0, 3, &[0x60, 0x0a, 0x09, 0x80, 0, 1][..]),
                (2, 0, 1, &b"LIO-ORG disk0"[..]),
            ]),
        ),
        ("vpd_page80", vpd_page80(b"  6002248ABCD  ")),
        (
            "nvme_identify_namespace",
            nvme_answer(
                &super::nvme::identify_query(super::nvme::Identify::Namespace(2)),
                &nvme_namespace_data(
                    *b"\xe6\xd8\x66\x42\x50\xd8\x47\xbd\x91\x6e\xaf\x1b\x00\x11\x22\x33",
                    [0x00, 0x25, 0x38, 0xb5, 0x71, 0xb0, 0x1a, 0x2b],
                ),
            ),
        ),
        (
            "nvme_identify_controller",
            nvme_answer(
                &super::nvme::identify_query(super::nvme::Identify::Controller),
                &nvme_controller_data(b"8f0a1b2c3d4e        "),
            ),
        ),
        ("scsi_address_nvme", vec![8, 0, 0, 0, 2, 0, 0, 1]),
        (
            "device_descriptor",
            device_descriptor(
                Some(b"Msft    "),
                Some(b"Virtual Disk"),
                Some(b" 6002248A "),
            ),
        ),
        (
            "layout_gpt",
            drive_layout(
                PartitionStyle::Gpt {
                    disk_id: Guid::from_u128(0x5b7a3f3e_2d64_4c38_9a43_3d1f1c0b7e21),
                },
                &[
                    LayoutSlot::Used(gpt_entry(
                        1,
                        17_408,
                        (16 << 20) - 17_408,
                        MICROSOFT_RESERVED,
                        "Microsoft reserved partition",
                    )),
                    LayoutSlot::Used(gpt_entry(
                        2,
                        16 << 20,
                        10 << 30,
                        BASIC_DATA,
                        "Basic data partition",
                    )),
                ],
            ),
        ),
        (
            "layout_mbr",
            drive_layout(
                PartitionStyle::Mbr {
                    signature: 0x1234_abcd,
                },
                &[
                    LayoutSlot::Used(PartitionEntry {
                        number: 1,
                        offset: 1 << 20,
                        length: 20 << 30,
                        kind: PartitionKind::Mbr { type_byte: 7 },
                    }),
                    LayoutSlot::Unused,
                    LayoutSlot::Unused,
                    LayoutSlot::Unused,
                ],
            ),
        ),
        (
            "volume_disk_extents",
            volume_disk_extents(&[(2, 1 << 20, 10 << 30), (3, 0, 4096)]),
        ),
        ("disk_geometry_ex", disk_geometry_ex(137_438_953_472)),
        ("disk_attributes", disk_attributes(1)),
        (
            "location_scsi",
            b"PCI Slot 3 : Adapter 0 : Port 0 : Target 1 : LUN 0".to_vec(),
        ),
        (
            "location_nvme",
            b"Integrated : Bus 12606208 : Device 0 : Function 0 : Adapter 0".to_vec(),
        ),
        (
            "volume_id",
            br"\\?\Volume{E3C9E316-0B5C-4DB8-817D-F92DF00215AE}\".to_vec(),
        ),
        ("cim_u64", b"137438953472".to_vec()),
    ];
    for (name, bytes) in seeds {
        std::fs::write(dir.join(name), bytes).unwrap();
    }
}
