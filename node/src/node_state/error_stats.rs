//! INFO errorstats: error replies counted by their code (the first word: `ERR`,
//! `WRONGTYPE`, `MOVED`...), as Redis 7 keeps them. Error replies are off the hot path, so
//! one mutex is enough.

use parking_lot::Mutex;
use std::collections::BTreeMap;

/// Distinct codes kept, as Redis's `ERRORSTATS_LIMIT`: past it new codes are not tracked
/// (a client cannot grow the table with made-up codes).
pub const ERROR_CODES_MAX: usize = 128;

#[derive(Default)]
pub struct ErrorStats {
    codes: Mutex<BTreeMap<String, u64>>,
}

impl ErrorStats {
    /// Counts one error reply whose text is `text` (without the leading '-').
    pub fn note(&self, text: &str) {
        let code = text.split(' ').next().unwrap_or(text);
        let mut codes = self.codes.lock();
        if let Some(n) = codes.get_mut(code) {
            *n += 1;
        } else if codes.len() < ERROR_CODES_MAX {
            codes.insert(code.to_string(), 1);
        }
    }

    /// `(code, count)` in code order.
    pub fn counts(&self) -> Vec<(String, u64)> {
        self.codes
            .lock()
            .iter()
            .map(|(c, n)| (c.clone(), *n))
            .collect()
    }

    pub fn reset(&self) {
        self.codes.lock().clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_counted_by_code_and_codes_are_bounded() {
        let s = ErrorStats::default();
        s.note("ERR unknown command 'x'");
        s.note("WRONGTYPE Operation against a key holding the wrong kind of value");
        s.note("ERR syntax error");
        s.note("NOAUTH");
        assert_eq!(
            s.counts(),
            [
                ("ERR".to_string(), 2),
                ("NOAUTH".to_string(), 1),
                ("WRONGTYPE".to_string(), 1)
            ]
        );
        for i in 0..2 * ERROR_CODES_MAX {
            s.note(&format!("CODE{i} x"));
        }
        assert_eq!(s.counts().len(), ERROR_CODES_MAX);
        s.note("ERR again");
        assert!(s.counts().contains(&("ERR".to_string(), 3)));
        s.reset();
        assert!(s.counts().is_empty());
    }
}
