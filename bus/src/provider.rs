//! The one fabric abstraction, with verbs semantics, that `verbs`, `ofi` and `sim` implement.
//!
//! Shape: a [`Provider`] registers memory ([`Region`]), listens and connects ([`Listener`],
//! [`Connection`]: a reliable connected endpoint, RC on verbs) and opens [`DatagramEndpoint`]s
//! (UD on verbs, RDM on ofi). Work is *posted* and finishes later as a [`Completion`] found by
//! `poll`, exactly as on verbs, so the primitives above (Stream, Ring, Datagram) are written once.
//! Everything is synchronous and non-blocking except the explicit `wait`/`accept` timeouts: the
//! node drives fabric connections from busy-polling threads (DESIGN §5), not from async tasks.
//!
//! Memory safety: registered memory can be changed by a peer at any time, so no `&[u8]` into it
//! is ever handed out; a [`Region`] is read and written by copy. A `Region` is a cheap handle
//! (reference counted inside): a provider keeps a clone of every region named by an outstanding
//! work request until its completion (or the later one that reports it, see
//! [`Completion::covers`]), so dropping the caller's handle never frees memory the
//! device may still touch.

use std::net::SocketAddr;
use std::time::Duration;

use crate::access::Access;
use crate::addr::EndpointAddr;
use crate::config::EndpointConfig;
use crate::error::Result;
use crate::idle::IdleWait;

/// What a peer needs to address a region with one-sided operations: its start address (the
/// virtual address on verbs; whatever the provider's key scheme wants on ofi), length and key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RemoteRegion {
    pub addr: u64,
    pub len: u64,
    /// The remote key. verbs rkeys are 32-bit; libfabric keys are 64-bit.
    pub rkey: u64,
}

/// A byte range of a remote region: the target of a WRITE or the source of a READ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteSlice {
    pub region: RemoteRegion,
    pub offset: u64,
    pub len: u64,
}

/// Registered memory. Clone is cheap and shares the same memory.
pub trait Region: Clone + Send + Sync + 'static {
    /// Length in bytes.
    fn len(&self) -> usize;
    /// Whether the region is empty (never, for a registered region; here for clippy).
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The rights it was registered with.
    fn access(&self) -> Access;
    /// Its address for peers. Errors if it has no remote access.
    fn remote(&self) -> Result<RemoteRegion>;
    /// Copies `dst.len()` bytes out of the region at `offset`.
    fn read(&self, offset: usize, dst: &mut [u8]) -> Result<()>;
    /// Copies `src` into the region at `offset`.
    fn write(&self, offset: usize, src: &[u8]) -> Result<()>;
    /// Reads an aligned little-endian u64 with acquire ordering: for words a peer publishes by a
    /// one-sided write (ring consumer offsets, ack words), read after the data they guard.
    fn load_u64(&self, offset: usize) -> Result<u64>;
    /// Writes an aligned u64 with release ordering (the local side of such a word).
    fn store_u64(&self, offset: usize, value: u64) -> Result<()>;
}

/// A byte range of a local region, named by a work request.
#[derive(Clone, Debug)]
pub struct LocalSlice<R> {
    pub region: R,
    pub offset: usize,
    pub len: usize,
}

/// The kind of work that completed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Send,
    Recv,
    Write,
    Read,
    /// A peer's WRITE WITH IMM landed: it consumed one posted receive; `imm` and `byte_len` are set.
    RecvWriteImm,
}

/// Why a work request failed (the verbs `ibv_wc_status` classes callers act on).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WorkError {
    /// The queue was flushed because the connection went to error or was closed.
    Flushed,
    /// The peer rejected the access: wrong rkey, out of range, or missing rights.
    RemoteAccess,
    /// Retries exhausted: the peer is unreachable.
    RetryExceeded,
    /// Anything else, with the provider's text.
    Other(String),
}

/// One finished work request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completion {
    /// The caller's id from the post call (for `RecvWriteImm`: the id of the consumed receive).
    pub wr_id: u64,
    pub op: Op,
    pub status: std::result::Result<(), WorkError>,
    /// Bytes received (Recv, RecvWriteImm); 0 otherwise.
    pub byte_len: u32,
    /// Immediate data (host order) of a WRITE WITH IMM.
    pub imm: Option<u32>,
    /// Earlier WRITEs posted with [`Connection::post_write_covered`] on this connection that
    /// this completion reports as done too, and done successfully even when this one failed
    /// (a failed WRITE is always reported by itself). 0 on providers that report every
    /// request by itself.
    pub covers: u32,
}

