//! Conversions between versioned wire messages and the version-free API.
//!
//! [`Wire`] is one fallible conversion trait used in both directions
//! (versioned request → API request, API response → versioned response).
//! Scalars convert to themselves; the old versions' quirks (disk ids as
//! decimal strings, `int64` disk numbers) are impls here, so a field of any
//! version converts by naming it in the [`request!`]/[`response!`] tables.

use std::collections::HashMap;
use std::hash::Hash;
use tonic::Status;

/// Convert `self` into `T`, or fail with a status (InvalidArgument).
pub trait Wire<T>: Sized {
    fn wire(self) -> Result<T, Status>;
}

macro_rules! identity {
    ($($t:ty),*) => { $(impl Wire<$t> for $t { #[inline] fn wire(self) -> Result<$t, Status> { Ok(self) } })* };
}
identity!(String, bool, u32, u64, i32, i64);

/// Old versions carry disk numbers as decimal strings. Upstream parsed them
/// as u64 and truncated; we reject anything that is not a u32 in decimal.
impl Wire<u32> for String {
    fn wire(self) -> Result<u32, Status> {
        parse_u32(&self)
    }
}

/// Parse a decimal u32 (disk or partition number) strictly.
pub fn parse_u32(s: &str) -> Result<u32, Status> {
    if s.is_empty() || s.len() > 10 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Status::invalid_argument(format!(
            "{s:?} is not a decimal number in 0..=4294967295"
        )));
    }
    s.parse::<u32>()
        .map_err(|_| Status::invalid_argument(format!("{s:?} is out of range (0..=4294967295)")))
}

impl Wire<String> for u32 {
    fn wire(self) -> Result<String, Status> {
        Ok(self.to_string())
    }
}

impl Wire<i64> for u32 {
    fn wire(self) -> Result<i64, Status> {
        Ok(i64::from(self))
    }
}

impl<A: Wire<B>, B> Wire<Vec<B>> for Vec<A> {
    fn wire(self) -> Result<Vec<B>, Status> {
        self.into_iter().map(Wire::wire).collect()
    }
}

impl<K1, V1, K2, V2> Wire<HashMap<K2, V2>> for HashMap<K1, V1>
where
    K1: Wire<K2>,
    V1: Wire<V2>,
    K2: Eq + Hash,
{
    fn wire(self) -> Result<HashMap<K2, V2>, Status> {
        self.into_iter()
            .map(|(k, v)| Ok((k.wire()?, v.wire()?)))
            .collect()
    }
}

/// `request!([v1, v2] WireMsg => api::Msg { api_field, api_field = wire_field })`:
/// implements `Wire<api::Msg>` for `<ver>::WireMsg` of every listed version.
/// Every field of the API message is named; wire fields not named are
/// ignored (e.g. the unused PathContext of old filesystem versions).
macro_rules! request {
    ([$ver:ident $(, $rest:ident)*] $msg:ident => $api:path { $($fields:tt)* }) => {
        $crate::wire::request!(@one $ver, $msg, $api, { $($fields)* });
        $crate::wire::request!([$($rest),*] $msg => $api { $($fields)* });
    };
    ([] $msg:ident => $api:path { $($fields:tt)* }) => {};
    (@one $ver:ident, $msg:ident, $api:path, { $($field:ident $(= $from:ident)?),* $(,)? }) => {
        impl $crate::wire::Wire<$api> for $ver::$msg {
            fn wire(self) -> Result<$api, ::tonic::Status> {
                type Api = $api;
                Ok(Api { $($field: $crate::wire::Wire::wire($crate::wire::pick!(self, $field $(, $from)?))?,)* })
            }
        }
    };
}

/// `response!([v1, v2] api::Msg => WireMsg { wire_field, wire_field = api_field } exact)`:
/// implements `Wire<<ver>::WireMsg>` for `api::Msg`. `exact` names every wire
/// field; `fill` leaves the unnamed wire fields at their defaults (the old
/// versions' unused `error` strings, which are never set).
macro_rules! response {
    ([$ver:ident $(, $rest:ident)*] $api:path => $msg:ident $fields:tt $fill:ident) => {
        $crate::wire::response!(@one $ver, $api, $msg, $fields, $fill);
        $crate::wire::response!([$($rest),*] $api => $msg $fields $fill);
    };
    ([] $api:path => $msg:ident $fields:tt $fill:ident) => {};
    (@one $ver:ident, $api:path, $msg:ident, { $($field:ident $(= $from:ident)?),* $(,)? }, exact) => {
        impl $crate::wire::Wire<$ver::$msg> for $api {
            fn wire(self) -> Result<$ver::$msg, ::tonic::Status> {
                Ok($ver::$msg { $($field: $crate::wire::Wire::wire($crate::wire::pick!(self, $field $(, $from)?))?,)* })
            }
        }
    };
    (@one $ver:ident, $api:path, $msg:ident, { $($field:ident $(= $from:ident)?),* $(,)? }, fill) => {
        impl $crate::wire::Wire<$ver::$msg> for $api {
            #[allow(clippy::needless_update)]
            fn wire(self) -> Result<$ver::$msg, ::tonic::Status> {
                Ok($ver::$msg { $($field: $crate::wire::Wire::wire($crate::wire::pick!(self, $field $(, $from)?))?,)* ..Default::default() })
            }
        }
    };
}

/// The source field of a conversion: the same name, or the one after `=`.
macro_rules! pick {
    ($s:ident, $field:ident) => {
        $s.$field
    };
    ($s:ident, $field:ident, $from:ident) => {
        $s.$from
    };
}

pub(crate) use {pick, request, response};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disk_id_strings_parse_strictly() {
        assert_eq!(Wire::<u32>::wire("0".to_string()).unwrap(), 0);
        assert_eq!(
            Wire::<u32>::wire("4294967295".to_string()).unwrap(),
            u32::MAX
        );
        for bad in [
            "",
            "-1",
            "4294967296",
            "99999999999",
            "1 ",
            " 1",
            "0x1",
            "1a",
            "+1",
            "１",
        ] {
            let e = Wire::<u32>::wire(bad.to_string()).unwrap_err();
            assert_eq!(e.code(), tonic::Code::InvalidArgument, "{bad:?}");
        }
    }

    #[test]
    fn maps_convert_keys_and_values() {
        let m: HashMap<u32, u32> = [(1, 2), (3, 4)].into_iter().collect();
        let w: HashMap<String, i64> = m.wire().unwrap();
        assert_eq!(w["1"], 2);
        assert_eq!(w["3"], 4);
        let back: Result<HashMap<u32, i64>, _> = HashMap::from([("x".to_string(), 1i64)]).wire();
        assert!(back.is_err());
    }
}
