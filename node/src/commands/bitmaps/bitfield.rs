//! BITFIELD key [GET type offset] [SET type offset value] [INCRBY type offset increment]
//! [OVERFLOW WRAP|SAT|FAIL] ..., and BITFIELD_RO (GET only).
//!
//! Fields are big-endian runs of bits (`i1`..`i64`, `u1`..`u63`) at any bit offset. All
//! operations are parsed (and every argument error answered) before any is applied.

use super::storage::{bit_at, bit_offset, set_bit, with_string, writable_string};
use crate::command_framework::error::err;
use crate::command_framework::{args, CmdError, CmdResult, Ctx};

const BAD_TYPE: &str =
    "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";

/// What SET and INCRBY do with a result that does not fit the field.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Overflow {
    Wrap,
    Sat,
    Fail,
}

#[derive(Clone, Copy)]
struct Field {
    signed: bool,
    bits: u32,
    offset: u64,
}

#[derive(Clone, Copy)]
enum Op {
    Get(Field),
    Set(Field, i64, Overflow),
    IncrBy(Field, i64, Overflow),
}

fn field_type(arg: &[u8]) -> Result<(bool, u32), CmdError> {
    let bad = || CmdError::new(BAD_TYPE);
    let signed = match arg.first() {
        Some(b'i') => true,
        Some(b'u') => false,
        _ => return Err(bad()),
    };
    let bits = proto::resp::request::parse_i64(&arg[1..]).ok_or_else(bad)?;
    if bits < 1 || (signed && bits > 64) || (!signed && bits > 63) {
        return Err(bad());
    }
    Ok((signed, bits as u32))
}

fn parse(ctx: &Ctx<'_>, args: &[&[u8]]) -> Result<Vec<Op>, CmdError> {
    let mut ops = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut j = 2;
    while j < args.len() {
        let remaining = args.len() - j - 1;
        let name = args[j].to_ascii_lowercase();
        let takes_value = match name.as_slice() {
            b"get" if remaining >= 2 => false,
            b"set" | b"incrby" if remaining >= 3 => true,
            b"overflow" if remaining >= 1 => {
                overflow = match args[j + 1].to_ascii_lowercase().as_slice() {
                    b"wrap" => Overflow::Wrap,
                    b"sat" => Overflow::Sat,
                    b"fail" => Overflow::Fail,
                    _ => return err("ERR Invalid OVERFLOW type specified"),
                };
                j += 2;
                continue;
            }
            _ => return Err(CmdError::Syntax),
        };
        let (signed, bits) = field_type(args[j + 1])?;
        let offset = bit_offset(ctx, args[j + 2], Some(bits))?;
        let field = Field {
            signed,
            bits,
            offset,
        };
        if takes_value {
            let value = args::int(args[j + 3])?;
            ops.push(if name.as_slice() == b"set" {
                Op::Set(field, value, overflow)
            } else {
                Op::IncrBy(field, value, overflow)
            });
            j += 4;
        } else {
            ops.push(Op::Get(field));
            j += 3;
        }
    }
    Ok(ops)
}

/// The field's bits as an unsigned number (bits past the end of `bytes` read as 0).
fn read_raw(bytes: &[u8], f: Field) -> u64 {
    (0..f.bits as u64).fold(0u64, |v, i| (v << 1) | bit_at(bytes, f.offset + i) as u64)
}

/// The field's value: sign-extended for signed types.
fn read(bytes: &[u8], f: Field) -> i64 {
    let raw = read_raw(bytes, f);
    if f.signed && f.bits < 64 && raw >> (f.bits - 1) & 1 == 1 {
        (raw | (u64::MAX << f.bits)) as i64
    } else {
        raw as i64
    }
}

fn write(bytes: &mut [u8], f: Field, value: u64) {
    for i in 0..f.bits as u64 {
        let bit = (value >> (f.bits as u64 - 1 - i)) & 1 == 1;
        set_bit(bytes, f.offset + i, bit);
    }
}

/// `value + incr` in a field of the given type: `Ok` when it fits, otherwise `Err` with the
/// value the overflow policy stores (`None` under FAIL).
fn add(f: Field, value: i64, incr: i64, overflow: Overflow) -> Result<i64, Option<i64>> {
    // Unsigned fields hold up to 63 bits, so their values fit an i64 too; an unsigned SET
    // value is taken as the 64-bit pattern of the argument, as Redis does.
    let base: i128 = if f.signed {
        value as i128
    } else {
        value as u64 as i128
    };
    let exact = base + incr as i128;
    let (min, max): (i128, i128) = if f.signed {
        (-(1i128 << (f.bits - 1)), (1i128 << (f.bits - 1)) - 1)
    } else {
        (0, (1i128 << f.bits) - 1)
    };
    if (min..=max).contains(&exact) {
        return Ok(exact as i64);
    }
    Err(match overflow {
        Overflow::Fail => None,
        Overflow::Sat => Some(if exact > max { max } else { min } as i64),
        Overflow::Wrap => {
            let low = (exact as u64) & (u64::MAX >> (64 - f.bits));
            Some(if f.signed && f.bits < 64 && low >> (f.bits - 1) & 1 == 1 {
                (low | (u64::MAX << f.bits)) as i64
            } else {
                low as i64
            })
        }
    })
}

