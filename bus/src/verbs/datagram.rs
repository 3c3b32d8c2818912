//! Datagram endpoints: a UD QP addressed by GID + QPN + QKey (DESIGN §4.2 Datagram, used by the
//! bus). sideway has no UD address handles or UD sends, so those few calls (`ibv_create_ah`,
//! `ibv_modify_qp` with a QKey, UD fields of `ibv_post_send`) go straight to sideway's loaded
//! symbols in `rdma-mummy-sys`.
//!
//! Payloads are copied: into a registered send slot (or inline) on send, out of a registered
//! receive slot on receive. Every UD receive starts with a 40-byte GRH area that the device
//! fills (on RoCE v2 over IPv4 its last 20 bytes hold the IPv4 header), followed by the payload.
#![allow(unsafe_code)]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use rdma_mummy_sys::{
    ibv_ah, ibv_ah_attr, ibv_create_ah, ibv_destroy_ah, ibv_gid, ibv_global_route, ibv_modify_qp,
    ibv_qp_attr, ibv_qp_attr_mask, ibv_qp_state, ibv_wc, ibv_wc_flags,
};
use sideway::ibverbs::queue_pair::{BasicQueuePair, QueuePair, QueuePairType};

use super::cq::Cq;
use super::device::Device;
use super::lib_error;
use super::region::{register, VerbsRegion};
use super::wr::{self, SendKind, Sge};
use crate::access::Access;
use crate::addr::EndpointAddr;
use crate::config::EndpointConfig;
use crate::error::{BusError, Result};
use crate::provider::{DatagramEndpoint, DatagramMeta, Region, WorkError};

/// The bytes in front of every UD receive that the device fills with the packet's GRH (or, on
/// RoCE v2 over IPv4, 20 unused bytes and the IPv4 header).
pub const GRH_LEN: usize = 40;
/// The QKey of our datagram endpoints (a sender names the receiver's QKey; ours is fixed).
pub const DATAGRAM_QKEY: u32 = 0x1111_1111;
/// Send and receive slots per datagram endpoint: each costs an MTU of registered memory, and the
/// bus sends small messages, so the QP depth from the config is capped here.
pub const DATAGRAM_WR_MAX: u32 = 1024;
/// Address handles kept per endpoint. When full the cache is emptied (handles still named by an
/// outstanding send live on until its completion).
pub const AH_CACHE_MAX: usize = 1024;
/// The largest datagram payload, whatever the port allows: the bus's messages are small.
pub const DATAGRAM_MTU_MAX: usize = 4096;
/// Hop limit of the GRH we send (the IP TTL on RoCE v2).
const HOP_LIMIT: u8 = 64;

/// An address handle, destroyed when the last send naming it has completed.
struct Ah(*mut ibv_ah);

// SAFETY: an address handle is an immutable device object; verbs allows using it from any
// thread, and we only destroy it once, on drop.
unsafe impl Send for Ah {}
// SAFETY: as above (shared use is read-only: it is only named in work requests).
unsafe impl Sync for Ah {}

impl Drop for Ah {
    fn drop(&mut self) {
        // SAFETY: created by ibv_create_ah, destroyed once; no outstanding send names it (every
        // send slot holds an Arc of its Ah until the completion).
        let rc = unsafe { ibv_destroy_ah(self.0) };
        if rc != 0 {
            tracing::warn!(rc, "ibv_destroy_ah failed");
        }
    }
}

/// A UD endpoint of the `verbs` provider.
pub struct VerbsDatagram {
    // Drop order: the QP first, then what its requests named (send slots' AHs, the regions),
    // then the CQs.
    qp: BasicQueuePair,
    send_slots: Vec<Option<Arc<Ah>>>,
    free_sends: Vec<usize>,
    ahs: HashMap<([u8; 16], u16), Arc<Ah>>,
    send_buf: VerbsRegion,
    recv_buf: VerbsRegion,
    send_cq: Cq,
    recv_cq: Cq,
    dev: Arc<Device>,
    mtu: usize,
    max_inline: usize,
    recv_slots: usize,
    local: EndpointAddr,
    wcs: Vec<ibv_wc>,
}

impl std::fmt::Debug for VerbsDatagram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerbsDatagram")
            .field("local", &self.local)
            .field("mtu", &self.mtu)
            .finish()
    }
}

