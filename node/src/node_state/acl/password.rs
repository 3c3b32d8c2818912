//! Passwords as Redis 7.0 keeps them: the SHA-256 of the password in lower-case hex, never
//! the password itself; compared in constant time.

use super::error::RuleError;
use sha2::{Digest, Sha256};

/// Length of a password hash in hex.
pub const HASH_HEX_LEN: usize = 64;

pub fn hash(password: &[u8]) -> String {
    let digest = Sha256::digest(password);
    let mut out = String::with_capacity(HASH_HEX_LEN);
    for b in digest {
        out.push(char::from(b"0123456789abcdef"[(b >> 4) as usize]));
        out.push(char::from(b"0123456789abcdef"[(b & 15) as usize]));
    }
    out
}

/// A hash given by `#hash` / `!hash`: exactly 64 lower-case hex digits.
pub fn valid_hash(hash: &str) -> Result<String, RuleError> {
    let ok = hash.len() == HASH_HEX_LEN
        && hash
            .bytes()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c));
    if ok {
        Ok(hash.to_string())
    } else {
        Err(RuleError::BadHash)
    }
}

/// Compares two hashes without an early exit.
pub fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut diff = a.len() ^ b.len();
    for i in 0..a.len().max(b.len()) {
        diff |= (a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0)) as usize;
    }
    diff == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_as_redis_stores_them() {
        // The hash of "passwd4" in Redis's acl unit test.
        assert_eq!(
            hash(b"passwd4"),
            "34344e4d60c2b6d639b7bd22e18f2b0b91bc34bf0ac5f9952744435093cfb4e6"
        );
        assert!(valid_hash(&hash(b"x")).is_ok());
        assert_eq!(valid_hash("abc"), Err(RuleError::BadHash));
        let upper = hash(b"x").to_ascii_uppercase();
        assert_eq!(valid_hash(&upper), Err(RuleError::BadHash));
        assert!(same(&hash(b"a"), &hash(b"a")));
        assert!(!same(&hash(b"a"), &hash(b"b")));
    }
}
