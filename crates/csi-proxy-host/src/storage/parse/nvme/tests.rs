use super::super::fixtures::{
    nvme_answer as answer, nvme_controller_data as controller_data,
    nvme_namespace_data as namespace_data,
};
use super::*;
use proptest::prelude::*;

const NGUID_A: [u8; 16] = [
    0xe6, 0xd8, 0x66, 0x42, 0x50, 0xd8, 0x47, 0xbd, 0x91, 0x6e, 0xaf, 0x1b, 0x00, 0x11, 0x22, 0x33,
];
const EUI_A: [u8; 8] = [0x00, 0x25, 0x38, 0xb5, 0x71, 0xb0, 0x1a, 0x2b];

#[test]
fn the_query_follows_the_sdk_layout() {
    let q = identify_query(Identify::Namespace(3));
    assert_eq!(q.len(), 8 + 40 + 4096);
    let u = |at: usize| u32::from_le_bytes(q[at..at + 4].try_into().unwrap());
    assert_eq!(u(0), 50); // StorageDeviceProtocolSpecificProperty
    assert_eq!(u(4), 0); // PropertyStandardQuery
    assert_eq!(u(8), 3); // ProtocolTypeNvme
    assert_eq!(u(12), 1); // NVMeDataTypeIdentify
    assert_eq!(u(16), 0); // CNS: namespace
    assert_eq!(u(20), 3); // the namespace id
    assert_eq!(u(24), 40); // data right after the protocol-specific data
    assert_eq!(u(28), 4096);
    assert!(q[32..].iter().all(|&b| b == 0));
    let c = identify_query(Identify::Controller);
    let u = |at: usize| u32::from_le_bytes(c[at..at + 4].try_into().unwrap());
    assert_eq!((u(0), u(16), u(20)), (49, 1, 0));
}

#[test]
fn a_namespace_answer_gives_its_ids() {
    let q = identify_query(Identify::Namespace(2));
    let buf = answer(&q, &namespace_data(NGUID_A, EUI_A));
    let data = parse_identify_answer(&buf).unwrap();
    assert_eq!(data.len(), IDENTIFY_SIZE);
    let ids = parse_identify_namespace(data).unwrap();
    assert_eq!(ids.nguid, NGUID_A);
    assert_eq!(ids.eui64, EUI_A);
    assert_eq!(
        ids.page83().as_deref(),
        Some("e6d8664250d847bd916eaf1b00112233")
    );
    // No NGUID: the EUI-64; neither: nothing.
    let eui_only = parse_identify_namespace(&namespace_data([0; 16], EUI_A)).unwrap();
    assert_eq!(eui_only.page83().as_deref(), Some("002538b571b01a2b"));
    let none = parse_identify_namespace(&namespace_data([0; 16], [0; 8])).unwrap();
    assert_eq!(none.page83(), None);
    // An output buffer larger than the answer is fine.
    let mut big = buf.clone();
    big.resize(8192, 0xEE);
    assert_eq!(parse_identify_answer(&big).unwrap(), data);
}

#[test]
fn namespace_size_from_nsze_and_the_format_in_use() {
    let mut d = namespace_data(NGUID_A, EUI_A);
    assert_eq!(identify_namespace_size(&d), Ok(Some(1 << 41)));
    // Format 1 in use, 4 KiB blocks.
    d[26] = 1;
    d[134] = 12;
    assert_eq!(identify_namespace_size(&d), Ok(Some(1 << 44)));
    // Format 17 (FLBAS bits 5-6 = 1, bits 0-3 = 1): LBAF17 @ 128 + 68.
    d[26] = 0x21;
    d[128 + 4 * 17 + 2] = 9;
    assert_eq!(identify_namespace_size(&d), Ok(Some(1 << 41)));
    // A block size out of range, an overflow: no size.
    d[26] = 0;
    d[130] = 8;
    assert_eq!(identify_namespace_size(&d), Ok(None));
    d[130] = 12;
    d[0..8].copy_from_slice(&u64::MAX.to_le_bytes());
    assert_eq!(identify_namespace_size(&d), Ok(None));
    assert!(identify_namespace_size(&d[..100]).is_err());
}

#[test]
fn the_data_offset_is_counted_from_the_protocol_specific_data() {
    // A driver that puts the data further on (offset 64 → byte 72).
    let q = identify_query(Identify::Namespace(1));
    let mut buf = answer(&q, &[]);
    buf[8 + 16..8 + 20].copy_from_slice(&64u32.to_le_bytes());
    buf.resize(72 + IDENTIFY_SIZE, 0);
    let d = namespace_data(NGUID_A, EUI_A);
    buf[72..].copy_from_slice(&d);
    assert_eq!(parse_identify_answer(&buf).unwrap(), &d[..]);
}

