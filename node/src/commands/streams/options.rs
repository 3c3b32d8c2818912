//! The options XADD and XTRIM share (Redis's `streamParseAddOrTrimArgsOrReply`):
//! `MAXLEN|MINID [=|~] threshold [LIMIT count]`, and for XADD `NOMKSTREAM` and the ID.

use super::{int, invalid_id};
use crate::command_framework::args::is;
use crate::command_framework::error::err;
use crate::command_framework::{CmdError, Ctx};
use crate::db::stream::id::{self, ParsedId};
use crate::db::stream::{NodeLimits, Trim, TrimStrategy};

/// Most entries an approximate trim removes when no LIMIT is given (Redis: 100 nodes'
/// worth, at most 10000).
const APPROX_LIMIT_MAX: u64 = 10_000;

#[derive(Debug, Default)]
pub struct AddTrimArgs {
    pub trim: Option<Trim>,
    /// Argument index of the threshold (MAXLEN/MINID value), for the replicated rewrite.
    pub threshold_at: usize,
    pub nomkstream: bool,
    /// XADD: the ID asked for; None for `*`.
    pub id: Option<ParsedId>,
    /// Index of the first argument after the options (XADD: the ID).
    pub end: usize,
}

/// The node limits in force (`stream-node-max-entries`, `stream-node-max-bytes`).
pub fn node_limits(ctx: &Ctx<'_>) -> NodeLimits {
    let c = ctx.server.config.read();
    NodeLimits {
        max_entries: c.encodings.stream_node_max_entries,
        max_bytes: c.encodings.stream_node_max_bytes,
    }
}

/// Parses from argument 2. `xadd` also takes NOMKSTREAM and stops at the ID (`*` or an ID);
/// `from_primary` drops LIMIT as Redis does for its primary and the AOF (their trims were
/// rewritten to exact ones).
pub fn parse(
    args: &[&[u8]],
    xadd: bool,
    limits: NodeLimits,
    from_primary: bool,
) -> Result<AddTrimArgs, CmdError> {
    let mut out = AddTrimArgs::default();
    let mut strategy: Option<TrimStrategy> = None;
    let mut approx = false;
    let mut limit: Option<i64> = None;
    let mut i = 2;
    while i < args.len() {
        let more = args.len() - 1 - i;
        let a = args[i];
        if xadd && a == b"*" {
            break;
        } else if (is(a, "maxlen") || is(a, "minid")) && more > 0 {
            if strategy.is_some() {
                return err(
                    "ERR syntax error, MAXLEN and MINID options at the same time are not compatible",
                );
            }
            approx = false;
            let next = args[i + 1];
            if more >= 2 && next == b"~" {
                approx = true;
                i += 1;
            } else if more >= 2 && next == b"=" {
                i += 1;
            }
            let value = args[i + 1];
            strategy = Some(if is(a, "maxlen") {
                let n = int(value)?;
                if n < 0 {
                    return err("ERR The MAXLEN argument must be >= 0.");
                }
                TrimStrategy::MaxLen(n as u64)
            } else {
                TrimStrategy::MinId(id::parse_strict(value).ok_or_else(invalid_id)?)
            });
            i += 1;
            out.threshold_at = i;
        } else if is(a, "limit") && more > 0 {
            let n = int(args[i + 1])?;
            if n < 0 {
                return err("ERR The LIMIT argument must be >= 0.");
            }
            limit = Some(n);
            i += 1;
        } else if xadd && is(a, "nomkstream") {
            out.nomkstream = true;
        } else if xadd {
            out.id = Some(id::parse(a, 0, true, true).ok_or_else(invalid_id)?);
            break;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    out.end = i;
    if limit.is_some_and(|n| n != 0) && strategy.is_none() {
        return err(
            "ERR syntax error, LIMIT cannot be used without specifying a trimming strategy",
        );
    }
    let Some(strategy) = strategy else {
        if !xadd {
            return err("ERR syntax error, XTRIM must be called with a trimming strategy");
        }
        return Ok(out);
    };
    let limit = if from_primary {
        0
    } else if let Some(n) = limit {
        if !approx {
            return err("ERR syntax error, LIMIT cannot be used without the special ~ option");
        }
        n as u64
    } else if approx {
        match limits.max_entries.saturating_mul(100) {
            0 => APPROX_LIMIT_MAX,
            n => n.min(APPROX_LIMIT_MAX),
        }
    } else {
        0
    };
    out.trim = Some(Trim {
        strategy,
        approx,
        limit,
    });
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::stream::StreamId;

    fn p(args: &[&str], xadd: bool) -> Result<AddTrimArgs, String> {
        let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        parse(&a, xadd, NodeLimits::default(), false).map_err(|e| e.to_string())
    }

    #[test]
    fn trimming_options_parse_as_redis_does() {
        let a = p(&["xadd", "s", "MAXLEN", "~", "10", "*", "f", "v"], true).unwrap();
        assert_eq!(
            a.trim,
            Some(Trim {
                strategy: TrimStrategy::MaxLen(10),
                approx: true,
                limit: 10_000
            })
        );
        assert_eq!((a.threshold_at, a.end, a.id), (4, 5, None));
        let a = p(
            &[
                "xadd",
                "s",
                "NOMKSTREAM",
                "MINID",
                "=",
                "5",
                "7-*",
                "f",
                "v",
            ],
            true,
        )
        .unwrap();
        assert!(a.nomkstream);
        assert_eq!(
            a.trim.unwrap().strategy,
            TrimStrategy::MinId(StreamId::new(5, 0))
        );
        assert_eq!(
            a.id.map(|i| (i.id, i.seq_given)),
            Some((StreamId::new(7, 0), false))
        );
        assert_eq!(a.end, 6);
        let t = p(&["xtrim", "s", "MAXLEN", "~", "0", "LIMIT", "2"], false).unwrap();
        assert_eq!(t.trim.unwrap().limit, 2);
        let e = |args: &[&str], xadd| p(args, xadd).err().unwrap();
        assert!(e(&["xtrim", "s", "MAXLEN", "1", "LIMIT", "30"], false).contains("special ~"));
        assert!(e(&["xtrim", "s", "LIMIT", "30"], false).contains("trimming strategy"));
        assert!(e(&["xtrim", "s", "MAXLEN", "-1"], false).contains("must be >= 0"));
        assert!(e(&["xtrim", "s", "MAXLEN", "1", "MINID", "1"], false).contains("same time"));
        assert!(e(&["xtrim", "s", "foo"], false).contains("syntax error"));
        assert!(e(&["xtrim", "s"], false).contains("XTRIM must be called"));
        assert!(e(&["xadd", "s", "1-x", "f", "v"], true).contains("Invalid stream ID"));
        assert!(e(&["xadd", "s", "MAXLEN", "x", "*", "f", "v"], true).contains("not an integer"));
    }
}
