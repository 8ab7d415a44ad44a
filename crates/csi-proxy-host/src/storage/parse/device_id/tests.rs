use super::super::fixtures::{self, FixtureId};
use super::*;
use proptest::prelude::*;

/// EUI-64 binary id of the device + vendor-specific ASCII id, the shape
/// of a Hyper-V / Azure virtual disk.
fn real_world_descriptor() -> Vec<u8> {
    fixtures::device_id_descriptor(&[
        FixtureId::new(
            1,
            ID_TYPE_EUI64,
            0,
            &[0x60, 0x02, 0x24, 0x80, 0xa1, 0xb2, 0xc3, 0xd4],
        ),
        FixtureId::new(
            2,
            ID_TYPE_VENDOR_SPECIFIC,
            0,
            b"MSFT    Virtual Disk    6002248 \0\0",
        ),
        FixtureId::new(1, 3, 1, &[0x50, 0x01, 0x43, 0x80, 0x00, 0x00, 0x00, 0x01]),
    ])
}

#[test]
fn descriptor_with_eui64_and_vendor_ascii() {
    let buf = real_world_descriptor();
    let ids = parse_storage_device_id_descriptor(&buf).unwrap();
    assert_eq!(ids.len(), 3);
    assert_eq!(ids[0].code_set, CodeSet::Binary);
    assert_eq!(ids[0].id_type, ID_TYPE_EUI64);
    assert_eq!(ids[1].code_set, CodeSet::Ascii);
    assert_eq!(ids[2].association, ASSOCIATION_PORT);
    assert_eq!(page83_id(&ids).as_deref(), Some("60022480a1b2c3d4"));
    // Oversized buffer (4 KiB like upstream): Size bounds the parse.
    let mut big = buf.clone();
    big.resize(4096, 0xEE);
    assert_eq!(parse_storage_device_id_descriptor(&big).unwrap(), ids);
}

#[test]
fn first_device_identifier_wins_whatever_its_type() {
    let buf = fixtures::device_id_descriptor(&[
        FixtureId::new(1, 3, ASSOCIATION_TARGET, &[0xAB]),
        FixtureId::new(2, ID_TYPE_VENDOR_SPECIFIC, 0, b"  vendor id  \0"),
        FixtureId::new(1, ID_TYPE_FCPH_NAME, 0, &[0x60, 0x0a]),
    ]);
    let ids = parse_storage_device_id_descriptor(&buf).unwrap();
    assert_eq!(page83_id(&ids).as_deref(), Some("vendor id"));
}

#[test]
fn undecodable_identifiers_are_skipped() {
    let ids = vec![
        Identifier {
            code_set: CodeSet::Other(0),
            id_type: 0,
            association: 0,
            bytes: b"x".to_vec(),
        },
        Identifier {
            code_set: CodeSet::Ascii,
            id_type: 0,
            association: 0,
            bytes: vec![0xC3, 0xA9],
        },
        Identifier {
            code_set: CodeSet::Utf8,
            id_type: 0,
            association: 0,
            bytes: vec![0xFF],
        },
        Identifier {
            code_set: CodeSet::Ascii,
            id_type: 0,
            association: 0,
            bytes: b"  \0\0".to_vec(),
        },
        Identifier {
            code_set: CodeSet::Ascii,
            id_type: 0,
            association: 0,
            bytes: b"a\0b".to_vec(),
        },
        Identifier {
            code_set: CodeSet::Binary,
            id_type: 0,
            association: 0,
            bytes: vec![],
        },
    ];
    assert_eq!(page83_id(&ids), None);
    let mut more = ids.clone();
    more.push(Identifier {
        code_set: CodeSet::Utf8,
        id_type: 8,
        association: 0,
        bytes: "naa.é".as_bytes().to_vec(),
    });
    assert_eq!(page83_id(&more).as_deref(), Some("naa.é"));
    assert_eq!(page83_id(&[]), None);
}

