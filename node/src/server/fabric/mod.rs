//! Client traffic over the fabric (issue "The fabric", item 5): a listener on
//! `rdma-bind`:`rdma-port` for any bus provider, Valkey-over-RDMA Streams, and busy-polling
//! threads that run the same command code as TCP through [`crate::server::session::Session`].

pub mod client;
pub mod listener;
pub mod poller;
pub mod pollers;
pub mod preauth;
pub mod slot;
pub mod start;

#[cfg(test)]
mod tests;
