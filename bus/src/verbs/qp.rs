//! The RC queue pair of a connection: sideway's, or our own when its receives come from a
//! shared receive queue (sideway 0.4's QP builder cannot attach one).
//!
//! Each connection's QP gets a protection domain of its own (`ibv_alloc_pd`), and the
//! connection registers its regions there (`Connection::register`): a peer's QP reaches
//! only the regions of its own connection, whatever key and address it names (the device
//! checks the MR's PD against the QP's on every remote access). An SRQ-attached QP stays in
//! the SRQ's PD (the device's), since its receives name the SRQ's buffers: such connections
//! share that PD and are kept apart by keys only.
//!
//! rdma_cm computes the attributes that move a QP through INIT/RTR/RTS (`rdma_init_qp_attr`),
//! but sideway hands them over sealed: only its own QPs can apply them. For our own QP we apply
//! them to a throwaway sideway QP (a "template": same PD, CQ and rdma_cm identifier, never
//! posted to), read them back with `ibv_query_qp` and apply the raw values to ours, state by
//! state. The template is destroyed once ours is up.
#![allow(unsafe_code)]

use std::ptr::NonNull;
use std::sync::Arc;

use rdma_mummy_sys::{
    ibv_create_qp, ibv_destroy_qp, ibv_modify_qp, ibv_qp, ibv_qp_attr, ibv_qp_attr_mask,
    ibv_qp_cap, ibv_qp_init_attr, ibv_qp_state, ibv_qp_type, ibv_query_qp,
};
use sideway::ibverbs::completion::BasicCompletionQueue;
use sideway::ibverbs::queue_pair::{
    BasicQueuePair, QueuePair, QueuePairAttribute, QueuePairState, QueuePairType,
};
use sideway::rdmacm::communication_manager::Identifier;

use super::cq::Cq;
use super::device::Device;
use super::lib_error;
use super::srq::SrqShared;
use crate::config::EndpointConfig;
use crate::error::{BusError, Result};
use sideway::ibverbs::protection_domain::ProtectionDomain;

/// An RC QP attached to a shared receive queue.
pub(crate) struct SrqQp {
    qp: NonNull<ibv_qp>,
    // Dropped after the QP is destroyed (in `Drop`): the SRQ, CQ and PD it was created on.
    srq: Arc<SrqShared>,
    _cq: Arc<BasicCompletionQueue>,
    _dev: Arc<Device>,
}

// SAFETY: an ibv_qp may be used from any thread; the pointer is owned by this value and freed
// only in Drop; `&self` methods only pass it to thread-safe verbs calls.
unsafe impl Send for SrqQp {}
// SAFETY: as above.
unsafe impl Sync for SrqQp {}

impl Drop for SrqQp {
    fn drop(&mut self) {
        // SAFETY: the QP is live and destroyed exactly once, before the SRQ/CQ/PD it uses.
        let rc = unsafe { ibv_destroy_qp(self.qp.as_ptr()) };
        if rc != 0 {
            tracing::warn!(errno = rc, "ibv_destroy_qp(SRQ-attached) failed");
        }
    }
}

/// A connection's RC QP.
pub(crate) enum RcQp {
    /// Sideway's QP with its own receive queue.
    Own(BasicQueuePair),
    /// Our QP taking receives from a shared receive queue.
    Shared(SrqQp),
}

fn modify_raw(qp: *mut ibv_qp, attr: &mut ibv_qp_attr, mask: ibv_qp_attr_mask) -> Result<()> {
    // SAFETY: callers pass a live QP; `attr` is fully initialised for `mask`.
    let rc = unsafe { ibv_modify_qp(qp, attr, mask.0 as i32) };
    if rc != 0 {
        return Err(lib_error(
            "ibv_modify_qp",
            &std::io::Error::from_raw_os_error(rc),
        ));
    }
    Ok(())
}

/// The attributes rdma_cm sets for each state of an RC QP (what `rdma_init_qp_attr` fills).
fn mask_for(state: QueuePairState) -> ibv_qp_attr_mask {
    use ibv_qp_attr_mask as m;
    match state {
        QueuePairState::Init => {
            m::IBV_QP_STATE | m::IBV_QP_PKEY_INDEX | m::IBV_QP_PORT | m::IBV_QP_ACCESS_FLAGS
        }
        QueuePairState::ReadyToReceive => {
            m::IBV_QP_STATE
                | m::IBV_QP_AV
                | m::IBV_QP_PATH_MTU
                | m::IBV_QP_DEST_QPN
                | m::IBV_QP_RQ_PSN
                | m::IBV_QP_MAX_DEST_RD_ATOMIC
                | m::IBV_QP_MIN_RNR_TIMER
        }
        _ => {
            m::IBV_QP_STATE
                | m::IBV_QP_TIMEOUT
                | m::IBV_QP_RETRY_CNT
                | m::IBV_QP_RNR_RETRY
                | m::IBV_QP_SQ_PSN
                | m::IBV_QP_MAX_QP_RD_ATOMIC
        }
    }
}

