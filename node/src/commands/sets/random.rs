//! SPOP key [count] and SRANDMEMBER key [count].

use super::set_at;
use crate::command_framework::args;
use crate::command_framework::sample::{self, Count};
use crate::command_framework::{CmdError, CmdResult, Ctx};
use crate::replication::propagate::WriteEffect;
use rand::Rng;

pub fn spop(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    if args.len() > 3 {
        return Err(CmdError::Syntax);
    }
    let mut rng = rand::thread_rng();
    let key = args[1];
    let Some(&count_arg) = args.get(2) else {
        let Some(set) = set_at(&mut ctx.db, key)?.filter(|s| !s.is_empty()) else {
            ctx.reply.null();
            return Ok(());
        };
        let i = rng.gen_range(0..set.len());
        let member = set.swap_remove_index(i);
        ctx.db.remove_if_empty(key);
        if let Some(m) = &member {
            ctx.replicate(|| WriteEffect::Popped(vec![m.to_vec()]));
        }
        ctx.modified(key);
        match member {
            Some(m) => ctx.reply.bulk(&m),
            None => ctx.reply.null(),
        }
        return Ok(());
    };
    // Redis reads this count with "must be positive", for non-numbers too.
    let count = args::int(count_arg)
        .ok()
        .and_then(|n| u64::try_from(n).ok())
        .ok_or_else(|| CmdError::new("ERR value is out of range, must be positive"))?;
    let Some(set) = set_at(&mut ctx.db, key)?.filter(|s| !s.is_empty() && count > 0) else {
        ctx.reply.set(0);
        return Ok(());
    };
    if count >= set.len() as u64 {
        // Everything goes: hand the whole set over and delete the key.
        ctx.reply.set(set.len());
        for member in set.iter() {
            ctx.reply.bulk(member);
        }
        let popped: Vec<Vec<u8>> = if ctx.replicating {
            set.iter().map(|m| m.to_vec()).collect()
        } else {
            Vec::new()
        };
        ctx.db.remove(key);
        ctx.replicate(|| WriteEffect::Popped(popped));
        ctx.modified(key);
        return Ok(());
    }
    // count < len: each pop is O(1), and the reply holds fewer members than the set did.
    let count = count as usize;
    ctx.reply.set(count);
    let replicating = ctx.replicating;
    let mut popped = Vec::new();
    for _ in 0..count {
        let i = rng.gen_range(0..set.len());
        match set.swap_remove_index(i) {
            Some(m) => {
                ctx.reply.bulk(&m);
                if replicating {
                    popped.push(m.to_vec());
                }
            }
            None => ctx.reply.null(),
        }
    }
    ctx.replicate(|| WriteEffect::Popped(popped));
    ctx.modified(key);
    Ok(())
}

pub fn srandmember(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let mut rng = rand::thread_rng();
    let Ctx { db, reply, .. } = ctx;
    if args.len() == 2 {
        match set_at(db, args[1])?.filter(|s| !s.is_empty()) {
            Some(set) => {
                let i = rng.gen_range(0..set.len());
                match set.get_index(i) {
                    Some(m) => reply.bulk(m),
                    None => reply.null(),
                }
            }
            None => reply.null(),
        }
        return Ok(());
    }
    if args.len() > 3 {
        return Err(CmdError::Syntax);
    }
    let count = sample::parse_count(args[2])?;
    let Some(set) = set_at(db, args[1])?.filter(|s| !s.is_empty()) else {
        reply.array(0);
        return Ok(());
    };
    let len = set.len();
    let picks: Box<dyn Iterator<Item = usize>> = match count {
        Count::Repeats(n) => {
            let n = sample::repeats(n)?;
            reply.array(n);
            // Streamed: one random index at a time, nothing held per element.
            Box::new((0..n).map(move |_| rng.gen_range(0..len)))
        }
        Count::Distinct(n) if n >= len as u64 => {
            reply.array(len);
            Box::new(0..len)
        }
        Count::Distinct(n) => {
            let picks = sample::distinct_indexes(&mut rng, len, n as usize);
            reply.array(picks.len());
            Box::new(picks.into_iter())
        }
    };
    // A packed set is walked to reach a position: list its members once instead.
    let packed: Option<Vec<&[u8]>> = set.is_packed().then(|| set.iter().collect());
    for i in picks {
        let member = match &packed {
            Some(members) => members.get(i).copied(),
            None => set.get_index(i),
        };
        match member {
            Some(m) => reply.bulk(m),
            None => reply.null(),
        }
    }
    Ok(())
}
