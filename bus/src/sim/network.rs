//! The state of one simulated network: hosts, memory registrations, queue pairs, datagram
//! endpoints, listeners, what is in flight, and virtual time. Every collection is ordered
//! (BTreeMap, VecDeque) so that one seed always gives one history.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Weak};
use std::time::Instant;

use parking_lot::{Condvar, Mutex};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::access::Access;
use crate::config::EndpointConfig;
use crate::error::{BusError, Result};

use super::faults::Faults;
use super::qp::{Flight, Qp};
use super::region::{RegionInner, SimRegion};
use super::HostId;

/// Most hosts on one network: a simulation of more is a bug in the test driving it.
pub const HOSTS_MAX: usize = 4096;
/// Most live memory registrations on one network (rkeys are drawn from 32 bits; this keeps the
/// draw fast and the registry bounded).
pub const REGIONS_MAX: usize = 1 << 20;
/// Largest single registration: 1 GiB is far past any ring or stream buffer the store uses.
pub const REGION_LEN_MAX: usize = 1 << 30;
/// Connections waiting in one listener's backlog before `connect` is refused (rdma_cm's backlog).
pub const LISTEN_BACKLOG_MAX: usize = 1024;
/// Datagrams queued at one endpoint before further arrivals are dropped (a UD receive queue).
pub const DATAGRAM_INBOX_MAX: usize = 4096;
/// Events one real-time pump delivers at most, so a caller's poll never spins unboundedly.
pub const PUMP_STEPS_MAX: usize = 100_000;
/// Ephemeral ports for `listen` on port 0 start here.
const EPHEMERAL_PORT_FIRST: u16 = 49152;

/// Counters of what the network did, for tests and the chaos crate's reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SimStats {
    /// Events delivered (reliable operations and datagrams).
    pub delivered: u64,
    pub datagrams_sent: u64,
    pub datagrams_lost: u64,
    pub datagrams_duplicated: u64,
    /// Dropped for a partition, a crashed or unknown target, or a full inbox.
    pub datagrams_dropped: u64,
    pub datagrams_delivered: u64,
    /// Plain WRITEs whose payload was scheduled to land a second time (`duplicate_writes`).
    pub writes_duplicated: u64,
    pub rnr_retries: u64,
    pub remote_access_errors: u64,
    pub retry_exceeded: u64,
}

#[derive(Debug)]
pub(crate) enum Clock {
    /// Time moves only when the driver steps or advances the network.
    Virtual,
    /// Virtual time follows the real monotonic clock from this instant; every API call delivers
    /// what is due, so threads can use the network without a driver.
    Real(Instant),
}

#[derive(Debug)]
pub(crate) struct Host {
    pub(crate) alive: bool,
    /// Next simulated virtual address handed to a registration on this host.
    next_va: u64,
    /// Longest registration this host accepts (`SimFabric::limit_registrations`): a
    /// memlock limit or a full MR table, which a real device answers at `ibv_reg_mr`.
    register_len_max: usize,
}

#[derive(Debug)]
pub(crate) struct RegionEntry {
    pub(crate) host: HostId,
    pub(crate) region: Weak<RegionInner>,
}

#[derive(Debug)]
pub(crate) struct ListenSlot {
    pub(crate) host: HostId,
    pub(crate) pending: VecDeque<u64>,
}

#[derive(Debug)]
pub(crate) struct DatagramSlot {
    pub(crate) host: HostId,
    pub(crate) inbox: VecDeque<(u64, Vec<u8>)>,
}

/// Unordered traffic: plain WRITEs when `reorder_writes` is on, and datagrams.
#[derive(Debug)]
pub(crate) enum Unordered {
    Write { from_qp: u64, flight: Flight },
    Datagram { from: u64, to: u64, data: Vec<u8> },
}

/// The lock-protected network plus the condition variable that wakes blocked waiters.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) net: Mutex<Network>,
    pub(crate) wake: Condvar,
}

impl Shared {
    pub(crate) fn new(seed: u64, faults: Faults, clock: Clock) -> Result<Arc<Shared>> {
        faults.validate()?;
        Ok(Arc::new(Shared {
            net: Mutex::new(Network::new(seed, faults, clock)),
            wake: Condvar::new(),
        }))
    }
}

