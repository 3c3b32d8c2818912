//! Strings seen as bit arrays: reading a string's bytes, making a string writable in place and
//! growing it, and Redis's bit offsets and ranges.

use crate::command_framework::{CmdError, Ctx};
use crate::db::{Locked, Value};
use std::sync::atomic::Ordering::Relaxed;

/// Redis's text for a bad bit offset (negative, not a number, or past proto-max-bulk-len).
pub const BAD_OFFSET: &str = "ERR bit offset is not an integer or out of range";

/// A bit offset argument as SETBIT/GETBIT/BITFIELD take it. With `width` (BITFIELD), a
/// `#N` offset means N fields of that width. Offsets whose byte lies at or past
/// `proto-max-bulk-len` are refused, as Redis does for every client but its primary, so a
/// command can never make a string longer than a bulk string may be.
pub fn bit_offset(ctx: &Ctx<'_>, arg: &[u8], width: Option<u32>) -> Result<u64, CmdError> {
    let bad = || CmdError::new(BAD_OFFSET);
    let (digits, fields) = match (arg.first(), width) {
        (Some(b'#'), Some(w)) => (&arg[1..], Some(w)),
        _ => (arg, None),
    };
    let mut offset = proto::resp::request::parse_i64(digits).ok_or_else(bad)?;
    if let Some(w) = fields {
        offset = offset.checked_mul(w as i64).ok_or_else(bad)?;
    }
    if offset < 0 {
        return Err(bad());
    }
    let max = ctx.server.hot.proto_max_bulk_len.load(Relaxed);
    if !ctx.client.primary_link && (offset as u64 >> 3) >= max {
        return Err(bad());
    }
    Ok(offset as u64)
}

/// The bytes of a string value for reading: `None` for a missing key, WRONGTYPE for other
/// types. Integers are formatted (Redis reads their decimal digits too).
pub fn read_string(db: &mut Locked<'_>, key: &[u8]) -> Result<Option<Vec<u8>>, CmdError> {
    match db.get(key).map(|e| &e.value) {
        None => Ok(None),
        Some(Value::Str(s)) => Ok(Some(s.to_vec())),
        Some(Value::Int(n)) => Ok(Some(itoa::Buffer::new().format(*n).as_bytes().to_vec())),
        Some(_) => Err(CmdError::WrongType),
    }
}

/// Calls `f` with the bytes of a string key (empty when missing) without copying them.
pub fn with_string<R>(
    db: &mut Locked<'_>,
    key: &[u8],
    f: impl FnOnce(Option<&[u8]>) -> R,
) -> Result<R, CmdError> {
    let mut digits = itoa::Buffer::new();
    match db.get(key).map(|e| &e.value) {
        None => Ok(f(None)),
        Some(Value::Str(s)) => Ok(f(Some(s))),
        Some(Value::Int(n)) => Ok(f(Some(digits.format(*n).as_bytes()))),
        Some(_) => Err(CmdError::WrongType),
    }
}

/// The bytes of `key`'s string for writing in place, grown with zero bytes to at least
/// `min_len` (created if missing; the TTL is kept). The flag says whether the key was created
/// or grown, which is a change even when no bit flips (as Redis's
/// `lookupStringForBitCommand`).
pub fn writable_string<'e>(
    db: &'e mut Locked<'_>,
    key: &[u8],
    min_len: usize,
) -> Result<(&'e mut [u8], bool), CmdError> {
    if let Some(e) = db.get(key) {
        if !matches!(e.value, Value::Str(_) | Value::Int(_)) {
            return Err(CmdError::WrongType);
        }
    }
    let mut changed = false;
    db.get_or_insert_with(key, || {
        changed = true;
        Value::Str(vec![0; min_len].into_boxed_slice())
    });
    db.update_access(key, |access| access.edited_in_place = true);
    let entry = db.get_or_insert_with(key, || unreachable!("created above"));
    if let Value::Int(n) = entry.value {
        entry.value = Value::Str(itoa::Buffer::new().format(n).as_bytes().into());
    }
    match &mut entry.value {
        Value::Str(s) => {
            if s.len() < min_len {
                let mut grown = std::mem::take(s).into_vec();
                grown.resize(min_len, 0);
                *s = grown.into_boxed_slice();
                changed = true;
            }
            Ok((&mut s[..], changed))
        }
        _ => Err(CmdError::WrongType),
    }
}

/// Whether a range argument counts bytes (the default) or bits.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum RangeUnit {
    Byte,
    Bit,
}

/// Parses the optional `BYTE|BIT` argument.
pub fn range_unit(arg: Option<&[u8]>) -> Result<RangeUnit, CmdError> {
    match arg {
        None => Ok(RangeUnit::Byte),
        Some(a) if a.eq_ignore_ascii_case(b"byte") => Ok(RangeUnit::Byte),
        Some(a) if a.eq_ignore_ascii_case(b"bit") => Ok(RangeUnit::Bit),
        Some(_) => Err(CmdError::Syntax),
    }
}

/// `start..=end` (negative counted from the end) clamped into a string of `total` units as
/// Redis clamps it; `None` when the range is empty.
pub fn clamp_range(start: i64, end: i64, total: i64) -> Option<(i64, i64)> {
    let from_end = |i: i64| if i < 0 { (total + i).max(0) } else { i };
    let (start, end) = (from_end(start), from_end(end).min(total - 1));
    (start <= end).then_some((start, end))
}

/// The bit at `offset` (0 is the most significant bit of the first byte); 0 past the end.
pub fn bit_at(bytes: &[u8], offset: u64) -> u8 {
    match bytes.get((offset >> 3) as usize) {
        Some(b) => (b >> (7 - (offset & 7))) & 1,
        None => 0,
    }
}

/// Sets the bit at `offset`, which must lie inside `bytes`.
pub fn set_bit(bytes: &mut [u8], offset: u64, on: bool) {
    let mask = 1u8 << (7 - (offset & 7));
    let byte = &mut bytes[(offset >> 3) as usize];
    if on {
        *byte |= mask;
    } else {
        *byte &= !mask;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_clamp_as_redis() {
        assert_eq!(clamp_range(0, -1, 4), Some((0, 3)));
        assert_eq!(clamp_range(-100, 100, 4), Some((0, 3)));
        assert_eq!(clamp_range(2, 1, 4), None);
        assert_eq!(clamp_range(5, 10, 4), None);
        assert_eq!(clamp_range(0, -1, 0), None);
    }

    #[test]
    fn bits_are_msb_first() {
        let mut b = [0u8; 2];
        set_bit(&mut b, 0, true);
        set_bit(&mut b, 15, true);
        assert_eq!(b, [0x80, 0x01]);
        assert_eq!(bit_at(&b, 0), 1);
        assert_eq!(bit_at(&b, 1), 0);
        assert_eq!(bit_at(&b, 100), 0);
    }
}
