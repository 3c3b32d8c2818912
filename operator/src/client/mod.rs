//! The async client library: a [`Client`] over a pluggable [`Transport`] (TCP or a fabric
//! Stream), replies decoded by `proto`'s RESP2/RESP3 frame codec, with bounded buffers.
//!
//! ```no_run
//! # async fn demo() -> Result<(), operator::client::ClientError> {
//! use operator::client::{Client, ConnectOptions, Target};
//! let mut client = Client::connect(&ConnectOptions::new(Target::tcp("127.0.0.1", 6379))).await?;
//! client.call(&["SET", "k", "v"]).await?;
//! let replies = client.pipeline(&[vec!["GET", "k"], vec!["DBSIZE"]]).await?;
//! # let _ = replies; Ok(()) }
//! ```

#[allow(clippy::module_inception)]
mod client;
mod connection;
mod error;
mod fabric;
mod fabric_driver;
mod transport;

#[cfg(test)]
mod fabric_tests;
#[cfg(test)]
mod tests;

pub use client::{error_text, Client, ConnectOptions, Protocol, CONNECT_TIMEOUT, PUSHES_MAX};
pub use connection::{
    BufferLimits, Connection, READ_CHUNK_MIN, REPLY_BYTES_MAX, REQUEST_BYTES_MAX,
};
pub use error::ClientError;
pub use fabric::{
    Backoff, FabricTransport, Idle, Liveness, CHUNK_BYTES_MAX, FROM_WIRE_CHUNKS_MAX,
    IDLE_SLEEP_MAX, IDLE_SLEEP_MIN, PEER_SILENCE_MAX, SPIN, TO_WIRE_CHUNKS_MAX,
};
pub use fabric_driver::settle as settle_fabric_connections;
pub use transport::{Target, Transport};
