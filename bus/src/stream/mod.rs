//! Stream: a RESP byte stream with Valkey-over-RDMA framing (DESIGN §4.2, protocols.md
//! §1.3-1.7), written once over [`crate::provider::Connection`].
//!
//! - Control messages are 32-byte big-endian SENDs ([`control`]). Each side keeps
//!   [`RECV_SLOTS`] receives posted in a command region and re-posts each after handling it.
//! - Each side registers an RX buffer and advertises it with RegisterXferMemory. The peer writes
//!   payload into it linearly with WRITE WITH IMM, imm = byte count; the receiver adds the count
//!   to its landed offset. When the application has read the whole buffer the receiver
//!   re-advertises it and the writer starts again at its beginning. So the writer's window is
//!   what remains of the advertised buffer: `write` accepts at most that.
//! - The server sends a Keepalive every [`KEEPALIVE_INTERVAL`]; a dead peer shows up as a failed
//!   work request, which closes the stream.
//! - A peer that sends a wrong-size or unknown control message, advertises an impossible buffer
//!   or claims to have written past ours gets `BusError::Protocol` and a closed connection.
//!
//! Our TX staging buffer is decoupled from the peer's window: it is a ring of our own size
//! (`rx_size` for a client; a server's starts small and grows with its traffic, `window.rs`),
//! freed as WRITE completions arrive, so a peer advertising a different size never forces a
//! re-registration.

pub mod control;
mod progress;
mod session;
mod window;

#[cfg(test)]
mod tests;

pub use control::ControlMsg;
pub(crate) use session::prepost_cmd_recvs;
pub use session::{Role, Stream, StreamStats, PREPOSTED_RECV_SLOTS};

use std::time::Duration;

/// Smallest RX buffer (`rdma-rx-size`), as Valkey.
pub const RX_SIZE_MIN: usize = 64 * 1024;
/// Largest RX buffer, as Valkey; also the largest window a peer may advertise.
pub const RX_SIZE_MAX: usize = 16 * 1024 * 1024;
/// Default RX buffer, as Valkey and libvalkey.
pub const RX_SIZE_DEFAULT: usize = 1024 * 1024;
/// RX buffer of a server stream whose peer has not proven who it is
/// ([`Stream::server_preauth`]): room for AUTH and a few small requests.
pub const PREAUTH_RX_LEN: usize = 8 * 1024;
/// TX staging of such a stream: replies to an unproven peer go out in pieces this big.
pub const PREAUTH_TX_LEN: usize = 4 * 1024;
/// RX and TX staging of a server stream once its peer may use the full window: a granted
/// window starts this small and doubles, up to `rdma-rx-size`, when traffic fills it (see
/// `window.rs`), so an idle client pins 128 KiB, not twice `rdma-rx-size`.
pub const GRANTED_START_LEN: usize = RX_SIZE_MIN;
/// Posted command receives. Every control message and every WRITE WITH IMM consumes one; they
/// are re-posted as handled. Valkey posts 1024 (VALKEY_RDMA_MAX_WQE); we post what a peer of
/// ours can have in flight (its data writes and control messages), because a receive queue's
/// memory is the device's whatever is posted (rxe: 64 bytes a slot, rounded to a power of
/// two). A peer that outruns them (a Valkey client with hundreds of tiny WRITEs in flight)
/// meets an RNR NAK and its retry (forever, 0.64 ms apart): slower, never lost.
pub const RECV_SLOTS: usize = 224;
/// Command receives a pre-auth stream posts (in a command region this small): an unproven
/// peer needs a handful (AUTH is one WRITE, plus its adverts and keepalives), and the
/// connection's receive queue then holds 32 entries, not [`RECV_SLOTS`]. The rest are
/// posted, in a second region, once the window is granted (`window.rs`).
pub const PREAUTH_RECV_SLOTS: usize = 32;
/// Control messages in flight at once. We send few (an advert, a keepalive, a feature reply);
/// 32 leaves slack without pinning much.
pub const CONTROL_SEND_SLOTS: usize = 32;
/// Control messages queued behind busy send slots before the peer is judged to flood us.
pub const PENDING_CONTROL_MAX: usize = 64;
/// Data WRITEs in flight at once; with the control slots this fills a peer's receives
/// ([`RECV_SLOTS`]) and stays within the default send queue ([`crate::config::WR_DEFAULT`]).
/// A stream writes one WRITE per flush of contiguous bytes: a pipeline is one, so 192 in
/// flight is far past what a request-reply stream uses.
pub const DATA_WRITES_MAX: usize = 192;
/// The send queue depth a stream needs (`rdma-send-wr` may not be less).
pub const SEND_WR_NEEDED: usize = CONTROL_SEND_SLOTS + DATA_WRITES_MAX;
/// The receive queue depth a stream needs (`rdma-recv-wr` may not be less).
pub const RECV_WR_NEEDED: usize = RECV_SLOTS;
/// Longest a closing client waits for its goodbye to be delivered before it drops the stream
/// anyway (see [`Stream::begin_goodbye`]).
pub const GOODBYE_WAIT: Duration = Duration::from_millis(200);
/// Why a server stream closed when its client said goodbye (the `BusError::Closed` text).
pub const PEER_SAID_GOODBYE: &str = "the peer said goodbye";
/// Server keepalive period (VALKEY_RDMA_KEEPALIVE_MS).
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(3);
/// How long a peer may send nothing at all (not even a keepalive) before it is taken as gone
/// on a provider that cannot report a dead peer (RDM on tcp and shm): three keepalive
/// periods and a second of slack. Both ends judge each other by it.
pub const PEER_SILENCE_MAX: Duration = Duration::from_secs(3 * KEEPALIVE_INTERVAL.as_secs() + 1);
/// Completions reaped per poll call, and poll calls per `progress`, bounding one call's work.
pub const POLL_BATCH: usize = 64;
pub const POLL_ROUNDS_MAX: usize = 8;

const _: () = assert!(RX_SIZE_MIN <= RX_SIZE_DEFAULT && RX_SIZE_DEFAULT <= RX_SIZE_MAX);
const _: () = assert!(PREAUTH_RX_LEN < RX_SIZE_MIN && PREAUTH_TX_LEN < RX_SIZE_MIN);
const _: () = assert!(SEND_WR_NEEDED <= crate::config::WR_DEFAULT as usize);
const _: () = assert!(RECV_WR_NEEDED <= crate::config::WR_DEFAULT as usize);
// Everything a peer of ours can have in flight finds a receive posted.
const _: () = assert!(CONTROL_SEND_SLOTS + DATA_WRITES_MAX <= RECV_SLOTS);
const _: () = assert!(RX_SIZE_MIN <= GRANTED_START_LEN && GRANTED_START_LEN <= RX_SIZE_DEFAULT);
const _: () = assert!(PREAUTH_RECV_SLOTS <= RECV_SLOTS);
// RegisterXferMemory carries the length as u32.
const _: () = assert!(RX_SIZE_MAX <= u32::MAX as usize);