fn raw_state(state: QueuePairState) -> ibv_qp_state::Type {
    match state {
        QueuePairState::Init => ibv_qp_state::IBV_QPS_INIT,
        QueuePairState::ReadyToReceive => ibv_qp_state::IBV_QPS_RTR,
        _ => ibv_qp_state::IBV_QPS_RTS,
    }
}

impl RcQp {
    /// Creates the QP and its CQ with the configured depths, attached to `srq` if given, and
    /// returns the PD it lives in (a new one; the device's for an SRQ-attached QP). The CQ
    /// takes the SRQ receives that arrive on this connection too: it must hold the send depth
    /// plus the whole SRQ.
    pub(crate) fn create(
        dev: &Arc<Device>,
        config: &EndpointConfig,
        srq: Option<&Arc<SrqShared>>,
    ) -> Result<(RcQp, Cq, Arc<ProtectionDomain>)> {
        config.validate()?;
        let Some(srq) = srq else {
            let pd = dev
                .ctx
                .alloc_pd()
                .map_err(|e| lib_error("ibv_alloc_pd", &e))?;
            let cq = Cq::new(&dev.ctx, config.cq_size)?;
            let qp = sideway_qp(&pd, config, &cq)?;
            return Ok((RcQp::Own(qp), cq, pd));
        };
        check_srq_fits(dev, config, srq)?;
        let cq = Cq::new(&dev.ctx, config.cq_size)?;
        let mut init = ibv_qp_init_attr {
            qp_context: std::ptr::null_mut(),
            send_cq: cq.raw(),
            recv_cq: cq.raw(),
            srq: srq.raw(),
            cap: ibv_qp_cap {
                max_send_wr: config.send_wr,
                // Ignored with an SRQ: receives come from it.
                max_recv_wr: 0,
                max_send_sge: 1,
                max_recv_sge: 0,
                max_inline_data: config.max_inline as u32,
            },
            qp_type: ibv_qp_type::IBV_QPT_RC,
            sq_sig_all: 0,
        };
        // SAFETY: the PD, CQ and SRQ are live and outlive the QP (it holds them, see SrqQp).
        let raw = unsafe { ibv_create_qp(dev.pd.pd().as_ptr(), &mut init) };
        let qp = NonNull::new(raw)
            .ok_or_else(|| lib_error("ibv_create_qp(SRQ)", &std::io::Error::last_os_error()))?;
        let qp = SrqQp {
            qp,
            srq: Arc::clone(srq),
            _cq: cq.handle(),
            _dev: Arc::clone(dev),
        };
        Ok((RcQp::Shared(qp), cq, Arc::clone(&dev.pd)))
    }

    /// The raw QP for posting; valid while `self` is.
    pub(crate) fn raw(&self) -> *mut ibv_qp {
        match self {
            // SAFETY: the pointer is only used while `self` (which owns the QP) is alive.
            RcQp::Own(qp) => unsafe { qp.qp().as_ptr() },
            RcQp::Shared(qp) => qp.qp.as_ptr(),
        }
    }

    pub(crate) fn qp_number(&self) -> u32 {
        match self {
            RcQp::Own(qp) => qp.qp_number(),
            // SAFETY: the QP is live; qp_num is set at creation and never changes.
            RcQp::Shared(qp) => unsafe { qp.qp.as_ref().qp_num },
        }
    }

    /// The SRQ this QP takes its receives from, if any.
    pub(crate) fn srq(&self) -> Option<&Arc<SrqShared>> {
        match self {
            RcQp::Own(_) => None,
            RcQp::Shared(qp) => Some(&qp.srq),
        }
    }

    /// INIT, RTR, RTS with rdma_cm's attributes for this identifier.
    pub(crate) fn bring_up(&mut self, dev: &Device, cq: &Cq, id: &Identifier) -> Result<()> {
        let states = [
            QueuePairState::Init,
            QueuePairState::ReadyToReceive,
            QueuePairState::ReadyToSend,
        ];
        let template = match self {
            RcQp::Own(qp) => {
                for state in states {
                    apply_cm_attr(qp, id, state)?;
                }
                return Ok(());
            }
            RcQp::Shared(_) => {
                let tiny = EndpointConfig {
                    send_wr: 1,
                    recv_wr: 1,
                    max_inline: 0,
                    ..EndpointConfig::default()
                };
                &mut sideway_qp(&dev.pd, &tiny, cq)?
            }
        };
        for state in states {
            apply_cm_attr(template, id, state)?;
            let mask = mask_for(state);
            // SAFETY: ibv_qp_attr and ibv_qp_init_attr are plain data; zero is valid.
            let mut attr: ibv_qp_attr = unsafe { std::mem::zeroed() };
            // SAFETY: as above.
            let mut init: ibv_qp_init_attr = unsafe { std::mem::zeroed() };
            // SAFETY: the template QP is live; the out-structs are valid locals.
            let rc = unsafe {
                ibv_query_qp(template.qp().as_ptr(), &mut attr, mask.0 as i32, &mut init)
            };
            if rc != 0 {
                return Err(lib_error(
                    "ibv_query_qp",
                    &std::io::Error::from_raw_os_error(rc),
                ));
            }
            attr.qp_state = raw_state(state);
            modify_raw(self.raw(), &mut attr, mask)?;
        }
        Ok(())
    }

