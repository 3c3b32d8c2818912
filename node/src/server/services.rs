//! This layer's side of `node_state::services`: what commands reach of the node's I/O.

use super::persistence;
use super::persistence::aof::rewrite::RewriteError;
use super::repl_link::{self, manual_failover};
use super::shutdown_replicas;
use super::Server;
use crate::config::Config;
use crate::node_state::migrate_links::{LinkError, LinkIo};
use crate::node_state::replication::ReplicaAddr;
use crate::node_state::services::failover::{FailoverMode, FailoverStartError};
use crate::node_state::services::persistence::{AofInfo, AofRewriteError};
use crate::node_state::services::replication_links::{FollowError, ReplicaNode};
use crate::node_state::services::shutdown::{ShutdownOutcome, ShutdownStartError};
use crate::node_state::services::write_stream::Fed;
use crate::node_state::services::{
    AclFile, ClusterSecretFile, ManualFailover, MigrateDialer, NodeServices, Persistence,
    ReplicationLinks, ShutdownSteps, SlotMigrations, WriteStream,
};
use crate::node_state::shutdown::ShutdownMode;
use crate::node_state::snapshot_state::{SaveError, SaveStats};
use crate::node_state::{ClientShared, NodeState};
use crate::replication::handshake::LinkRequest;
use crate::replication::outgoing::Outgoing;
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::Duration;

impl NodeServices for Server {
    fn state(&self) -> &NodeState {
        self
    }
    fn write_stream(&self) -> &dyn WriteStream {
        self
    }
    fn persistence(&self) -> &dyn Persistence {
        self
    }
    fn replication_links(&self) -> &dyn ReplicationLinks {
        self
    }
    fn failover(&self) -> &dyn ManualFailover {
        self
    }
    fn shutdown(&self) -> &dyn ShutdownSteps {
        self
    }
    fn slot_migrations(&self) -> &dyn SlotMigrations {
        self
    }
    fn migrate_dialer(&self) -> &dyn MigrateDialer {
        self
    }
    fn acl_file(&self) -> &dyn AclFile {
        self
    }
    fn cluster_secret_file(&self) -> &dyn ClusterSecretFile {
        self
    }
}

impl ClusterSecretFile for Server {
    fn save(
        &self,
        dir: &std::path::Path,
        secret: &str,
    ) -> Result<(), crate::cluster::secret::SecretFileError> {
        persistence::cluster_secret_file::save(dir, secret)
    }
}

impl AclFile for Server {
    fn read(&self, path: &std::path::Path) -> Result<String, String> {
        persistence::acl_file::read(path)
    }
    fn write(&self, path: &std::path::Path, text: &str) -> std::io::Result<()> {
        persistence::acl_file::write(path, text)
    }
}

impl SlotMigrations for Server {
    fn start_migration(
        &self,
        request_id: &str,
        ranges: crate::cluster::migration::SlotRanges,
        target: crate::cluster::NodeId,
    ) -> Result<crate::cluster::migration::MigrationId, String> {
        let server = self.owner().ok_or("the node is stopping")?;
        super::slot_migration::start(
            &server,
            super::slot_migration::StartRequest {
                request_id: request_id.to_string(),
                ranges,
                target,
            },
        )
        .map_err(|e| e.to_string())
    }
    fn cancel_migrations(&self) -> usize {
        self.slot_migrations.cancel_all()
    }
    fn drives(&self, id: crate::cluster::migration::MigrationId) -> bool {
        self.slot_migrations.runs(id)
    }
    fn stats(
        &self,
        id: crate::cluster::migration::MigrationId,
    ) -> Option<crate::cluster::migration::MigrationStats> {
        self.slot_migrations.stats(id)
    }
}

impl MigrateDialer for Server {
    fn connect(
        &self,
        host: &str,
        port: u16,
        timeout: Duration,
    ) -> Result<Box<dyn LinkIo>, LinkError> {
        Ok(Box::new(super::migrate_link::connect(host, port, timeout)?))
    }
}

impl WriteStream for Server {
    fn feed(&self, outgoing: &mut Outgoing) -> Fed {
        super::write_stream::feed(self, outgoing)
    }
    fn refusing_writes(&self) -> Option<String> {
        self.aof.refusing_writes()
    }
    fn log_end(&self) -> u64 {
        self.aof.log.appended()
    }
}

impl Persistence for Server {
    fn save(&self) -> Result<SaveStats, SaveError> {
        persistence::save(self)
    }
    fn bgsave(&self) -> Result<(), SaveError> {
        persistence::bgsave(self)
    }
    fn bgrewrite_aof(&self, config: &Config) -> Result<(), AofRewriteError> {
        self.aof.bgrewrite(config).map_err(|e| match e {
            RewriteError::InProgress => AofRewriteError::InProgress,
            other => AofRewriteError::Failed(other.to_string()),
        })
    }
    fn aof_info(&self) -> AofInfo {
        self.aof.info()
    }
    fn apply_config(&self, config: &Config) {
        self.aof.apply_config(config);
    }
    fn prepare_shutdown(&self, mode: ShutdownMode) -> Result<(), SaveError> {
        persistence::prepare_shutdown(self, mode)
    }
}

impl ReplicationLinks for Server {
    fn follow(&self, host: &str, port: u16) -> Result<bool, FollowError> {
        repl_link::follow(self, host, port)
    }
    fn link_port(&self) -> u16 {
        self.repl_links.port()
    }
    fn link(
        &self,
        peer: String,
        request: LinkRequest,
        addr: ReplicaAddr,
        node: ReplicaNode,
    ) -> Result<Vec<u8>, String> {
        self.repl_links.link(peer, request, addr, node)
    }
}

impl ManualFailover for Server {
    fn start(&self, mode: FailoverMode) -> Result<(), FailoverStartError> {
        let server = self.owner().ok_or(FailoverStartError::NotStarted)?;
        manual_failover::start(server, mode)?;
        Ok(())
    }
}

impl ShutdownSteps for Server {
    fn start(
        &self,
        mode: ShutdownMode,
        force: bool,
        client: Arc<ClientShared>,
    ) -> Result<Receiver<ShutdownOutcome>, ShutdownStartError> {
        let server = self.owner().ok_or(ShutdownStartError::NotStarted)?;
        Ok(shutdown_replicas::start(server, mode, force, client)?)
    }
}
