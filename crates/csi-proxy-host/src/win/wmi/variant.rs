//! Values handed to and read from WMI: method in-parameters ([`Value`]),
//! objects ([`Object`]) and owned VARIANTs ([`Var`]).

use std::mem::ManuallyDrop;

use windows::core::{Interface, BSTR, PCWSTR};
use windows::Win32::Foundation::{VARIANT_BOOL, VARIANT_FALSE, VARIANT_TRUE};
use windows::Win32::System::Variant::{
    VariantClear, VARIANT, VT_BOOL, VT_BSTR, VT_EMPTY, VT_I1, VT_I2, VT_I4, VT_I8, VT_NULL, VT_UI1,
    VT_UI2, VT_UI4, VT_UI8, VT_UNKNOWN,
};
use windows::Win32::System::Wmi::IWbemClassObject;
use zeroize::Zeroizing;

use super::secret::SecretBstr;
use super::wide;
use crate::storage::parse::cim;
use crate::win::errors;
use crate::wmi_schema::{AnyOut, Embedded, Param, Prop, PATH};
use crate::{Error, Result};

/// A value for a method in-parameter.
#[derive(Clone, PartialEq, Eq)]
pub enum Value {
    Str(String),
    /// A secret string (an SMB credential, a CHAP secret): its `Debug` is
    /// redacted, and every copy this process makes (the string, its UTF-16
    /// form and the BSTR handed to COM: `secret::SecretBstr`) is wiped when
    /// dropped.
    Secret(Zeroizing<String>),
    Bool(bool),
    /// Any CIM integer up to 32 bits (sent as VT_I4, WMI's convention).
    U32(u32),
    /// A CIM uint64 (sent as a decimal string, WMI's convention).
    U64(u64),
}

impl std::fmt::Debug for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::Str(s) => f.debug_tuple("Str").field(s).finish(),
            Value::Secret(_) => f.write_str("Secret(<redacted>)"),
            Value::Bool(b) => f.debug_tuple("Bool").field(b).finish(),
            Value::U32(n) => f.debug_tuple("U32").field(n).finish(),
            Value::U64(n) => f.debug_tuple("U64").field(n).finish(),
        }
    }
}

/// One WMI object (a row, a class, out-parameters).
pub struct Object(pub(super) IWbemClassObject);

impl Object {
    /// The raw interface.
    pub fn raw(&self) -> &IWbemClassObject {
        &self.0
    }

    /// The value of property `name`.
    pub fn get(&self, name: &str) -> Result<Var> {
        let w = wide(name)?;
        let mut v = Var::empty();
        // SAFETY: `w` is NUL-terminated; `v.0` is an initialised (empty)
        // VARIANT that receives an owned value, freed by `Var`'s Drop.
        unsafe { self.0.Get(PCWSTR(w.as_ptr()), 0, &mut v.0, None, None) }
            .map_err(|e| errors::hresult("IWbemClassObject::Get", name, &e))?;
        Ok(v)
    }

    /// Sets property `name` (an in-parameter).
    pub fn put(&self, name: &str, value: &Value) -> Result<()> {
        let w = wide(name)?;
        let v = Var::from_value(value)?;
        // SAFETY: `w` is NUL-terminated; `v.0` is a valid VARIANT that the
        // callee copies; type 0 = the property's declared type.
        unsafe { self.0.Put(PCWSTR(w.as_ptr()), 0, &v.0, 0) }
            .map_err(|e| errors::hresult("IWbemClassObject::Put", name, &e))
    }

    /// A string property (`None` when NULL).
    pub fn string(&self, name: &str) -> Result<Option<String>> {
        let v = self.get(name)?;
        if v.is_null() {
            return Ok(None);
        }
        v.as_string()
            .map(Some)
            .ok_or_else(|| type_error(name, "a string", &v))
    }

    /// An integer property of up to 32 bits (`None` when NULL). WMI hands
    /// CIM uint32 out as VT_I4: the bits are taken as they are.
    pub fn u32(&self, name: &str) -> Result<Option<u32>> {
        let v = self.get(name)?;
        if v.is_null() {
            return Ok(None);
        }
        v.as_u32()
            .map(Some)
            .ok_or_else(|| type_error(name, "a 32-bit integer", &v))
    }

    /// A CIM uint64 property (`None` when NULL): VT_BSTR (decimal text,
    /// WMI's usual form) or a 64-bit integer.
    pub fn u64(&self, name: &str) -> Result<Option<u64>> {
        let v = self.get(name)?;
        if v.is_null() {
            return Ok(None);
        }
        if let Some(s) = v.as_string() {
            return cim::cim_u64(&s)
                .map(Some)
                .map_err(|e| Error::Internal(format!("WMI property {name}: {e}")));
        }
        v.as_u64()
            .map(Some)
            .ok_or_else(|| type_error(name, "a uint64", &v))
    }

