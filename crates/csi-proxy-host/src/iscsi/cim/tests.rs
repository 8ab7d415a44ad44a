//! The walks against an in-memory model of the provider: instances by
//! class, association edges, and every method call recorded.

use super::*;
use crate::iscsi::AuthenticationType;
use crate::path::Flavor;
use std::cell::RefCell;

/// A recorded call: path, class, method, arguments.
type Recorded = (String, String, String, Vec<(&'static str, Arg)>);

#[derive(Default)]
struct Model {
    rows: RefCell<Vec<(String, Row)>>,
    edges: RefCell<Vec<(String, String, String)>>,
    calls: RefCell<Vec<Recorded>>,
    /// ReturnValue of every call.
    ret: RefCell<u32>,
}

fn row(path: &str, props: &[(&str, CimValue)]) -> Row {
    Row {
        path: path.into(),
        props: props
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
    }
}

impl Model {
    fn add(&self, class: &str, r: Row) {
        self.rows.borrow_mut().push((class.into(), r));
    }
    fn link(&self, assoc: &str, a: &str, b: &str) {
        self.edges
            .borrow_mut()
            .push((assoc.into(), a.into(), b.into()));
    }
    fn class_of(&self, path: &str) -> String {
        self.rows
            .borrow()
            .iter()
            .find(|(_, r)| r.path == path)
            .map(|(c, _)| c.clone())
            .unwrap_or_default()
    }
    fn methods(&self) -> Vec<String> {
        self.calls
            .borrow()
            .iter()
            .map(|(p, c, m, _)| format!("{c}.{m}@{p}"))
            .collect()
    }
}

impl Cim for Model {
    fn instances(&self, class: &str, filter: &[(&str, CimValue)]) -> Result<Vec<Row>> {
        Ok(self
            .rows
            .borrow()
            .iter()
            .filter(|(c, r)| c == class && filter.iter().all(|(k, v)| r.props.get(*k) == Some(v)))
            .map(|(_, r)| r.clone())
            .collect())
    }
    fn associators(&self, path: &str, assoc: &str, result: &str) -> Result<Vec<Row>> {
        let others: Vec<String> = self
            .edges
            .borrow()
            .iter()
            .filter(|(a, _, _)| a == assoc)
            .filter_map(|(_, x, y)| {
                if x == path {
                    Some(y.clone())
                } else if y == path {
                    Some(x.clone())
                } else {
                    None
                }
            })
            .collect();
        Ok(self
            .rows
            .borrow()
            .iter()
            .filter(|(c, r)| c == result && others.contains(&r.path))
            .map(|(_, r)| r.clone())
            .collect())
    }
    fn call(
        &self,
        path: &str,
        class: &str,
        method: &str,
        args: Vec<(&'static str, Arg)>,
    ) -> Result<Row> {
        self.calls
            .borrow_mut()
            .push((path.into(), class.into(), method.into(), args));
        Ok(row(
            "",
            &[("ReturnValue", CimValue::U32(*self.ret.borrow()))],
        ))
    }
}

fn portal() -> Portal {
    Portal::parse(&TargetPortal {
        target_address: "10.0.0.9".into(),
        target_port: 0,
    })
    .unwrap()
}

fn iqn() -> Iqn {
    Iqn::parse("iqn.1991-05.com.microsoft:t1").unwrap()
}

/// A portal with two targets; t1 connected through one session (persistent)
/// and two connections reaching disks 3, 5 and 3 again.
fn model(connected: bool) -> Model {
    let m = Model::default();
    m.add(
        PORTAL,
        row(
            "P1",
            &[
                ("TargetPortalAddress", CimValue::Str("10.0.0.9".into())),
                ("TargetPortalPortNumber", CimValue::U32(3260)),
            ],
        ),
    );
    for (p, n) in [
        ("T1", "iqn.1991-05.com.microsoft:T1"),
        ("T2", "iqn.1991-05.com.microsoft:t2"),
    ] {
        m.add(
            TARGET,
            row(
                p,
                &[
                    ("NodeAddress", CimValue::Str(n.into())),
                    ("IsConnected", CimValue::Bool(connected && p == "T1")),
                ],
            ),
        );
        m.link(TARGET_TO_PORTAL, p, "P1");
    }
    m.add(
        SESSION,
        row(
            "S1",
            &[
                ("SessionIdentifier", CimValue::Str("ffff-1".into())),
                ("IsPersistent", CimValue::Bool(true)),
            ],
        ),
    );
    m.link(TARGET_TO_SESSION, "T1", "S1");
    for c in ["C1", "C2"] {
        m.add(CONNECTION, row(c, &[]));
        m.link(TARGET_TO_CONNECTION, "T1", c);
    }
    for (d, n) in [("D3", 3), ("D5", 5)] {
        m.add(DISK, row(d, &[("Number", CimValue::U32(n))]));
    }
    m.link(CONNECTION_TO_DISK, "C1", "D5");
    m.link(CONNECTION_TO_DISK, "C1", "D3");
    m.link(CONNECTION_TO_DISK, "C2", "D3");
    m
}

#[test]
fn portals_add_list_discover_remove() {
    let m = model(false);
    add_portal(&m, &portal()).unwrap();
    assert!(m.methods().is_empty(), "present already: no New");
    let other = Portal::parse(&TargetPortal {
        target_address: "san.example".into(),
        target_port: 3261,
    })
    .unwrap();
    add_portal(&m, &other).unwrap();
    assert_eq!(
        m.methods(),
        vec!["MSFT_iSCSITargetPortal.New@MSFT_iSCSITargetPortal"]
    );
    assert_eq!(
        m.calls.borrow()[0].3,
        vec![
            ("TargetPortalAddress", Arg::Str("san.example".into())),
            ("TargetPortalPortNumber", Arg::U32(3261))
        ]
    );
    assert_eq!(
        list_portals(&m).unwrap(),
        vec![TargetPortal {
            target_address: "10.0.0.9".into(),
            target_port: 3260
        }]
    );
    let mut iqns = discover(&m, &portal()).unwrap();
    iqns.sort();
    assert_eq!(
        iqns,
        [
            "iqn.1991-05.com.microsoft:T1",
            "iqn.1991-05.com.microsoft:t2"
        ]
    );
    let e = discover(&m, &other).unwrap_err();
    assert!(matches!(e, Error::NotFound(_)), "{e}");
    remove_portal(&m, &portal()).unwrap();
    assert_eq!(m.calls.borrow()[1].0, "P1");
    *m.ret.borrow_mut() = 2;
    let e = remove_portal(&m, &portal()).unwrap_err();
    assert!(e.to_string().contains("ReturnValue 2"), "{e}");
}

#[test]
fn connect_passes_chap_as_a_secret_and_is_idempotent() {
    let m = model(false);
    let auth = crate::iscsi::validate::Auth::parse(
        AuthenticationType::MutualChap,
        "chapuser",
        Zeroizing::new("0123456789abcd".into()),
        Flavor::Windows,
    )
    .unwrap();
    connect(&m, &portal(), &iqn(), &auth).unwrap();
    let calls = m.calls.borrow();
    assert_eq!(calls[0].2, "Connect");
    let args = &calls[0].3;
    assert_eq!(
        args[0],
        (
            "NodeAddress",
            Arg::Str("iqn.1991-05.com.microsoft:t1".into())
        )
    );
    assert_eq!(
        args[3],
        ("AuthenticationType", Arg::Str("MUTUALCHAP".into()))
    );
    assert_eq!(args[4], ("ChapUsername", Arg::Str("chapuser".into())));
    assert!(matches!(&args[5], ("ChapSecret", Arg::Secret(s)) if s.as_str() == "0123456789abcd"));
    assert!(!format!("{args:?}").contains("0123456789abcd"));
    drop(calls);
    let m = model(true);
    connect(&m, &portal(), &iqn(), &crate::iscsi::validate::Auth::None).unwrap();
    assert!(m.methods().is_empty());
    let e = connect(
        &m,
        &portal(),
        &Iqn::parse("iqn.1991-05.com.microsoft:none").unwrap(),
        &crate::iscsi::validate::Auth::None,
    )
    .unwrap_err();
    assert!(matches!(e, Error::NotFound(_)), "{e}");
}

#[test]
fn disconnect_unregisters_persistent_sessions() {
    let m = model(true);
    disconnect(&m, &portal(), &iqn()).unwrap();
    assert_eq!(
        m.methods(),
        vec![
            "MSFT_iSCSISession.Unregister@S1",
            "MSFT_iSCSITarget.Disconnect@T1"
        ]
    );
    assert_eq!(
        m.calls.borrow()[1].3,
        vec![("SessionIdentifier", Arg::Str("ffff-1".into()))]
    );
    // Not connected, or not offered: nothing to do.
    let m = model(false);
    disconnect(&m, &portal(), &iqn()).unwrap();
    disconnect(&m, &portal(), &Iqn::parse("iqn.2000-01.x.y:z").unwrap()).unwrap();
    assert!(m.methods().is_empty());
    assert_eq!(m.class_of("S1"), SESSION);
}

#[test]
fn target_disks_walk_connections_to_disks() {
    let m = model(true);
    assert_eq!(target_disks(&m, &portal(), &iqn()).unwrap(), vec![3, 5]);
    let m = model(false);
    assert!(target_disks(&m, &portal(), &iqn()).unwrap().is_empty());
}

#[test]
fn mutual_chap_secret_is_a_static_call_with_a_secret() {
    let m = model(false);
    let s = Secret::parse(
        Zeroizing::new("mutual-secret-1".into()),
        Flavor::Windows,
        "x",
    )
    .unwrap();
    set_mutual_chap_secret(&m, Some(&s)).unwrap();
    set_mutual_chap_secret(&m, None).unwrap();
    let calls = m.calls.borrow();
    assert_eq!(calls[0].0, SESSION);
    assert!(
        matches!(&calls[0].3[0], ("ChapSecret", Arg::Secret(v)) if v.as_str() == "mutual-secret-1")
    );
    assert!(matches!(&calls[1].3[0], ("ChapSecret", Arg::Secret(v)) if v.is_empty()));
}
