//! The `verbs` provider (DESIGN §4.1): libibverbs and librdmacm through the `sideway` crate,
//! which loads rdma-core at run time, so this code builds and runs on hosts without RDMA and
//! answers [`BusError::Unavailable`](crate::BusError::Unavailable) there.
//!
//! - Connections are RC QPs set up with rdma_cm (`RDMA_PS_TCP`) by IP address and port.
//! - Datagram endpoints are UD QPs addressed by GID + QPN + QKey.
//! - Shared receive queues (own FFI): connections made with `connect_with_srq` /
//!   `listen_with_srq` take their receives from one [`VerbsSrq`]; a listener serving Streams
//!   with a depth (`Listener::serve_streams`) gives its connections one receive pool
//!   (`receive_pool.rs`). Such connections share the device's protection domain, so their
//!   remotely reachable regions are reached through type 2 memory windows bound to their own
//!   QP (`window.rs`).
//! - Work is posted with the classic `ibv_post_send`/`ibv_post_recv` and completions read with
//!   `ibv_poll_cq` through sideway's loaded symbols (`rdma-mummy-sys`): one code path for RC and
//!   UD (sideway's guards have no UD address), and no completion is ever dropped by a poller that
//!   reads ahead of what the caller asked for.
//!
//! Proven by the verbs lane (`scripts/verbs-lane.sh`): soft-RoCE in a QEMU guest.

mod cm;
mod conn;
mod covered;
mod cq;
mod datagram;
mod device;
mod listener;
mod peer_gone;
mod pooled_recvs;
mod qp;
mod receive_pool;
mod region;
mod srq;
mod srq_slots;
mod window;
mod wr;

pub use conn::VerbsConnection;
pub use datagram::{VerbsDatagram, DATAGRAM_QKEY, GRH_LEN};
pub use device::{VerbsOptions, VerbsProvider, GID_INDEX_DEFAULT, PORT_DEFAULT};
pub use listener::{VerbsListener, ACCEPT_QUEUE_MAX, ESTABLISH_WAIT_MAX};
pub use region::{VerbsRegion, REGION_LEN_MAX};
pub use srq::{VerbsSrq, SRQ_DEPTH_MAX, SRQ_DEPTH_MIN};

/// The provider's name, as in `fabric-provider` and in errors.
pub(crate) const PROVIDER: &str = "verbs";

/// A provider-library error with its cause chain (sideway's errors carry the errno as source).
pub(crate) fn lib_error(call: &'static str, err: &dyn std::error::Error) -> crate::BusError {
    crate::BusError::Provider {
        provider: PROVIDER,
        call,
        reason: error_chain(err),
    }
}

/// `outer: inner: innermost`, so an errno behind a wrapper error is not lost.
pub(crate) fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