fn modify(qp: &BasicQueuePair, attr: &mut ibv_qp_attr, mask: ibv_qp_attr_mask) -> Result<()> {
    // SAFETY: the QP is alive; `attr` is a fully initialised attribute struct for `mask`.
    let rc = unsafe { ibv_modify_qp(qp.qp().as_ptr(), attr, mask.0 as i32) };
    if rc != 0 {
        return Err(lib_error(
            "ibv_modify_qp",
            &std::io::Error::from_raw_os_error(rc),
        ));
    }
    Ok(())
}

/// RESET → INIT (port, P_Key index 0, our QKey) → RTR → RTS.
fn bring_up(qp: &BasicQueuePair, port: u8) -> Result<()> {
    // SAFETY: ibv_qp_attr is plain data; zero is valid for every field not named by the mask.
    let mut attr: ibv_qp_attr = unsafe { std::mem::zeroed() };
    attr.qp_state = ibv_qp_state::IBV_QPS_INIT;
    attr.pkey_index = 0;
    attr.port_num = port;
    attr.qkey = DATAGRAM_QKEY;
    modify(
        qp,
        &mut attr,
        ibv_qp_attr_mask::IBV_QP_STATE
            | ibv_qp_attr_mask::IBV_QP_PKEY_INDEX
            | ibv_qp_attr_mask::IBV_QP_PORT
            | ibv_qp_attr_mask::IBV_QP_QKEY,
    )?;
    attr.qp_state = ibv_qp_state::IBV_QPS_RTR;
    modify(qp, &mut attr, ibv_qp_attr_mask::IBV_QP_STATE)?;
    attr.qp_state = ibv_qp_state::IBV_QPS_RTS;
    attr.sq_psn = 0;
    modify(
        qp,
        &mut attr,
        ibv_qp_attr_mask::IBV_QP_STATE | ibv_qp_attr_mask::IBV_QP_SQ_PSN,
    )
}

pub(crate) fn open(dev: &Arc<Device>, config: &EndpointConfig) -> Result<VerbsDatagram> {
    config.validate()?;
    let send_wr = config.send_wr.min(DATAGRAM_WR_MAX);
    let recv_wr = config.recv_wr.min(DATAGRAM_WR_MAX);
    let mtu = dev.mtu.min(DATAGRAM_MTU_MAX);
    let send_cq = Cq::new(&dev.ctx, send_wr)?;
    let recv_cq = Cq::new(&dev.ctx, recv_wr)?;
    let qp = dev
        .pd
        .create_qp_builder()
        .setup_qp_type(QueuePairType::UnreliableDatagram)
        .setup_max_send_wr(send_wr)
        .setup_max_recv_wr(recv_wr)
        .setup_max_send_sge(1)
        .setup_max_recv_sge(1)
        .setup_max_inline_data(config.max_inline.min(mtu) as u32)
        .setup_send_cq(send_cq.handle())
        .setup_recv_cq(recv_cq.handle())
        .build()
        .map_err(|e| lib_error("ibv_create_qp(UD)", &e))?;
    bring_up(&qp, dev.port)?;
    let send_buf = register(dev, send_wr as usize * mtu, Access::SEND)?;
    let recv_buf = register(dev, recv_wr as usize * (GRH_LEN + mtu), Access::LOCAL_WRITE)?;
    let local = EndpointAddr::Verbs {
        gid: dev.gid,
        qpn: qp.qp_number(),
        qkey: DATAGRAM_QKEY,
        lid: dev.lid,
    };
    let mut ep = VerbsDatagram {
        qp,
        send_slots: (0..send_wr).map(|_| None).collect(),
        free_sends: (0..send_wr as usize).rev().collect(),
        ahs: HashMap::new(),
        send_buf,
        recv_buf,
        send_cq,
        recv_cq,
        dev: Arc::clone(dev),
        mtu,
        max_inline: config.max_inline.min(mtu),
        recv_slots: recv_wr as usize,
        local,
        wcs: Vec::new(),
    };
    for slot in 0..ep.recv_slots {
        ep.post_recv_slot(slot)?;
    }
    tracing::debug!(local = %ep.local, mtu, "verbs datagram endpoint open");
    Ok(ep)
}

impl VerbsDatagram {
    fn recv_slot_len(&self) -> usize {
        GRH_LEN + self.mtu
    }