    /// The remote end's GID and LID as the QP addresses it (its RTR address vector, which
    /// rdma_cm filled from the peer's route): the GID the peer's connection reports as its own.
    pub(crate) fn remote_gid_lid(&self) -> Result<([u8; 16], u16)> {
        // SAFETY: ibv_qp_attr and ibv_qp_init_attr are plain data; zero is valid.
        let mut attr: ibv_qp_attr = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut init: ibv_qp_init_attr = unsafe { std::mem::zeroed() };
        // SAFETY: `self` owns the live QP; the out-structs are valid locals.
        let rc = unsafe {
            ibv_query_qp(
                self.raw(),
                &mut attr,
                ibv_qp_attr_mask::IBV_QP_AV.0 as i32,
                &mut init,
            )
        };
        if rc != 0 {
            return Err(lib_error(
                "ibv_query_qp(AV)",
                &std::io::Error::from_raw_os_error(rc),
            ));
        }
        let av = attr.ah_attr;
        // SAFETY: every bit pattern of the 16-byte GID union is a valid `raw` array.
        let gid = unsafe { av.grh.dgid.raw };
        Ok((if av.is_global != 0 { gid } else { [0; 16] }, av.dlid))
    }

    /// Moves the QP to the error state: outstanding work completes as flushed.
    pub(crate) fn enter_error_state(&mut self) -> Result<()> {
        match self {
            RcQp::Own(qp) => {
                let mut attr = QueuePairAttribute::new();
                attr.setup_state(QueuePairState::Error);
                qp.modify(&attr)
                    .map_err(|e| lib_error("ibv_modify_qp(ERR)", &e))
            }
            RcQp::Shared(qp) => {
                // SAFETY: ibv_qp_attr is plain data; zero is valid for the fields not masked.
                let mut attr: ibv_qp_attr = unsafe { std::mem::zeroed() };
                attr.qp_state = ibv_qp_state::IBV_QPS_ERR;
                modify_raw(qp.qp.as_ptr(), &mut attr, ibv_qp_attr_mask::IBV_QP_STATE)
            }
        }
    }
}

/// Whether connections with `config` can be attached to `srq`: same provider instance, and a
/// CQ that holds the send depth plus every SRQ receive (any of them may complete on it).
pub(crate) fn check_srq_fits(
    dev: &Arc<Device>,
    config: &EndpointConfig,
    srq: &SrqShared,
) -> Result<()> {
    if !srq.belongs_to(dev) {
        return Err(BusError::Invalid {
            what: "srq",
            reason: "created by another provider instance".to_owned(),
        });
    }
    // Not the connection's own credit: a peer that ignores it can land every SRQ receive on
    // its connection before the CQ is read, and an overflowing CQ loses the completion of a
    // receive the device already took from the SRQ (rxe consumes the WQE first), so that
    // receive would never return to the pool.
    if config.cq_size < config.send_wr + srq.depth() {
        return Err(BusError::Invalid {
            what: "rdma-cq-size",
            reason: format!(
                "{} cannot hold {} sends and the SRQ's {} receives",
                config.cq_size,
                config.send_wr,
                srq.depth()
            ),
        });
    }
    Ok(())
}

/// How long a sender waits before retrying a message that found none of our receives posted
/// (the RNR NAK timer we answer with; IB encoding: 12 is 0.64 ms).
///
/// Why: rdma_cm leaves it at 0, which encodes 655.36 ms. Each side posts its Stream's
/// receives once the connection is established (the accepting side only after the node's
/// accept thread took the connection), so a peer's first message could beat them and wait
/// that long: every new client's first request took 0.66 s (verbs lane,
/// `node_idle_clients`). With RNR retry 7 ("forever", `conn.rs`) a short timer is only
/// back-pressure retried sooner.
pub(crate) const MIN_RNR_TIMER: u8 = 12;

fn apply_cm_attr(qp: &mut BasicQueuePair, id: &Identifier, state: QueuePairState) -> Result<()> {
    let mut attr = id
        .get_qp_attr(state)
        .map_err(|e| lib_error("rdma_init_qp_attr", &e))?;
    if state == QueuePairState::ReadyToReceive {
        attr.setup_min_rnr_timer(MIN_RNR_TIMER);
    }
    qp.modify(&attr).map_err(|e| lib_error("ibv_modify_qp", &e))
}

fn sideway_qp(
    pd: &Arc<ProtectionDomain>,
    config: &EndpointConfig,
    cq: &Cq,
) -> Result<BasicQueuePair> {
    pd.create_qp_builder()
        .setup_qp_type(QueuePairType::ReliableConnection)
        .setup_max_send_wr(config.send_wr)
        .setup_max_recv_wr(config.recv_wr)
        .setup_max_send_sge(1)
        .setup_max_recv_sge(1)
        .setup_max_inline_data(config.max_inline as u32)
        .setup_send_cq(cq.handle())
        .setup_recv_cq(cq.handle())
        .build()
        .map_err(|e| lib_error("ibv_create_qp", &e))
}
