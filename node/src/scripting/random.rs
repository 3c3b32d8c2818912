//! `math.random` and `math.randomseed` as Redis replaces them: a 48-bit linear congruential
//! generator (POSIX `lrand48`'s constants), so that a script seeding it with
//! `math.randomseed(n)` gets the same sequence on every node and every run. Unseeded, each
//! thread's generator starts from a random seed (Redis 7.0 replicates a script's effects, so
//! its random numbers need not repeat).

use mlua::{Lua, Result, Value};
use std::cell::Cell;
use std::rc::Rc;

const MULTIPLIER: u64 = 0x5_DEEC_E66D;
const INCREMENT: u64 = 0xB;
const MASK: u64 = (1 << 48) - 1;
/// The largest value the generator returns (`REDIS_LRAND48_MAX`).
const MAX: u64 = i32::MAX as u64;

/// The generator's 48-bit state.
#[derive(Debug, Clone)]
pub struct Rand48(Rc<Cell<u64>>);

impl Rand48 {
    pub fn seeded(seed: i32) -> Rand48 {
        let rng = Rand48(Rc::new(Cell::new(0)));
        rng.seed(seed);
        rng
    }

    /// `srand48`: the seed in the high 32 bits, 0x330E below.
    pub fn seed(&self, seed: i32) {
        self.0.set((((seed as u32 as u64) << 16) | 0x330E) & MASK);
    }

    /// `lrand48`: the next 31-bit value.
    pub fn next(&self) -> u64 {
        let x = (self
            .0
            .get()
            .wrapping_mul(MULTIPLIER)
            .wrapping_add(INCREMENT))
            & MASK;
        self.0.set(x);
        x >> 17
    }

    /// A float in [0, 1).
    pub fn unit(&self) -> f64 {
        (self.next() % MAX) as f64 / MAX as f64
    }
}

/// Replaces `math.random` and `math.randomseed` in `math` with the generator's.
pub fn install(lua: &Lua, math: &mlua::Table, rng: Rand48) -> Result<()> {
    let draw = rng.clone();
    let random = lua.create_function(move |_, args: mlua::Variadic<Value>| {
        let r = draw.unit();
        let int = |v: &Value| -> Result<f64> {
            match v {
                Value::Integer(i) => Ok(*i as f64),
                Value::Number(n) => Ok(n.floor()),
                Value::String(s) => s
                    .to_str()
                    .ok()
                    .and_then(|s| s.trim().parse::<f64>().ok())
                    .map(f64::floor)
                    .ok_or_else(|| {
                        mlua::Error::runtime("bad argument to 'random' (number expected)")
                    }),
                _ => Err(mlua::Error::runtime(
                    "bad argument to 'random' (number expected)",
                )),
            }
        };
        match args.len() {
            0 => Ok(r),
            1 => {
                let m = int(&args[0])?;
                if m < 1.0 {
                    return Err(mlua::Error::runtime(
                        "bad argument #1 to 'random' (interval is empty)",
                    ));
                }
                Ok((r * m).floor() + 1.0)
            }
            2 => {
                let (m, n) = (int(&args[0])?, int(&args[1])?);
                if m > n {
                    return Err(mlua::Error::runtime(
                        "bad argument #2 to 'random' (interval is empty)",
                    ));
                }
                Ok((r * (n - m + 1.0)).floor() + m)
            }
            _ => Err(mlua::Error::runtime("wrong number of arguments")),
        }
    })?;
    let randomseed = lua.create_function(move |_, seed: f64| {
        rng.seed(seed as i64 as i32);
        Ok(())
    })?;
    math.set("random", random)?;
    math.set("randomseed", randomseed)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sequence_is_lrand48s() {
        // glibc: srand48(0); lrand48() -> 366850414, 1610402240 (and srand48(1): 89400484).
        let rng = Rand48::seeded(0);
        assert_eq!(rng.next(), 366_850_414);
        assert_eq!(rng.next(), 1_610_402_240);
        assert_eq!(Rand48::seeded(1).next(), 89_400_484);
    }
}