    fn post_recv_slot(&mut self, slot: usize) -> Result<()> {
        let len = self.recv_slot_len();
        let sge = Sge {
            addr: self.recv_buf.io_addr_of(slot * len),
            ptr: self.recv_buf.addr_of(slot * len),
            len: len as u32,
            lkey: self.recv_buf.lkey(),
        };
        // SAFETY: the QP is alive; the slot lies inside `recv_buf`, registered in the QP's PD and
        // owned by self, so it outlives the receive (the QP is dropped first).
        unsafe { wr::post_recv(self.qp.qp().as_ptr(), slot as u64, sge) }
    }

    /// Frees the send slots of finished sends.
    fn reap_sends(&mut self) -> Result<()> {
        self.wcs.clear();
        self.send_cq.poll(&mut self.wcs, DATAGRAM_WR_MAX as usize)?;
        for wc in &self.wcs {
            let slot = wc.wr_id as usize;
            if let Some(Some(_)) = self.send_slots.get(slot) {
                self.send_slots[slot] = None;
                self.free_sends.push(slot);
            }
            if let Err(e) = wr::status_of(wc) {
                // Datagrams may be lost; a failed send is one more loss, but worth a log.
                tracing::debug!(error = ?e, "verbs datagram send failed");
            }
        }
        Ok(())
    }

    fn address_handle(&mut self, gid: [u8; 16], lid: u16) -> Result<Arc<Ah>> {
        if let Some(ah) = self.ahs.get(&(gid, lid)) {
            return Ok(Arc::clone(ah));
        }
        if self.ahs.len() >= AH_CACHE_MAX {
            self.ahs.clear();
        }
        let sgid_index = u8::try_from(self.dev.gid_index).map_err(|_| BusError::Invalid {
            what: "gid index",
            reason: format!("{} exceeds 255", self.dev.gid_index),
        })?;
        let mut attr = ibv_ah_attr {
            grh: ibv_global_route {
                dgid: ibv_gid { raw: gid },
                flow_label: 0,
                sgid_index,
                hop_limit: HOP_LIMIT,
                traffic_class: 0,
            },
            dlid: lid,
            sl: 0,
            src_path_bits: 0,
            static_rate: 0,
            is_global: 1,
            port_num: self.dev.port,
        };
        // SAFETY: the PD is alive (the provider's, held by `self.dev`); `attr` is initialised.
        let ah = unsafe { ibv_create_ah(self.dev.pd.pd().as_ptr(), &mut attr) };
        if ah.is_null() {
            return Err(lib_error("ibv_create_ah", &std::io::Error::last_os_error()));
        }
        let ah = Arc::new(Ah(ah));
        self.ahs.insert((gid, lid), Arc::clone(&ah));
        Ok(ah)
    }

    /// The sender's GID from the GRH area of a receive slot.
    fn source_gid(grh: &[u8; GRH_LEN]) -> [u8; 16] {
        // RoCE v2 over IPv4: the first 20 bytes are unused and an IPv4 header follows.
        if grh[..20].iter().all(|b| *b == 0) && grh[20] >> 4 == 4 {
            let src = [grh[32], grh[33], grh[34], grh[35]];
            return std::net::Ipv4Addr::from(src).to_ipv6_mapped().octets();
        }
        // An IPv6 header or InfiniBand GRH: the source GID at bytes 8..24.
        let mut gid = [0; 16];
        gid.copy_from_slice(&grh[8..24]);
        gid
    }
}

impl DatagramEndpoint for VerbsDatagram {
    fn mtu(&self) -> usize {
        self.mtu
    }

    fn local(&self) -> &EndpointAddr {
        &self.local
    }