#[test]
fn descriptor_chain_rules() {
    // Zero identifiers.
    let buf = fixtures::device_id_descriptor(&[]);
    assert_eq!(parse_storage_device_id_descriptor(&buf), Ok(vec![]));
    // Header only, truncated.
    assert_eq!(
        parse_storage_device_id_descriptor(&buf[..11]),
        Err(ParseError::truncated(
            "STORAGE_DEVICE_ID_DESCRIPTOR",
            12,
            11
        ))
    );
    // Size below the header.
    let mut b = buf.clone();
    b[4] = 11;
    assert!(matches!(
        parse_storage_device_id_descriptor(&b),
        Err(ParseError::Invalid { .. })
    ));

    let two = fixtures::device_id_descriptor(&[
        FixtureId::new(1, 2, 0, &[1, 2, 3]),
        FixtureId::new(2, 0, 0, b"abc"),
    ]);
    // NextOffset 0 on the first of two: the chain ends after it.
    let mut b = two.clone();
    b[12 + 10] = 0;
    b[12 + 11] = 0;
    let ids = parse_storage_device_id_descriptor(&b).unwrap();
    assert_eq!(ids.len(), 1);
    assert_eq!(page83_id(&ids).as_deref(), Some("010203"));
    // NextOffset overlapping the identifier bytes.
    let mut b = two.clone();
    b[12 + 10] = 18;
    assert!(matches!(
        parse_storage_device_id_descriptor(&b),
        Err(ParseError::Invalid { .. })
    ));
    // More identifiers announced than present: truncated.
    let mut b = two.clone();
    b[8] = 3;
    assert!(matches!(
        parse_storage_device_id_descriptor(&b),
        Err(ParseError::Truncated { .. })
    ));
    // Size larger than the buffer (output buffer too small): truncated.
    let short = &two[..two.len() - 4];
    assert!(matches!(
        parse_storage_device_id_descriptor(short),
        Err(ParseError::Truncated { .. })
    ));
    // Size smaller than the identifiers: truncated at Size even though
    // the buffer holds them.
    let mut b = two.clone();
    b[4] = 20;
    assert_eq!(
        parse_storage_device_id_descriptor(&b),
        Err(ParseError::truncated("STORAGE_IDENTIFIER", 28, 20))
    );
    // The last identifier's NextOffset is ignored.
    let mut b = two.clone();
    let last = 12 + usize::from(u16::from_le_bytes([b[22], b[23]]));
    b[last + 10] = 0xFF;
    b[last + 11] = 0xFF;
    assert_eq!(parse_storage_device_id_descriptor(&b).unwrap().len(), 2);
}

