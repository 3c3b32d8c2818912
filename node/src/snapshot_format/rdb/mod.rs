//! Redis's RDB encoding of one value, as DUMP and RESTORE exchange it with redis-server 7.0:
//! a type byte and the value's body (`rdbSaveObjectType` + `rdbSaveObject`). The payload
//! framing (RDB version, CRC-64) is `dump.rs`'s.
//!
//! - [`read`]: every type and encoding redis-server 7.0 writes or still loads (plain,
//!   listpack, quicklist, intset, ziplist, streams), into our values;
//! - [`write`]: our values in the simplest encodings Redis 7.0 loads;
//! - [`input`]: the bounded cursor and RDB's lengths and strings;
//! - [`listpack`], [`intset`], [`ziplist`], [`lzf`]: Redis's compact containers;
//! - [`stream_read`], [`stream_write`]: streams (`STREAM_LISTPACKS`, `_2`);
//! - [`crc64`]: Redis's CRC-64 (Jones).
//!
//! Decoding never trusts a length: each one is checked against the bytes that remain before
//! anything is allocated for it, so a hostile payload costs memory in proportion to its own
//! size (LZF strings: at most [`lzf::MAX_RATIO`] times) and ends in an error, never a panic.

pub mod crc64;
pub mod input;
pub mod intset;
pub mod listpack;
pub mod lzf;
pub mod read;
pub mod stream_read;
pub mod stream_write;
pub mod write;
pub mod ziplist;

/// The RDB version Redis 7.0 writes and the newest it reads.
pub const RDB_VERSION: u16 = 10;

/// RDB object types (rdb.h).
pub mod rdb_type {
    pub const STRING: u8 = 0;
    pub const LIST: u8 = 1;
    pub const SET: u8 = 2;
    pub const ZSET: u8 = 3;
    pub const HASH: u8 = 4;
    pub const ZSET_2: u8 = 5;
    pub const MODULE: u8 = 6;
    pub const MODULE_2: u8 = 7;
    pub const HASH_ZIPMAP: u8 = 9;
    pub const LIST_ZIPLIST: u8 = 10;
    pub const SET_INTSET: u8 = 11;
    pub const ZSET_ZIPLIST: u8 = 12;
    pub const HASH_ZIPLIST: u8 = 13;
    pub const LIST_QUICKLIST: u8 = 14;
    pub const STREAM_LISTPACKS: u8 = 15;
    pub const HASH_LISTPACK: u8 = 16;
    pub const ZSET_LISTPACK: u8 = 17;
    pub const LIST_QUICKLIST_2: u8 = 18;
    pub const STREAM_LISTPACKS_2: u8 = 19;
}

/// Why RDB bytes were refused (RESTORE answers "Bad data format" for all of them).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RdbError {
    #[error("truncated at offset {offset}: {needed} bytes needed, {left} left")]
    Truncated {
        offset: usize,
        needed: u64,
        left: usize,
    },
    #[error("corrupt RDB value at offset {offset}: {what}")]
    Corrupt { what: &'static str, offset: usize },
    #[error("RDB type {0} is not supported here (modules, zipmaps)")]
    Unsupported(u8),
}

#[cfg(test)]
mod tests;
