//! The replica's side: one thread per REPLICAOF generation that sets the link up and applies
//! the primary's stream.
//!
//! Setup: over TCP to the primary's client port `REPLCONF RDMA-PORT` (where its replication
//! listener is), then a fabric connection there, the ring registered on it
//! ([`ReplicaLink`]), and `REPLCONF RDMA-LINK <endpoint> <listening-port> <LinkRequest>`,
//! answered with the `LinkAccept`. From then on only the fabric carries anything: the primary
//! WRITEs into the ring, this thread polls it, executes the released commands through the
//! dispatcher as the primary's client (no replies; writes allowed on a read-only replica),
//! and publishes the applied offset at whole-command boundaries.

use super::apply::{ApplyError, StreamApplier};
use super::control::{Control, ControlError};
use super::peer_watch::{PeerState, PeerWatch};
use super::primary::endpoint_config;
use super::snapshot;
use crate::replication::apply_order::REORDER_BYTES_MAX_DEFAULT;
use crate::replication::fullsync::SNAPSHOT_BYTES_MAX_DEFAULT;
use crate::replication::handshake::{LinkAccept, LinkDecision, LinkRequest};
use crate::replication::ids::ReplId;
use crate::replication::link::{LinkLimits, ReplicaLink};
use crate::replication::link_pace::LinkPace;
use crate::replication::psync::{self, PsyncRequest, SyncRefused};
use crate::replication::report::LinkState;
use crate::server::Server;
use bus::select::{with_provider, WithProvider};
use bus::{Connection, Provider};
use proto::resp::Frame;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// TCP connect and each setup reply (the primary may build a snapshot before answering).
const CONTROL_TIMEOUT: Duration = Duration::from_secs(10);
/// The fabric connection to the primary's replication listener.
const FABRIC_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Pause between attempts after a failed or dropped link.
const RECONNECT_DELAY: Duration = Duration::from_millis(500);
/// Longest pause between failing attempts.
const RECONNECT_DELAY_MAX: Duration = Duration::from_secs(4);
/// Sleep when a poll found nothing: bounds the CPU an idle link costs and the ack latency.
const IDLE_POLL: Duration = Duration::from_micros(500);
/// Sleep when a poll found nothing but the link is busy (acks in flight, records a moment
/// ago): on manual-progress providers (shm, tcp) the primary's WRITEs land and this side's
/// acks complete only during this thread's calls into the provider.
const BUSY_POLL: Duration = Duration::from_micros(20);

