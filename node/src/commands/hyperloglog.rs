//! HyperLogLog: PFADD PFCOUNT PFMERGE PFDEBUG PFSELFTEST. An HLL is a string in Redis's exact
//! layout (`sketch`), so it can be moved between this node and redis-server as a string or
//! with DUMP/RESTORE, and GET/SET see its bytes.

mod estimate;
mod murmur;
pub mod sketch;

use crate::command_framework::error::err;
use crate::command_framework::spec::{command, flags::*, KeySpec, ALL_ARGS_KEYS, KEY1};
use crate::command_framework::{CmdError, CmdResult, CommandSpec, Ctx};
use crate::db::{Locked, Value};
use sketch::{HllError, REGISTERS};

const HLL: &str = "hyperloglog";

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec { since: "2.8.9", ..command("pfadd", -2, WRITE | DENYOOM | FAST, KEY1, pfadd, HLL, "Adds elements to a HyperLogLog key. Creates the key if it doesn't exist.") },
    CommandSpec { since: "2.8.9", ..command("pfcount", -2, READONLY | MAY_REPLICATE, ALL_ARGS_KEYS, pfcount, HLL, "Returns the approximated cardinality of the set(s) observed by the HyperLogLog key(s).") },
    CommandSpec { since: "2.8.9", ..command("pfmerge", -2, WRITE | DENYOOM, ALL_ARGS_KEYS, pfmerge, HLL, "Merges one or more HyperLogLog values into a single key.") },
    CommandSpec { since: "2.8.9", ..command("pfdebug", 3, WRITE | DENYOOM | ADMIN, KeySpec::Range { first: 2, last: 2, step: 1 }, pfdebug, HLL, "Internal commands for debugging HyperLogLog values.") },
    CommandSpec { since: "2.8.9", ..command("pfselftest", 1, ADMIN, KeySpec::None, pfselftest, HLL, "An internal command for testing HyperLogLog values.") },
];

/// `hll-sparse-max-bytes`: the size past which a sparse HLL becomes dense.
fn sparse_max_bytes(ctx: &Ctx<'_>) -> usize {
    ctx.server.config.read().hll_sparse_max_bytes as usize
}

/// Takes the HLL string of `key` out of the keyspace for in-place work (`None`: no key).
/// Other types answer WRONGTYPE, strings that are not HLLs Redis's HLL WRONGTYPE.
fn take_hll(db: &mut Locked<'_>, key: &[u8]) -> Result<Option<Vec<u8>>, CmdError> {
    let Some(entry) = db.get(key) else {
        return Ok(None);
    };
    match &mut entry.value {
        Value::Str(s) => {
            sketch::validate(s)?;
            Ok(Some(std::mem::take(s).into_vec()))
        }
        Value::Int(_) => Err(HllError::NotHll.into()),
        _ => Err(CmdError::WrongType),
    }
}

/// Puts back a string taken with `take_hll` (the key's TTL untouched).
fn put_back(db: &mut Locked<'_>, key: &[u8], hll: Vec<u8>) {
    if let Some(entry) = db.get(key) {
        entry.value = Value::Str(hll.into_boxed_slice());
    }
}

/// Reads the HLL string of `key` without taking it: `f` gets its bytes.
fn with_hll<R>(
    db: &mut Locked<'_>,
    key: &[u8],
    f: impl FnOnce(&[u8]) -> Result<R, CmdError>,
) -> Result<Option<R>, CmdError> {
    match db.get(key).map(|e| &e.value) {
        None => Ok(None),
        Some(Value::Str(s)) => {
            sketch::validate(s)?;
            f(s).map(Some)
        }
        Some(Value::Int(_)) => Err(HllError::NotHll.into()),
        Some(_) => Err(CmdError::WrongType),
    }
}

fn pfadd(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let key = args[1];
    let max_bytes = sparse_max_bytes(ctx);
    let (mut hll, mut updated) = match take_hll(&mut ctx.db, key)? {
        Some(h) => (h, 0u64),
        None => {
            ctx.db.set(key, Value::Str(Box::default()));
            (sketch::new_sparse(), 1)
        }
    };
    let mut outcome = Ok(());
    for element in &args[2..] {
        match sketch::add(&mut hll, element, max_bytes) {
            Ok(true) => updated += 1,
            Ok(false) => {}
            Err(e) => {
                outcome = Err(e);
                break;
            }
        }
    }
    if updated > 0 && outcome.is_ok() {
        sketch::invalidate_cache(&mut hll);
    }
    put_back(&mut ctx.db, key, hll);
    // As Redis: registers raised before a corruption was found stay raised, unannounced.
    outcome?;
    for _ in 0..updated {
        ctx.modified(key);
    }
    ctx.reply.integer((updated > 0) as i64);
    Ok(())
}

