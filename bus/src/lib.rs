//! The fabric (DESIGN §4): one abstraction with verbs semantics ([`provider`]) that the
//! providers `verbs`, `ofi` and `sim` implement, and the Stream, Ring and Datagram primitives
//! written once on top of it.
//!
//! This is the only crate allowed `unsafe` (FFI and registered memory); each such module opts in
//! with `#![allow(unsafe_code)]` and every block carries its `// SAFETY:` reason. Everything
//! above the providers is safe Rust.

pub mod access;
pub mod addr;
pub mod config;
pub mod datagram;
pub mod error;
pub mod idle;
pub mod ofi;
pub mod provider;
pub mod ring;
pub mod select;
pub mod sim;
pub mod stream;
pub mod verbs;

pub use access::Access;
pub use addr::EndpointAddr;
pub use config::EndpointConfig;
pub use error::{BusError, Result};
pub use provider::{
    Completion, Connection, DatagramEndpoint, DatagramMeta, Listener, LocalSlice, Op, Provider,
    Region, RemoteRegion, RemoteSlice, WorkError,
};
