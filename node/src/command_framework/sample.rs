//! Random picks for SRANDMEMBER, HRANDFIELD and SPOP: how their count argument reads, and the
//! bound on replies that repeat elements.
//!
//! A negative count asks for that many elements with repeats allowed, whatever the size of the
//! collection. Redis writes them one by one to the client, so `-9223372036854775807` makes it
//! fill its output buffer until memory runs out (Redis 7.0.15 does exactly that). Handlers here
//! stream the elements straight into the reply without building a list, and refuse counts
//! above [`REPEATS_MAX`] before writing anything.

use super::args;
use super::error::CmdError;
use rand::Rng;

/// Most elements a reply with repeats may hold. At 16 Mi elements the reply is already at
/// least 112 MiB of RESP (7 bytes for a one-byte bulk string), more than any client means to
/// read in one reply; beyond it the request is refused instead of exhausting memory.
pub const REPEATS_MAX: u64 = 1 << 24;

/// What a count argument asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Count {
    /// `count >= 0`: up to that many distinct elements.
    Distinct(u64),
    /// `count < 0`: exactly `-count` elements, repeats allowed.
    Repeats(u64),
}

/// Reads the count of SRANDMEMBER/HRANDFIELD as Redis does: an integer in
/// `-9223372036854775807..=9223372036854775807` (i64::MIN is refused with Redis's range text).
pub fn parse_count(arg: &[u8]) -> Result<Count, CmdError> {
    let n = args::int(arg)?;
    if n == i64::MIN {
        return Err(CmdError::new(
            "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
        ));
    }
    Ok(if n >= 0 {
        Count::Distinct(n as u64)
    } else {
        Count::Repeats(n.unsigned_abs())
    })
}

/// `n` as a number of elements to stream, or the error for a reply past [`REPEATS_MAX`].
pub fn repeats(n: u64) -> Result<usize, CmdError> {
    if n > REPEATS_MAX {
        return Err(CmdError::new(format!(
            "ERR value is out of range, a reply with repeated elements holds at most {REPEATS_MAX} elements"
        )));
    }
    Ok(n as usize)
}

/// `amount` distinct indexes below `len` in random order (`amount < len`); costs O(amount).
pub fn distinct_indexes(rng: &mut impl Rng, len: usize, amount: usize) -> Vec<usize> {
    debug_assert!(amount <= len);
    rand::seq::index::sample(rng, len, amount.min(len)).into_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_as_redis_reads_them() {
        assert_eq!(parse_count(b"3"), Ok(Count::Distinct(3)));
        assert_eq!(parse_count(b"0"), Ok(Count::Distinct(0)));
        assert_eq!(parse_count(b"-2"), Ok(Count::Repeats(2)));
        assert_eq!(
            parse_count(b"-9223372036854775807"),
            Ok(Count::Repeats(i64::MAX as u64))
        );
        assert!(parse_count(b"-9223372036854775808")
            .unwrap_err()
            .to_string()
            .starts_with("ERR value is out of range, value must between"));
        assert_eq!(parse_count(b"x"), Err(CmdError::NotInteger));
    }

    #[test]
    fn repeats_are_bounded() {
        assert_eq!(repeats(REPEATS_MAX), Ok(REPEATS_MAX as usize));
        assert!(repeats(REPEATS_MAX + 1).is_err());
        assert!(repeats(i64::MAX as u64).is_err());
    }

    #[test]
    fn distinct_indexes_are_distinct_and_in_range() {
        let mut rng = rand::thread_rng();
        for len in 1..50 {
            for amount in 0..=len {
                let mut v = distinct_indexes(&mut rng, len, amount);
                assert_eq!(v.len(), amount);
                assert!(v.iter().all(|&i| i < len));
                v.sort_unstable();
                v.dedup();
                assert_eq!(v.len(), amount);
            }
        }
    }
}