    /// A boolean property (`None` when NULL).
    pub fn bool(&self, name: &str) -> Result<Option<bool>> {
        let v = self.get(name)?;
        if v.is_null() {
            return Ok(None);
        }
        v.as_bool()
            .map(Some)
            .ok_or_else(|| type_error(name, "a boolean", &v))
    }

    /// An embedded object property (e.g. `ExtendedStatus`), `None` when
    /// NULL or not an object.
    pub fn object(&self, name: &str) -> Result<Option<Object>> {
        let v = self.get(name)?;
        Ok(v.as_object())
    }

    /// A 16-bit integer property (`None` when NULL).
    pub fn u16(&self, name: &str) -> Result<Option<u16>> {
        self.u32(name)?
            .map(|n| {
                u16::try_from(n).map_err(|_| {
                    Error::Internal(format!("WMI property {name} is {n}: not a 16-bit integer"))
                })
            })
            .transpose()
    }

    /// Property `p`, read as the type the schema declares for it.
    pub fn read<T: FromObject>(&self, p: &Prop<T>) -> Result<Option<T>> {
        T::from_object(self, p.name)
    }

    /// Out-parameter `p` of a method's answer.
    pub fn out<T: FromObject>(&self, p: &Param<T>) -> Result<Option<T>> {
        T::from_object(self, p.name)
    }

    /// Out-parameter `p` of whichever method answered.
    pub fn any_out<T: FromObject>(&self, p: &AnyOut<T>) -> Result<Option<T>> {
        T::from_object(self, p.name)
    }

    /// An embedded-object (or reference) out-parameter: its raw value.
    pub fn embedded(&self, p: &AnyOut<Embedded>) -> Result<Var> {
        self.get(p.name)
    }

    /// An embedded-object property or out-parameter as an object.
    pub fn embedded_object(&self, p: &AnyOut<Embedded>) -> Result<Option<Object>> {
        self.object(p.name)
    }

    /// `__PATH`: the object path to call instance methods on.
    pub fn path(&self) -> Result<String> {
        self.string(PATH)?
            .ok_or_else(|| Error::Internal("WMI object has no __PATH (not an instance)".into()))
    }

    /// The MOF text of the object, for error messages.
    pub fn text(&self) -> String {
        // SAFETY: the object is alive; the result is an owned BSTR.
        unsafe { self.0.GetObjectText(0) }
            .map(|b| b.to_string())
            .unwrap_or_default()
    }
}

/// A Rust type a WMI property or out-parameter is read as.
pub trait FromObject: Sized {
    fn from_object(o: &Object, name: &str) -> Result<Option<Self>>;
}

impl FromObject for u16 {
    fn from_object(o: &Object, name: &str) -> Result<Option<u16>> {
        o.u16(name)
    }
}
impl FromObject for u32 {
    fn from_object(o: &Object, name: &str) -> Result<Option<u32>> {
        o.u32(name)
    }
}
impl FromObject for u64 {
    fn from_object(o: &Object, name: &str) -> Result<Option<u64>> {
        o.u64(name)
    }
}
impl FromObject for bool {
    fn from_object(o: &Object, name: &str) -> Result<Option<bool>> {
        o.bool(name)
    }
}
impl FromObject for String {
    fn from_object(o: &Object, name: &str) -> Result<Option<String>> {
        o.string(name)
    }
}

impl From<u16> for Value {
    fn from(n: u16) -> Value {
        Value::U32(n.into())
    }
}
impl From<u32> for Value {
    fn from(n: u32) -> Value {
        Value::U32(n)
    }
}
impl From<u64> for Value {
    fn from(n: u64) -> Value {
        Value::U64(n)
    }
}
impl From<bool> for Value {
    fn from(b: bool) -> Value {
        Value::Bool(b)
    }
}
impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::Str(s)
    }
}
impl From<Zeroizing<String>> for Value {
    fn from(s: Zeroizing<String>) -> Value {
        Value::Secret(s)
    }
}

impl<T: Into<Value>> Param<T> {
    /// This in-parameter with value `v`, for `Wmi::exec_method`.
    pub fn value(&self, v: T) -> (&'static str, Value) {
        (self.name, v.into())
    }
}

fn type_error(name: &str, want: &str, v: &Var) -> Error {
    Error::Internal(format!(
        "WMI property {name} is not {want} (VARIANT type {})",
        v.vt()
    ))
}

/// An owned VARIANT, cleared on drop. A secret's BSTR is not the
/// VARIANT's: it belongs to the `SecretBstr` beside it, which wipes and
/// frees it after the VARIANT lets go of it.
pub struct Var(VARIANT, Option<SecretBstr>);

impl Var {
    fn empty() -> Var {
        Var(VARIANT::default(), None)
    }

