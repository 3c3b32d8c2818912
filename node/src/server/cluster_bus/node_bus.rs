//! Bringing the cluster bus up for a running node: the provider `fabric-provider` names, the
//! rendezvous at the bus port on the node's first bind address, the node's own bus address and
//! ip recorded in its topology, and the gossip core on the bus thread.

use super::driver::GossipDriver;
use crate::cluster::agent::AgentSettings;
use crate::cluster::consensus::log::TICK_MS;
use crate::cluster::core::ClusterCore;
use crate::cluster::gossip::GossipSettings;
use crate::cluster::transport::rendezvous::LocalIpHook;
use crate::cluster::transport::{start, BusHandle, BusStartError};
use crate::config::bind_addr;
use crate::server::persistence::topology_group_files::group_store;
use crate::server::Server;
use bus::select::{with_provider, WithProvider};
use bus::Provider;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Weak};

/// Starts the bus of a cluster-mode node and stores its handle in the cluster state.
pub fn start_node_bus(server: &Arc<Server>) -> Result<(), BusStartError> {
    let Some(cluster) = server.cluster.as_ref() else {
        return Ok(());
    };
    let (provider, rendezvous, bind) = {
        let c = server.config.read();
        // The rendezvous is a TCP service beside the client port: on `bind`'s first
        // address; the bus endpoint on the fabric's (`rdma-bind`, else `bind`). Neither
        // falls back to every interface: an unreadable entry means loopback.
        let ip = c
            .bind
            .iter()
            .filter_map(|s| bind_addr::parse(s))
            .find(|b| !(b.optional && b.ip.is_ipv6()))
            .map_or(IpAddr::V4(Ipv4Addr::LOCALHOST), |b| b.ip);
        let cport = cluster.topology.read().myself().cport;
        (
            c.fabric.provider.name().to_string(),
            SocketAddr::new(ip, cport),
            c.fabric_bind_ip()
                .unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        )
    };
    let job = Job {
        server: server.clone(),
        rendezvous,
        bind,
    };
    let handle = with_provider(&provider, job).map_err(|error| BusStartError::Endpoint {
        provider: provider.clone(),
        error,
    })??;
    let _ = cluster.bus.set(handle);
    Ok(())
}

struct Job {
    server: Arc<Server>,
    rendezvous: SocketAddr,
    bind: IpAddr,
}

impl WithProvider for Job {
    type Output = Result<BusHandle, BusStartError>;

    fn run<P: Provider>(self, provider: P) -> Self::Output {
        let server = self.server;
        let ((settings, agent), secret, announce) = {
            let c = server.config.read();
            let node_timeout_ms = c.cluster.node_timeout_ms.max(1);
            let settings = GossipSettings {
                node_timeout_ms,
                rdma_port: c.fabric.port,
                ..GossipSettings::default()
            };
            let agent = AgentSettings {
                failover_sync_acks: c.repl_sync_acks as usize,
                raft_tick_ms: (node_timeout_ms / 20).clamp(10, TICK_MS),
                ..AgentSettings::default()
            };
            (
                (settings, agent),
                c.cluster.secret.clone().into_bytes(),
                c.cluster.announce_ip.clone(),
            )
        };
        if !announce.is_empty() {
            set_own_ip(&server, &announce);
        }
        let weak = Arc::downgrade(&server);
        let hook: Option<LocalIpHook> = announce
            .is_empty()
            .then(|| Arc::new(move |ip: IpAddr| learn_own_ip(&weak, ip)) as LocalIpHook);
        let seed = rand::random();
        let (me, dir, applied) = {
            let cluster = server
                .cluster
                .as_ref()
                .expect("the bus runs only in cluster mode");
            (
                cluster.topology.read().myself().id,
                server.config.read().dir.clone(),
                cluster.topology.read().consensus.saved_version,
            )
        };
        let core = ClusterCore::with_store(me, settings, agent, seed, group_store(&dir), applied)
            .map_err(BusStartError::Topology)?;
        start(
            &provider,
            Some(self.bind),
            Some(self.rendezvous),
            hook,
            |address| {
                if let Some(c) = server.cluster.as_ref() {
                    let _ = c.change(|t| {
                        t.myself_mut().bus_addr = address.to_string();
                        Ok(())
                    });
                }
                GossipDriver::new(server.clone(), core, secret)
            },
        )
    }
}

/// Records the ip a peer reached us at, unless we know one already.
fn learn_own_ip(server: &Weak<Server>, ip: IpAddr) {
    let Some(server) = server.upgrade() else {
        return;
    };
    let unknown = server
        .cluster
        .as_ref()
        .is_some_and(|c| c.topology.read().myself().ip.is_empty());
    if unknown && !ip.is_unspecified() {
        set_own_ip(&server, &ip.to_string());
        tracing::info!(%ip, "cluster: learned this node's ip from a peer");
    }
}

fn set_own_ip(server: &Server, ip: &str) {
    if let Some(c) = server.cluster.as_ref() {
        let _ = c.change(|t| {
            t.myself_mut().ip = ip.to_string();
            Ok(())
        });
    }
}
