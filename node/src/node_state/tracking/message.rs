//! Invalidation messages and where they go. A RESP3 client gets a push
//! `>2 invalidate [keys]` on its own connection; with REDIRECT they go to the other client
//! instead: as the same push if that client speaks RESP3, as a pub/sub message on
//! `__redis__:invalidate` if it speaks RESP2 and is subscribed to something (Redis's rule),
//! and nowhere otherwise. A flush invalidates everything: the key list is a null.
//! When the redirect client has gone, a RESP3 tracking client is told with a
//! `tracking-redir-broken` push instead, at each invalidation that could not be delivered.

use super::client_state::SharedTracking;
use crate::node_state::client::ClientShared;
use crate::node_state::clients::ClientRegistry;
use bytes::BytesMut;
use proto::resp::{ProtocolVersion, Reply};

/// The pub/sub channel RESP2 redirect clients receive invalidations on.
pub const INVALIDATE_CHANNEL: &[u8] = b"__redis__:invalidate";

/// What one invalidation names.
#[derive(Clone, Copy, Debug)]
pub enum Invalidated<'a> {
    Keys(&'a [&'a [u8]]),
    /// FLUSHALL / FLUSHDB: every key (a null key list).
    Everything,
}

/// The message for `dest`, whose protocol decides its shape; None when it cannot receive
/// one (a RESP2 client not redirected to, or not subscribed).
pub fn encode(
    version: ProtocolVersion,
    redirected: bool,
    subscribed: bool,
    what: Invalidated<'_>,
) -> Option<BytesMut> {
    let mut buf = BytesMut::new();
    let mut reply = Reply::new(&mut buf, version);
    match version {
        ProtocolVersion::Resp3 => {
            reply.push(2);
            reply.bulk(b"invalidate");
        }
        ProtocolVersion::Resp2 if redirected && subscribed => {
            reply.push(3);
            reply.bulk(b"message");
            reply.bulk(INVALIDATE_CHANNEL);
        }
        ProtocolVersion::Resp2 => return None,
    }
    match what {
        Invalidated::Keys(keys) => {
            reply.array(keys.len());
            for k in keys {
                reply.bulk(k);
            }
        }
        Invalidated::Everything => reply.null(),
    }
    Some(buf)
}

/// Delivers one invalidation for the tracking client `target` (to it, or to its redirect).
pub fn deliver(clients: &ClientRegistry, target: &ClientShared, what: Invalidated<'_>) {
    let tracking: &SharedTracking = &target.tracking;
    let redirect = tracking.redirect();
    let (dest, redirected) = if redirect == 0 {
        (None, false)
    } else {
        match clients.get(redirect) {
            Some(c) if !c.is_killed() => (Some(c), true),
            _ => {
                tracking.note_broken_redirect();
                if target.protocol() == ProtocolVersion::Resp3 {
                    target.push(&redirect_broken(redirect));
                }
                return;
            }
        }
    };
    let dest: &ClientShared = dest.as_deref().unwrap_or(target);
    if let Some(message) = encode(
        dest.protocol(),
        redirected,
        dest.subscription_count() > 0,
        what,
    ) {
        dest.push(&message);
    }
}

/// `>2 tracking-redir-broken <id>`.
fn redirect_broken(redirect: u64) -> BytesMut {
    let mut buf = BytesMut::new();
    let mut reply = Reply::new(&mut buf, ProtocolVersion::Resp3);
    reply.push(2);
    reply.bulk(b"tracking-redir-broken");
    reply.integer(redirect as i64);
    buf
}

#[cfg(test)]
mod tests {
    use super::*;
    use ProtocolVersion::{Resp2, Resp3};

    fn text(b: Option<BytesMut>) -> Option<String> {
        b.map(|b| String::from_utf8(b.to_vec()).unwrap())
    }

    #[test]
    fn each_protocol_gets_its_shape() {
        let keys: &[&[u8]] = &[b"a", b"bc"];
        assert_eq!(
            text(encode(Resp3, false, false, Invalidated::Keys(keys))).unwrap(),
            ">2\r\n$10\r\ninvalidate\r\n*2\r\n$1\r\na\r\n$2\r\nbc\r\n"
        );
        assert_eq!(
            text(encode(Resp3, true, false, Invalidated::Everything)).unwrap(),
            ">2\r\n$10\r\ninvalidate\r\n_\r\n"
        );
        assert_eq!(
            text(encode(Resp2, true, true, Invalidated::Keys(&keys[..1]))).unwrap(),
            "*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n*1\r\n$1\r\na\r\n"
        );
        assert_eq!(
            text(encode(Resp2, true, true, Invalidated::Everything)).unwrap(),
            "*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n$-1\r\n"
        );
        assert_eq!(
            text(encode(Resp2, false, true, Invalidated::Everything)),
            None
        );
        assert_eq!(
            text(encode(Resp2, true, false, Invalidated::Everything)),
            None
        );
    }

    #[test]
    fn a_gone_redirect_marks_the_client_and_tells_a_resp3_one() {
        let addr = "127.0.0.1:1".parse().unwrap();
        let clients = ClientRegistry::default();
        let target = std::sync::Arc::new(ClientShared::new(1, addr, addr));
        target
            .protocol
            .store(3, std::sync::atomic::Ordering::Relaxed);
        target.tracking.set(0, 42);
        deliver(&clients, &target, Invalidated::Keys(&[b"k"]));
        assert!(target
            .tracking
            .has(super::super::client_state::BROKEN_REDIRECT));
        assert_eq!(
            &target.pushes.lock()[..],
            b">2\r\n$21\r\ntracking-redir-broken\r\n:42\r\n"
        );
    }
}
