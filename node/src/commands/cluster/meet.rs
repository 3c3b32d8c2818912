//! CLUSTER MEET ip port [bus-port] | CLUSTER MEET fabric-address.
//!
//! As in Redis the reply comes at once and the handshake runs in the background. An ip and
//! port are first turned into a fabric address by asking the node's bus port (client port +
//! 10000 unless given) over TCP; that lookup runs on a short-lived thread, never on the
//! command path. A node that does not answer yet (still starting, as pods of an orchestrated
//! cluster often are) is asked again for [`MEET_RETRY_FOR`], as Redis keeps a handshake
//! node until it answers or times out.

use super::cluster;
use crate::cluster::transport::rendezvous;
use crate::command_framework::{CmdError, CmdResult, Ctx};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Lookups in flight at once; more MEETs are refused until some finish.
pub const MEET_LOOKUPS_MAX: usize = 16;
/// The bus port's distance from the client port, as in Redis.
const BUS_PORT_OFFSET: u32 = 10_000;

/// How long a MEET keeps asking a node that does not answer its bus port.
pub const MEET_RETRY_FOR: Duration = Duration::from_secs(15);
/// First pause between two asks; it doubles up to [`MEET_RETRY_PAUSE_MAX`].
const MEET_RETRY_PAUSE: Duration = Duration::from_millis(100);
const MEET_RETRY_PAUSE_MAX: Duration = Duration::from_secs(2);

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
            match lookup_until_answered(target) {
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

/// Asks `target`'s bus port for its fabric address until it answers or
/// [`MEET_RETRY_FOR`] has passed; returns the last failure then.
fn lookup_until_answered(target: SocketAddr) -> Result<rendezvous::Found, rendezvous::LookupError> {
    let deadline = Instant::now() + MEET_RETRY_FOR;
    let mut pause = MEET_RETRY_PAUSE;
    loop {
        match rendezvous::lookup(target) {
            Ok(found) => return Ok(found),
            // It answered, with something that is not an address: asking again won't help.
            Err(e @ rendezvous::LookupError::Bad(..)) => return Err(e),
            Err(e) if Instant::now() + pause >= deadline => return Err(e),
            Err(e) => {
                tracing::debug!(%target, error = %e, "CLUSTER MEET: no answer yet, asking again");
                std::thread::sleep(pause);
                pause = (pause * 2).min(MEET_RETRY_PAUSE_MAX);
            }
        }
    }
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
