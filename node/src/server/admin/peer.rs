//! Asking another node something over its client port in RESP, as `redis-cli --cluster`
//! does (CLUSTER MYID, MEET, REPLICATE, FAILOVER), authenticated as this node's replicas
//! authenticate to their primaries (`masterauth` / `masteruser`).

use crate::server::repl_link::control::{Control, ControlError};
use crate::server::Server;
use proto::resp::Frame;
use std::time::Duration;

/// How long one call to a peer may take.
pub const PEER_CALL_TIMEOUT: Duration = Duration::from_secs(5);

pub struct Peer {
    control: Control,
}

impl Peer {
    pub fn connect(server: &Server, host: &str, port: u16) -> Result<Peer, ControlError> {
        Ok(Peer {
            control: Control::connect_to_primary(server, host, port, PEER_CALL_TIMEOUT)?,
        })
    }

    /// Sends one command; an error reply is `ControlError::Refused` with its text.
    pub fn call(&mut self, args: &[&[u8]]) -> Result<Frame, ControlError> {
        self.control.call(args)
    }

    /// The local address this connection left from: an address of this node that the peer
    /// reaches.
    pub fn local_ip(&self) -> Option<std::net::IpAddr> {
        self.control.local_addr().ok().map(|a| a.ip())
    }
}

/// The text of a simple or bulk string reply.
pub fn text(frame: &Frame) -> Option<String> {
    match frame {
        Frame::Simple(s) | Frame::Bulk(s) => Some(String::from_utf8_lossy(s).into_owned()),
        _ => None,
    }
}