fn answer(ctx: &mut Ctx<'_>, result: Option<i64>) {
    match result {
        Some(v) => ctx.reply.integer(v),
        None => ctx.reply.null(),
    }
}

pub fn bitfield(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    run(ctx, args, false)
}

pub fn bitfield_ro(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    run(ctx, args, true)
}

fn run(ctx: &mut Ctx<'_>, args: &[&[u8]], read_only: bool) -> CmdResult {
    let ops = parse(ctx, args)?;
    let highest = ops
        .iter()
        .filter_map(|op| match op {
            Op::Get(_) => None,
            Op::Set(f, ..) | Op::IncrBy(f, ..) => Some(f.offset + f.bits as u64 - 1),
        })
        .max();
    let Some(highest) = highest else {
        // Only GETs: nothing is created.
        let values = with_string(&mut ctx.db, args[1], |bytes| {
            let bytes = bytes.unwrap_or_default();
            ops.iter()
                .map(|op| match op {
                    Op::Get(f) => read(bytes, *f),
                    _ => 0,
                })
                .collect::<Vec<_>>()
        })?;
        ctx.reply.array(values.len());
        values.into_iter().for_each(|v| ctx.reply.integer(v));
        return Ok(());
    };
    if read_only {
        return err("ERR BITFIELD_RO only supports the GET subcommand");
    }
    let (bytes, grown) = writable_string(&mut ctx.db, args[1], (highest >> 3) as usize + 1)?;
    let mut results = Vec::with_capacity(ops.len());
    let mut changes = 0u64;
    for op in &ops {
        let (field, stored, answer) = match *op {
            Op::Get(f) => {
                results.push(Some(read(bytes, f)));
                continue;
            }
            Op::Set(f, v, ow) => {
                let old = read(bytes, f);
                match add(f, v, 0, ow) {
                    Ok(new) | Err(Some(new)) => (f, Some(new), Some(old)),
                    Err(None) => (f, None, None),
                }
            }
            Op::IncrBy(f, incr, ow) => {
                let old = read(bytes, f);
                match add(f, old, incr, ow) {
                    Ok(new) | Err(Some(new)) => (f, Some(new), Some(new)),
                    Err(None) => (f, None, None),
                }
            }
        };
        if let Some(new) = stored {
            let before = read_raw(bytes, field);
            write(bytes, field, new as u64);
            if grown || before != read_raw(bytes, field) {
                changes += 1;
            }
        }
        results.push(answer);
    }
    for _ in 0..changes {
        ctx.modified(args[1]);
    }
    ctx.reply.array(results.len());
    for r in results {
        answer(ctx, r);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(signed: bool, bits: u32) -> Field {
        Field {
            signed,
            bits,
            offset: 0,
        }
    }

    #[test]
    fn overflow_policies_match_redis() {
        let u8f = field(false, 8);
        assert_eq!(add(u8f, 250, 10, Overflow::Wrap), Err(Some(4)));
        assert_eq!(add(u8f, 250, 10, Overflow::Sat), Err(Some(255)));
        assert_eq!(add(u8f, 250, 10, Overflow::Fail), Err(None));
        assert_eq!(add(u8f, 5, -10, Overflow::Sat), Err(Some(0)));
        assert_eq!(add(u8f, -1, 0, Overflow::Wrap), Err(Some(255)));
        let i8f = field(true, 8);
        assert_eq!(add(i8f, 127, 1, Overflow::Wrap), Err(Some(-128)));
        assert_eq!(add(i8f, -128, -1, Overflow::Sat), Err(Some(-128)));
        assert_eq!(add(i8f, 100, 20, Overflow::Wrap), Ok(120));
        let i64f = field(true, 64);
        assert_eq!(add(i64f, i64::MAX, 1, Overflow::Wrap), Err(Some(i64::MIN)));
        assert_eq!(add(i64f, i64::MAX, 1, Overflow::Sat), Err(Some(i64::MAX)));
        let u63 = field(false, 63);
        assert_eq!(add(u63, i64::MAX, 1, Overflow::Wrap), Err(Some(0)));
    }

    #[test]
    fn fields_read_and_write_big_endian() {
        let mut b = [0u8; 3];
        let f = Field {
            signed: true,
            bits: 5,
            offset: 6,
        };
        write(&mut b, f, (-3i64) as u64);
        assert_eq!(read(&b, f), -3);
        assert_eq!(b, [0b0000_0011, 0b1010_0000, 0]);
    }
}