#[derive(Debug, thiserror::Error)]
pub enum ReplicaLinkError {
    #[error("{0}")]
    Control(#[from] ControlError),
    #[error("fabric: {0}")]
    Bus(#[from] bus::BusError),
    #[error("link: {0}")]
    Link(#[from] crate::replication::link::LinkError),
    #[error("handshake: {0}")]
    Handshake(#[from] crate::replication::handshake::HandshakeError),
    #[error("full sync load: {0}")]
    Load(#[from] snapshot::LoadSnapshotError),
    #[error("unexpected reply to {0}")]
    Reply(&'static str),
    #[error("{0}")]
    Apply(#[from] ApplyError),
    #[error("the link's client was killed")]
    Killed,
    #[error("REPLICAOF changed")]
    Stale,
    #[error("no record or ping from the primary for {0} ms (repl-timeout, or cluster-node-timeout in cluster mode)")]
    PrimarySilent(u64),
    #[error("{0} (gossip)")]
    PrimaryGone(&'static str),
    #[error("full sync refused ({0}): the primary whose stream this node holds offers a history without it; the data is kept")]
    SyncRefused(SyncRefused),
}

/// Starts the link thread of `generation` (from REPLICAOF or `replicaof`).
pub fn start(server: &Arc<Server>, generation: u64) -> std::io::Result<()> {
    let server = server.clone();
    std::thread::Builder::new()
        .name("node-repl-link".into())
        .spawn(move || run(server, generation))
        .map(drop)
}

/// Fencing: a link's ring is a region of its own fabric connection (`ReplicaLink`), which
/// lives inside one `LinkJob::run` and is dropped (deregistered) before the next attempt
/// sets up another; once the old primary's records find it gone, its WRITEs fail. A new
/// REPLICAOF generation (a failover) runs on a new thread while this one notices, within
/// one poll, that its generation ended: until then its ring may still take the old
/// primary's records, but nothing of them is applied (every apply checks the generation
/// under the apply gate), and the new link's ring is another connection's region under
/// another key, which the old primary never learned.
fn run(server: Arc<Server>, generation: u64) {
    let provider = server.config.read().fabric.provider.name().to_string();
    let mut delay = RECONNECT_DELAY;
    while server.replica_of.is_current(generation) && !server.shutdown.is_triggered() {
        server
            .replica_of
            .set_state(generation, LinkState::Connecting);
        let job = LinkJob {
            server: server.clone(),
            generation,
        };
        let result = with_provider(&provider, job).map_err(ReplicaLinkError::from);
        match result.and_then(|r| r) {
            Ok(()) | Err(ReplicaLinkError::Stale) => {}
            Err(e) => tracing::warn!(error = %e, "replication link to the primary failed"),
        }
        // Read before the state moves on: a link that got to streaming was up.
        delay = next_reconnect_delay(delay, server.replica_of.is_connected(generation));
        server.replica_of.set_state(generation, LinkState::Connect);
        std::thread::sleep(delay);
    }
    tracing::info!(generation, "replication link ended");
}

/// The pause before the next attempt: [`RECONNECT_DELAY`] after a link that got to
/// streaming (set up, and a full sync loaded), doubling (to [`RECONNECT_DELAY_MAX`]) while
/// set-ups keep failing. A failure that repeats (refused AUTH, a snapshot over the limit,
/// which the primary takes with every shard locked) then costs the primary one attempt per
/// few seconds, not two per second.
fn next_reconnect_delay(previous: Duration, linked: bool) -> Duration {
    if linked {
        RECONNECT_DELAY
    } else {
        (previous * 2).min(RECONNECT_DELAY_MAX)
    }
}

struct LinkJob {
    server: Arc<Server>,
    generation: u64,
}

impl WithProvider for LinkJob {
    type Output = Result<(), ReplicaLinkError>;

    fn run<P: Provider>(self, provider: P) -> Self::Output {
        let (link, replid, synced) = set_up(&self.server, self.generation, &provider)?;
        // In cluster mode gossip says when the primary is dead or restarted.
        let watch = match (
            &self.server.cluster,
            self.server.replica_of.node(self.generation),
        ) {
            (Some(cluster), Some(node)) => {
                let timeout = self.server.config.read().cluster.node_timeout_ms;
                Some(PeerWatch::new(cluster, node, None, None, timeout))
            }
            _ => None,
        };
        apply_loop(&self.server, self.generation, link, replid, synced, watch)
    }
}

/// The handshake: returns the connected link and the history it follows.
fn set_up<P: Provider>(
    server: &Arc<Server>,
    generation: u64,
    provider: &P,
) -> Result<(ReplicaLink<P::Conn>, ReplId, bool), ReplicaLinkError> {
    let (host, port) = server
        .replica_of
        .target(generation)
        .ok_or(ReplicaLinkError::Stale)?;
    let mut control = Control::connect_to_primary(server, &host, port, CONTROL_TIMEOUT)?;
    // A cluster primary adds a challenge that RDMA-LINK must prove the cluster secret over.
    let (fabric_port, challenge) = match control.call(&[b"REPLCONF", b"RDMA-PORT"])? {
        Frame::Integer(p) if (1..=65535).contains(&p) => (p as u16, None),
        Frame::Array(items) => match items.as_slice() {
            [Frame::Integer(p), Frame::Bulk(c)] if (1..=65535).contains(p) => {
                (*p as u16, Some(c.to_vec()))
            }
            _ => return Err(ReplicaLinkError::Reply("REPLCONF RDMA-PORT")),
        },
        _ => return Err(ReplicaLinkError::Reply("REPLCONF RDMA-PORT")),
    };
    let primary_ip = control.peer()?.ip();
    let config = endpoint_config(server);
    let conn = provider.connect(
        SocketAddr::new(primary_ip, fabric_port),
        &config,
        FABRIC_CONNECT_TIMEOUT,
    )?;
    let endpoint = conn.local().to_string();
    server
        .replica_of
        .set_state(generation, LinkState::Handshake);
    // This node's own history (Redis's cached master): its ids and offset follow the
    // stream it mirrors, so after a failover the promoted sibling, which keeps the old id as
    // its `replid2`, continues it; an old primary returning as a replica names its own.
    let history = Some(server.replication.history());
    let limits = LinkLimits {
        ring_data_len: server.config.read().repl_ring_size as usize,
        reorder_bytes_max: REORDER_BYTES_MAX_DEFAULT,
        snapshot_bytes_max: SNAPSHOT_BYTES_MAX_DEFAULT,
    };
    let processed = history.map_or(0, |(_, o)| o);
    let mut link = ReplicaLink::create(conn, limits, processed)?;
    let request = LinkRequest {
        ring: link.ring_advert()?,
        psync: PsyncRequest::from_replica(history),
    };
    let my_port = server.config.read().port.to_string();
    let request_bytes = request.encode();
    let mut link_args: Vec<&[u8]> = vec![
        b"REPLCONF",
        b"RDMA-LINK",
        endpoint.as_bytes(),
        my_port.as_bytes(),
        &request_bytes,
    ];
    let proof = challenge.map(|c| {
        let secret = server.config.read().cluster.secret.clone();
        proto::bus::link_proof::link_proof(
            secret.as_bytes(),
            &c,
            endpoint.as_bytes(),
            &request_bytes,
        )
    });
    if let Some(proof) = &proof {
        link_args.push(proof);
    }
    // A cluster replica names itself (and its incarnation, once the bus has one), after the
    // proof, so that the primary can watch it through gossip.
    let (my_id, my_incarnation) = match &server.cluster {
        Some(c) => (
            c.topology.read().myself().id.to_string(),
            c.incarnation().to_string(),
        ),
        None => (String::new(), String::new()),
    };
    if proof.is_some() && !my_id.is_empty() {
        link_args.push(my_id.as_bytes());
        if my_incarnation != "0" {
            link_args.push(my_incarnation.as_bytes());
        }
    }
    let accept = match control.call(&link_args)? {
        Frame::Bulk(b) => LinkAccept::decode(&b)?,
        _ => return Err(ReplicaLinkError::Reply("REPLCONF RDMA-LINK")),
    };
    let primary = server.replica_of.node(generation);
    if let LinkDecision::FullResync {
        replid,
        offset,
        claim,
    } = accept.decision
    {
        let mine = server.replication.held_history();
        let offer = psync::SyncOffer {
            by: primary,
            replid,
            offset,
            claim,
        };
        if let Err(reason) = psync::full_sync_allowed(mine, offer) {
            tracing::warn!(
                %reason,
                offered_replid = %replid,
                offered_offset = offset,
                offered_promoted_in = claim.promoted_in,
                offered_succeeds = ?claim.succeeds,
                my_replid = %mine.replid,
                my_offset = mine.offset,
                my_history_epoch = mine.epoch,
                "refusing the full sync: it would drop history its primary no longer has"
            );
            server.replica_of.set_sync_refused(generation, Some(reason));
            return Err(ReplicaLinkError::SyncRefused(reason));
        }
    }
    server.replica_of.set_sync_refused(generation, None);
    link.connect_primary(accept.ring_ack, accept.applied_word)?;
    let (replid, synced) = match accept.decision {
        LinkDecision::FullResync { replid, offset, .. } => {
            tracing::info!(%replid, offset, "full sync from the primary");
            server.replica_of.set_state(generation, LinkState::Sync);
            (replid, false)
        }
        LinkDecision::Continue { new_replid } => {
            let replid = new_replid
                .or(history.map(|(id, _)| id))
                .ok_or(ReplicaLinkError::Reply("PSYNC continue without a history"))?;
            adopt_continue(server, generation, new_replid, primary)?;
            tracing::info!(%replid, processed, "partial resync from the primary");
            server
                .replica_of
                .set_state(generation, LinkState::Connected);
            (replid, true)
        }
    };
    Ok((link, replid, synced))
}

/// A `+CONTINUE` taken: this node's history goes on as `primary`'s stream (under the
/// primary's new id, if it has one). Only for the generation still current, checked under the
/// apply gate, which a promotion's `stop` takes before it ends the generation: a link that
/// set up while its node was being promoted (its old primary restarted and answered) would
/// otherwise name the old primary as the promoted node's history primary, after the
/// promotion had named the node itself; the identity file would then say it never was a
/// primary, and a crash and quick restart would come back without its restart fence.
fn adopt_continue(
    server: &Server,
    generation: u64,
    new_replid: Option<ReplId>,
    primary: Option<crate::cluster::NodeId>,
) -> Result<(), ReplicaLinkError> {
    let _gate = server.replica_of.apply_gate();
    if !server.replica_of.is_current(generation) {
        return Err(ReplicaLinkError::Stale);
    }
    if let Some(id) = new_replid {
        server.replication.continue_under(id);
    }
    server
        .replication
        .set_history_primary(primary, primary_epoch(server, primary));
    Ok(())
}

/// How long the primary may send nothing (no record, no ping) before the link is given up:
/// `repl-timeout`, or in cluster mode the node timeout if shorter (the primary pings an idle
/// link four times per node timeout, `ship_thread::ping_period`).
fn silence_limit(server: &Server) -> Duration {
    let config = server.config.read();
    let repl_timeout = Duration::from_secs(config.repl_timeout_secs);
    match config.cluster.node_timeout_ms {
        ms if config.cluster.enabled && ms > 0 => repl_timeout.min(Duration::from_millis(ms)),
        _ => repl_timeout,
    }
}

/// The config epoch of the primary `node` in the topology (the identity file's `epoch`).
fn primary_epoch(server: &Server, node: Option<crate::cluster::NodeId>) -> u64 {
    let (Some(cluster), Some(node)) = (&server.cluster, node) else {
        return 0;
    };
    let t = cluster.topology.read();
    t.index_of(&node)
        .and_then(|i| t.node(i))
        .map_or(0, |n| t.node_epoch(n))
}

/// Polls the ring and executes what it releases until the link fails or REPLICAOF changes.
fn apply_loop<C: Connection>(
    server: &Arc<Server>,
    generation: u64,
    mut link: ReplicaLink<C>,
    replid: ReplId,
    mut synced: bool,
    mut watch: Option<PeerWatch>,
) -> Result<(), ReplicaLinkError> {
    // The link's clock: the pacing core takes the time since this loop started.
    let origin = Instant::now();
    let mut pace = LinkPace::new(silence_limit(server), origin.elapsed());
    let mut applier = StreamApplier::new(server, link.applied_offset());
    let mut released = Vec::new();
    server.replica_of.note_io(generation, origin);
    while server.replica_of.is_current(generation) {
        if server.shutdown.is_triggered() {
            return Ok(());
        }
        if applier.killed() {
            return Err(ReplicaLinkError::Killed);
        }
        // Checked again under the gate: a stop or a new REPLICAOF that returned has ended
        // this generation, and nothing more of its stream may run.
        let gate = server.replica_of.apply_gate();
        if !server.replica_of.is_current(generation) {
            break;
        }
        released.clear();
        let polled = link.poll(&mut released, origin.elapsed())?;
        if let Err(silent) = pace.after_poll(polled.records, origin.elapsed()) {
            return Err(ReplicaLinkError::PrimarySilent(silent.limit_ms));
        }
        if polled.records > 0 {
            server.replica_of.note_io(generation, Instant::now());
        }
        if let (Some(w), Some(cluster)) = (watch.as_mut(), server.cluster.as_ref()) {
            // A suspected primary is left to the silence limit: its ring may still work.
            if let PeerState::Gone(why) = w.check(cluster) {
                return Err(ReplicaLinkError::PrimaryGone(why));
            }
        }
        applier.push(&released)?;
        if polled.records > 0 {
            server.aof.log.nudge();
        }
        if let Some(snap) = polled.snapshot {
            // From the first key replaced on, the dataset is no history's until it is whole.
            server.replication.forget_history(&mut rand::thread_rng());
            server.replica_of.set_loading(true);
            // The AOF holds the old dataset: it stops, and starts again from a base of the
            // new one (Redis restarts its AOF after a full sync).
            let log_ran = server.aof.dataset_replacing();
            let loaded = snapshot::load(server, &snap.bytes);
            server.aof.dataset_replaced(log_ran, &server.config.read());
            server.replica_of.set_loading(false);
            let stats = loaded?;
            server.replication.adopt_history(replid, snap.offset);
            let primary = server.replica_of.node(generation);
            server
                .replication
                .set_history_primary(primary, primary_epoch(server, primary));
            tracing::info!(keys = stats.keys, offset = snap.offset, "full sync loaded");
            applier.reset(snap.offset);
            synced = true;
            // Loading took this thread's time, not the primary's silence.
            pace.heard(origin.elapsed());
            server
                .replica_of
                .set_state(generation, LinkState::Connected);
        }
        // Before a full sync's snapshot is loaded the dataset is not this history's: nothing
        // of it is acknowledged (the offset this node had is another history's, possibly past
        // what the primary shipped, which it rejects), and a reconnect must not continue it.
        if synced {
            link.publish_applied(applier.applied(), origin.elapsed())?;
            server.replica_of.set_offsets(
                generation,
                replid,
                link.released_offset(),
                applier.applied(),
            );
        }
        drop(gate);
        if polled.records == 0 {
            let soon = pace.poll_soon(link.busy(), origin.elapsed());
            std::thread::sleep(if soon { BUSY_POLL } else { IDLE_POLL });
        }
    }
    Err(ReplicaLinkError::Stale)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failing_attempts_back_off_and_a_link_that_was_up_starts_over() {
        let mut d = RECONNECT_DELAY;
        let mut seen = Vec::new();
        for _ in 0..6 {
            d = next_reconnect_delay(d, false);
            seen.push(d.as_millis());
        }
        assert_eq!(seen, [1000, 2000, 4000, 4000, 4000, 4000]);
        assert_eq!(next_reconnect_delay(d, true), RECONNECT_DELAY);
    }

    fn node_id(c: u8) -> crate::cluster::NodeId {
        crate::cluster::NodeId::parse(&[c; 40]).unwrap()
    }

    /// Goal: a `+CONTINUE` that reaches a link whose generation has ended (the node was
    /// promoted while it set up) changes nothing of the node's history; the current
    /// generation's takes effect.
    #[test]
    fn a_continue_for_an_ended_generation_leaves_the_history_alone() {
        crate::commands::install_table();
        let server = Server::new(crate::config::Config::default());
        let (me, old_primary) = (node_id(b'a'), node_id(b'b'));
        let crate::node_state::replica_of::FollowOutcome::Started(ended) = server
            .replica_of
            .follow_node("127.0.0.1", 7000, Some(old_primary))
        else {
            panic!("a first REPLICAOF starts a generation");
        };
        // The promotion: the generation ends, the history becomes this node's own.
        assert!(server.replica_of.stop());
        server.replication.set_history_primary(Some(me), 4);
        let before = server.replication.held_history();
        let their_id = ReplId::parse(&[b'c'; 40]).unwrap();
        let taken = adopt_continue(&server, ended, Some(their_id), Some(old_primary));
        assert!(matches!(taken, Err(ReplicaLinkError::Stale)), "{taken:?}");
        let after = server.replication.held_history();
        assert_eq!(after.primary, Some(me));
        assert_eq!(after.replid, before.replid);
        assert_eq!(after.epoch, 4);

        let crate::node_state::replica_of::FollowOutcome::Started(current) = server
            .replica_of
            .follow_node("127.0.0.1", 7000, Some(old_primary))
        else {
            panic!("following again starts a generation");
        };
        adopt_continue(&server, current, Some(their_id), Some(old_primary)).unwrap();
        let now = server.replication.held_history();
        assert_eq!(now.primary, Some(old_primary));
        assert_eq!(now.replid, their_id);
    }
}