#[derive(Debug)]
pub(crate) struct Network {
    pub(crate) rng: StdRng,
    pub(crate) faults: Faults,
    pub(crate) clock: Clock,
    /// Virtual time in nanoseconds.
    pub(crate) now: u64,
    next_seq: u64,
    next_endpoint: u64,
    next_port: u16,
    pub(crate) hosts: Vec<Host>,
    cut: BTreeSet<(HostId, HostId)>,
    pub(crate) listeners: BTreeMap<SocketAddr, ListenSlot>,
    pub(crate) regions: BTreeMap<u32, RegionEntry>,
    regions_gc_at: usize,
    pub(crate) qps: BTreeMap<u64, Qp>,
    pub(crate) datagrams: BTreeMap<u64, DatagramSlot>,
    pub(crate) unordered: BTreeMap<(u64, u64), Unordered>,
    pub(crate) stats: SimStats,
    trace: u64,
}

/// What `next_event` found.
#[derive(Clone, Copy, Debug)]
pub(crate) enum EventRef {
    Ordered(u64),
    Unordered((u64, u64)),
}

impl Network {
    fn new(seed: u64, faults: Faults, clock: Clock) -> Self {
        Network {
            rng: StdRng::seed_from_u64(seed),
            faults,
            clock,
            now: 0,
            next_seq: 0,
            next_endpoint: 1,
            next_port: EPHEMERAL_PORT_FIRST,
            hosts: Vec::new(),
            cut: BTreeSet::new(),
            listeners: BTreeMap::new(),
            regions: BTreeMap::new(),
            regions_gc_at: 1024,
            qps: BTreeMap::new(),
            datagrams: BTreeMap::new(),
            unordered: BTreeMap::new(),
            stats: SimStats::default(),
            trace: 0xcbf2_9ce4_8422_2325,
        }
    }

    pub(crate) fn next_seq(&mut self) -> u64 {
        self.next_seq += 1;
        self.next_seq
    }

    pub(crate) fn next_endpoint_id(&mut self) -> u64 {
        let id = self.next_endpoint;
        self.next_endpoint += 1;
        id
    }

    /// Mixes one delivered event into the trace digest (FNV-1a over its fields).
    pub(crate) fn trace(&mut self, fields: [u64; 4]) {
        for f in [self.now].into_iter().chain(fields) {
            for b in f.to_le_bytes() {
                self.trace ^= u64::from(b);
                self.trace = self.trace.wrapping_mul(0x0100_0000_01b3);
            }
        }
    }

    pub(crate) fn trace_digest(&self) -> u64 {
        self.trace
    }

    /// A one-way delay drawn from the configured range, in ns.
    pub(crate) fn draw_delay(&mut self) -> u64 {
        let lo = self.faults.delay_min.as_nanos() as u64;
        let hi = self.faults.delay_max.as_nanos() as u64;
        self.now.saturating_add(self.rng.gen_range(lo..=hi))
    }

    pub(crate) fn add_host(&mut self) -> Result<HostId> {
        if self.hosts.len() >= HOSTS_MAX {
            return Err(BusError::Full { what: "sim hosts" });
        }
        let id = HostId(self.hosts.len() as u32);
        self.hosts.push(Host {
            alive: true,
            // Each host gets its own 1 TiB of simulated address space.
            next_va: (u64::from(id.0) + 1) << 40,
            register_len_max: REGION_LEN_MAX,
        });
        Ok(id)
    }

    pub(crate) fn limit_registrations(&mut self, host: HostId, len_max: usize) {
        if let Some(h) = self.hosts.get_mut(host.0 as usize) {
            h.register_len_max = len_max;
        }
    }

    pub(crate) fn alive(&self, host: HostId) -> bool {
        self.hosts.get(host.0 as usize).is_some_and(|h| h.alive)
    }

    pub(crate) fn check_alive(&self, host: HostId) -> Result<()> {
        if self.alive(host) {
            Ok(())
        } else {
            Err(BusError::Closed(format!("sim host {} has crashed", host.0)))
        }
    }

    /// Whether traffic between the two hosts gets through (both alive, no partition).
    pub(crate) fn connected(&self, a: HostId, b: HostId) -> bool {
        self.alive(a) && self.alive(b) && !self.cut.contains(&ordered_pair(a, b))
    }

    pub(crate) fn partition(&mut self, a: HostId, b: HostId) {
        if a != b {
            self.cut.insert(ordered_pair(a, b));
        }
    }

    pub(crate) fn heal(&mut self, a: HostId, b: HostId) {
        self.cut.remove(&ordered_pair(a, b));
    }

    pub(crate) fn heal_all(&mut self) {
        self.cut.clear();
    }

