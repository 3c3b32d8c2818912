//! What commands need from the layer above that does the node's I/O, as narrow traits that
//! this layer defines and `server` implements: the command context holds a
//! `&dyn NodeServices` and a command takes only the handle it needs.

pub mod acl_file;
pub mod cluster_secret_file;
pub mod failover;
pub mod migrate_dialer;
pub mod persistence;
pub mod replication_links;
pub mod shutdown;
pub mod slot_migrations;
pub mod write_stream;

pub use acl_file::AclFile;
pub use cluster_secret_file::ClusterSecretFile;
pub use failover::ManualFailover;
pub use migrate_dialer::MigrateDialer;
pub use persistence::Persistence;
pub use replication_links::ReplicationLinks;
pub use shutdown::ShutdownSteps;
pub use slot_migrations::SlotMigrations;
pub use write_stream::WriteStream;

use super::NodeState;

/// The running node as the command layers see it: its shared state and its services.
pub trait NodeServices: Send + Sync {
    fn state(&self) -> &NodeState;
    fn write_stream(&self) -> &dyn WriteStream;
    fn persistence(&self) -> &dyn Persistence;
    fn replication_links(&self) -> &dyn ReplicationLinks;
    fn failover(&self) -> &dyn ManualFailover;
    fn shutdown(&self) -> &dyn ShutdownSteps;
    fn slot_migrations(&self) -> &dyn SlotMigrations;
    fn migrate_dialer(&self) -> &dyn MigrateDialer;
    fn acl_file(&self) -> &dyn AclFile;
    fn cluster_secret_file(&self) -> &dyn ClusterSecretFile;
}
