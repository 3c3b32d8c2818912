//! RESP2 and RESP3.
//!
//! Two paths share this module:
//! - the server's hot path: [`request::RequestParser`] finds a command's arguments in the read
//!   buffer without copying them, and [`reply::Reply`] writes replies straight into the write
//!   buffer in the client's protocol version;
//! - the general path: [`frame::Frame`] with [`decode`]/[`encode`] for clients, tests and tools.

pub mod decode;
pub mod encode;
pub mod frame;
pub mod fuzz_checks;
pub mod limits;
pub mod reply;
pub mod request;
pub mod splitargs;

pub use decode::{decode, DecodeError};
pub use encode::encode;
pub use frame::Frame;
pub use limits::RequestLimits;
pub use reply::{ProtocolVersion, Reply};
pub use request::{ProtocolError, RequestParser};
