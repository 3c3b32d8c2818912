//! A node's flags as CLUSTER NODES prints them (`myself,master`, `slave,fail`...), in
//! Redis's order. Bits follow the cluster bus's `flags` field (protocols.md §2.6) so that
//! the bus can carry them unchanged later.

/// Flag bits, named as in the cluster bus header.
pub mod bit {
    pub const MASTER: u16 = 1 << 0;
    pub const SLAVE: u16 = 1 << 1;
    pub const PFAIL: u16 = 1 << 2;
    pub const FAIL: u16 = 1 << 3;
    pub const MYSELF: u16 = 1 << 4;
    pub const HANDSHAKE: u16 = 1 << 5;
    pub const NOADDR: u16 = 1 << 6;
    pub const MEET: u16 = 1 << 7;
    pub const MIGRATE_TO: u16 = 1 << 8;
    pub const NOFAILOVER: u16 = 1 << 9;
}

/// Printed names in CLUSTER NODES order; MEET and MIGRATE_TO are never printed.
const NAMES: [(u16, &str); 8] = [
    (bit::MYSELF, "myself"),
    (bit::MASTER, "master"),
    (bit::SLAVE, "slave"),
    (bit::PFAIL, "fail?"),
    (bit::FAIL, "fail"),
    (bit::HANDSHAKE, "handshake"),
    (bit::NOADDR, "noaddr"),
    (bit::NOFAILOVER, "nofailover"),
];

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeFlags(pub u16);

impl NodeFlags {
    pub fn has(self, b: u16) -> bool {
        self.0 & b != 0
    }

    pub fn set(&mut self, b: u16, on: bool) {
        if on {
            self.0 |= b;
        } else {
            self.0 &= !b;
        }
    }

    /// `myself,master` or `noflags` when none is printable.
    pub fn write(self, out: &mut String) {
        let start = out.len();
        for (b, name) in NAMES {
            if self.has(b) {
                if out.len() > start {
                    out.push(',');
                }
                out.push_str(name);
            }
        }
        if out.len() == start {
            out.push_str("noflags");
        }
    }

    /// Parses the comma list of a nodes.conf line; unknown names are an error (a file we
    /// do not understand must not be half-loaded).
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut flags = NodeFlags::default();
        for word in text.split(',') {
            if word == "noflags" {
                continue;
            }
            let b = NAMES
                .iter()
                .find(|(_, n)| *n == word)
                .map(|(b, _)| *b)
                .ok_or_else(|| format!("unknown node flag '{word}'"))?;
            flags.0 |= b;
        }
        Ok(flags)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_print_in_redis_order_and_parse_back() {
        for text in [
            "myself,master",
            "slave,fail",
            "master,fail?",
            "noflags",
            "myself,slave,nofailover",
        ] {
            let f = NodeFlags::parse(text).unwrap();
            let mut out = String::new();
            f.write(&mut out);
            assert_eq!(out, text);
        }
        let mut out = String::new();
        NodeFlags(bit::FAIL | bit::MASTER | bit::MYSELF).write(&mut out);
        assert_eq!(out, "myself,master,fail");
        assert!(NodeFlags::parse("master,bogus").is_err());
    }
}
