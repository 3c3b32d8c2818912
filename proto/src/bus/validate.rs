//! Checks a decoded message against the limits of [`super::limits`]: prost accepts any
//! well-formed protobuf, these checks accept only what a node may act on.

use super::error::WireError;
use super::limits::*;
use super::message::*;

fn invalid(reason: impl Into<String>) -> WireError {
    WireError::Invalid(reason.into())
}

/// A node id: exactly 40 hex characters.
pub fn check_node_id(what: &str, id: &str) -> Result<(), WireError> {
    if id.len() == NODE_ID_LEN && id.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(())
    } else {
        Err(invalid(format!("{what} is not a 40-hex node id")))
    }
}

fn check_len(what: &str, len: usize, max: usize) -> Result<(), WireError> {
    if len <= max {
        Ok(())
    } else {
        Err(invalid(format!("{what} of {len} bytes exceeds {max}")))
    }
}

/// Ports and flag words are 16-bit values carried in 32-bit protobuf fields.
fn check_u16(what: &str, value: u32) -> Result<(), WireError> {
    if value <= u16::MAX as u32 {
        Ok(())
    } else {
        Err(invalid(format!("{what} {value} does not fit 16 bits")))
    }
}

/// Slot ranges: at most [`SLOT_RANGES_MAX`], each `start <= end <= SLOT_MAX`.
pub fn check_slots(ranges: &[SlotRange]) -> Result<(), WireError> {
    if ranges.len() > SLOT_RANGES_MAX {
        return Err(invalid(format!(
            "{} slot ranges exceed {SLOT_RANGES_MAX}",
            ranges.len()
        )));
    }
    for r in ranges {
        if r.start > r.end || r.end > SLOT_MAX {
            return Err(invalid(format!("bad slot range {}-{}", r.start, r.end)));
        }
    }
    Ok(())
}

fn check_record(r: &NodeRecord) -> Result<(), WireError> {
    check_len("bus address", r.bus_addr.len(), BUS_ADDR_MAX)?;
    check_len("ip", r.ip.len(), IP_MAX)?;
    check_len("hostname", r.hostname.len(), HOSTNAME_MAX)?;
    check_u16("port", r.port)?;
    check_u16("rdma port", r.rdma_port)?;
    check_u16("bus port", r.cport)?;
    if !r.shard_id.is_empty() {
        check_node_id("shard id", &r.shard_id)?;
    }
    if !r.repl_id.is_empty() {
        check_node_id("replication id", &r.repl_id)?;
    }
    Ok(())
}

fn check_header(h: &Header) -> Result<(), WireError> {
    check_node_id("sender", &h.sender)?;
    if !h.primary.is_empty() {
        check_node_id("primary", &h.primary)?;
    }
    check_u16("flags", h.flags)?;
    check_slots(&h.slots)?;
    if let Some(r) = &h.record {
        check_record(r)?;
    }
    Ok(())
}

fn check_gossip(g: &Gossip) -> Result<(), WireError> {
    if g.entries.len() > GOSSIP_ENTRIES_MAX {
        return Err(invalid(format!(
            "{} gossip entries exceed {GOSSIP_ENTRIES_MAX}",
            g.entries.len()
        )));
    }
    for e in &g.entries {
        check_node_id("gossip node", &e.node_id)?;
        check_len("gossip ip", e.ip.len(), IP_MAX)?;
        check_len("gossip bus address", e.bus_addr.len(), BUS_ADDR_MAX)?;
        check_u16("gossip port", e.port)?;
        check_u16("gossip bus port", e.cport)?;
        check_u16("gossip flags", e.flags)?;
    }
    Ok(())
}

/// Accepts a message a node may act on: a header, a body, every field within its limits.
pub fn check_message(m: &BusMessage) -> Result<(), WireError> {
    let header = m.header.as_ref().ok_or_else(|| invalid("no header"))?;
    check_header(header)?;
    match m.body.as_ref().ok_or_else(|| invalid("no body"))? {
        Body::Ping(g) | Body::Pong(g) | Body::Meet(g) => check_gossip(g),
        Body::Fail(f) => check_node_id("failed node", &f.node_id),
        Body::Update(u) => {
            check_node_id("updated node", &u.node_id)?;
            check_slots(&u.slots)
        }
        Body::Publish(p) | Body::PublishShard(p) => {
            check_len("channel", p.channel.len(), CHANNEL_MAX)
        }
        // Opaque: raft's codec checks its own bytes; the size is bounded by MESSAGE_MAX.
        Body::Raft(r) => check_node_id("topology group", &r.group),
        Body::RaftPropose(p) => {
            check_node_id("topology group", &p.group)?;
            check_len("topology command", p.command.len(), RAFT_COMMAND_MAX)
        }
    }
}
