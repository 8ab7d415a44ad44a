//! The `wmi_schema` checks: every name and type of [`names`], every query
//! of [`queries`] and every call the iSCSI walks make, against the
//! published class definitions of `published.txt`; and a guard that the
//! Windows code takes its WMI names from here only.

use super::facts::{self, direction_fits, readable, writable, Version};
use super::names::{ALL, ANY_OUT};
use super::{queries, AnyOutUse, ClassUses, Dir, Kind};

fn versions() -> Vec<Version> {
    facts::parse(facts::PUBLISHED).expect("published.txt parses")
}

/// Every use of `uses` that the schema of `v` does not have.
fn check_uses(v: &Version, uses: &[ClassUses]) -> Vec<String> {
    let mut errors = Vec::new();
    for u in uses {
        let (ns, class) = (u.class.namespace, u.class.name);
        if v.class(ns, class).is_none() {
            errors.push(format!(
                "{}: class {class} is not published in {ns} (it is in: {:?})",
                v.name,
                v.namespaces_of(class)
            ));
            continue;
        }
        for (prop, kind) in u.props {
            match v.prop_type(ns, class, prop) {
                None => errors.push(format!("{}: {class} has no property {prop}", v.name)),
                Some(t) if !readable(*kind, t) => errors.push(format!(
                    "{}: {class}.{prop} is CIM {t}, read as {kind:?}",
                    v.name
                )),
                Some(_) => {}
            }
        }
        for m in u.methods {
            let Some(params) = v.method(ns, class, m.name) else {
                errors.push(format!("{}: {class} has no method {}", v.name, m.name));
                continue;
            };
            for (name, dir, kind) in m.params {
                let Some((pdir, _, t)) = params.iter().find(|(_, n, _)| n == name) else {
                    errors.push(format!(
                        "{}: {class}.{} has no parameter {name}",
                        v.name, m.name
                    ));
                    continue;
                };
                let fits = match dir {
                    Dir::In => writable(*kind, t),
                    Dir::Out => readable(*kind, t),
                };
                if !direction_fits(*dir, pdir) {
                    errors.push(format!(
                        "{}: {class}.{}({name}) is an {pdir} parameter, used as {dir:?}",
                        v.name, m.name
                    ));
                } else if !fits {
                    errors.push(format!(
                        "{}: {class}.{}({name}) is CIM {t}, used as {kind:?}",
                        v.name, m.name
                    ));
                }
            }
        }
    }
    errors
}

/// The out-parameters read from whichever method was called: `always`
/// ones in every method of `uses`, the others with the right type where
/// present and present somewhere.
fn check_any_out(v: &Version, uses: &[ClassUses], outs: &[AnyOutUse]) -> Vec<String> {
    let mut errors = Vec::new();
    for o in outs {
        let mut seen = false;
        for u in uses {
            for m in u.methods {
                let Some(params) = v.method(u.class.namespace, u.class.name, m.name) else {
                    continue;
                };
                match params.iter().find(|(_, n, _)| n == o.name) {
                    Some((d, _, t)) => {
                        seen = true;
                        if !direction_fits(Dir::Out, d) || !readable(o.kind, t) {
                            errors.push(format!(
                                "{}: {}.{} returns {} as {d} CIM {t}, read as {:?}",
                                v.name, u.class.name, m.name, o.name, o.kind
                            ));
                        }
                    }
                    None if o.always => errors.push(format!(
                        "{}: {}.{} has no out-parameter {}",
                        v.name, u.class.name, m.name, o.name
                    )),
                    None => {}
                }
            }
        }
        if !seen {
            errors.push(format!(
                "{}: no method the code calls has an out-parameter {}",
                v.name, o.name
            ));
        }
    }
    errors
}

// ---- WQL ----------------------------------------------------------------

#[derive(Debug, PartialEq)]
enum Tok {
    Word(String),
    Str(String),
    Num(u64),
    Path(String),
    Sym(char),
}

