//! The cluster bus thread as the running node runs it: starting it with the node's settings
//! ([`node_bus`]) and the driver that feeds the cluster core's actions to the node
//! ([`driver`]), which keeps the keyspace's hidden slots in step ([`hidden_sync`]). The transport itself (endpoint, rendezvous, requests) is the cluster
//! layer's `transport`.

pub mod driver;
pub mod hidden_sync;
pub mod node_bus;