    /// Crashes a host: its memory registrations vanish, its queue pairs, listeners and datagram
    /// endpoints are gone. Peers find out when their next operation to it fails.
    pub(crate) fn crash(&mut self, host: HostId) {
        let Some(h) = self.hosts.get_mut(host.0 as usize) else {
            return;
        };
        h.alive = false;
        self.regions.retain(|_, e| e.host != host);
        self.qps.retain(|_, qp| qp.host != host);
        self.listeners.retain(|_, l| l.host != host);
        self.datagrams.retain(|_, d| d.host != host);
        let qps = &self.qps;
        self.unordered.retain(|_, u| match u {
            Unordered::Write { from_qp, .. } => qps.contains_key(from_qp),
            Unordered::Datagram { .. } => true,
        });
    }

    /// Registers memory for the connection `qp` (see [`RegionInner::owner_qp`]).
    pub(crate) fn register_for_qp(
        &mut self,
        qp: u64,
        len: usize,
        access: Access,
    ) -> Result<SimRegion> {
        let host = self.qps.get(&qp).map(|q| q.host).ok_or_else(|| {
            BusError::Closed("sim connection is gone (closed, or its host crashed)".into())
        })?;
        self.register(host, len, access, Some(qp))
    }

    pub(crate) fn register(
        &mut self,
        host: HostId,
        len: usize,
        access: Access,
        owner_qp: Option<u64>,
    ) -> Result<SimRegion> {
        self.check_alive(host)?;
        if len == 0 || len > REGION_LEN_MAX {
            return Err(BusError::Invalid {
                what: "region length",
                reason: format!("{len} is outside 1..={REGION_LEN_MAX}"),
            });
        }
        if len > self.hosts[host.0 as usize].register_len_max {
            return Err(BusError::Full {
                what: "sim host's registrable memory",
            });
        }
        if self.regions.len() >= self.regions_gc_at {
            self.regions.retain(|_, e| e.region.strong_count() > 0);
            self.regions_gc_at = (self.regions.len() * 2).max(1024);
        }
        if self.regions.len() >= REGIONS_MAX {
            return Err(BusError::Full {
                what: "sim memory registrations",
            });
        }
        let rkey = loop {
            let k: u32 = self.rng.gen();
            if k != 0 && !self.regions.contains_key(&k) {
                break k;
            }
        };
        let h = &mut self.hosts[host.0 as usize];
        let base = h.next_va;
        // Page-align the next registration and leave a guard page, as an allocator would.
        h.next_va += (len as u64).div_ceil(4096) * 4096 + 4096;
        let inner = Arc::new(RegionInner {
            host,
            base,
            rkey,
            access,
            owner_qp,
            len,
            bytes: Mutex::new(vec![0u8; len].into_boxed_slice()),
        });
        self.regions.insert(
            rkey,
            RegionEntry {
                host,
                region: Arc::downgrade(&inner),
            },
        );
        Ok(SimRegion { inner })
    }

    pub(crate) fn listen(&mut self, host: HostId, mut bind: SocketAddr) -> Result<SocketAddr> {
        self.check_alive(host)?;
        if bind.port() == 0 {
            let mut tries = 0u32;
            loop {
                bind.set_port(self.next_port);
                self.next_port = self
                    .next_port
                    .checked_add(1)
                    .unwrap_or(EPHEMERAL_PORT_FIRST);
                if !self.listeners.contains_key(&bind) {
                    break;
                }
                tries += 1;
                if tries > u32::from(u16::MAX - EPHEMERAL_PORT_FIRST) {
                    return Err(BusError::Full {
                        what: "sim ephemeral ports",
                    });
                }
            }
        }
        if self.listeners.contains_key(&bind) {
            return Err(BusError::Invalid {
                what: "listen address",
                reason: format!("{bind} is already in use"),
            });
        }
        self.listeners.insert(
            bind,
            ListenSlot {
                host,
                pending: VecDeque::new(),
            },
        );
        Ok(bind)
    }

    /// Creates both ends of a connection and queues the server end at the listener.
    /// Returns (client qp, server qp).
    pub(crate) fn connect(
        &mut self,
        host: HostId,
        to: SocketAddr,
        config: &EndpointConfig,
    ) -> Result<(u64, u64)> {
        self.check_alive(host)?;
        let Some(slot) = self.listeners.get(&to) else {
            return Err(BusError::Closed(format!(
                "connection to {to} refused: nothing listens there"
            )));
        };
        let server_host = slot.host;
        if !self.connected(host, server_host) {
            return Err(BusError::Timeout(std::time::Duration::ZERO));
        }
        if slot.pending.len() >= LISTEN_BACKLOG_MAX {
            return Err(BusError::Full {
                what: "listen backlog",
            });
        }
        let client = self.next_endpoint_id();
        let server = self.next_endpoint_id();
        self.qps
            .insert(client, Qp::new(host, server, config.clone()));
        self.qps
            .insert(server, Qp::new(server_host, client, config.clone()));
        if let Some(slot) = self.listeners.get_mut(&to) {
            slot.pending.push_back(server);
        }
        Ok((client, server))
    }