fn lex(q: &str) -> Result<Vec<Tok>, String> {
    let mut out = Vec::new();
    let mut it = q.chars().peekable();
    while let Some(&c) = it.peek() {
        match c {
            ' ' => {
                it.next();
            }
            ',' | '=' | '*' => {
                out.push(Tok::Sym(c));
                it.next();
            }
            '{' => {
                it.next();
                // Up to the closing brace outside quoted key values.
                let mut s = String::new();
                let mut quote = None;
                loop {
                    match (it.next(), quote) {
                        (Some('}'), None) => break,
                        (Some(ch @ ('\'' | '"')), None) => {
                            quote = Some(ch);
                            s.push(ch);
                        }
                        (Some(ch), Some(qc)) if ch == qc => {
                            quote = None;
                            s.push(ch);
                        }
                        (Some('\\'), Some(_)) => {
                            s.push('\\');
                            match it.next() {
                                Some(e) => s.push(e),
                                None => return Err(format!("dangling escape in {q:?}")),
                            }
                        }
                        (Some(ch), _) => s.push(ch),
                        (None, _) => return Err(format!("unterminated object path in {q:?}")),
                    }
                }
                out.push(Tok::Path(s));
            }
            '\'' | '"' => {
                it.next();
                let mut s = String::new();
                loop {
                    match it.next() {
                        Some('\\') => match it.next() {
                            Some(e) => s.push(e),
                            None => return Err(format!("dangling escape in {q:?}")),
                        },
                        Some(ch) if ch == c => break,
                        Some(ch) => s.push(ch),
                        None => return Err(format!("unterminated string in {q:?}")),
                    }
                }
                out.push(Tok::Str(s));
            }
            c if c.is_ascii_digit() => {
                let mut n = String::new();
                while let Some(&d) = it.peek().filter(|d| d.is_ascii_digit()) {
                    n.push(d);
                    it.next();
                }
                out.push(Tok::Num(n.parse().map_err(|e| format!("{n}: {e}"))?));
            }
            c if c.is_ascii_alphabetic() || c == '_' => {
                let mut w = String::new();
                while let Some(&d) = it
                    .peek()
                    .filter(|d| d.is_ascii_alphanumeric() || **d == '_')
                {
                    w.push(d);
                    it.next();
                }
                out.push(Tok::Word(w));
            }
            other => return Err(format!("unexpected {other:?} in {q:?}")),
        }
    }
    Ok(out)
}

