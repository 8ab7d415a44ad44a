//! Every WQL query the Windows backends run, built from the names of
//! [`super::names`] only; values enter as integers, booleans, object paths
//! WMI returned, or through [`wql_string_literal`]. The `wmi_schema` tests
//! parse what these functions build and check it against the schema.

use super::names::{bios, disk, partition, partition_to_volume, smb_global_mapping, volume};
use super::{Class, Prop};
use crate::storage::parse::cim::wql_string_literal;
use crate::storage::parse::error::ParseError;

/// One `property = literal` condition of a WHERE clause.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cond {
    prop: String,
    literal: String,
}

impl Cond {
    /// `prop = 'value'` (refused: quotes and control characters).
    pub fn string(prop: &str, value: &str) -> Result<Cond, ParseError> {
        Ok(Cond {
            prop: prop.to_string(),
            literal: wql_string_literal(value)?,
        })
    }
    /// `prop = n`.
    pub fn int(prop: &str, n: u64) -> Cond {
        Cond {
            prop: prop.to_string(),
            literal: n.to_string(),
        }
    }
    /// `prop = TRUE` / `FALSE`.
    pub fn bool(prop: &str, b: bool) -> Cond {
        Cond {
            prop: prop.to_string(),
            literal: if b { "TRUE" } else { "FALSE" }.to_string(),
        }
    }
    /// `prop IS NULL`.
    pub fn null(prop: &str) -> Cond {
        Cond {
            prop: prop.to_string(),
            literal: String::new(),
        }
    }
}

impl Prop<u32> {
    /// `Prop = n`.
    pub fn eq(&self, n: u32) -> Cond {
        Cond::int(self.name, n.into())
    }
}

impl Prop<bool> {
    /// `Prop = TRUE/FALSE`.
    pub fn eq(&self, b: bool) -> Cond {
        Cond::bool(self.name, b)
    }
}

impl Prop<String> {
    /// `Prop = 'value'`.
    pub fn eq(&self, value: &str) -> Result<Cond, ParseError> {
        Cond::string(self.name, value)
    }
}

/// `SELECT <columns or *> FROM <class> [WHERE c AND c ...]`.
pub fn select(class: &str, columns: &[&str], conds: &[Cond]) -> String {
    let mut q = String::from("SELECT ");
    if columns.is_empty() {
        q.push('*');
    } else {
        q.push_str(&columns.join(", "));
    }
    q.push_str(" FROM ");
    q.push_str(class);
    for (i, c) in conds.iter().enumerate() {
        q.push_str(if i == 0 { " WHERE " } else { " AND " });
        q.push_str(&c.prop);
        if c.literal.is_empty() {
            q.push_str(" IS NULL");
        } else {
            q.push_str(" = ");
            q.push_str(&c.literal);
        }
    }
    q
}

/// `ASSOCIATORS OF {path} WHERE AssocClass = A [ResultClass = R]`, `path`
/// an object path WMI returned.
pub fn associators(path: &str, assoc: &str, result: Option<&str>) -> String {
    let mut q = format!("ASSOCIATORS OF {{{path}}} WHERE AssocClass = {assoc}");
    if let Some(r) = result {
        q.push_str(" ResultClass = ");
        q.push_str(r);
    }
    q
}

fn all(class: Class, conds: &[Cond]) -> String {
    select(class.name, &[], conds)
}

/// Number and location of every disk.
pub fn disk_locations() -> String {
    select(
        disk::CLASS.name,
        &[disk::NUMBER.name, disk::LOCATION.name],
        &[],
    )
}

/// The disk `number`.
pub fn disk(number: u32) -> String {
    all(disk::CLASS, &[disk::NUMBER.eq(number)])
}

/// The GPT types of the partitions of disk `number`.
pub fn partition_types(number: u32) -> String {
    select(
        partition::CLASS.name,
        &[partition::GPT_TYPE.name, partition::PARTITION_NUMBER.name],
        &[partition::DISK_NUMBER.eq(number)],
    )
}

/// The offline partitions of disk `number`.
pub fn offline_partitions(number: u32) -> String {
    all(
        partition::CLASS,
        &[
            partition::DISK_NUMBER.eq(number),
            partition::IS_OFFLINE.eq(true),
        ],
    )
}

/// The volume whose `UniqueId` is `id`.
pub fn volume(id: &str) -> Result<String, ParseError> {
    Ok(all(volume::CLASS, &[volume::UNIQUE_ID.eq(id)?]))
}

/// The partition of the volume at `volume_path`.
pub fn partition_of_volume(volume_path: &str) -> String {
    associators(volume_path, partition_to_volume::CLASS.name, None)
}

/// The SMB global mapping of `unc` (`SELECT *`: its `__PATH` is used to
/// remove it, and a projection without every key property has none).
pub fn smb_mapping(unc: &str) -> Result<String, ParseError> {
    Ok(all(
        smb_global_mapping::CLASS,
        &[smb_global_mapping::REMOTE_PATH.eq(unc)?],
    ))
}

/// The BIOS serial number.
pub fn bios_serial() -> String {
    select(bios::CLASS.name, &[bios::SERIAL_NUMBER.name], &[])
}