#[test]
fn a_controller_answer_gives_its_serial() {
    let q = identify_query(Identify::Controller);
    let buf = answer(&q, &controller_data(b"  8f0a1b2c3d4e      "));
    let data = parse_identify_answer(&buf).unwrap();
    assert_eq!(
        parse_identify_controller_serial(data),
        Ok(Some("8f0a1b2c3d4e".to_string()))
    );
    assert_eq!(
        parse_identify_controller_serial(&controller_data(&[b' '; 20])),
        Ok(None)
    );
    assert_eq!(
        parse_identify_controller_serial(&controller_data(&[0; 20])),
        Ok(None)
    );
    let mut bad = *b"serial              ";
    bad[3] = 0xC3;
    assert!(parse_identify_controller_serial(&controller_data(&bad)).is_err());
    let mut nul = *b"ser al              ";
    nul[3] = 0;
    assert!(parse_identify_controller_serial(&controller_data(&nul)).is_err());
    assert!(parse_identify_controller_serial(&[0; 100]).is_err());
}

#[test]
fn malformed_answers_are_refused() {
    let q = identify_query(Identify::Namespace(1));
    let good = answer(&q, &namespace_data(NGUID_A, EUI_A));
    let set = |at: usize, v: u32| {
        let mut b = good.clone();
        b[at..at + 4].copy_from_slice(&v.to_le_bytes());
        b
    };
    for (at, v) in [
        (0, 40),        // Version
        (4, 4144),      // Size
        (8, 1),         // ProtocolType SCSI
        (12, 2),        // DataType log page
        (24, 39),       // offset inside the protocol-specific data
        (28, 512),      // length below 4096
        (24, u32::MAX), // offset past everything
        (24, 0x1000_0000),
    ] {
        assert!(parse_identify_answer(&set(at, v)).is_err(), "{at} = {v}");
    }
    assert!(matches!(
        parse_identify_answer(&good[..47]),
        Err(ParseError::Truncated { .. })
    ));
    assert!(matches!(
        parse_identify_answer(&good[..good.len() - 1]),
        Err(ParseError::Truncated { .. })
    ));
    assert!(parse_identify_namespace(&[0; 4095]).is_err());
}

#[test]
fn scsi_address_and_location() {
    // Length 8, PortNumber 2, PathId 0, TargetId 0, Lun 1.
    let a = parse_scsi_address(&[8, 0, 0, 0, 2, 0, 0, 1]).unwrap();
    assert_eq!(
        a,
        ScsiAddress {
            port: 2,
            path: 0,
            target: 0,
            lun: 1
        }
    );
    assert_eq!(a.namespace_id(), 2);
    // Instance path suffix 000001: Azure's data disk at LUN 0.
    assert_eq!(
        a.nvme_location(),
        Some(Location {
            adapter: "2".into(),
            bus: "0".into(),
            target: "0".into(),
            lun_id: "0".into()
        })
    );
    let last = parse_scsi_address(&[8, 0, 0, 0, 0, 0, 0, 255]).unwrap();
    assert_eq!(last.namespace_id(), 256);
    assert_eq!(last.nvme_location().unwrap().lun_id, "254");
    // Lun 0 (Azure's OS disk, suffix 000000): no LUN to give.
    let first = parse_scsi_address(&[8, 0, 0, 0, 2, 0, 0, 0]).unwrap();
    assert_eq!(first.nvme_location(), None);
    assert!(parse_scsi_address(&[8, 0, 0, 0, 2, 0, 0]).is_err());
    assert!(parse_scsi_address(&[7, 0, 0, 0, 2, 0, 0, 1]).is_err());
}

#[test]
fn device_descriptor_bus_type() {
    let mut d = super::super::fixtures::device_descriptor(Some(b"NVMe"), None, Some(b"E6D8_6642."));
    assert_eq!(parse_device_bus_type(&d), Ok(1));
    d[28..32].copy_from_slice(&BUS_TYPE_NVME.to_le_bytes());
    assert_eq!(parse_device_bus_type(&d), Ok(0x11));
    assert!(parse_device_bus_type(&d[..31]).is_err());
}

fn loc(a: &str, b: &str, t: &str, l: &str) -> Location {
    Location {
        adapter: a.into(),
        bus: b.into(),
        target: t.into(),
        lun_id: l.into(),
    }
}

