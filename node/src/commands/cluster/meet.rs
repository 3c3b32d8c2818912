//! CLUSTER MEET ip port [bus-port] | CLUSTER MEET fabric-address.
//!
//! As in Redis the reply comes at once and the handshake runs in the background. An ip and
//! port are first turned into a fabric address by asking the node's bus port (client port +
//! 10000 unless given) over TCP; that lookup, and its asking again while the node does not
//! answer yet, runs on a thread of its own (`cluster::transport::meet_lookup`), never on the
//! command path: nothing here waits.

use super::cluster;
use crate::cluster::transport::meet_lookup;
use crate::command_framework::{CmdError, CmdResult, Ctx};
use std::net::{IpAddr, SocketAddr};

/// The bus port's distance from the client port, as in Redis.
const BUS_PORT_OFFSET: u32 = 10_000;

pub fn meet(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let c = cluster(ctx)?;
    let Some(bus) = c.bus.get() else {
        return Err(CmdError::new("ERR the cluster bus is not running"));
    };
    let target = match &args[2..] {
        [addr] => {
            let text = std::str::from_utf8(addr).unwrap_or("");
            let addr = text
                .parse::<bus::EndpointAddr>()
                .map_err(|e| CmdError::new(format!("ERR Invalid fabric address specified: {e}")))?;
            if !bus.meet(addr) {
                return Err(CmdError::new("ERR the cluster bus is not running"));
            }
            ctx.reply.ok();
            return Ok(());
        }
        [ip, port] => parse_target(ip, port, None)?,
        [ip, port, cport] => parse_target(ip, port, Some(cport))?,
        _ => return Err(CmdError::Syntax),
    };
    meet_lookup::start(target, bus.requester(), bus.local_ip_hook.clone())
        .map_err(|e| CmdError::new(format!("ERR {e}")))?;
    ctx.reply.ok();
    Ok(())
}

/// Redis's checks and messages for `ip port [bus-port]`.
fn parse_target(ip: &[u8], port: &[u8], cport: Option<&&[u8]>) -> Result<SocketAddr, CmdError> {
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let base: u16 = std::str::from_utf8(port)
        .ok()
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| CmdError::new(format!("ERR Invalid base port specified: {}", text(port))))?;
    let bus_port: u32 = match cport {
        Some(c) => std::str::from_utf8(c)
            .ok()
            .and_then(|p| p.parse::<u16>().ok())
            .ok_or_else(|| CmdError::new(format!("ERR Invalid bus port specified: {}", text(c))))?
            .into(),
        None => u32::from(base) + BUS_PORT_OFFSET,
    };
    let parsed: Option<IpAddr> = std::str::from_utf8(ip).ok().and_then(|s| s.parse().ok());
    match (parsed, u16::try_from(bus_port)) {
        (Some(ip), Ok(bus_port)) if base != 0 && bus_port != 0 => Ok(SocketAddr::new(ip, bus_port)),
        _ => Err(CmdError::new(format!(
            "ERR Invalid node address specified: {}:{}",
            text(ip),
            text(port)
        ))),
    }
}
