//! The published schema facts (`published.txt`, made by
//! `scripts/wmi-schema-facts.py`) and the rules that match the code's
//! names and types against them.

use std::collections::BTreeMap;

use super::{Dir, Kind};

/// The facts file, as committed.
pub const PUBLISHED: &str = include_str!("published.txt");

/// One class as published.
#[derive(Debug, Default)]
pub struct ClassDef {
    pub parent: Option<String>,
    pub props: BTreeMap<String, String>,
    /// Method → parameters (direction `in`, `out` or `inout`, name, type).
    pub methods: BTreeMap<String, Vec<(String, String, String)>>,
}

/// The classes of one Windows Server version.
#[derive(Debug, Default)]
pub struct Version {
    pub name: String,
    /// (namespace, class name) → definition; namespaces normalised.
    pub classes: BTreeMap<(String, String), ClassDef>,
}

/// `root\Microsoft\Windows\Storage` → `root/microsoft/windows/storage`.
pub fn namespace_key(ns: &str) -> String {
    ns.replace('\\', "/").to_ascii_lowercase()
}

/// Parses the facts file.
pub fn parse(text: &str) -> Result<Vec<Version>, String> {
    let mut versions: Vec<Version> = Vec::new();
    let mut class: Option<(String, String)> = None;
    let mut method: Option<String> = None;
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = |what: &str| format!("published.txt line {}: {what}: {line:?}", i + 1);
        let f: Vec<&str> = line.split_whitespace().collect();
        match f.as_slice() {
            ["version", name] => {
                versions.push(Version {
                    name: name.to_string(),
                    ..Version::default()
                });
                class = None;
                method = None;
            }
            ["class", ns, name, rest @ ..] if rest.len() <= 1 => {
                let v = versions
                    .last_mut()
                    .ok_or_else(|| bad("class before version"))?;
                let key = (namespace_key(ns), name.to_string());
                v.classes.insert(
                    key.clone(),
                    ClassDef {
                        parent: rest.first().map(|p| p.to_string()),
                        ..ClassDef::default()
                    },
                );
                class = Some(key);
                method = None;
            }
            ["prop", name, ty] => {
                current(&mut versions, &class)
                    .ok_or_else(|| bad("prop outside a class"))?
                    .props
                    .insert(name.to_string(), ty.to_string());
            }
            ["method", name] => {
                current(&mut versions, &class)
                    .ok_or_else(|| bad("method outside a class"))?
                    .methods
                    .insert(name.to_string(), Vec::new());
                method = Some(name.to_string());
            }
            [dir @ ("in" | "out" | "inout"), name, ty] => {
                let m = method
                    .clone()
                    .ok_or_else(|| bad("parameter outside a method"))?;
                current(&mut versions, &class)
                    .and_then(|c| c.methods.get_mut(&m))
                    .ok_or_else(|| bad("parameter outside a method"))?
                    .push((dir.to_string(), name.to_string(), ty.to_string()));
            }
            _ => return Err(bad("not a fact")),
        }
    }
    Ok(versions)
}

fn current<'a>(
    versions: &'a mut [Version],
    class: &Option<(String, String)>,
) -> Option<&'a mut ClassDef> {
    versions.last_mut()?.classes.get_mut(class.as_ref()?)
}

impl Version {
    /// The class `name` in namespace `ns`.
    pub fn class(&self, ns: &str, name: &str) -> Option<&ClassDef> {
        self.classes.get(&(namespace_key(ns), name.to_string()))
    }

    /// The namespace (normalised) holding a class of that name, if any.
    pub fn namespaces_of(&self, name: &str) -> Vec<&str> {
        self.classes
            .keys()
            .filter(|(_, c)| c == name)
            .map(|(ns, _)| ns.as_str())
            .collect()
    }

    /// `name` and its ancestors, nearest first.
    pub fn lineage<'a>(&'a self, ns: &str, name: &str) -> Vec<(&'a str, &'a ClassDef)> {
        let mut out = Vec::new();
        let mut next = Some(name.to_string());
        while let Some(n) = next {
            let Some((key, def)) = self.classes.get_key_value(&(namespace_key(ns), n)) else {
                break;
            };
            if out.len() > 32 {
                break;
            }
            out.push((key.1.as_str(), def));
            next = def.parent.clone();
        }
        out
    }

    /// The published type of property `prop` of `class` (inherited too).
    pub fn prop_type(&self, ns: &str, class: &str, prop: &str) -> Option<&str> {
        self.lineage(ns, class)
            .into_iter()
            .find_map(|(_, d)| d.props.get(prop).map(String::as_str))
    }

    /// The parameters of method `method` of `class` (inherited too).
    pub fn method(
        &self,
        ns: &str,
        class: &str,
        method: &str,
    ) -> Option<&[(String, String, String)]> {
        self.lineage(ns, class)
            .into_iter()
            .find_map(|(_, d)| d.methods.get(method).map(Vec::as_slice))
    }

    /// Whether `class` is `ancestor` or derives from it.
    pub fn is_a(&self, ns: &str, class: &str, ancestor: &str) -> bool {
        self.lineage(ns, class).iter().any(|(n, _)| *n == ancestor)
    }
}

/// Whether a value the code reads as `kind` fits the CIM type `cim` (a
/// property or out-parameter): the Rust type holds every value of it.
pub fn readable(kind: Kind, cim: &str) -> bool {
    match kind {
        Kind::U16 => matches!(cim, "uint8" | "uint16"),
        Kind::U32 => matches!(cim, "uint8" | "uint16" | "uint32" | "enum"),
        Kind::U64 => matches!(cim, "uint8" | "uint16" | "uint32" | "uint64"),
        Kind::Bool => cim == "boolean",
        Kind::Str => cim == "string",
        Kind::Object => cim.starts_with("object:") && !cim.ends_with("[]"),
    }
}

/// Whether a value the code passes as `kind` is what an in-parameter of
/// CIM type `cim` takes (exactly: no value WMI would refuse or cut).
pub fn writable(kind: Kind, cim: &str) -> bool {
    match kind {
        Kind::U16 => cim == "uint16",
        Kind::U32 => matches!(cim, "uint32" | "enum"),
        Kind::U64 => cim == "uint64",
        Kind::Bool => cim == "boolean",
        Kind::Str => cim == "string",
        Kind::Object => false,
    }
}

/// Whether a parameter of published direction `published` can be used as
/// `dir`.
pub fn direction_fits(dir: Dir, published: &str) -> bool {
    match dir {
        Dir::In => matches!(published, "in" | "inout"),
        Dir::Out => matches!(published, "out" | "inout"),
    }
}