/// A reliable connected endpoint (RC QP; an RDM endpoint bound to one peer on ofi).
/// Reliable and in order for SEND/RECV; WRITE placement order is provider-specific (unordered on
/// EFA and optionally in `sim`): protocols must not rely on it.
pub trait Connection: Send + 'static {
    type Region: Region;

    /// Registers `len` zeroed bytes with `access` for this connection's peer: "one region per
    /// peer and purpose". Every region a protocol advertises to its peer is registered here,
    /// so each provider can keep other peers out of it: verbs and sim only let this
    /// connection's peer reach it; ofi, whose keys are checked per domain, gives it its own
    /// random key and address (at least 64 bits). Usable on this connection only; dropped
    /// (deregistered) with its last handle.
    fn register(&self, len: usize, access: Access) -> Result<Self::Region>;

    /// Posts a SEND of the slice (inline when `len <= max_inline`). The region must have
    /// [`Access::SEND`] (`Invalid` otherwise).
    fn post_send(&mut self, wr_id: u64, src: LocalSlice<Self::Region>) -> Result<()>;
    /// Posts a receive buffer for one incoming SEND or WRITE WITH IMM.
    fn post_recv(&mut self, wr_id: u64, dst: LocalSlice<Self::Region>) -> Result<()>;
    /// Posts an RDMA WRITE of `src` to `dst` (same length), WITH IMM when `imm` is set.
    fn post_write(
        &mut self,
        wr_id: u64,
        src: LocalSlice<Self::Region>,
        dst: RemoteSlice,
        imm: Option<u32>,
    ) -> Result<()>;
    /// Posts an RDMA WRITE whose completion may be reported by a later one (selective
    /// signaling: see `verbs::covered`): verbs asks the device for no completion entry, and
    /// the next completion of this connection's sends counts it in [`Completion::covers`]
    /// (a failed one is always reported by itself). Providers whose completions do not come
    /// in post order report it by itself, as `post_write` (the default).
    ///
    /// The caller must follow covered WRITEs with a request it posts with `post_write` (or
    /// `post_send`) before it waits for them: the provider signals one anyway only every
    /// few (at most 32) and when it fills the send queue.
    fn post_write_covered(
        &mut self,
        wr_id: u64,
        src: LocalSlice<Self::Region>,
        dst: RemoteSlice,
    ) -> Result<()> {
        self.post_write(wr_id, src, dst, None)
    }
    /// Posts an RDMA READ of `src` into `dst` (same length).
    fn post_read(
        &mut self,
        wr_id: u64,
        dst: LocalSlice<Self::Region>,
        src: RemoteSlice,
    ) -> Result<()>;
    /// Appends up to `max` completions to `out` without blocking (drives progress on providers
    /// that need it). Returns how many were appended.
    fn poll(&mut self, out: &mut Vec<Completion>, max: usize) -> Result<usize>;
    /// Blocks until a completion may be ready or `timeout` passes (the idle back-off).
    fn wait(&mut self, timeout: Duration) -> Result<()>;
    /// Prepares a thread that polls many connections to block on all of them at once (see
    /// [`crate::idle`]): arms the completion notification and pushes the descriptors that
    /// become readable when a completion or connection event comes (`Armed`), or finds one
    /// already waiting (`Ready`: poll instead). Providers without such a descriptor answer
    /// `Unsupported`, and the caller sleeps instead.
    fn arm_idle_wait(&mut self, fds: &mut Vec<std::os::fd::RawFd>) -> Result<IdleWait> {
        let _ = fds;
        Ok(IdleWait::Unsupported)
    }
    /// Command receives of a Stream that the listener posted before it answered the peer
    /// ([`Listener::serve_streams`]): the Stream built on this connection adopts them as its
    /// first command slots instead of posting its own.
    fn take_preposted_receives(&mut self) -> Option<Self::Region> {
        None
    }
    /// The doorbell of the thread that polls this connection and blocks in
    /// [`crate::idle::wait_readable`]: a provider whose connections share an endpoint (so
    /// that another thread's poll may take this connection's completions off the wire)
    /// rings it when it hands this connection something while that thread waits.
    fn attach_idle_bell(&mut self, bell: &std::sync::Arc<crate::idle::Doorbell>) {
        let _ = bell;
    }
    /// The peer's address.
    fn peer(&self) -> &EndpointAddr;
    /// Our own address.
    fn local(&self) -> &EndpointAddr;
}