/// A parsed query.
#[derive(Debug, PartialEq)]
enum Wql {
    Select {
        class: String,
        /// Empty: `*`.
        columns: Vec<String>,
        /// (property, literal kind: "string", "int", "boolean", "null").
        conds: Vec<(String, &'static str)>,
    },
    Associators {
        path: String,
        assoc: Option<String>,
        result: Option<String>,
    },
}

fn word(t: Option<&Tok>) -> Option<&str> {
    match t {
        Some(Tok::Word(w)) => Some(w),
        _ => None,
    }
}

fn kw(t: Option<&Tok>, k: &str) -> bool {
    word(t).is_some_and(|w| w.eq_ignore_ascii_case(k))
}

fn parse_wql(q: &str) -> Result<Wql, String> {
    let toks = lex(q)?;
    let mut i = 0;
    let bad = |what: &str| format!("{what} in {q:?}");
    if kw(toks.first(), "SELECT") {
        i += 1;
        let mut columns = Vec::new();
        if toks.get(i) == Some(&Tok::Sym('*')) {
            i += 1;
        } else {
            loop {
                columns.push(
                    word(toks.get(i))
                        .ok_or_else(|| bad("column expected"))?
                        .to_string(),
                );
                i += 1;
                if toks.get(i) != Some(&Tok::Sym(',')) {
                    break;
                }
                i += 1;
            }
        }
        if !kw(toks.get(i), "FROM") {
            return Err(bad("FROM expected"));
        }
        let class = word(toks.get(i + 1))
            .ok_or_else(|| bad("class expected"))?
            .to_string();
        i += 2;
        let mut conds = Vec::new();
        if i < toks.len() {
            if !kw(toks.get(i), "WHERE") {
                return Err(bad("WHERE expected"));
            }
            i += 1;
            loop {
                let prop = word(toks.get(i)).ok_or_else(|| bad("property expected"))?;
                let lit = if kw(toks.get(i + 1), "IS") && kw(toks.get(i + 2), "NULL") {
                    "null"
                } else if toks.get(i + 1) == Some(&Tok::Sym('=')) {
                    match toks.get(i + 2) {
                        Some(Tok::Str(_)) => "string",
                        Some(Tok::Num(_)) => "int",
                        t if kw(t, "TRUE") || kw(t, "FALSE") => "boolean",
                        _ => return Err(bad("literal expected")),
                    }
                } else {
                    return Err(bad("= or IS NULL expected"));
                };
                conds.push((prop.to_string(), lit));
                i += 3;
                if i >= toks.len() {
                    break;
                }
                if !kw(toks.get(i), "AND") {
                    return Err(bad("AND expected"));
                }
                i += 1;
            }
        }
        return Ok(Wql::Select {
            class,
            columns,
            conds,
        });
    }
    if kw(toks.first(), "ASSOCIATORS") && kw(toks.get(1), "OF") {
        let Some(Tok::Path(path)) = toks.get(2) else {
            return Err(bad("{object path} expected"));
        };
        let (mut assoc, mut result) = (None, None);
        i = 3;
        if i < toks.len() {
            if !kw(toks.get(i), "WHERE") {
                return Err(bad("WHERE expected"));
            }
            i += 1;
            while i < toks.len() {
                let key = word(toks.get(i)).ok_or_else(|| bad("keyword expected"))?;
                if toks.get(i + 1) != Some(&Tok::Sym('=')) {
                    return Err(bad("= expected"));
                }
                let val = word(toks.get(i + 2)).ok_or_else(|| bad("class expected"))?;
                match key {
                    "AssocClass" => assoc = Some(val.to_string()),
                    "ResultClass" => result = Some(val.to_string()),
                    other => return Err(bad(&format!("unsupported {other}"))),
                }
                i += 3;
            }
        }
        return Ok(Wql::Associators {
            path: path.clone(),
            assoc,
            result,
        });
    }
    Err(bad("not a SELECT or ASSOCIATORS query"))
}

/// The declared namespace of `class` (it must be in [`names`]).
fn declared_ns<'a>(uses: &'a [ClassUses], class: &str) -> Option<&'a str> {
    uses.iter()
        .find(|u| u.class.name == class)
        .map(|u| u.class.namespace)
}

/// The class of an object path `\\HOST\ns:Class.Key="v"` (or `Class`).
fn path_class(path: &str) -> &str {
    let p = path.split(['.', '=']).next().unwrap_or(path);
    p.rsplit(':').next().unwrap_or(p)
}

/// What is wrong with query `q` against `v`.
fn check_query(v: &Version, uses: &[ClassUses], q: &str) -> Vec<String> {
    let wql = match parse_wql(q) {
        Ok(w) => w,
        Err(e) => return vec![e],
    };
    let mut errors = Vec::new();
    let class_ok = |class: &str, errors: &mut Vec<String>| -> Option<String> {
        let Some(ns) = declared_ns(uses, class) else {
            errors.push(format!(
                "{q:?}: class {class} is not declared in wmi_schema::names"
            ));
            return None;
        };
        if v.class(ns, class).is_none() {
            errors.push(format!("{}: {q:?}: no class {class} in {ns}", v.name));
            return None;
        }
        Some(ns.to_string())
    };
    match wql {
        Wql::Select {
            class,
            columns,
            conds,
        } => {
            let Some(ns) = class_ok(&class, &mut errors) else {
                return errors;
            };
            for c in &columns {
                if c != super::PATH && v.prop_type(&ns, &class, c).is_none() {
                    errors.push(format!("{}: {q:?}: {class} has no property {c}", v.name));
                }
            }
            for (p, lit) in &conds {
                match v.prop_type(&ns, &class, p) {
                    None => errors.push(format!("{}: {q:?}: {class} has no property {p}", v.name)),
                    Some(t) => {
                        let fits = match *lit {
                            "string" => t == "string",
                            "boolean" => t == "boolean",
                            "int" => t.starts_with("uint") || t.starts_with("sint") || t == "enum",
                            _ => true,
                        };
                        if !fits || t.ends_with("[]") {
                            errors.push(format!(
                                "{}: {q:?}: {class}.{p} is CIM {t}, compared with a {lit}",
                                v.name
                            ));
                        }
                    }
                }
            }
        }
        Wql::Associators {
            path,
            assoc,
            result,
        } => {
            let source = path_class(&path).to_string();
            let Some(src_ns) = class_ok(&source, &mut errors) else {
                return errors;
            };
            let Some(assoc) = assoc else {
                errors.push(format!("{q:?}: no AssocClass"));
                return errors;
            };
            let Some(ns) = class_ok(&assoc, &mut errors) else {
                return errors;
            };
            // The ends of the association: its object-typed properties.
            let ends: Vec<String> = v
                .lineage(&ns, &assoc)
                .iter()
                .flat_map(|(_, d)| d.props.values())
                .filter_map(|t| t.strip_prefix("object:").map(str::to_string))
                .collect();
            let from = ends.iter().position(|e| v.is_a(&src_ns, &source, e));
            match from {
                None => errors.push(format!(
                    "{}: {q:?}: {assoc} does not link {source} (its ends: {ends:?})",
                    v.name
                )),
                Some(k) => {
                    if let Some(r) = result {
                        if class_ok(&r, &mut errors).is_some()
                            && !ends
                                .iter()
                                .enumerate()
                                .any(|(j, e)| j != k && v.is_a(&ns, &r, e))
                        {
                            errors.push(format!(
                                "{}: {q:?}: {assoc} does not lead from {source} to {r} (its ends: {ends:?})",
                                v.name
                            ));
                        }
                    }
                }
            }
        }
    }
    errors
}

