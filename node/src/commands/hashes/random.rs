//! HRANDFIELD key [count [WITHVALUES]].

use super::hash_at;
use crate::command_framework::args::is;
use crate::command_framework::error::err;
use crate::command_framework::sample::{self, Count};
use crate::command_framework::{CmdError, CmdResult, Ctx};
use proto::resp::Reply;
use rand::Rng;

pub fn hrandfield(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let mut rng = rand::thread_rng();
    if args.len() == 2 {
        let Ctx { db, reply, .. } = ctx;
        match hash_at(db, args[1])? {
            Some(h) if !h.is_empty() => {
                let i = rng.gen_range(0..h.len());
                let (field, _) = h.get_index(i).expect("index below len");
                reply.bulk(field);
            }
            _ => reply.null(),
        }
        return Ok(());
    }
    // Count and options first, then the key, in Redis's order.
    let count = sample::parse_count(args[2])?;
    let with_values = match args.get(3) {
        None => false,
        Some(a) if args.len() == 4 && is(a, "withvalues") => true,
        Some(_) => return Err(CmdError::Syntax),
    };
    // Field and value make two elements: Redis refuses counts whose double overflows.
    let magnitude = match count {
        Count::Distinct(n) | Count::Repeats(n) => n,
    };
    if with_values && magnitude > (i64::MAX / 2) as u64 {
        return err("ERR value is out of range");
    }
    let Ctx { db, reply, .. } = ctx;
    let hash = match hash_at(db, args[1])? {
        Some(h) if !h.is_empty() => h,
        _ => {
            reply.array(0);
            return Ok(());
        }
    };
    let len = hash.len();
    // A packed hash is walked to reach a position: list its pairs once instead.
    let packed: Option<Vec<(&[u8], &[u8])>> = hash.is_packed().then(|| hash.iter().collect());
    let pair = |i: usize| match &packed {
        Some(pairs) => pairs.get(i).copied(),
        None => hash.get_index(i),
    };
    match count {
        Count::Repeats(n) => {
            let n = sample::repeats(n)?;
            open_reply(reply, n, with_values);
            for _ in 0..n {
                write_entry(reply, pair(rng.gen_range(0..len)), with_values);
            }
        }
        Count::Distinct(n) if n >= len as u64 => {
            open_reply(reply, len, with_values);
            for i in 0..len {
                write_entry(reply, pair(i), with_values);
            }
        }
        Count::Distinct(n) => {
            let picks = sample::distinct_indexes(&mut rng, len, n as usize);
            open_reply(reply, picks.len(), with_values);
            for i in picks {
                write_entry(reply, pair(i), with_values);
            }
        }
    }
    Ok(())
}

/// The array header for `n` fields: RESP3 nests each field/value pair in an array of two,
/// RESP2 flattens them.
fn open_reply(reply: &mut Reply<'_>, n: usize, with_values: bool) {
    if with_values && !reply.is_resp3() {
        reply.array(n * 2);
    } else {
        reply.array(n);
    }
}

fn write_entry(reply: &mut Reply<'_>, pair: Option<(&[u8], &[u8])>, with_values: bool) {
    // Indexes come from below the length; should one not, a null keeps the reply framed.
    let (field, value) = match pair {
        Some((f, v)) => (Some(f), Some(v)),
        None => (None, None),
    };
    let bulk = |reply: &mut Reply<'_>, b: Option<&[u8]>| match b {
        Some(b) => reply.bulk(b),
        None => reply.null(),
    };
    if with_values {
        if reply.is_resp3() {
            reply.array(2);
        }
        bulk(reply, field);
        bulk(reply, value);
    } else {
        bulk(reply, field);
    }
}
