//! Wire formats, with no I/O: everything here turns bytes into values and values into bytes.
//!
//! - [`resp`]: RESP2 and RESP3 (all types, push included), the server-side request parser
//!   with Redis's limits and error texts, and a reply writer that speaks either version.
//! - [`slot`]: CRC16-XMODEM key hashing into 16384 cluster slots, `{hash tag}` aware.
//! - [`bus`]: cluster bus messages, their authenticated envelope and datagram fragments.
//!
//! - [`admin`]: the admin gRPC API (`admin.proto`): messages, client and server (tonic).

pub mod admin;
pub mod bus;
pub mod resp;
pub mod slot;
