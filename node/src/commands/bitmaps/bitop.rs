//! BITOP AND|OR|XOR|NOT destkey srckey...

use super::storage::with_string;
use crate::command_framework::error::err;
use crate::command_framework::{CmdError, CmdResult, Ctx};
use crate::db::Value;

#[derive(Clone, Copy)]
enum Op {
    And,
    Or,
    Xor,
    Not,
}

pub fn bitop(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let op = match args[1].to_ascii_lowercase().as_slice() {
        b"and" => Op::And,
        b"or" => Op::Or,
        b"xor" => Op::Xor,
        b"not" => Op::Not,
        _ => return Err(CmdError::Syntax),
    };
    if matches!(op, Op::Not) && args.len() != 4 {
        return err("ERR BITOP NOT must be called with a single source key.");
    }
    let sources = &args[3..];
    // Missing keys are empty strings; the result is as long as the longest source, every
    // source zero-padded to it.
    let mut inputs: Vec<Vec<u8>> = Vec::with_capacity(sources.len());
    for key in sources {
        inputs.push(with_string(&mut ctx.db, key, |s| {
            s.unwrap_or_default().to_vec()
        })?);
    }
    let len = inputs.iter().map(Vec::len).max().unwrap_or(0);
    let dest = args[2];
    if len == 0 {
        if ctx.db.remove(dest).is_some() {
            ctx.modified(dest);
        }
        ctx.reply.integer(0);
        return Ok(());
    }
    let mut out = inputs[0].clone();
    out.resize(len, 0);
    match op {
        Op::Not => out.iter_mut().for_each(|b| *b = !*b),
        Op::And => {
            for src in &inputs[1..] {
                for (i, b) in out.iter_mut().enumerate() {
                    *b &= src.get(i).copied().unwrap_or(0);
                }
            }
        }
        Op::Or | Op::Xor => {
            for src in &inputs[1..] {
                for (b, s) in out.iter_mut().zip(src) {
                    if matches!(op, Op::Or) {
                        *b |= s;
                    } else {
                        *b ^= s;
                    }
                }
            }
        }
    }
    // Stored as SET would: any TTL of the destination goes.
    ctx.db.set(dest, Value::Str(out.into_boxed_slice()));
    ctx.modified(dest);
    ctx.reply.integer(len as i64);
    Ok(())
}
