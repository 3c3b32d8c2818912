//! SORT's options, read left to right as Redis reads them: the first bad one is the error.

use crate::command_framework::args::{self, is};
use crate::command_framework::CmdError;
use std::ops::Range;

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Order {
    Asc,
    Desc,
}

pub struct SortOptions<'a> {
    pub order: Order,
    pub alpha: bool,
    /// `LIMIT offset count` (Redis's defaults: everything).
    pub limit_start: i64,
    pub limit_count: i64,
    pub store: Option<&'a [u8]>,
    /// The last `BY` pattern given.
    pub by: Option<&'a [u8]>,
    /// A `BY` pattern without `*` was given: the elements keep their own order.
    pub dont_sort: bool,
    pub gets: Vec<&'a [u8]>,
}

impl<'a> SortOptions<'a> {
    /// `options` are the arguments after the key; `read_only` (SORT_RO) refuses STORE;
    /// `cluster` refuses patterns that name keys (they may be on other nodes).
    /// `full_key_access`: the client's user may touch every key (ACL `allkeys`); BY and GET
    /// patterns name keys no key check sees, so without it they are refused, as in Redis.
    pub fn parse(
        options: &[&'a [u8]],
        read_only: bool,
        cluster: bool,
        full_key_access: bool,
    ) -> Result<Self, CmdError> {
        let mut opts = SortOptions {
            order: Order::Asc,
            alpha: false,
            limit_start: 0,
            limit_count: -1,
            store: None,
            by: None,
            dont_sort: false,
            gets: Vec::new(),
        };
        let mut i = 0;
        while i < options.len() {
            let arg = options[i];
            let left = options.len() - i - 1;
            if is(arg, "asc") {
                opts.order = Order::Asc;
            } else if is(arg, "desc") {
                opts.order = Order::Desc;
            } else if is(arg, "alpha") {
                opts.alpha = true;
            } else if is(arg, "limit") && left >= 2 {
                opts.limit_start = args::int(options[i + 1])?;
                opts.limit_count = args::int(options[i + 2])?;
                i += 2;
            } else if is(arg, "store") && left >= 1 && !read_only {
                opts.store = Some(options[i + 1]);
                i += 1;
            } else if is(arg, "by") && left >= 1 {
                let pattern = options[i + 1];
                if !pattern.contains(&b'*') {
                    opts.dont_sort = true;
                } else if cluster {
                    return Err(CmdError::new(
                        "ERR BY option of SORT denied in Cluster mode.",
                    ));
                } else if !full_key_access {
                    return Err(CmdError::new(
                        "ERR BY option of SORT denied due to insufficient ACL permissions.",
                    ));
                }
                opts.by = Some(pattern);
                i += 1;
            } else if is(arg, "get") && left >= 1 {
                if cluster {
                    return Err(CmdError::new(
                        "ERR GET option of SORT denied in Cluster mode.",
                    ));
                }
                if !full_key_access {
                    return Err(CmdError::new(
                        "ERR GET option of SORT denied due to insufficient ACL permissions.",
                    ));
                }
                opts.gets.push(options[i + 1]);
                i += 1;
            } else {
                return Err(CmdError::Syntax);
            }
            i += 1;
        }
        Ok(opts)
    }

    /// The part of `len` sorted elements that LIMIT picks, clamped as Redis clamps it (an
    /// offset past the end picks nothing, a negative count means to the end).
    pub fn range(&self, len: usize) -> Range<usize> {
        let len = len as i64;
        let mut start = self.limit_start.max(0);
        let mut end = if self.limit_count < 0 {
            len - 1
        } else {
            start.saturating_add(self.limit_count) - 1
        };
        if start >= len {
            start = len - 1;
            end = len - 2;
        }
        end = end.min(len - 1);
        if end < start {
            return 0..0;
        }
        start as usize..(end + 1) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(start: i64, count: i64, len: usize) -> Range<usize> {
        let mut opts = SortOptions::parse(&[], false, false, true).unwrap();
        (opts.limit_start, opts.limit_count) = (start, count);
        opts.range(len)
    }

    #[test]
    fn limit_clamps_as_redis() {
        assert_eq!(range(0, -1, 5), 0..5);
        assert_eq!(range(1, 2, 5), 1..3);
        assert_eq!(range(-3, 2, 5), 0..2);
        assert_eq!(range(4, 10, 5), 4..5);
        assert_eq!(range(5, 1, 5), 0..0);
        assert_eq!(range(0, 0, 5), 0..0);
        assert_eq!(range(0, -1, 0), 0..0);
        assert_eq!(range(i64::MAX, i64::MAX, 3), 0..0);
        assert_eq!(range(1, i64::MAX, 3), 1..3);
    }

    #[test]
    fn patterns_are_refused_in_cluster_mode_but_nosort() {
        let parse =
            |a: &[&[u8]], cluster| SortOptions::parse(a, false, cluster, true).map(|o| o.dont_sort);
        assert!(parse(&[b"BY", b"w_*"], true).is_err());
        assert!(parse(&[b"GET", b"#"], true).is_err());
        assert_eq!(parse(&[b"BY", b"nosort"], true).ok(), Some(true));
        assert_eq!(parse(&[b"BY", b"w_*"], false).ok(), Some(false));
        assert!(SortOptions::parse(&[b"STORE", b"d"], true, false, true).is_err());
        // A user without every key may not name keys through patterns.
        let by: &[&[u8]] = &[b"BY", b"w_*"];
        assert!(SortOptions::parse(by, false, false, false).is_err());
        let by_no_pattern: &[&[u8]] = &[b"BY", b"nosort"];
        assert!(SortOptions::parse(by_no_pattern, false, false, false).is_ok());
        let get: &[&[u8]] = &[b"GET", b"#"];
        assert!(SortOptions::parse(get, false, false, false).is_err());
        assert!(parse(&[b"LIMIT", b"1"], false).is_err());
    }
}
