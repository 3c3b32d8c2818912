//! The cluster bus as the running node sees it: a fabric datagram endpoint owned by one
//! thread ([`runtime`]) that drives the cluster core, and a TCP answerer at the bus port
//! ([`rendezvous`]) so `CLUSTER MEET ip port` can learn the fabric address to greet.

pub mod lookups;
pub mod meet_lookup;
pub mod publish_budget;
pub mod rendezvous;
pub mod runtime;

/// Queue depths of the cluster bus's one datagram endpoint per node: a burst of gossip from
/// every peer at once must find receives posted (a datagram that finds none is dropped), and
/// one endpoint's deep queues cost little. The bus's per-connection default is sized for
/// the many Stream clients, not for this.
pub const CLUSTER_BUS_WR: u32 = 1024;

fn bus_endpoint_config() -> EndpointConfig {
    EndpointConfig {
        send_wr: CLUSTER_BUS_WR,
        recv_wr: CLUSTER_BUS_WR,
        cq_size: 2 * CLUSTER_BUS_WR,
        ..EndpointConfig::default()
    }
}

#[cfg(test)]
mod tests;

use bus::datagram::DatagramSocket;
use bus::{EndpointAddr, EndpointConfig, Provider};
pub use publish_budget::{PublishBudget, PUBLISH_PAYLOAD_MAX};
use runtime::{BusCore, LoopStats, Request};
use std::net::SocketAddr;
use std::sync::mpsc::{self, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Requests waiting for the bus thread (MEETs, PUBLISH propagation) before new ones are
/// refused: the thread takes them every loop, so only a stalled thread fills this.
pub const REQUESTS_MAX: usize = 4096;

#[derive(Debug, thiserror::Error)]
pub enum BusStartError {
    #[error("cluster bus endpoint ({provider}): {error}")]
    Endpoint {
        provider: String,
        error: bus::BusError,
    },
    #[error("cluster bus port {addr}: {error}")]
    Rendezvous {
        addr: SocketAddr,
        error: std::io::Error,
    },
    #[error("cluster bus thread: {0}")]
    Thread(std::io::Error),
    /// The topology group's files in `dir` could not be opened (a damaged Raft log: the node
    /// must not start and vote with a state it lost).
    #[error("topology group: {0}")]
    Topology(crate::cluster::agent::store::StoreError),
}

/// The running bus: ask it to MEET, tell it of FORGET and RESET, stop it on shutdown.
pub struct BusHandle {
    /// This node's bus address (what gossip tells others to reach us by).
    pub address: EndpointAddr,
    pub provider: String,
    /// Tells the node its own ip as a peer saw it (MEET lookups call it too).
    pub local_ip_hook: Option<rendezvous::LocalIpHook>,
    requests: SyncSender<Request>,
    thread: Option<JoinHandle<LoopStats>>,
    answerer: Option<rendezvous::Answerer>,
    /// What PUBLISH propagation may hold in `requests`.
    pub publish_budget: Arc<PublishBudget>,
}

/// Why a PUBLISH did not go to the other nodes.
#[derive(Debug, PartialEq, Eq)]
pub enum PublishRefused {
    /// Channel and message exceed [`PUBLISH_PAYLOAD_MAX`], or the channel the bus's
    /// `CHANNEL_MAX`: the caller refuses the command.
    TooLarge,
    /// The bus thread is behind (the budget is spent, or it is gone): counted as dropped.
    Behind,
}

impl BusHandle {
    /// Where the rendezvous answers (ip:cport).
    pub fn rendezvous_addr(&self) -> Option<SocketAddr> {
        self.answerer.as_ref().map(|a| a.local)
    }

    /// Queues a MEET; false if the bus thread is gone or too far behind.
    pub fn meet(&self, to: EndpointAddr) -> bool {
        self.requests.try_send(Request::Meet(to)).is_ok()
    }

    /// Hands a PUBLISH/SPUBLISH to the bus for the other nodes, within the
    /// [`PublishBudget`]: when the bus thread is that far behind the message is not
    /// propagated (and counted), rather than queued without bound.
    pub fn publish(
        &self,
        shard: bool,
        channel: &[u8],
        message: &[u8],
    ) -> Result<(), PublishRefused> {
        let bytes = channel.len() + message.len();
        if bytes > PUBLISH_PAYLOAD_MAX || channel.len() > proto::bus::limits::CHANNEL_MAX {
            return Err(PublishRefused::TooLarge);
        }
        let ticket = self
            .publish_budget
            .take(bytes)
            .ok_or(PublishRefused::Behind)?;
        let r = Request::Publish {
            shard,
            channel: channel.to_vec(),
            message: message.to_vec(),
            ticket,
        };
        self.requests.try_send(r).map_err(|_| {
            self.publish_budget.note_dropped();
            PublishRefused::Behind
        })
    }

    /// Tells the core a node was forgotten (it blacklists it); false if the thread is gone
    /// or too far behind (the command path never waits for it).
    pub fn forget(&self, id: crate::cluster::NodeId, addr: String) -> bool {
        self.requests.try_send(Request::Forget { id, addr }).is_ok()
    }

    /// Tells the core every other node was dropped; false if the thread is gone or too far
    /// behind.
    pub fn reset(&self) -> bool {
        self.requests.try_send(Request::Reset).is_ok()
    }

    /// Hands a topology change to the bus thread; the outcome arrives on the returned
    /// receiver. None if the thread is gone or too far behind.
    pub fn propose(
        &self,
        command: crate::cluster::consensus::TopologyCommand,
        then: Option<Box<dyn FnOnce() + Send>>,
    ) -> Option<std::sync::mpsc::Receiver<Result<(), crate::cluster::agent::ProposeError>>> {
        let (reply, outcome) = mpsc::sync_channel(1);
        let reply = runtime::ProposalReply::new(reply, then);
        self.requests
            .try_send(Request::Propose { command, reply })
            .ok()
            .map(|_| outcome)
    }

    /// A sender for requests from other threads (the MEET lookups).
    pub fn requester(&self) -> SyncSender<Request> {
        self.requests.clone()
    }

    /// Stops the thread and returns its counters.
    pub fn stop(mut self) -> LoopStats {
        self.stop_inner()
    }

    fn stop_inner(&mut self) -> LoopStats {
        self.answerer = None;
        let _ = self.requests.send(Request::Stop);
        self.thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for BusHandle {
    fn drop(&mut self) {
        self.stop_inner();
    }
}

/// Opens a datagram endpoint on `provider` (on the interface of `bind` where the provider's
/// addresses are IPs), answers lookups at `rendezvous` (none if `None`), and starts the bus
/// thread driving `core`. `make_core` receives this node's bus address.
pub fn start<P: Provider, C: BusCore>(
    provider: &P,
    bind: Option<std::net::IpAddr>,
    rendezvous: Option<SocketAddr>,
    on_local_ip: Option<rendezvous::LocalIpHook>,
    make_core: impl FnOnce(&EndpointAddr) -> C,
) -> Result<BusHandle, BusStartError> {
    let endpoint_error = |error| BusStartError::Endpoint {
        provider: provider.name().to_string(),
        error,
    };
    let ep = provider
        .datagram_at(bind, &bus_endpoint_config())
        .map_err(endpoint_error)?;
    let socket = DatagramSocket::new(ep).map_err(endpoint_error)?;
    let address = socket.local().clone();
    let answerer = match rendezvous {
        Some(addr) => Some(
            rendezvous::Answerer::start(addr, address.to_string(), on_local_ip.clone())
                .map_err(|error| BusStartError::Rendezvous { addr, error })?,
        ),
        None => None,
    };
    let core = make_core(&address);
    let (requests, incoming) = mpsc::sync_channel(REQUESTS_MAX);
    let thread = std::thread::Builder::new()
        .name("node-cluster-bus".into())
        .spawn(move || runtime::run(socket, core, incoming))
        .map_err(BusStartError::Thread)?;
    tracing::info!(%address, provider = provider.name(), "cluster bus up");
    Ok(BusHandle {
        address,
        provider: provider.name().to_string(),
        local_ip_hook: on_local_ip,
        requests,
        thread: Some(thread),
        answerer,
        publish_budget: Arc::default(),
    })
}
