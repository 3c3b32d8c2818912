//! CLUSTER MEET ip port [bus-port] | CLUSTER MEET fabric-address.
//!
//! As in Redis the reply comes at once and the handshake runs in the background. An ip and
//! port are first turned into a fabric address by asking the node's bus port (client port +
//! 10000 unless given) over TCP; that lookup runs on a short-lived thread, never on the
//! command path.

use super::cluster;
use crate::cluster::transport::rendezvous;
use crate::command::{CmdError, CmdResult, Ctx};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Lookups in flight at once; more MEETs are refused until some finish.
pub const MEET_LOOKUPS_MAX: usize = 16;
/// The bus port's distance from the client port, as in Redis.
const BUS_PORT_OFFSET: u32 = 10_000;

static LOOKUPS_IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);

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
    if LOOKUPS_IN_FLIGHT.fetch_add(1, Ordering::AcqRel) >= MEET_LOOKUPS_MAX {
        LOOKUPS_IN_FLIGHT.fetch_sub(1, Ordering::AcqRel);
        return Err(CmdError::new(
            "ERR too many CLUSTER MEET lookups in progress, try again",
        ));
    }
    let requests = bus.requester();
    let learn_ip = bus.local_ip_hook.clone();
    let spawned = std::thread::Builder::new()
        .name("node-cluster-meet".into())
        .spawn(move || {
            match rendezvous::lookup(target) {
                Ok(found) => match found.address.parse() {
                    Ok(addr) => {
                        if let (Some(ip), Some(hook)) = (found.local_ip, &learn_ip) {
                            hook(ip);
                        }
                        let _ =
                            requests.send(crate::cluster::transport::runtime::Request::Meet(addr));
                    }
                    Err(e) => tracing::warn!(%target, error = %e, "CLUSTER MEET: bad address"),
                },
                Err(e) => tracing::warn!(%target, error = %e, "CLUSTER MEET lookup failed"),
            }
            LOOKUPS_IN_FLIGHT.fetch_sub(1, Ordering::AcqRel);
        });
    if let Err(e) = spawned {
        LOOKUPS_IN_FLIGHT.fetch_sub(1, Ordering::AcqRel);
        return Err(CmdError::new(format!("ERR CLUSTER MEET: {e}")));
    }
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
