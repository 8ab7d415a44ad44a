//! Fuzz the storage parsers of `csi_proxy_host::storage::parse`: every
//! input goes to every binary parser (IOCTL buffers, SCSI VPD pages, NVMe identify answers) and,
//! when it is UTF-8, to every string parser (volume ids, GUIDs, disk
//! locations, CIM numbers, WQL literals). None may panic, and what they
//! accept must satisfy the documented invariants.
#![no_main]

use csi_proxy_host::storage::parse::{cim, device_id, extents, guid, layout, location, nvme};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    binary(data);
    if let Ok(s) = std::str::from_utf8(data) {
        text(s);
    }
});

fn binary(data: &[u8]) {
    for ids in [
        device_id::parse_storage_device_id_descriptor(data),
        device_id::parse_scsi_vpd_page83(data),
    ]
    .into_iter()
    .flatten()
    {
        let total: usize = ids.iter().map(|i| i.bytes.len()).sum();
        assert!(total <= data.len());
        if let Some(id) = device_id::page83_id(&ids) {
            assert!(!id.is_empty() && !id.contains('\0'));
        }
    }
    if let Ok(serial) = device_id::parse_scsi_vpd_page80(data) {
        assert!(serial.is_ascii() && serial.trim_matches(' ') == serial);
    }
    if let Ok(Some(serial)) = device_id::parse_storage_device_descriptor_serial(data) {
        assert!(!serial.is_empty() && !serial.contains('\0'));
    }
    if let Ok(l) = layout::parse_drive_layout_ex(data) {
        for p in &l.partitions {
            assert!(p.number != 0 && p.length > 0 && p.offset >= 0);
            assert!(p.offset.checked_add(p.length).is_some());
        }
        assert!(l.data_partitions().all(|p| !p.is_microsoft_reserved()));
    }
    if let Ok(e) = extents::parse_volume_disk_extents(data) {
        assert!(e.len() * 24 <= data.len());
        assert!(e.iter().all(|x| x.offset >= 0 && x.length >= 0));
    }
    let _ = extents::parse_storage_device_number(data);
    if let Ok(n) = extents::parse_length_info(data) {
        assert!(n >= 0);
    }
    if let Ok(n) = extents::parse_disk_geometry_ex_size(data) {
        assert!(n >= 0);
    }
    let _ = extents::parse_disk_attributes(data).map(|a| a.is_offline());
    if let Ok(d) = nvme::parse_identify_answer(data) {
        assert_eq!(d.len(), nvme::IDENTIFY_SIZE);
        if let Some(id) = nvme::parse_identify_namespace(d).ok().and_then(|n| n.page83()) {
            assert!(id.len() == 32 || id.len() == 16);
        }
        if let Ok(Some(size)) = nvme::identify_namespace_size(d) {
            assert!(size % 512 == 0);
        }
        if let Ok(Some(sn)) = nvme::parse_identify_controller_serial(d) {
            assert!(!sn.is_empty() && sn.is_ascii() && !sn.contains('\0'));
        }
    }
    let _ = nvme::parse_scsi_address(data).map(|a| (a.namespace_id(), a.nvme_location()));
    let _ = nvme::parse_device_bus_type(data);
}

fn text(s: &str) {
    if let Ok(g) = guid::Guid::parse(s) {
        assert_eq!(g.to_string(), s.to_ascii_lowercase());
    }
    if let Ok(v) = guid::VolumeId::parse(s) {
        assert_eq!(guid::VolumeId::parse(v.as_str()).as_ref(), Ok(&v));
        assert_eq!(format!("{}\\", v.device_path()), v.as_str());
        let with = if s.ends_with('\\') {
            s.to_string()
        } else {
            format!("{s}\\")
        };
        assert!(with.eq_ignore_ascii_case(v.as_str()));
    }
    if let Ok(l) = location::parse_location(s) {
        for f in [&l.adapter, &l.bus, &l.target, &l.lun_id] {
            assert!(f.bytes().all(|c| c.is_ascii_digit()));
        }
    }
    if let Ok(n) = cim::cim_u64(s) {
        assert!(s.bytes().all(|c| c.is_ascii_digit()));
        assert_eq!(s.parse::<u64>(), Ok(n));
    }
    let _ = cim::cim_u32(s);
    let _ = nvme::parse_sysfs_nguid(s);
    let _ = nvme::parse_sysfs_eui(s);
    if let Ok(lit) = cim::wql_string_literal(s) {
        let inner = &lit[1..lit.len() - 1];
        assert_eq!(inner.replace("\\\\", "\\"), s);
    }
}
