//! Disk and Volume storage: shared types, parsers, backends.

pub mod parse;