/// Every query of [`queries`], with sample values.
fn all_queries() -> Vec<String> {
    let vol =
        r"\\HOST\root\Microsoft\Windows\Storage:MSFT_Volume.ObjectId='{1}\\\\HOST\\Volume{0f}'";
    vec![
        queries::disk_locations(),
        queries::disk(3),
        queries::partition_types(3),
        queries::offline_partitions(3),
        queries::volume(r"\\?\Volume{0f5b1a5e-3a7d-4e26-9c1e-57a1e0b0c0d1}\").unwrap(),
        queries::partition_of_volume(vol),
        queries::smb_mapping(r"\\srv\share").unwrap(),
        queries::bios_serial(),
    ]
}

fn assert_clean(what: &str, errors: Vec<String>) {
    assert!(
        errors.is_empty(),
        "{what}: {} problem(s):\n  {}",
        errors.len(),
        errors.join("\n  ")
    );
}

#[test]
fn wmi_schema_facts_name_their_source_and_hold_every_version() {
    assert!(facts::PUBLISHED.contains("github.com/microsoft/wmi commit "));
    let vs = versions();
    let names: Vec<&str> = vs.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["server2019", "server23h2"]);
    for v in &vs {
        // Spot facts read by hand from the generated structs.
        assert_eq!(
            v.prop_type(super::STORAGE_NAMESPACE, "MSFT_Disk", "Number"),
            Some("uint32")
        );
        assert_eq!(
            v.prop_type(super::STORAGE_NAMESPACE, "MSFT_Volume", "UniqueId"),
            Some("string"),
            "inherited from MSFT_StorageObject"
        );
        let init = v
            .method(super::STORAGE_NAMESPACE, "MSFT_Disk", "Initialize")
            .unwrap();
        assert!(init.contains(&("in".into(), "PartitionStyle".into(), "uint16".into())));
        assert!(v.classes.len() >= ALL.len());
    }
}

#[test]
fn wmi_schema_names_match_the_published_classes() {
    for v in versions() {
        assert_clean(&v.name, check_uses(&v, ALL));
        assert_clean(&v.name, check_any_out(&v, ALL, ANY_OUT));
    }
}

#[test]
fn wmi_schema_queries_name_published_classes_and_properties() {
    let qs = all_queries();
    for v in versions() {
        for q in &qs {
            assert_clean(q, check_query(&v, ALL, q));
        }
    }
}

