//! The `bit` library Redis bundles (LuaBitOp's functions): 32-bit operations on Lua numbers,
//! whose results are signed 32-bit integers (`bit.tobit(0xffffffff)` is -1).

use mlua::{Lua, Result, Table, Variadic};

/// A Lua number as LuaBitOp reads it: rounded to the nearest integer (ties to even), then
/// taken modulo 2^32.
pub fn tobit(n: f64) -> i32 {
    if !n.is_finite() {
        return 0;
    }
    let whole = n.round_ties_even().rem_euclid(4_294_967_296.0);
    whole as u64 as u32 as i32
}

/// `bit.tohex(x [, n])`: the low `|n|` nibbles (8 by default) in hex, upper-case when `n` < 0.
pub fn tohex(x: i32, n: Option<i32>) -> String {
    let n = n.unwrap_or(8);
    let upper = n < 0;
    let digits = n.unsigned_abs().min(8) as usize;
    let text = if upper {
        format!("{:08X}", x as u32)
    } else {
        format!("{:08x}", x as u32)
    };
    text[8 - digits..].to_string()
}

fn fold(args: &Variadic<f64>, op: fn(i32, i32) -> i32) -> Result<i32> {
    let mut it = args.iter();
    let first = it
        .next()
        .ok_or_else(|| mlua::Error::runtime("bad argument #1 (number expected, got no value)"))?;
    Ok(it.fold(tobit(*first), |acc, v| op(acc, tobit(*v))))
}

/// Builds the `bit` table.
pub fn library(lua: &Lua) -> Result<Table> {
    let bit = lua.create_table()?;
    bit.set("tobit", lua.create_function(|_, x: f64| Ok(tobit(x)))?)?;
    bit.set("bnot", lua.create_function(|_, x: f64| Ok(!tobit(x)))?)?;
    bit.set(
        "band",
        lua.create_function(|_, a: Variadic<f64>| fold(&a, |x, y| x & y))?,
    )?;
    bit.set(
        "bor",
        lua.create_function(|_, a: Variadic<f64>| fold(&a, |x, y| x | y))?,
    )?;
    bit.set(
        "bxor",
        lua.create_function(|_, a: Variadic<f64>| fold(&a, |x, y| x ^ y))?,
    )?;
    let shift = |f: fn(i32, u32) -> i32| {
        move |_: &Lua, (x, n): (f64, f64)| Ok(f(tobit(x), (tobit(n) & 31) as u32))
    };
    bit.set(
        "lshift",
        lua.create_function(shift(|x, n| ((x as u32) << n) as i32))?,
    )?;
    bit.set(
        "rshift",
        lua.create_function(shift(|x, n| ((x as u32) >> n) as i32))?,
    )?;
    bit.set("arshift", lua.create_function(shift(|x, n| x >> n))?)?;
    bit.set(
        "rol",
        lua.create_function(shift(|x, n| (x as u32).rotate_left(n) as i32))?,
    )?;
    bit.set(
        "ror",
        lua.create_function(shift(|x, n| (x as u32).rotate_right(n) as i32))?,
    )?;
    bit.set(
        "bswap",
        lua.create_function(|_, x: f64| Ok((tobit(x) as u32).swap_bytes() as i32))?,
    )?;
    bit.set(
        "tohex",
        lua.create_function(|_, (x, n): (f64, Option<f64>)| Ok(tohex(tobit(x), n.map(tobit))))?,
    )?;
    Ok(bit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_wrap_to_signed_32_bits() {
        assert_eq!(tobit(4_294_967_295.0), -1);
        assert_eq!(tobit(4_294_967_296.0 + 5.0), 5);
        assert_eq!(tobit(-1.0), -1);
        assert_eq!(tobit(2.5), 2, "ties to even");
        assert_eq!(tobit(3.5), 4);
    }

    #[test]
    fn hex_digits_count_and_case() {
        assert_eq!(tohex(1, None), "00000001");
        assert_eq!(tohex(-1, Some(-4)), "FFFF");
        assert_eq!(tohex(0x1234_5678, Some(2)), "78");
    }
}