#[test]
fn huge_identifier_count_is_bounded_by_the_buffer() {
    let mut b = fixtures::device_id_descriptor(&[FixtureId::new(1, 2, 0, &[9; 4])]);
    b[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
    // NextOffset of the first identifier points at its own end: the
    // second identifier is missing.
    assert!(matches!(
        parse_storage_device_id_descriptor(&b),
        Err(ParseError::Truncated { .. })
    ));
}

#[test]
fn vpd83_linux_shape() {
    // NAA (binary, LU), T10 vendor id (ASCII, LU), relative port (port).
    let page = fixtures::vpd_page83(&[
        (1, 0, 3, &[0x60, 0x0a, 0x09, 0x80, 0x00, 0x01][..]),
        (2, 0, 1, &b"LIO-ORG disk0"[..]),
        (1, 1, 4, &[0, 1][..]),
    ]);
    let ids = parse_scsi_vpd_page83(&page).unwrap();
    assert_eq!(ids.len(), 3);
    assert_eq!(ids[0].id_type, 3);
    assert_eq!(ids[1].code_set, CodeSet::Ascii);
    assert_eq!(ids[2].association, ASSOCIATION_PORT);
    assert_eq!(ids[2].id_type, 4);
    assert_eq!(page83_id(&ids).as_deref(), Some("600a09800001"));
}

#[test]
fn vpd83_same_result_as_windows_descriptor() {
    let des: [(u8, u8, u8, &[u8]); 2] = [(2, 1, 3, b"port"), (2, 0, 0, b"ABC DEF ")];
    let from_linux = parse_scsi_vpd_page83(&fixtures::vpd_page83(&des)).unwrap();
    let from_windows = parse_storage_device_id_descriptor(&fixtures::device_id_descriptor(&[
        FixtureId::new(2, 3, 1, b"port"),
        FixtureId::new(2, 0, 0, b"ABC DEF "),
    ]))
    .unwrap();
    assert_eq!(from_linux, from_windows);
    assert_eq!(page83_id(&from_linux).as_deref(), Some("ABC DEF"));
}

#[test]
fn vpd_errors() {
    assert!(parse_scsi_vpd_page83(&[0, 0x80, 0, 0]).is_err());
    assert!(parse_scsi_vpd_page83(&[0, 0x83, 0]).is_err());
    assert_eq!(parse_scsi_vpd_page83(&[0, 0x83, 0, 0]), Ok(vec![]));
    // Page length beyond the buffer.
    assert!(matches!(
        parse_scsi_vpd_page83(&[0, 0x83, 0, 8, 1, 3, 0, 4]),
        Err(ParseError::Truncated { .. })
    ));
    // Designator length beyond the page.
    assert!(matches!(
        parse_scsi_vpd_page83(&[0, 0x83, 0, 5, 1, 3, 0, 4, 0xAA]),
        Err(ParseError::Truncated { .. })
    ));
    // Designator header cut by the page end.
    assert!(matches!(
        parse_scsi_vpd_page83(&[0, 0x83, 0, 2, 1, 3]),
        Err(ParseError::Truncated { .. })
    ));
}

#[test]
fn vpd80() {
    let page = fixtures::vpd_page80(b"  6002248ABCD   \0");
    assert_eq!(parse_scsi_vpd_page80(&page).as_deref(), Ok("6002248ABCD"));
    assert_eq!(
        parse_scsi_vpd_page80(&fixtures::vpd_page80(b"")).as_deref(),
        Ok("")
    );
    assert!(parse_scsi_vpd_page80(&fixtures::vpd_page80(&[0xC3, 0xA9])).is_err());
    assert!(parse_scsi_vpd_page80(&[0, 0x83, 0, 0]).is_err());
    assert!(parse_scsi_vpd_page80(&[0, 0x80, 0, 3, b'a']).is_err());
}

#[test]
fn device_descriptor_serial() {
    let buf = fixtures::device_descriptor(
        Some(b"Msft    "),
        Some(b"Virtual Disk    "),
        Some(b"  6002248A1B2C3D4  "),
    );
    assert_eq!(
        parse_storage_device_descriptor_serial(&buf),
        Ok(Some("6002248A1B2C3D4".to_string()))
    );
    let none = fixtures::device_descriptor(Some(b"Msft"), Some(b"Disk"), None);
    assert_eq!(parse_storage_device_descriptor_serial(&none), Ok(None));
    let blank = fixtures::device_descriptor(None, None, Some(b"    "));
    assert_eq!(parse_storage_device_descriptor_serial(&blank), Ok(None));
    // Output buffer too small: Size is larger than what came back.
    assert!(matches!(
        parse_storage_device_descriptor_serial(&buf[..buf.len() - 3]),
        Err(ParseError::Truncated { .. })
    ));
    assert!(matches!(
        parse_storage_device_descriptor_serial(&buf[..27]),
        Err(ParseError::Truncated { .. })
    ));
    // Offset into the header.
    let mut b = buf.clone();
    b[24..28].copy_from_slice(&8u32.to_le_bytes());
    assert!(matches!(
        parse_storage_device_descriptor_serial(&b),
        Err(ParseError::Invalid { .. })
    ));
    // Offset beyond Size.
    let mut b = buf.clone();
    b[24..28].copy_from_slice(&5000u32.to_le_bytes());
    assert!(matches!(
        parse_storage_device_descriptor_serial(&b),
        Err(ParseError::Invalid { .. })
    ));
    // Missing NUL with a complete buffer.
    let mut b = buf.clone();
    let last = b.len() - 1;
    b[last] = b'X';
    assert!(matches!(
        parse_storage_device_descriptor_serial(&b),
        Err(ParseError::Invalid { .. })
    ));
    // Not UTF-8.
    let bad = fixtures::device_descriptor(None, None, Some(&[0xFF, 0xFE]));
    assert!(parse_storage_device_descriptor_serial(&bad).is_err());
}

fn arb_fixture_id() -> impl Strategy<Value = FixtureId> {
    (
        0u32..6,
        0u32..10,
        0u32..3,
        proptest::collection::vec(any::<u8>(), 0..40),
    )
        .prop_map(|(c, t, a, b)| FixtureId::new(c, t, a, &b))
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(buf in proptest::collection::vec(any::<u8>(), 0..512)) {
        if let Ok(ids) = parse_storage_device_id_descriptor(&buf) {
            let _ = page83_id(&ids);
        }
        if let Ok(ids) = parse_scsi_vpd_page83(&buf) {
            let _ = page83_id(&ids);
        }
        let _ = parse_scsi_vpd_page80(&buf);
        let _ = parse_storage_device_descriptor_serial(&buf);
    }

    #[test]
    fn header_shaped_bytes_never_panic(
        count: u32,
        size in 0u32..600,
        tail in proptest::collection::vec(any::<u8>(), 0..512),
    ) {
        // Plausible headers reach the identifier chain more often.
        let mut buf = Vec::new();
        buf.extend_from_slice(&16u32.to_le_bytes());
        buf.extend_from_slice(&size.to_le_bytes());
        buf.extend_from_slice(&count.to_le_bytes());
        buf.extend_from_slice(&tail);
        let _ = parse_storage_device_id_descriptor(&buf);
    }

    #[test]
    fn descriptor_round_trip(ids in proptest::collection::vec(arb_fixture_id(), 0..6)) {
        let buf = fixtures::device_id_descriptor(&ids);
        let got = parse_storage_device_id_descriptor(&buf).unwrap();
        let want: Vec<Identifier> = ids.iter().map(FixtureId::identifier).collect();
        prop_assert_eq!(got, want);
    }

    #[test]
    fn vpd83_round_trip(
        des in proptest::collection::vec(
            (0u8..16, 0u8..4, 0u8..16, proptest::collection::vec(any::<u8>(), 0..40)),
            0..6,
        )
    ) {
        let refs: Vec<(u8, u8, u8, &[u8])> =
            des.iter().map(|(c, a, t, b)| (*c, *a, *t, b.as_slice())).collect();
        let got = parse_scsi_vpd_page83(&fixtures::vpd_page83(&refs)).unwrap();
        prop_assert_eq!(got.len(), des.len());
        for (g, (c, a, t, b)) in got.iter().zip(&des) {
            prop_assert_eq!(g.code_set.to_u32(), u32::from(*c));
            prop_assert_eq!(g.association, u32::from(*a));
            prop_assert_eq!(g.id_type, u32::from(*t));
            prop_assert_eq!(&g.bytes, b);
        }
    }

    #[test]
    fn page83_binary_is_hex(bytes in proptest::collection::vec(any::<u8>(), 1..40)) {
        let ids = [Identifier { code_set: CodeSet::Binary, id_type: 3, association: 0, bytes: bytes.clone() }];
        let hex = page83_id(&ids).unwrap();
        prop_assert_eq!(hex.len(), bytes.len() * 2);
        prop_assert!(hex.bytes().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)));
    }

    #[test]
    fn vpd80_round_trip(serial in "[A-Za-z0-9_.-]{0,40}", pad in 0usize..4) {
        let mut raw = " ".repeat(pad).into_bytes();
        raw.extend_from_slice(serial.as_bytes());
        raw.extend(std::iter::repeat_n(b' ', pad));
        prop_assert_eq!(parse_scsi_vpd_page80(&fixtures::vpd_page80(&raw)), Ok(serial));
    }

    #[test]
    fn serial_round_trip(serial in "[A-Za-z0-9_.-]{1,40}") {
        let buf = fixtures::device_descriptor(Some(b"V"), Some(b"P"), Some(serial.as_bytes()));
        prop_assert_eq!(parse_storage_device_descriptor_serial(&buf), Ok(Some(serial)));
    }
}