#[test]
fn nvme_locations_replace_the_pci_form_unless_they_clash() {
    let wmi = BTreeMap::from([
        (0, loc("0", "12606208", "", "")), // NVMe OS disk, PCI form
        (1, loc("0", "12606208", "", "")), // NVMe data disk
        (2, loc("3", "0", "0", "1")),      // Hyper-V SCSI
    ]);
    let nvme = [(0, loc("0", "0", "0", "0")), (1, loc("0", "0", "0", "1"))];
    let (all, clash) = merge_nvme_locations(wmi.clone(), &nvme);
    assert!(clash.is_empty());
    assert_eq!(all[&0], loc("0", "0", "0", "0"));
    assert_eq!(all[&1], loc("0", "0", "0", "1"));
    assert_eq!(all[&2], loc("3", "0", "0", "1"));
    // Two namespaces reported at one address (a driver answering Lun 0
    // for all): neither is given it.
    let same = [(0, loc("0", "0", "0", "0")), (1, loc("0", "0", "0", "0"))];
    let (all, clash) = merge_nvme_locations(wmi.clone(), &same);
    assert_eq!(clash, vec![0, 1]);
    assert_eq!(all, wmi);
    // An NVMe address equal to a SCSI disk's: that disk keeps its own.
    let (all, clash) = merge_nvme_locations(wmi.clone(), &[(1, loc("3", "0", "0", "1"))]);
    assert_eq!(clash, vec![1]);
    assert_eq!(all, wmi);
    // A disk WMI does not list (no MSFT_Disk) is added.
    let (all, _) = merge_nvme_locations(BTreeMap::new(), &[(7, loc("1", "0", "0", "4"))]);
    assert_eq!(all[&7], loc("1", "0", "0", "4"));
}

#[test]
fn sysfs_text_gives_the_windows_string() {
    let nguid = parse_sysfs_nguid("e6d86642-50d8-47bd-916e-af1b00112233\n").unwrap();
    let eui = parse_sysfs_eui("00 25 38 b5 71 b0 1a 2b\n").unwrap();
    assert_eq!(nguid, NGUID_A);
    assert_eq!(eui, EUI_A);
    let from_linux = NamespaceIds { nguid, eui64: eui };
    let from_windows = parse_identify_namespace(&namespace_data(NGUID_A, EUI_A)).unwrap();
    assert_eq!(from_linux.page83(), from_windows.page83());
    for bad in [
        "",
        "00 25 38",
        "zz 25 38 b5 71 b0 1a 2b",
        "00 25 38 b5 71 b0 1a 2b 00",
        "+0 25 38 b5 71 b0 1a 2b",
    ] {
        assert_eq!(parse_sysfs_eui(bad), None, "{bad:?}");
    }
    assert_eq!(
        parse_sysfs_nguid("E6D86642-50D8-47BD-916E-AF1B00112233"),
        Some(NGUID_A)
    );
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(buf in proptest::collection::vec(any::<u8>(), 0..4300)) {
        if let Ok(d) = parse_identify_answer(&buf) {
            prop_assert_eq!(d.len(), IDENTIFY_SIZE);
            let _ = parse_identify_namespace(d).map(|n| n.page83());
            let _ = parse_identify_controller_serial(d);
        }
        let _ = parse_identify_namespace(&buf);
        let _ = identify_namespace_size(&buf);
        let _ = parse_identify_controller_serial(&buf);
        let _ = parse_scsi_address(&buf);
        let _ = parse_device_bus_type(&buf);
    }

    #[test]
    fn header_shaped_answers_never_panic(
        version in prop_oneof![Just(48u32), any::<u32>()],
        size in prop_oneof![Just(48u32), any::<u32>()],
        offset in prop_oneof![Just(40u32), 0u32..5000, any::<u32>()],
        length in prop_oneof![Just(4096u32), any::<u32>()],
        len in 0usize..4400,
    ) {
        let mut buf = answer(&identify_query(Identify::Controller), &[]);
        buf[0..4].copy_from_slice(&version.to_le_bytes());
        buf[4..8].copy_from_slice(&size.to_le_bytes());
        buf[24..28].copy_from_slice(&offset.to_le_bytes());
        buf[28..32].copy_from_slice(&length.to_le_bytes());
        buf.truncate(len);
        if let Ok(d) = parse_identify_answer(&buf) {
            prop_assert_eq!(d.len(), IDENTIFY_SIZE);
        }
    }

    #[test]
    fn ids_round_trip(nguid: [u8; 16], eui: [u8; 8], nsid: u32) {
        let q = identify_query(Identify::Namespace(nsid));
        let buf = answer(&q, &namespace_data(nguid, eui));
        let ids = parse_identify_namespace(parse_identify_answer(&buf).unwrap()).unwrap();
        prop_assert_eq!(ids, NamespaceIds { nguid, eui64: eui });
        if let Some(p) = ids.page83() {
            prop_assert!(p.len() == 32 || p.len() == 16);
            prop_assert!(p.bytes().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        }
        let text: Vec<String> = eui.iter().map(|b| format!("{b:02x}")).collect();
        prop_assert_eq!(parse_sysfs_eui(&text.join(" ")), Some(eui));
    }

    #[test]
    fn sysfs_text_never_panics(s in any::<String>()) {
        let _ = parse_sysfs_nguid(&s);
        let _ = parse_sysfs_eui(&s);
    }
}
