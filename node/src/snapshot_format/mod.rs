//! The bytes of snapshots, AOF bases and DUMP payloads: one versioned, checksummed format of
//! our own for files and node-to-node slot copies, and Redis's RDB encoding for DUMP/RESTORE.
//! Pure encoding and bounded decoding; the files are `server::persistence`'s.
//!
//! - [`format`]: values, entries, file framing;
//! - [`checksum`]: CRC-64 over streams;
//! - [`dump`]: DUMP/RESTORE payloads (also MIGRATE's and slot copies'), in either format;
//! - [`rdb`]: Redis's RDB encoding of one value;
//! - [`function_payload`]: FUNCTION DUMP/RESTORE payloads;
//! - [`stream_format`]: the stream value's body.

pub mod checksum;
pub mod dump;
pub mod format;
pub mod function_payload;
pub mod rdb;
pub mod stream_format;
