//! Node ids and shard ids: 40 lower-case hex characters, as Redis Cluster names nodes
//! (`CLUSTER_NAMELEN`). Both are drawn from a caller-supplied random source so that a
//! seeded simulation gets the same ids on every replay.

use rand::Rng;
use std::fmt;

/// Length of a node or shard id in hex characters.
pub const ID_LEN: usize = 40;

/// A 40-hex identifier; the text is kept as bytes so comparisons and formatting are free.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HexId([u8; ID_LEN]);

impl HexId {
    /// A fresh random id from `rng` (the node's seeded source).
    pub fn random(rng: &mut impl Rng) -> Self {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut out = [0u8; ID_LEN];
        for b in out.iter_mut() {
            *b = DIGITS[rng.gen_range(0..16usize)];
        }
        HexId(out)
    }

    /// Parses an id: exactly 40 hex digits (either case, stored lower-case as Redis prints).
    pub fn parse(text: &[u8]) -> Option<Self> {
        if text.len() != ID_LEN || !text.iter().all(u8::is_ascii_hexdigit) {
            return None;
        }
        let mut out = [0u8; ID_LEN];
        out.copy_from_slice(text);
        out.make_ascii_lowercase();
        Some(HexId(out))
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    pub fn as_str(&self) -> &str {
        // Only ASCII hex digits are ever stored (random() and parse() guarantee it).
        std::str::from_utf8(&self.0).unwrap_or("")
    }
}

impl fmt::Display for HexId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for HexId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A node's name in the cluster (`CLUSTER MYID`).
pub type NodeId = HexId;
/// A shard's name (`CLUSTER MYSHARDID`): a primary and its replicas share it.
pub type ShardId = HexId;

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn random_ids_are_hex_and_follow_the_seed() {
        let mut a = rand::rngs::StdRng::seed_from_u64(7);
        let mut b = rand::rngs::StdRng::seed_from_u64(7);
        let (x, y) = (HexId::random(&mut a), HexId::random(&mut b));
        assert_eq!(x, y);
        assert_eq!(x.as_str().len(), ID_LEN);
        assert!(x
            .as_str()
            .bytes()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)));
        assert_ne!(x, HexId::random(&mut a));
    }

    #[test]
    fn parse_checks_length_and_digits() {
        let id = "0C24887D2474E26D84FCEBEFA41F59B5382518BF";
        assert_eq!(
            HexId::parse(id.as_bytes()).unwrap().as_str(),
            id.to_ascii_lowercase()
        );
        assert!(HexId::parse(b"abc").is_none());
        assert!(HexId::parse(&[b'g'; 40]).is_none());
        assert!(HexId::parse(&[b'a'; 41]).is_none());
    }
}
