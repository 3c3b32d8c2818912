//! Linearizability of single-key read/write histories, checked per key (a register is
//! linearizable as a whole iff each key's history is) with `todc-utils`' WGL checker.
//!
//! A history holds the operations whose effect is known or possible:
//! - answered reads and writes, from call to answer;
//! - writes whose answer never came (timeout): they may have been applied, so their answer
//!   is put after everything else (the write may take effect at any point after its call,
//!   or never, which is "last");
//! - refused operations and unanswered reads are left out: they changed nothing.
//!
//! An unanswered write whose value no read returned is left out too: it can always be put
//! last, where it changes no read, so the verdict is the same without it and the search
//! is smaller.

use crate::data_net::{Key, Value};
use std::collections::{BTreeMap, BTreeSet};
use todc_utils::specifications::register::{RegisterOperation, RegisterSpecification};
use todc_utils::{Action, History, WGLChecker};

/// Most operations per key a checker is given: WGL's search grows fast with concurrency,
/// and its memory with the history's length.
pub const OPS_PER_KEY_MAX: usize = 500;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recorded {
    Read(Value),
    Write(Value),
}

/// One operation: when it was called and answered, in one global order of events
/// (None: never answered).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Op {
    pub call: u64,
    pub answer: Option<u64>,
    pub what: Recorded,
}

/// Every key's operations.
#[derive(Clone, Debug, Default)]
pub struct Histories {
    pub keys: BTreeMap<Key, Vec<Op>>,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CheckError {
    #[error("key {key}: history of {ops} operations is not linearizable")]
    NotLinearizable { key: Key, ops: usize },
    #[error("key {key}: {ops} operations, more than {max} checked")]
    TooLong { key: Key, ops: usize, max: usize },
    #[error("key {key}: an operation answered before it was called")]
    Malformed { key: Key },
}

impl Histories {
    pub fn record(&mut self, key: Key, op: Op) {
        self.keys.entry(key).or_default().push(op);
    }

    pub fn ops_of(&self, key: Key) -> usize {
        self.keys.get(&key).map_or(0, Vec::len)
    }

    /// Checks every key; the first key that fails.
    pub fn check(&self) -> Result<(), CheckError> {
        for (&key, ops) in &self.keys {
            check_key(key, ops)?;
        }
        Ok(())
    }
}

/// Checks one key's history (initial value 0: "no value").
pub fn check_key(key: Key, ops: &[Op]) -> Result<(), CheckError> {
    let read: BTreeSet<Value> = ops
        .iter()
        .filter_map(|o| match o.what {
            Recorded::Read(v) => Some(v),
            Recorded::Write(_) => None,
        })
        .collect();
    let kept: Vec<&Op> = ops
        .iter()
        .filter(|o| match o.what {
            Recorded::Write(v) => o.answer.is_some() || read.contains(&v),
            Recorded::Read(_) => o.answer.is_some(),
        })
        .collect();
    if kept.is_empty() {
        return Ok(());
    }
    if kept.len() > OPS_PER_KEY_MAX {
        return Err(CheckError::TooLong {
            key,
            ops: kept.len(),
            max: OPS_PER_KEY_MAX,
        });
    }
    if kept.iter().any(|o| o.answer.is_some_and(|a| a <= o.call)) {
        return Err(CheckError::Malformed { key });
    }
    // Each operation is its own process: a client's timed-out write stays open while it
    // goes on with others.
    let mut events: Vec<(u64, usize, Action<RegisterOperation<Value>>)> = Vec::new();
    for (process, o) in kept.iter().enumerate() {
        let (call, answer) = match o.what {
            Recorded::Read(v) => (
                RegisterOperation::Read(None),
                RegisterOperation::Read(Some(v)),
            ),
            Recorded::Write(v) => (RegisterOperation::Write(v), RegisterOperation::Write(v)),
        };
        events.push((o.call, process, Action::Call(call)));
        events.push((
            o.answer.unwrap_or(u64::MAX),
            process,
            Action::Response(answer),
        ));
    }
    events.sort_by_key(|&(at, process, _)| (at, process));
    let actions = events.into_iter().map(|(_, p, a)| (p, a)).collect();
    let history = History::from_actions(actions);
    if WGLChecker::<RegisterSpecification<Value>>::is_linearizable(history) {
        Ok(())
    } else {
        Err(CheckError::NotLinearizable {
            key,
            ops: kept.len(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(call: u64, answer: Option<u64>, what: Recorded) -> Op {
        Op { call, answer, what }
    }

    #[test]
    fn a_stale_read_after_an_acknowledged_write_is_caught() {
        let ops = [
            op(1, Some(2), Recorded::Write(5)),
            op(3, Some(4), Recorded::Read(0)),
        ];
        assert!(matches!(
            check_key(1, &ops),
            Err(CheckError::NotLinearizable { .. })
        ));
        let ok = [
            op(1, Some(2), Recorded::Write(5)),
            op(3, Some(4), Recorded::Read(5)),
        ];
        assert_eq!(check_key(1, &ok), Ok(()));
    }

    #[test]
    fn an_unanswered_write_may_take_effect_late_or_never() {
        // Read 0, then 7, then 7: the timed-out write of 7 took effect in between.
        let ops = [
            op(1, None, Recorded::Write(7)),
            op(2, Some(3), Recorded::Read(0)),
            op(4, Some(5), Recorded::Read(7)),
            op(6, Some(7), Recorded::Read(7)),
        ];
        assert_eq!(check_key(1, &ops), Ok(()));
        // But once seen it cannot be undone.
        let undone = [
            op(1, None, Recorded::Write(7)),
            op(4, Some(5), Recorded::Read(7)),
            op(6, Some(7), Recorded::Read(0)),
        ];
        assert!(check_key(1, &undone).is_err());
        // Never read: left out, nothing to check.
        let unseen = [
            op(1, None, Recorded::Write(9)),
            op(2, Some(3), Recorded::Read(0)),
        ];
        assert_eq!(check_key(1, &unseen), Ok(()));
    }

    #[test]
    fn concurrent_operations_may_go_either_way() {
        let ops = [
            op(1, Some(10), Recorded::Write(1)),
            op(2, Some(9), Recorded::Write(2)),
            op(3, Some(4), Recorded::Read(2)),
            op(5, Some(6), Recorded::Read(1)),
        ];
        assert_eq!(check_key(1, &ops), Ok(()));
        // Flip-flopping after both writes ended is not.
        let flip = [
            op(1, Some(2), Recorded::Write(1)),
            op(1, Some(2), Recorded::Write(2)),
            op(3, Some(4), Recorded::Read(2)),
            op(5, Some(6), Recorded::Read(1)),
        ];
        assert!(check_key(1, &flip).is_err());
    }

    #[test]
    fn bounds_are_enforced() {
        let long: Vec<Op> = (0..=OPS_PER_KEY_MAX as u64)
            .map(|i| op(2 * i + 1, Some(2 * i + 2), Recorded::Write(i + 1)))
            .collect();
        assert!(matches!(
            check_key(1, &long),
            Err(CheckError::TooLong { .. })
        ));
        let backwards = [op(5, Some(5), Recorded::Write(1))];
        assert_eq!(
            check_key(1, &backwards),
            Err(CheckError::Malformed { key: 1 })
        );
    }
}
