//! Which arguments of a request are keys worth warming before it runs (see `db::warm`).

use super::dispatch::resolve;
use super::spec::flags;
use smallvec::SmallVec;

/// The argument indexes of the keys `args` names by its command's key specs; none for an
/// unknown or ill-formed request, or one that works on the whole keyspace.
pub fn key_positions(args: &[&[u8]]) -> SmallVec<[usize; 16]> {
    match resolve(args) {
        Ok(spec) if !spec.has(flags::ALL_KEYS) => spec.key_positions(args),
        _ => SmallVec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_of_known_commands_only() {
        crate::commands::install_table();
        let positions = |args: &[&[u8]]| key_positions(args).to_vec();
        assert_eq!(positions(&[b"GET", b"k"]), vec![1]);
        assert_eq!(positions(&[b"mset", b"a", b"1", b"b", b"2"]), vec![1, 3]);
        assert_eq!(positions(&[b"PING"]), Vec::<usize>::new());
        assert_eq!(positions(&[b"GET"]), Vec::<usize>::new(), "wrong arity");
        assert_eq!(positions(&[b"NOSUCH", b"k"]), Vec::<usize>::new());
        assert_eq!(positions(&[b"KEYS", b"*"]), Vec::<usize>::new());
    }
}
