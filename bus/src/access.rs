//! Access rights of a memory region, as verbs names them (`IBV_ACCESS_*`), mapped by each provider
//! to its own flags (`FI_REMOTE_WRITE`... on libfabric).
//!
//! Rights are minimal on purpose: a region is reachable by peers only through the remote rights
//! it asks for, and [`Access::SEND`] is separate because libfabric's `ofi_rxm` makes every
//! SEND source remotely *readable* (its rendezvous protocol), so only buffers holding what the
//! peer receives anyway may carry it.

use std::fmt;

/// A set of access rights for a registered memory region.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Access(u8);

impl Access {
    /// The local side may receive into it (every region that receives a RECV or a READ reply).
    pub const LOCAL_WRITE: Access = Access(1);
    /// Peers may RDMA WRITE into it (stream RX buffers, rings, ack words).
    pub const REMOTE_WRITE: Access = Access(2);
    /// Peers may RDMA READ from it.
    pub const REMOTE_READ: Access = Access(4);
    /// It may be the source of a SEND (control messages, handshakes, datagrams). Keep it off
    /// anything a peer may not read: on `ofi:tcp` such a region is remotely readable by its key.
    pub const SEND: Access = Access(8);
    /// No rights beyond local reads and being the source of a WRITE (staging buffers, ack
    /// sources).
    pub const NONE: Access = Access(0);

    /// Both sets together.
    pub const fn union(self, other: Access) -> Access {
        Access(self.0 | other.0)
    }

    /// Whether every right of `other` is in `self`.
    pub const fn contains(self, other: Access) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether any remote right is granted (then the region needs an rkey).
    pub const fn is_remote(self) -> bool {
        self.0 & (Self::REMOTE_WRITE.0 | Self::REMOTE_READ.0) != 0
    }
}

impl std::ops::BitOr for Access {
    type Output = Access;
    fn bitor(self, rhs: Access) -> Access {
        self.union(rhs)
    }
}

impl fmt::Debug for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = [
            (Self::LOCAL_WRITE, "LOCAL_WRITE"),
            (Self::REMOTE_WRITE, "REMOTE_WRITE"),
            (Self::REMOTE_READ, "REMOTE_READ"),
            (Self::SEND, "SEND"),
        ];
        let set: Vec<&str> = names
            .iter()
            .filter(|(a, _)| self.contains(*a))
            .map(|(_, n)| *n)
            .collect();
        if set.is_empty() {
            f.write_str("NONE")
        } else {
            f.write_str(&set.join("|"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn union_and_contains() {
        let a = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
        assert!(a.contains(Access::REMOTE_WRITE));
        assert!(!a.contains(Access::REMOTE_READ));
        assert!(a.is_remote());
        assert!(!Access::LOCAL_WRITE.is_remote());
        assert_eq!(format!("{a:?}"), "LOCAL_WRITE|REMOTE_WRITE");
        assert_eq!(format!("{:?}", Access::NONE), "NONE");
        assert!(!Access::SEND.is_remote());
        assert_eq!(
            format!("{:?}", Access::SEND | Access::LOCAL_WRITE),
            "LOCAL_WRITE|SEND"
        );
    }
}