    pub(super) fn from_value(value: &Value) -> Result<Var> {
        let secret = match value {
            Value::Secret(s) => Some(SecretBstr::new(s)?),
            _ => None,
        };
        let mut v = VARIANT::default();
        // SAFETY: writes the tag and the matching union member of a zeroed
        // VARIANT. An owned BSTR is moved in and freed by VariantClear in
        // Drop; a secret's is only lent (ManuallyDrop, and Drop empties the
        // VARIANT before clearing it), its owner outlives the VARIANT.
        unsafe {
            let inner = &mut *v.Anonymous.Anonymous;
            match value {
                Value::Str(s) => {
                    inner.vt = VT_BSTR;
                    inner.Anonymous.bstrVal = ManuallyDrop::new(BSTR::from(s.as_str()));
                }
                Value::Secret(_) => {
                    let raw = secret.as_ref().map_or(std::ptr::null(), |b| b.as_raw());
                    inner.vt = VT_BSTR;
                    inner.Anonymous.bstrVal = ManuallyDrop::new(BSTR::from_raw(raw));
                }
                Value::U64(n) => {
                    inner.vt = VT_BSTR;
                    inner.Anonymous.bstrVal = ManuallyDrop::new(BSTR::from(n.to_string()));
                }
                Value::Bool(b) => {
                    inner.vt = VT_BOOL;
                    inner.Anonymous.boolVal = if *b { VARIANT_TRUE } else { VARIANT_FALSE };
                }
                Value::U32(n) => {
                    inner.vt = VT_I4;
                    inner.Anonymous.lVal = *n as i32;
                }
            }
        }
        Ok(Var(v, secret))
    }

    /// The VARIANT type tag.
    pub fn vt(&self) -> u16 {
        // SAFETY: the tag is valid in every VARIANT.
        unsafe { self.0.Anonymous.Anonymous.vt.0 }
    }

    /// NULL or EMPTY.
    pub fn is_null(&self) -> bool {
        let vt = self.vt();
        vt == VT_NULL.0 || vt == VT_EMPTY.0
    }

    /// The string of a VT_BSTR.
    pub fn as_string(&self) -> Option<String> {
        if self.vt() != VT_BSTR.0 {
            return None;
        }
        // SAFETY: the tag says the union holds a BSTR.
        let b: &BSTR = unsafe { &self.0.Anonymous.Anonymous.Anonymous.bstrVal };
        Some(b.to_string())
    }

    /// A signed view of any integer VARIANT.
    fn as_i128(&self) -> Option<i128> {
        let vt = self.vt();
        // SAFETY: each arm reads the union member its tag names.
        unsafe {
            let u = &self.0.Anonymous.Anonymous.Anonymous;
            Some(match vt {
                x if x == VT_I1.0 => u.cVal as i128,
                x if x == VT_UI1.0 => u.bVal as i128,
                x if x == VT_I2.0 => u.iVal as i128,
                x if x == VT_UI2.0 => u.uiVal as i128,
                x if x == VT_I4.0 => u.lVal as i128,
                x if x == VT_UI4.0 => u.ulVal as i128,
                x if x == VT_I8.0 => u.llVal as i128,
                x if x == VT_UI8.0 => u.ullVal as i128,
                _ => return None,
            })
        }
    }

    fn as_u32(&self) -> Option<u32> {
        // VT_I4 carries CIM uint32: reinterpret negative values.
        if self.vt() == VT_I4.0 {
            // SAFETY: the tag says the union holds an i32.
            return Some(unsafe { self.0.Anonymous.Anonymous.Anonymous.lVal } as u32);
        }
        self.as_i128().and_then(|n| u32::try_from(n).ok())
    }

    fn as_u64(&self) -> Option<u64> {
        self.as_i128().and_then(|n| u64::try_from(n).ok())
    }

    fn as_bool(&self) -> Option<bool> {
        if self.vt() != VT_BOOL.0 {
            return None;
        }
        // SAFETY: the tag says the union holds a VARIANT_BOOL.
        let b: VARIANT_BOOL = unsafe { self.0.Anonymous.Anonymous.Anonymous.boolVal };
        Some(b.0 != 0)
    }

    fn as_object(&self) -> Option<Object> {
        if self.vt() != VT_UNKNOWN.0 {
            return None;
        }
        // SAFETY: the tag says the union holds an IUnknown (possibly null);
        // `cast` adds a reference of its own.
        let unk = unsafe { &*self.0.Anonymous.Anonymous.Anonymous.punkVal };
        unk.as_ref()
            .and_then(|u| u.cast::<IWbemClassObject>().ok())
            .map(Object)
    }
}

impl Drop for Var {
    fn drop(&mut self) {
        if self.1.is_some() {
            // SAFETY: the BSTR in the union is the SecretBstr's (lent, in a
            // ManuallyDrop): the tag is set to VT_EMPTY so that VariantClear
            // leaves it alone; the SecretBstr wipes and frees it when it is
            // dropped after this.
            unsafe { (*self.0.Anonymous.Anonymous).vt = VT_EMPTY };
        }
        // SAFETY: `self.0` is a valid VARIANT owned by this value; clearing
        // frees what it holds (BSTR, interface) exactly once.
        let _ = unsafe { VariantClear(&mut self.0) };
    }
}