    fn send_to(&mut self, to: &EndpointAddr, payload: &[u8]) -> Result<()> {
        let EndpointAddr::Verbs {
            gid,
            qpn,
            qkey,
            lid,
        } = *to
        else {
            return Err(BusError::Invalid {
                what: "datagram address",
                reason: format!("{to} is not a verbs address"),
            });
        };
        if payload.len() > self.mtu {
            return Err(BusError::Invalid {
                what: "datagram",
                reason: format!("{} bytes exceed the MTU {}", payload.len(), self.mtu),
            });
        }
        self.reap_sends()?;
        let slot = self.free_sends.pop().ok_or(BusError::Full {
            what: "datagram send queue",
        })?;
        let ah = match self.address_handle(gid, lid) {
            Ok(ah) => ah,
            Err(e) => {
                self.free_sends.push(slot);
                return Err(e);
            }
        };
        let offset = slot * self.mtu;
        self.send_buf.write(offset, payload)?;
        let sge = Sge {
            addr: self.send_buf.io_addr_of(offset),
            ptr: self.send_buf.addr_of(offset),
            len: payload.len() as u32,
            lkey: self.send_buf.lkey(),
        };
        let kind = SendKind::Datagram {
            ah: ah.0,
            qpn,
            qkey,
        };
        let inline = payload.len() <= self.max_inline;
        // SAFETY: the QP is alive; the slot is inside `send_buf` (registered in the QP's PD, owned
        // by self); the AH is kept alive by the slot until the send completes.
        let posted =
            unsafe { wr::post_send(self.qp.qp().as_ptr(), slot as u64, kind, sge, inline, true) };
        match posted {
            Ok(()) => {
                self.send_slots[slot] = Some(ah);
                Ok(())
            }
            Err(e) => {
                self.free_sends.push(slot);
                Err(e)
            }
        }
    }

    fn try_recv(&mut self, buf: &mut [u8]) -> Result<Option<DatagramMeta>> {
        loop {
            self.wcs.clear();
            if self.recv_cq.poll(&mut self.wcs, 1)? == 0 {
                return Ok(None);
            }
            let wc = self.wcs[0];
            let slot = wc.wr_id as usize;
            if slot >= self.recv_slots {
                tracing::warn!(wr_id = wc.wr_id, "datagram receive completion for no slot");
                continue;
            }
            if let Err(e) = wr::status_of(&wc) {
                if e == WorkError::Flushed {
                    return Err(BusError::Closed("datagram queue pair flushed".to_owned()));
                }
                tracing::debug!(error = ?e, "verbs datagram receive failed");
                self.post_recv_slot(slot)?;
                continue;
            }
            let base = slot * self.recv_slot_len();
            let byte_len = wc.byte_len as usize;
            let result = if !(GRH_LEN..=GRH_LEN + self.mtu).contains(&byte_len) {
                Err(BusError::Protocol(format!(
                    "UD receive of {byte_len} bytes is outside {GRH_LEN}..={}",
                    GRH_LEN + self.mtu
                )))
            } else if byte_len - GRH_LEN > buf.len() {
                Err(BusError::Invalid {
                    what: "receive buffer",
                    reason: format!(
                        "{} bytes is smaller than the {}-byte datagram (dropped)",
                        buf.len(),
                        byte_len - GRH_LEN
                    ),
                })
            } else {
                let len = byte_len - GRH_LEN;
                let mut grh = [0u8; GRH_LEN];
                self.recv_buf.read(base, &mut grh)?;
                self.recv_buf.read(base + GRH_LEN, &mut buf[..len])?;
                let has_grh = wc.wc_flags & ibv_wc_flags::IBV_WC_GRH.0 != 0;
                let gid = if has_grh {
                    Self::source_gid(&grh)
                } else {
                    [0; 16]
                };
                Ok(DatagramMeta {
                    from: EndpointAddr::Verbs {
                        gid,
                        qpn: wc.src_qp,
                        qkey: DATAGRAM_QKEY,
                        lid: wc.slid,
                    },
                    len,
                })
            };
            self.post_recv_slot(slot)?;
            return result.map(Some);
        }
    }

    fn wait(&mut self, timeout: Duration) -> Result<()> {
        self.recv_cq.wait(timeout, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_gid_reads_ipv4_header_and_ipv6_grh() {
        // Goal: the sender's address is found in both GRH layouts the device may write.
        let mut v4 = [0u8; GRH_LEN];
        v4[20] = 0x45;
        v4[32..36].copy_from_slice(&[10, 11, 12, 13]);
        assert_eq!(
            VerbsDatagram::source_gid(&v4),
            std::net::Ipv4Addr::new(10, 11, 12, 13)
                .to_ipv6_mapped()
                .octets()
        );
        let mut v6 = [0u8; GRH_LEN];
        v6[0] = 0x60;
        v6[8..24].copy_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(VerbsDatagram::source_gid(&v6)[..2], [0xfe, 0x80]);
        assert_eq!(VerbsDatagram::source_gid(&v6)[15], 8);
    }
}