#[test]
fn wmi_schema_check_catches_misspelt_and_mistyped_names() {
    use super::{Class, MethodUses, STORAGE_NAMESPACE};
    let v = &versions()[0];
    let class = |name| Class {
        name,
        namespace: STORAGE_NAMESPACE,
    };
    let broken = [
        ClassUses {
            class: class("MSFT_Disks"),
            props: &[],
            methods: &[],
        },
        ClassUses {
            class: class("MSFT_Disk"),
            props: &[
                ("Numbr", Kind::U32),
                ("Size", Kind::U32),
                ("Location", Kind::Str),
            ],
            methods: &[
                MethodUses {
                    name: "Initialise",
                    params: &[],
                },
                MethodUses {
                    name: "Initialize",
                    params: &[
                        ("PartitionStyle", Dir::In, Kind::U32),
                        ("Style", Dir::In, Kind::U16),
                        ("ExtendedStatus", Dir::In, Kind::Object),
                    ],
                },
            ],
        },
        ClassUses {
            class: Class {
                name: "Win32_BIOS",
                namespace: STORAGE_NAMESPACE,
            },
            props: &[],
            methods: &[],
        },
    ];
    let errors = check_uses(v, &broken);
    for want in [
        "class MSFT_Disks is not published",
        "MSFT_Disk has no property Numbr",
        "MSFT_Disk.Size is CIM uint64, read as U32",
        "MSFT_Disk has no method Initialise",
        "Initialize(PartitionStyle) is CIM uint16, used as U32",
        "Initialize has no parameter Style",
        "Initialize(ExtendedStatus) is an out parameter",
        "class Win32_BIOS is not published in root\\Microsoft\\Windows\\Storage",
    ] {
        assert!(
            errors.iter().any(|e| e.contains(want)),
            "{want:?} not reported in {errors:#?}"
        );
    }
    assert_eq!(errors.len(), 8, "{errors:#?}");

    let bad_queries = [
        ("SELECT Number, Locaton FROM MSFT_Disk", "has no property Locaton"),
        ("SELECT * FROM MSFT_Disk WHERE Number = '3'", "compared with a string"),
        ("SELECT * FROM MSFT_Partition WHERE IsOffline = 1", "compared with a int"),
        ("SELECT * FROM MSFT_Volumes", "not declared"),
        ("SELECT * FROM MSFT_Disk WHERE", "property expected"),
        (
            "ASSOCIATORS OF {MSFT_Volume.ObjectId='x'} WHERE AssocClass = MSFT_iSCSIConnectionToDisk",
            "does not link MSFT_Volume",
        ),
        (
            "ASSOCIATORS OF {MSFT_iSCSITarget.NodeAddress='x'} WHERE AssocClass = MSFT_iSCSITargetToiSCSISession ResultClass = MSFT_iSCSIConnection",
            "does not lead from MSFT_iSCSITarget to MSFT_iSCSIConnection",
        ),
    ];
    for (q, want) in bad_queries {
        let errors = check_query(v, ALL, q);
        assert!(
            errors.iter().any(|e| e.contains(want)),
            "{q}: {want:?} not reported in {errors:#?}"
        );
    }

    let no_return = [ClassUses {
        class: class("MSFT_Disk"),
        props: &[],
        methods: &[MethodUses {
            name: "Refresh",
            params: &[],
        }],
    }];
    let outs = [AnyOutUse {
        name: "ReturnValu",
        always: true,
        kind: Kind::U32,
    }];
    let errors = check_any_out(v, &no_return, &outs);
    assert_eq!(errors.len(), 2, "{errors:#?}");
}

#[test]
fn wmi_schema_wql_parser_reads_what_the_builders_write() {
    assert_eq!(
        parse_wql(&queries::offline_partitions(7)).unwrap(),
        Wql::Select {
            class: "MSFT_Partition".into(),
            columns: vec![],
            conds: vec![
                ("DiskNumber".into(), "int"),
                ("IsOffline".into(), "boolean")
            ],
        }
    );
    assert_eq!(
        parse_wql(&queries::smb_mapping(r"\\srv\share").unwrap()).unwrap(),
        Wql::Select {
            class: "MSFT_SmbGlobalMapping".into(),
            columns: vec![],
            conds: vec![("RemotePath".into(), "string")],
        }
    );
    assert_eq!(
        parse_wql(&queries::disk_locations()).unwrap(),
        Wql::Select {
            class: "MSFT_Disk".into(),
            columns: vec!["Number".into(), "Location".into()],
            conds: vec![],
        }
    );
}

mod guard;
mod iscsi;
