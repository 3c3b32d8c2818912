//! Bitmaps: SETBIT GETBIT BITCOUNT BITPOS BITOP BITFIELD BITFIELD_RO. A bitmap is a string
//! read as bits, most significant bit of the first byte first, so these commands work on
//! whatever GET/SET/APPEND/SETRANGE stored and the other way round.

mod bitfield;
mod bitop;
pub mod storage;

use crate::command_framework::args;
use crate::command_framework::error::err;
use crate::command_framework::spec::{command, flags::*, KeySpec, KEY1};
use crate::command_framework::{CmdError, CmdResult, CommandSpec, Ctx};
use storage::{bit_at, bit_offset, clamp_range, range_unit, set_bit, with_string, RangeUnit};

const BITMAP: &str = "bitmap";

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec { since: "2.2.0", ..command("setbit", 4, WRITE | DENYOOM, KEY1, setbit, BITMAP, "Sets or clears the bit at offset of the string value. Creates the key if it doesn't exist.") },
    CommandSpec { since: "2.2.0", ..command("getbit", 3, READONLY | FAST, KEY1, getbit, BITMAP, "Returns a bit value by offset.") },
    CommandSpec { since: "2.6.0", ..command("bitcount", -2, READONLY, KEY1, bitcount, BITMAP, "Counts the number of set bits (population counting) in a string.") },
    CommandSpec { since: "2.8.7", ..command("bitpos", -3, READONLY, KEY1, bitpos, BITMAP, "Finds the first set (1) or clear (0) bit in a string.") },
    CommandSpec { since: "2.6.0", ..command("bitop", -4, WRITE | DENYOOM, KeySpec::Range { first: 2, last: -1, step: 1 }, bitop::bitop, BITMAP, "Performs bitwise operations on multiple strings, and stores the result.") },
    CommandSpec { since: "3.2.0", ..command("bitfield", -2, WRITE | DENYOOM, KEY1, bitfield::bitfield, BITMAP, "Performs arbitrary bitfield integer operations on strings.") },
    CommandSpec { since: "6.0.0", ..command("bitfield_ro", -2, READONLY | FAST, KEY1, bitfield::bitfield_ro, BITMAP, "Performs arbitrary read-only bitfield integer operations on strings.") },
];

fn setbit(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let offset = bit_offset(ctx, args[2], None)?;
    let bad_bit = || CmdError::new("ERR bit is not an integer or out of range");
    let on = match proto::resp::request::parse_i64(args[3]) {
        Some(0) => false,
        Some(1) => true,
        _ => return Err(bad_bit()),
    };
    let (bytes, grown) =
        storage::writable_string(&mut ctx.db, args[1], (offset >> 3) as usize + 1)?;
    let old = bit_at(bytes, offset);
    if grown || (old == 1) != on {
        set_bit(bytes, offset, on);
        ctx.modified(args[1]);
    }
    ctx.reply.integer(old as i64);
    Ok(())
}

fn getbit(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let offset = bit_offset(ctx, args[2], None)?;
    let bit = with_string(&mut ctx.db, args[1], |s| {
        bit_at(s.unwrap_or_default(), offset)
    })?;
    ctx.reply.integer(bit as i64);
    Ok(())
}

/// A `start end [BYTE|BIT]` range as the bits it covers, `None` when it is empty.
fn bit_range(len: usize, start: i64, end: i64, unit: RangeUnit) -> Option<(u64, u64)> {
    match unit {
        RangeUnit::Byte => {
            clamp_range(start, end, len as i64).map(|(s, e)| (s as u64 * 8, e as u64 * 8 + 7))
        }
        RangeUnit::Bit => {
            clamp_range(start, end, len as i64 * 8).map(|(s, e)| (s as u64, e as u64))
        }
    }
}

