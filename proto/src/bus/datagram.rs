//! The two calls the fabric wiring makes: a message to the datagrams that carry it, and a
//! received datagram to a message once all of its fragments are in.

use super::envelope::{open, seal};
use super::error::{FragmentError, WireError};
use super::fragment::{fragment_as, Reassembler};
use super::message::BusMessage;
use std::hash::Hash;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DatagramError {
    #[error(transparent)]
    Wire(#[from] WireError),
    #[error(transparent)]
    Fragment(#[from] FragmentError),
}

/// Seals `msg` with the cluster secret and cuts it to the endpoint's `max_payload()`;
/// `send` numbers the sender's messages (see [`fragment_as`]: a message sent again is not
/// a duplicate).
pub fn to_datagrams(
    msg: &BusMessage,
    secret: &[u8],
    mtu: usize,
    send: u64,
) -> Result<Vec<Vec<u8>>, DatagramError> {
    Ok(fragment_as(&seal(msg, secret)?, mtu, send)?)
}

/// Takes one datagram from `sender`; returns the opened message once it is complete.
pub fn from_datagram<S: Eq + Hash + Clone>(
    reassembler: &mut Reassembler<S>,
    sender: &S,
    datagram: &[u8],
    secret: &[u8],
    now_ms: u64,
) -> Result<Option<BusMessage>, DatagramError> {
    match reassembler.push(sender, datagram, now_ms)? {
        Some(bytes) => Ok(Some(open(&bytes, secret)?)),
        None => Ok(None),
    }
}
