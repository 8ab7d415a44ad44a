//! Every WMI name the Windows backends hand to WMI, in one place, checked
//! against the published class definitions on every OS.
//!
//! [`names`] declares each class the code uses (with its namespace), the
//! properties it reads (with the Rust type it reads them as), the methods
//! it calls and their parameters (with the Rust type it passes or reads);
//! [`queries`] builds every WQL string from those names. The Windows code
//! takes its names only from here (a guard test scans it for literals),
//! and the `wmi_schema` tests check all of it against `published.txt`:
//! facts extracted by `scripts/wmi-schema-facts.py` from the generated
//! class structs of github.com/microsoft/wmi. A misspelt class, property,
//! method or parameter, or a type that does not fit the CIM type, fails
//! here instead of on a node.

use std::marker::PhantomData;

use zeroize::Zeroizing;

pub mod names;
pub mod queries;

#[cfg(test)]
mod facts;
#[cfg(test)]
mod tests;

/// The Windows Storage Management API namespace.
pub const STORAGE_NAMESPACE: &str = r"root\Microsoft\Windows\Storage";
/// The classic Win32 provider namespace.
pub const CIMV2_NAMESPACE: &str = r"root\cimv2";
/// The SMB client namespace (`MSFT_SmbGlobalMapping`).
pub const SMB_NAMESPACE: &str = r"root\Microsoft\Windows\SMB";

/// The system property holding an instance's object path.
pub const PATH: &str = "__PATH";

/// How the code holds a WMI value: what it reads a property as, or passes
/// a parameter as. The check matches it against the CIM type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    U16,
    U32,
    U64,
    Bool,
    Str,
    /// An embedded object or a reference (out-parameters).
    Object,
}

/// A Rust type the code reads or passes WMI values as.
pub trait CimType {
    const KIND: Kind;
}
impl CimType for u16 {
    const KIND: Kind = Kind::U16;
}
impl CimType for u32 {
    const KIND: Kind = Kind::U32;
}
impl CimType for u64 {
    const KIND: Kind = Kind::U64;
}
impl CimType for bool {
    const KIND: Kind = Kind::Bool;
}
impl CimType for String {
    const KIND: Kind = Kind::Str;
}
/// A secret string parameter (a credential, a CHAP secret).
impl CimType for Zeroizing<String> {
    const KIND: Kind = Kind::Str;
}

/// An embedded object or reference, read as a WMI object (or its path).
pub struct Embedded;
impl CimType for Embedded {
    const KIND: Kind = Kind::Object;
}

/// A WMI class and the namespace the code looks for it in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Class {
    pub name: &'static str,
    pub namespace: &'static str,
}

/// A property of a class, read as `T`.
pub struct Prop<T> {
    pub class: Class,
    pub name: &'static str,
    ty: PhantomData<fn() -> T>,
}

impl<T> Prop<T> {
    pub const fn new(class: Class, name: &'static str) -> Prop<T> {
        Prop {
            class,
            name,
            ty: PhantomData,
        }
    }
}

/// A method of a class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Method {
    pub class: Class,
    pub name: &'static str,
}

/// The direction of a method parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    In,
    Out,
}

/// A parameter of a method, passed (in) or read (out) as `T`.
pub struct Param<T> {
    pub method: Method,
    pub name: &'static str,
    pub dir: Dir,
    ty: PhantomData<fn() -> T>,
}

impl<T> Param<T> {
    pub const fn new(method: Method, dir: Dir, name: &'static str) -> Param<T> {
        Param {
            method,
            name,
            dir,
            ty: PhantomData,
        }
    }
}

/// An out-parameter read from the answer of whichever method was called
/// (`ReturnValue`, the storage provider's `ExtendedStatus`, ...).
pub struct AnyOut<T> {
    pub name: &'static str,
    /// Whether every method the code calls must have it (else: those that
    /// have it must have it with this type, and some must have it).
    pub always: bool,
    ty: PhantomData<fn() -> T>,
}

impl<T> AnyOut<T> {
    pub const fn new(name: &'static str, always: bool) -> AnyOut<T> {
        AnyOut {
            name,
            always,
            ty: PhantomData,
        }
    }
}

/// What the code uses of one class, for the check: generated with the
/// constants by `wmi_names!`.
#[derive(Debug)]
pub struct ClassUses {
    pub class: Class,
    pub props: &'static [(&'static str, Kind)],
    pub methods: &'static [MethodUses],
}

/// What the code uses of one method.
#[derive(Debug)]
pub struct MethodUses {
    pub name: &'static str,
    pub params: &'static [(&'static str, Dir, Kind)],
}

/// The record of what the code uses of one out-parameter of any method.
#[derive(Debug)]
pub struct AnyOutUse {
    pub name: &'static str,
    pub always: bool,
    pub kind: Kind,
}

impl<T: CimType> AnyOut<T> {
    pub const fn uses(&self) -> AnyOutUse {
        AnyOutUse {
            name: self.name,
            always: self.always,
            kind: T::KIND,
        }
    }
}
