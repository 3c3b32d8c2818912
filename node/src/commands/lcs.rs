//! LCS key1 key2 [LEN] [IDX] [MINMATCHLEN n] [WITHMATCHLEN]: the longest common subsequence
//! of two strings, by Redis's dynamic-programming table and its backtracking order, so the
//! string and the match ranges it answers are redis-server's.

use crate::command_framework::error::err;
use crate::command_framework::spec::{command, flags::*, KEY1_2};
use crate::command_framework::{args, CmdError, CmdResult, CommandSpec, Ctx};
use crate::commands::bitmaps::storage::read_string;
use std::sync::atomic::Ordering::Relaxed;

pub static COMMANDS: &[CommandSpec] = &[CommandSpec {
    since: "7.0.0",
    ..command(
        "lcs",
        -3,
        READONLY,
        KEY1_2,
        lcs,
        "string",
        "Finds the longest common substring.",
    )
}];

/// One matched range: positions in the first and second string, inclusive.
struct Match {
    a: (u32, u32),
    b: (u32, u32),
}

fn lcs(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let not_strings = || CmdError::new("ERR The specified keys must contain string values");
    let a = read_string(&mut ctx.db, args[1]).map_err(|_| not_strings())?;
    let b = read_string(&mut ctx.db, args[2]).map_err(|_| not_strings())?;
    let (a, b) = (a.unwrap_or_default(), b.unwrap_or_default());
    let (mut get_len, mut get_idx, mut with_len, mut min_len) = (false, false, false, 0i64);
    let mut j = 3;
    while j < args.len() {
        match args[j].to_ascii_lowercase().as_slice() {
            b"idx" => get_idx = true,
            b"len" => get_len = true,
            b"withmatchlen" => with_len = true,
            b"minmatchlen" if j + 1 < args.len() => {
                min_len = args::int(args[j + 1])?.max(0);
                j += 1;
            }
            _ => return Err(CmdError::Syntax),
        }
        j += 1;
    }
    if get_len && get_idx {
        return err("ERR If you want both the length and indexes, please just use IDX.");
    }
    if a.len() >= u32::MAX as usize - 1 || b.len() >= u32::MAX as usize - 1 {
        return err("ERR String too long for LCS");
    }
    let (alen, blen) = (a.len(), b.len());
    let cells = (alen + 1) * (blen + 1);
    // The table is transient but quadratic: bounded like Redis by proto-max-bulk-len.
    let max = ctx.server.hot.proto_max_bulk_len.load(Relaxed) as usize;
    if cells.saturating_mul(4) > max {
        return err("ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len");
    }
    let mut table: Vec<u32> = Vec::new();
    if table.try_reserve_exact(cells).is_err() {
        return err("ERR Insufficient memory, failed allocating transient memory for LCS");
    }
    table.resize(cells, 0);
    let at = |i: usize, j: usize| j + i * (blen + 1);
    for i in 1..=alen {
        for j in 1..=blen {
            table[at(i, j)] = if a[i - 1] == b[j - 1] {
                table[at(i - 1, j - 1)] + 1
            } else {
                table[at(i - 1, j)].max(table[at(i, j - 1)])
            };
        }
    }
    let total = table[at(alen, blen)];
    let compute = get_idx || !get_len;
    let mut result = vec![0u8; total as usize];
    let mut matches = Vec::new();
    let (mut i, mut j, mut idx) = (alen, blen, total as usize);
    // No range open: `a_start == alen` (as Redis marks it).
    let unset = alen as u32;
    let (mut a_start, mut a_end, mut b_start, mut b_end) = (unset, 0u32, 0u32, 0u32);
    while compute && i > 0 && j > 0 {
        let mut emit = false;
        if a[i - 1] == b[j - 1] {
            result[idx - 1] = a[i - 1];
            if a_start == unset {
                (a_start, a_end, b_start, b_end) = (
                    (i - 1) as u32,
                    (i - 1) as u32,
                    (j - 1) as u32,
                    (j - 1) as u32,
                );
            } else if a_start == i as u32 && b_start == j as u32 {
                a_start -= 1;
                b_start -= 1;
            } else {
                emit = true;
            }
            if a_start == 0 || b_start == 0 {
                emit = true;
            }
            idx -= 1;
            i -= 1;
            j -= 1;
        } else {
            if table[at(i - 1, j)] > table[at(i, j - 1)] {
                i -= 1;
            } else {
                j -= 1;
            }
            if a_start != unset {
                emit = true;
            }
        }
        if emit {
            let len = a_end.wrapping_sub(a_start).wrapping_add(1);
            if min_len == 0 || len as i64 >= min_len {
                matches.push(Match {
                    a: (a_start, a_end),
                    b: (b_start, b_end),
                });
            }
            a_start = unset;
        }
    }
    let reply = &mut ctx.reply;
    if get_idx {
        reply.map(2);
        reply.bulk(b"matches");
        reply.array(matches.len());
        for m in &matches {
            reply.array(2 + with_len as usize);
            reply.array(2);
            reply.integer(m.a.0 as i64);
            reply.integer(m.a.1 as i64);
            reply.array(2);
            reply.integer(m.b.0 as i64);
            reply.integer(m.b.1 as i64);
            if with_len {
                reply.integer(m.a.1.wrapping_sub(m.a.0).wrapping_add(1) as i64);
            }
        }
        reply.bulk(b"len");
        reply.integer(total as i64);
    } else if get_len {
        reply.integer(total as i64);
    } else {
        reply.bulk(&result);
    }
    Ok(())
}