/// Set bits in `from..=to` (bit offsets inside `bytes`).
fn count_ones(bytes: &[u8], from: u64, to: u64) -> u64 {
    let (first, last) = ((from >> 3) as usize, (to >> 3) as usize);
    let whole: u64 = bytes[first..=last]
        .iter()
        .map(|b| b.count_ones() as u64)
        .sum();
    // Bits of the edge bytes outside the range.
    let head = bytes[first]
        .checked_shr(8 - (from & 7) as u32)
        .unwrap_or(0)
        .count_ones() as u64;
    let tail =
        (bytes[last] & (0xffu8.checked_shr(1 + (to & 7) as u32).unwrap_or(0))).count_ones() as u64;
    whole - head - tail
}

fn bitcount(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let Ctx { db, reply, .. } = ctx;
    let count = with_string(db, args[1], |bytes| -> Result<u64, CmdError> {
        // Redis looks the key up before parsing the range: a missing key counts 0 whatever
        // follows.
        let Some(bytes) = bytes else { return Ok(0) };
        let range = match args.len() {
            2 => bit_range(bytes.len(), 0, -1, RangeUnit::Byte),
            4 | 5 => {
                let (start, end) = (args::int(args[2])?, args::int(args[3])?);
                if start < 0 && end < 0 && start > end {
                    return Ok(0);
                }
                bit_range(bytes.len(), start, end, range_unit(args.get(4).copied())?)
            }
            _ => return Err(CmdError::Syntax),
        };
        Ok(range.map_or(0, |(from, to)| count_ones(bytes, from, to)))
    })??;
    reply.integer(count as i64);
    Ok(())
}

/// The first bit equal to `bit` in `from..=to`, skipping whole bytes that cannot hold it.
fn first_bit(bytes: &[u8], bit: u8, from: u64, to: u64) -> Option<u64> {
    let skip = if bit == 1 { 0x00 } else { 0xff };
    let mut i = from;
    while i <= to {
        if i & 7 == 0 && i + 7 <= to && bytes[(i >> 3) as usize] == skip {
            i += 8;
            continue;
        }
        if bit_at(bytes, i) == bit {
            return Some(i);
        }
        i += 1;
    }
    None
}

fn bitpos(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let bit = match args::int(args[2])? {
        0 => 0u8,
        1 => 1u8,
        _ => return err("ERR The bit argument must be 1 or 0."),
    };
    let Ctx { db, reply, .. } = ctx;
    let pos = with_string(db, args[1], |bytes| -> Result<i64, CmdError> {
        // A missing key is an endless run of clear bits.
        let Some(bytes) = bytes else {
            return Ok(if bit == 1 { -1 } else { 0 });
        };
        let (range, end_given) = match args.len() {
            3 => (bit_range(bytes.len(), 0, -1, RangeUnit::Byte), false),
            4..=6 => {
                let start = args::int(args[3])?;
                let unit = range_unit(args.get(5).copied())?;
                let end = match args.get(4) {
                    Some(e) => args::int(e)?,
                    None => -1,
                };
                (bit_range(bytes.len(), start, end, unit), args.len() >= 5)
            }
            _ => return Err(CmdError::Syntax),
        };
        let Some((from, to)) = range else {
            return Ok(-1);
        };
        Ok(match first_bit(bytes, bit, from, to) {
            Some(p) => p as i64,
            // Without an end the string counts as padded with clear bits on the right.
            None if bit == 0 && !end_given => to as i64 + 1,
            None => -1,
        })
    })??;
    reply.integer(pos);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counting_honours_bit_edges() {
        let b = [0xffu8, 0xff, 0xff];
        assert_eq!(count_ones(&b, 0, 23), 24);
        assert_eq!(count_ones(&b, 1, 22), 22);
        assert_eq!(count_ones(&b, 5, 5), 1);
        assert_eq!(count_ones(&b, 8, 15), 8);
        assert_eq!(count_ones(&[0b1010_0000], 0, 2), 2);
    }

    #[test]
    fn first_bit_skips_and_finds() {
        let b = [0x00u8, 0x00, 0x01];
        assert_eq!(first_bit(&b, 1, 0, 23), Some(23));
        assert_eq!(first_bit(&b, 0, 0, 23), Some(0));
        assert_eq!(first_bit(&[0xff, 0xfe], 0, 0, 15), Some(15));
        assert_eq!(first_bit(&[0xff], 0, 0, 7), None);
    }
}