/// Accepts connections on a service address.
pub trait Listener: Send + 'static {
    type Conn: Connection;
    /// Waits up to `timeout` for one connection.
    fn accept(&mut self, timeout: Duration) -> Result<Option<Self::Conn>>;
    /// The address it listens on.
    fn local_addr(&self) -> SocketAddr;
    /// Every accepted connection will carry a server Stream: a provider whose peer's first
    /// message fails without a receive posted (verbs: an RNR NAK and its retry) posts the
    /// Stream's first command receives before it answers the peer
    /// ([`Connection::take_preposted_receives`]). With `shared_receives` > 0, a provider
    /// that can (verbs: an SRQ and memory windows) gives the connections one pool of that
    /// many receives instead of a receive queue each; returns whether it did. Other users of
    /// a listener's connections (rings) must not call it.
    fn serve_streams(&mut self, shared_receives: u32) -> bool {
        let _ = shared_receives;
        false
    }
    /// Receives posted in the listener's shared receive pool now (`None` without one): the
    /// pool's depth whenever no message waits to be polled, less any the pool lost.
    fn shared_receives_posted(&self) -> Option<usize> {
        None
    }
    /// Connection attempts dropped before they became connections (an ofi handshake socket
    /// idle past its deadline, evicted from the full table, or malformed); for INFO.
    fn dropped_handshakes(&self) -> u64 {
        0
    }
}

/// A received datagram's metadata.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DatagramMeta {
    pub from: EndpointAddr,
    pub len: usize,
}

/// Unreliable fixed-MTU messages (UD on verbs, RDM on ofi). Copy based: bus messages are small.
pub trait DatagramEndpoint: Send + 'static {
    /// Largest payload `send_to` accepts.
    fn mtu(&self) -> usize;
    /// Our address, to hand to peers.
    fn local(&self) -> &EndpointAddr;
    /// Sends one datagram (may be lost, duplicated or reordered in flight). `Full` = retry later.
    fn send_to(&mut self, to: &EndpointAddr, payload: &[u8]) -> Result<()>;
    /// Receives one datagram into `buf` if one is waiting.
    fn try_recv(&mut self, buf: &mut [u8]) -> Result<Option<DatagramMeta>>;
    /// Blocks until a datagram may be waiting or `timeout` passes.
    fn wait(&mut self, timeout: Duration) -> Result<()>;
}

/// A fabric provider. Connections are established by IP address and port for every provider
/// (rdma_cm on verbs, `fi_getinfo(node, service)` on ofi, an in-process registry on sim), so the
/// node's `rdma-bind`/`rdma-port` mean the same thing everywhere. A provider is a cheap handle:
/// clones share one device or domain.
pub trait Provider: Clone + Send + Sync + 'static {
    type Region: Region;
    type Conn: Connection<Region = Self::Region>;
    type Listener: Listener<Conn = Self::Conn>;
    type Datagram: DatagramEndpoint;

    /// The name as in `fabric-provider` (`verbs`, `ofi:tcp`, `ofi:shm`, `ofi:efa`, `sim`).
    fn name(&self) -> &str;
    /// Registers `len` zeroed bytes with `access`, for datagram endpoints (and, on ofi and
    /// sim, any connection). A verbs connection has a protection domain of its own and takes
    /// only what was registered through it ([`Connection::register`]), the way every region
    /// a peer may reach should be registered anyway.
    fn register(&self, len: usize, access: Access) -> Result<Self::Region>;
    /// Listens for connections at `bind`.
    fn listen(&self, bind: SocketAddr, config: &EndpointConfig) -> Result<Self::Listener>;
    /// Connects to a listener, waiting at most `timeout`.
    fn connect(
        &self,
        to: SocketAddr,
        config: &EndpointConfig,
        timeout: Duration,
    ) -> Result<Self::Conn>;
    /// [`Provider::connect`] for a connection that will carry a client Stream (`stream/`,
    /// which builds on this module and is not linked from it): verbs posts the Stream's
    /// first command receives before the handshake ends (the Stream adopts them,
    /// [`Connection::take_preposted_receives`]), so the listener's first message finds one
    /// instead of an RNR NAK and a retry. The others connect as usual.
    fn connect_for_stream(
        &self,
        to: SocketAddr,
        config: &EndpointConfig,
        timeout: Duration,
    ) -> Result<Self::Conn> {
        self.connect(to, config, timeout)
    }
    /// Opens a datagram endpoint.
    fn datagram(&self, config: &EndpointConfig) -> Result<Self::Datagram>;
    /// Opens a datagram endpoint on the interface of `ip` where the provider addresses
    /// endpoints by IP (ofi:tcp): an unspecified or absent `ip`, and providers whose
    /// addresses are not IPs (verbs: GID + QPN; shm; sim), take [`Self::datagram`]'s.
    fn datagram_at(
        &self,
        ip: Option<std::net::IpAddr>,
        config: &EndpointConfig,
    ) -> Result<Self::Datagram> {
        let _ = ip;
        self.datagram(config)
    }
}
