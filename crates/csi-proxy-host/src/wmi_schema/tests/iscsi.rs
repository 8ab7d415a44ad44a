//! The iSCSI walks of `iscsi::cim` run against a provider that checks
//! every query they make (built as the Windows adapter builds it) and
//! every method call (class, method, parameter names, directions and value
//! types) against the published schema, in three worlds (nothing there;
//! a portal with a disconnected target; a connected one).

use std::cell::RefCell;
use std::collections::BTreeSet;

use zeroize::Zeroizing;

use super::super::facts::{writable, Version};
use super::super::names::ALL;
use super::super::queries;
use super::super::Kind;
use super::{check_query, versions};
use crate::iscsi::cim::{self, Arg, Cim, CimValue, Row};
use crate::iscsi::validate::{Auth, Iqn, Portal, Secret};
use crate::iscsi::TargetPortal;
use crate::path::Flavor;
use crate::Result;

struct Checked<'a> {
    v: &'a Version,
    empty: bool,
    connected: bool,
    errors: RefCell<Vec<String>>,
    called: RefCell<BTreeSet<String>>,
    queries: RefCell<usize>,
}

impl Checked<'_> {
    fn query(&self, q: &str) {
        *self.queries.borrow_mut() += 1;
        self.errors.borrow_mut().extend(check_query(self.v, ALL, q));
    }

    /// One instance of `class` with every property the walks read.
    fn row(&self, class: &str) -> Row {
        let mut r = Row {
            path: format!(r#"\\HOST\root\Microsoft\Windows\Storage:{class}.Id="1""#),
            ..Row::default()
        };
        for (k, v) in [
            ("TargetPortalAddress", CimValue::Str("10.0.0.9".into())),
            ("TargetPortalPortNumber", CimValue::U32(3260)),
            (
                "NodeAddress",
                CimValue::Str("iqn.1991-05.com.microsoft:t1".into()),
            ),
            ("IsConnected", CimValue::Bool(self.connected)),
            ("IsPersistent", CimValue::Bool(true)),
            ("SessionIdentifier", CimValue::Str("ffff-1".into())),
            ("Number", CimValue::U32(3)),
        ] {
            r.props.insert(k.to_string(), v);
        }
        r
    }
}

impl Cim for Checked<'_> {
    fn instances(&self, class: &str, filter: &[(&str, CimValue)]) -> Result<Vec<Row>> {
        self.query(&cim::instances_query(class, filter)?);
        Ok(if self.empty {
            vec![]
        } else {
            vec![self.row(class)]
        })
    }

    fn associators(&self, path: &str, assoc: &str, result: &str) -> Result<Vec<Row>> {
        self.query(&queries::associators(path, assoc, Some(result)));
        Ok(vec![self.row(result)])
    }

    fn call(
        &self,
        path: &str,
        class: &str,
        method: &str,
        args: Vec<(&'static str, Arg)>,
    ) -> Result<Row> {
        let mut errors = self.errors.borrow_mut();
        self.called.borrow_mut().insert(format!("{class}.{method}"));
        let ns = ALL
            .iter()
            .find(|u| u.class.name == class)
            .map(|u| u.class.namespace);
        let params = ns.and_then(|ns| self.v.method(ns, class, method));
        let Some(params) = params else {
            errors.push(format!("{}: call of unknown {class}.{method}", self.v.name));
            return Ok(Row::default());
        };
        if path != class && !path.contains(&format!(":{class}.")) {
            errors.push(format!("{class}.{method} called on {path:?}"));
        }
        for (name, arg) in &args {
            let Some((dir, _, t)) = params.iter().find(|(_, n, _)| n == name) else {
                errors.push(format!(
                    "{}: {class}.{method} has no parameter {name}",
                    self.v.name
                ));
                continue;
            };
            let fits = match arg {
                Arg::Str(_) | Arg::Secret(_) => writable(Kind::Str, t),
                Arg::U32(n) => match t.as_str() {
                    "uint8" => *n <= u8::MAX.into(),
                    "uint16" => *n <= u16::MAX.into(),
                    "uint32" | "enum" => true,
                    _ => false,
                },
            };
            if dir != "in" || !fits {
                errors.push(format!(
                    "{}: {class}.{method}({name}) is {dir} CIM {t}, given {arg:?}",
                    self.v.name
                ));
            }
        }
        let mut out = Row::default();
        out.props.insert("ReturnValue".into(), CimValue::U32(0));
        Ok(out)
    }
}

#[test]
fn wmi_schema_iscsi_walks_make_only_published_calls() {
    let portal = Portal::parse(&TargetPortal {
        target_address: "10.0.0.9".into(),
        target_port: 3260,
    })
    .unwrap();
    let iqn = Iqn::parse("iqn.1991-05.com.microsoft:t1").unwrap();
    let secret = || {
        Secret::parse(
            Zeroizing::new("0123456789ab".into()),
            Flavor::Windows,
            "secret",
        )
        .unwrap()
    };
    let auth = Auth::Mutual {
        user: "user".into(),
        secret: secret(),
    };
    let declared: BTreeSet<String> = ALL
        .iter()
        .filter(|u| u.class.name.starts_with("MSFT_iSCSI"))
        .flat_map(|u| {
            u.methods
                .iter()
                .map(|m| format!("{}.{}", u.class.name, m.name))
        })
        .collect();
    for v in versions() {
        let mut called = BTreeSet::new();
        let mut queries = 0;
        for (empty, connected) in [(true, false), (false, false), (false, true)] {
            let c = Checked {
                v: &v,
                empty,
                connected,
                errors: RefCell::default(),
                called: RefCell::default(),
                queries: RefCell::default(),
            };
            // Outcomes do not matter here (an empty world fails NotFound):
            // what the walks asked of WMI on the way does.
            let _ = cim::add_portal(&c, &portal);
            let _ = cim::discover(&c, &portal);
            let _ = cim::list_portals(&c);
            let _ = cim::connect(&c, &portal, &iqn, &auth);
            let _ = cim::connect(&c, &portal, &iqn, &Auth::None);
            let _ = cim::target_disks(&c, &portal, &iqn);
            let _ = cim::disconnect(&c, &portal, &iqn);
            let _ = cim::remove_portal(&c, &portal);
            let _ = cim::set_mutual_chap_secret(&c, Some(&secret()));
            let _ = cim::set_mutual_chap_secret(&c, None);
            let errors = c.errors.take();
            assert!(errors.is_empty(), "{}: {errors:#?}", v.name);
            called.extend(c.called.take());
            queries += c.queries.take();
        }
        assert_eq!(called, declared, "every declared iSCSI method is called");
        assert!(queries >= 10, "{queries} queries checked");
    }
}