    pub(crate) fn close_listener(&mut self, addr: SocketAddr) {
        if let Some(slot) = self.listeners.remove(&addr) {
            for qp in slot.pending {
                self.close_qp(qp);
            }
        }
    }

    /// The owner dropped its end: it is gone, and the peer's queue pair goes to error, as after
    /// an rdma_cm DISCONNECTED event.
    pub(crate) fn close_qp(&mut self, id: u64) {
        if let Some(qp) = self.qps.remove(&id) {
            self.unordered.retain(|_, u| match u {
                Unordered::Write { from_qp, .. } => *from_qp != id,
                Unordered::Datagram { .. } => true,
            });
            self.qp_error(qp.peer);
        }
    }

    /// The earliest event in flight: the head of any queue pair's ordered queue, or the first
    /// unordered one, by (time, post order).
    pub(crate) fn next_event(&self) -> Option<(u64, EventRef)> {
        let mut best: Option<((u64, u64), EventRef)> = None;
        for (id, qp) in &self.qps {
            if let Some(f) = qp.ordered.front() {
                if best.is_none_or(|(k, _)| (f.at, f.seq) < k) {
                    best = Some(((f.at, f.seq), EventRef::Ordered(*id)));
                }
            }
        }
        if let Some((k, _)) = self.unordered.first_key_value() {
            if best.is_none_or(|(b, _)| *k < b) {
                best = Some((*k, EventRef::Unordered(*k)));
            }
        }
        best.map(|((at, _), e)| (at, e))
    }

    /// Delivers the earliest event, moving virtual time to it. False when nothing is in flight.
    pub(crate) fn step(&mut self) -> bool {
        let Some((at, event)) = self.next_event() else {
            return false;
        };
        self.now = self.now.max(at);
        self.stats.delivered += 1;
        match event {
            EventRef::Ordered(qp) => self.deliver_ordered(qp),
            EventRef::Unordered(key) => self.deliver_unordered(key),
        }
        true
    }

    /// Delivers every event due by `until` (ns), then sets the clock to it.
    pub(crate) fn run_until(&mut self, until: u64, max_steps: usize) -> usize {
        let mut steps = 0;
        while steps < max_steps {
            match self.next_event() {
                Some((at, _)) if at <= until => {
                    self.step();
                    steps += 1;
                }
                _ => break,
            }
        }
        self.now = self.now.max(until);
        steps
    }

    /// On a real-time network, delivers what the real clock says is due. No-op on virtual time.
    pub(crate) fn pump(&mut self) -> usize {
        match self.clock {
            Clock::Virtual => 0,
            Clock::Real(start) => {
                let t = start.elapsed().as_nanos() as u64;
                self.run_until(t, PUMP_STEPS_MAX)
            }
        }
    }

    /// Real time (ns) of the next due event, for a blocked real-time waiter.
    pub(crate) fn next_due_real(&self) -> Option<Instant> {
        match self.clock {
            Clock::Virtual => None,
            Clock::Real(start) => self
                .next_event()
                .map(|(at, _)| start + std::time::Duration::from_nanos(at)),
        }
    }
}

fn ordered_pair(a: HostId, b: HostId) -> (HostId, HostId) {
    if a <= b {
        (a, b)
    } else {
        (b, a)
    }
}

impl Shared {
    /// Runs `f` on the network (after delivering what real time says is due) and wakes waiters,
    /// since `f` may have queued completions or datagrams.
    pub(crate) fn with<T>(&self, f: impl FnOnce(&mut Network) -> T) -> T {
        let mut net = self.net.lock();
        net.pump();
        let out = f(&mut net);
        drop(net);
        self.wake.notify_all();
        out
    }

    /// Blocks until `ready` holds or `timeout` passes. Another thread stepping the network (or,
    /// on a real-time network, the clock) makes progress meanwhile.
    pub(crate) fn wait_until(
        &self,
        timeout: std::time::Duration,
        ready: impl Fn(&Network) -> bool,
    ) {
        let deadline = Instant::now() + timeout;
        let mut net = self.net.lock();
        loop {
            if net.pump() > 0 {
                self.wake.notify_all();
            }
            if ready(&net) {
                return;
            }
            let now = Instant::now();
            if now >= deadline {
                return;
            }
            let until = net.next_due_real().map_or(deadline, |t| t.min(deadline));
            self.wake.wait_until(&mut net, until);
        }
    }
}