fn pfcount(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    if args.len() > 2 {
        // The cardinality of the union: registers merged into a scratch array.
        let mut max = Box::new([0u8; REGISTERS]);
        for key in &args[1..] {
            with_hll(&mut ctx.db, key, |h| Ok(sketch::merge_into(&mut max, h)?))?;
        }
        ctx.reply.integer(sketch::count_raw(&max) as i64);
        return Ok(());
    }
    let key = args[1];
    let Some(mut hll) = take_hll(&mut ctx.db, key)? else {
        ctx.reply.integer(0);
        return Ok(());
    };
    let counted = match sketch::cached(&hll) {
        Some(card) => Ok((card, false)),
        None => sketch::count(&hll).map(|card| {
            sketch::set_cached(&mut hll, card);
            (card, true)
        }),
    };
    put_back(&mut ctx.db, key, hll);
    let (card, refreshed) = counted?;
    if refreshed {
        // The cache is part of the string's bytes: the value changed (Redis signals it too).
        ctx.modified(key);
    }
    ctx.reply.integer(card as i64);
    Ok(())
}

fn pfmerge(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let mut max = Box::new([0u8; REGISTERS]);
    let mut any_dense = false;
    // The destination is one of the sources, as in Redis.
    for key in &args[1..] {
        with_hll(&mut ctx.db, key, |h| {
            any_dense |= sketch::is_dense(h);
            Ok(sketch::merge_into(&mut max, h)?)
        })?;
    }
    let dest = args[1];
    let max_bytes = sparse_max_bytes(ctx);
    let mut hll = match take_hll(&mut ctx.db, dest)? {
        Some(h) => h,
        None => {
            ctx.db.set(dest, Value::Str(Box::default()));
            sketch::new_sparse()
        }
    };
    let mut outcome = Ok(());
    if any_dense {
        outcome = sketch::sparse_to_dense(&mut hll);
    }
    if outcome.is_ok() {
        for (i, &m) in max.iter().enumerate() {
            if m > 0 {
                // Errors cannot occur here: every input, the destination included, was read
                // whole above. Redis ignores them alike.
                let _ = sketch::raise(&mut hll, i, m, max_bytes);
            }
        }
        sketch::invalidate_cache(&mut hll);
    }
    put_back(&mut ctx.db, dest, hll);
    outcome?;
    ctx.modified(dest);
    ctx.reply.ok();
    Ok(())
}

fn pfdebug(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let sub = args[1].to_ascii_lowercase();
    let key = args[2];
    let Some(mut hll) = take_hll(&mut ctx.db, key)? else {
        // Only a missing key reaches here without its string taken.
        return err("ERR The specified key does not exist");
    };
    let was_sparse = !sketch::is_dense(&hll);
    let outcome: Result<(), CmdError> = match sub.as_slice() {
        b"getreg" | b"todense" => sketch::sparse_to_dense(&mut hll).map_err(Into::into),
        b"decode" if was_sparse => Ok(()),
        b"decode" => Err(CmdError::new("ERR HLL encoding is not sparse")),
        b"encoding" => Ok(()),
        _ => Err(CmdError::new(format!(
            "ERR Unknown PFDEBUG subcommand '{}'",
            String::from_utf8_lossy(args[1])
        ))),
    };
    let converted = was_sparse && !hll.is_empty() && sketch::is_dense(&hll);
    let bytes = hll.clone();
    put_back(&mut ctx.db, key, hll);
    outcome?;
    if converted {
        // The encoding changed: propagated like a write, as Redis forces it.
        ctx.modified(key);
    }
    match sub.as_slice() {
        b"getreg" => {
            let registers = &bytes[sketch::HEADER_LEN..];
            ctx.reply.array(REGISTERS);
            for i in 0..REGISTERS {
                ctx.reply.integer(sketch::dense_get(registers, i) as i64);
            }
        }
        b"decode" => ctx.reply.bulk(sketch::decode_sparse(&bytes).as_bytes()),
        b"encoding" => ctx
            .reply
            .simple(if was_sparse { b"sparse" } else { b"dense" }),
        _ => ctx.reply.integer(converted as i64),
    }
    Ok(())
}

/// Checks the register packing and that the sparse and dense encodings agree, on sketches
/// built here (no keys are touched).
fn pfselftest(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    let mut registers = vec![0u8; sketch::DENSE_LEN - sketch::HEADER_LEN];
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let values: Vec<u8> = (0..REGISTERS).map(|_| (next() % 64) as u8).collect();
    for (i, v) in values.iter().enumerate() {
        sketch::dense_put(&mut registers, i, *v);
    }
    if let Some(i) = (0..REGISTERS).find(|&i| sketch::dense_get(&registers, i) != values[i]) {
        return err(format!("TESTFAILED Register error at index {i}"));
    }
    let mut sparse = sketch::new_sparse();
    let mut dense = sketch::new_sparse();
    sketch::sparse_to_dense(&mut dense)?;
    for _ in 0..1000 {
        let element = next().to_le_bytes();
        sketch::add(&mut sparse, &element, usize::MAX)?;
        sketch::add(&mut dense, &element, usize::MAX)?;
    }
    if sketch::is_dense(&sparse) {
        return err("TESTFAILED sparse encoding not used");
    }
    if sketch::count(&sparse)? != sketch::count(&dense)? {
        return err("TESTFAILED dense/sparse disagree");
    }
    ctx.reply.ok();
    Ok(())
}
