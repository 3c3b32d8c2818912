//! GEO: GEOADD GEODIST GEOHASH GEOPOS GEOSEARCH GEOSEARCHSTORE GEORADIUS GEORADIUS_RO
//! GEORADIUSBYMEMBER GEORADIUSBYMEMBER_RO. Positions live in sorted sets, scored with Redis's
//! 52-bit interleaved geohash, so ZRANGE & co. see them and a set written by redis-server
//! reads the same here.

mod geohash;
mod search;

use crate::command_framework::args;
use crate::command_framework::error::err;
use crate::command_framework::spec::{command, flags::*, KeySpec, KEY1, KEY1_2};
use crate::command_framework::{CmdError, CmdResult, CommandSpec, Ctx};
use crate::commands::zsets::zset_limits;
use crate::db::zset::ZSet;
use crate::db::{Locked, Value};
use proto::resp::Reply;

const GEO: &str = "geo";

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec { since: "3.2.0", ..command("geoadd", -5, WRITE | DENYOOM, KEY1, geoadd, GEO, "Adds one or more members to a geospatial index. The key is created if it doesn't exist.") },
    CommandSpec { since: "3.2.0", ..command("geodist", -4, READONLY, KEY1, geodist, GEO, "Returns the distance between two members of a geospatial index.") },
    CommandSpec { since: "3.2.0", ..command("geohash", -2, READONLY, KEY1, geohash_cmd, GEO, "Returns members from a geospatial index as geohash strings.") },
    CommandSpec { since: "3.2.0", ..command("geopos", -2, READONLY, KEY1, geopos, GEO, "Returns the longitude and latitude of members from a geospatial index.") },
    CommandSpec { since: "3.2.0", ..command("georadius", -6, WRITE | DENYOOM | MOVABLE_KEYS, KeySpec::CustomWithRange { first: 1, last: 1, step: 1, find: search::radius_keys }, search::georadius, GEO, "Queries a geospatial index for members within a distance from a coordinate, optionally stores the result.") },
    CommandSpec { since: "3.2.10", ..command("georadius_ro", -6, READONLY, KEY1, search::georadius_ro, GEO, "Returns members from a geospatial index that are within a distance from a coordinate.") },
    CommandSpec { since: "3.2.0", ..command("georadiusbymember", -5, WRITE | DENYOOM | MOVABLE_KEYS, KeySpec::CustomWithRange { first: 1, last: 1, step: 1, find: search::radius_keys }, search::georadiusbymember, GEO, "Queries a geospatial index for members within a distance from a member, optionally stores the result.") },
    CommandSpec { since: "3.2.10", ..command("georadiusbymember_ro", -5, READONLY, KEY1, search::georadiusbymember_ro, GEO, "Returns members from a geospatial index that are within a distance from a member.") },
    CommandSpec { since: "6.2.0", ..command("geosearch", -7, READONLY, KEY1, search::geosearch, GEO, "Queries a geospatial index for members inside an area of a box or a circle.") },
    CommandSpec { since: "6.2.0", ..command("geosearchstore", -8, WRITE | DENYOOM, KEY1_2, search::geosearchstore, GEO, "Queries a geospatial index for members inside an area of a box or a circle, optionally stores the result.") },
];

/// The sorted set at `key` for reading (`None`: no key), WRONGTYPE for other types.
fn zset<'a>(db: &'a mut Locked<'_>, key: &[u8]) -> Result<Option<&'a ZSet>, CmdError> {
    match db.get(key).map(|e| &e.value) {
        None => Ok(None),
        Some(Value::ZSet(z)) => Ok(Some(z)),
        Some(_) => Err(CmdError::WrongType),
    }
}

/// A longitude/latitude pair argument, checked against the indexable range.
fn long_lat(long: &[u8], lat: &[u8]) -> Result<(f64, f64), CmdError> {
    let (long, lat) = (args::float(long)?, args::float(lat)?);
    if !(geohash::LONG_MIN..=geohash::LONG_MAX).contains(&long)
        || !(geohash::LAT_MIN..=geohash::LAT_MAX).contains(&lat)
    {
        return Err(CmdError::new(format!(
            "ERR invalid longitude,latitude pair {long:.6},{lat:.6}"
        )));
    }
    Ok((long, lat))
}

/// Metres per unit (`M`, `KM`, `FT`, `MI`).
fn unit(arg: &[u8]) -> Result<f64, CmdError> {
    match arg.to_ascii_lowercase().as_slice() {
        b"m" => Ok(1.0),
        b"km" => Ok(1000.0),
        b"ft" => Ok(0.3048),
        b"mi" => Ok(1609.34),
        _ => err("ERR unsupported unit provided. please use M, KM, FT, MI"),
    }
}

/// A distance as Redis prints it: fixed point, four decimals, rounded half to even.
fn distance_text(d: f64) -> String {
    if d == 0.0 {
        return "0.0000".into();
    }
    let scaled = (d * 10000.0).round_ties_even() as i64;
    let sign = if scaled < 0 { "-" } else { "" };
    let v = scaled.unsigned_abs();
    format!("{sign}{}.{:04}", v / 10000, v % 10000)
}

/// A coordinate as Redis's "human" long double: 17 decimals, trailing zeros dropped.
fn coordinate_text(v: f64) -> String {
    let mut s = format!("{v:.17}");
    if s.contains('.') {
        let trimmed = s.trim_end_matches('0').trim_end_matches('.').len();
        s.truncate(trimmed);
    }
    if s == "-0" {
        s = "0".into();
    }
    s
}

/// A coordinate reply: a bulk string in RESP2, a double in RESP3 (as Redis).
fn reply_coordinate(reply: &mut Reply<'_>, v: f64) {
    let text = coordinate_text(v);
    if reply.is_resp3() {
        reply.raw(format!(",{text}\r\n").as_bytes());
    } else {
        reply.bulk(text.as_bytes());
    }
}

fn geoadd(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let (mut nx, mut xx, mut ch) = (false, false, false);
    let mut first = 2;
    while first < args.len() {
        match args[first].to_ascii_lowercase().as_slice() {
            b"nx" => nx = true,
            b"xx" => xx = true,
            b"ch" => ch = true,
            _ => break,
        }
        first += 1;
    }
    if !(args.len() - first).is_multiple_of(3) || (nx && xx) {
        return Err(CmdError::Syntax);
    }
    // Every position is checked before anything is added.
    let mut items = Vec::with_capacity((args.len() - first) / 3);
    for triple in args[first..].chunks(3) {
        let (long, lat) = long_lat(triple[0], triple[1])?;
        let score = geohash::score_of(long, lat).unwrap_or(0) as f64;
        items.push((score, triple[2]));
    }
    let key = args[1];
    if let Some(e) = ctx.db.get(key) {
        if !matches!(e.value, Value::ZSet(_)) {
            return Err(CmdError::WrongType);
        }
    } else if xx {
        ctx.reply.integer(0);
        return Ok(());
    }
    let limits = zset_limits(ctx);
    let entry = ctx
        .db
        .get_or_insert_with(key, || Value::ZSet(Box::new(ZSet::new())));
    let Value::ZSet(z) = &mut entry.value else {
        return Err(CmdError::WrongType);
    };
    let (mut added, mut changed) = (0i64, 0i64);
    for (score, member) in items {
        match z.score(member) {
            Some(_) if nx => {}
            Some(old) => {
                if old != score {
                    let _ = z.insert(member, score, limits);
                    changed += 1;
                }
            }
            None if xx => {}
            None => {
                let _ = z.insert(member, score, limits);
                added += 1;
            }
        }
    }
    let empty = z.is_empty();
    if empty {
        // Created for nothing (NX/XX skipped every member): Redis never keeps empty sets.
        ctx.db.remove(key);
    }
    if added + changed > 0 {
        ctx.modified(key);
        ctx.signal_ready(key);
    }
    ctx.reply.integer(if ch { added + changed } else { added });
    Ok(())
}

fn geodist(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let to_meters = match args.len() {
        4 => 1.0,
        5 => unit(args[4])?,
        _ => return Err(CmdError::Syntax),
    };
    let Ctx { db, reply, .. } = ctx;
    let Some(z) = zset(db, args[1])? else {
        reply.null();
        return Ok(());
    };
    let (Some(a), Some(b)) = (z.score(args[2]), z.score(args[3])) else {
        reply.null();
        return Ok(());
    };
    let ((lon1, lat1), (lon2, lat2)) = (geohash::position_of(a), geohash::position_of(b));
    let d = geohash::distance(lon1, lat1, lon2, lat2) / to_meters;
    reply.bulk(distance_text(d).as_bytes());
    Ok(())
}

fn geohash_cmd(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let Ctx { db, reply, .. } = ctx;
    let z = zset(db, args[1])?;
    reply.array(args.len() - 2);
    for member in &args[2..] {
        match z.and_then(|z| z.score(member)) {
            Some(score) => reply.bulk(geohash::geohash_string(score).as_bytes()),
            None => reply.null(),
        }
    }
    Ok(())
}

fn geopos(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let Ctx { db, reply, .. } = ctx;
    let z = zset(db, args[1])?;
    reply.array(args.len() - 2);
    for member in &args[2..] {
        match z.and_then(|z| z.score(member)) {
            Some(score) => {
                let (long, lat) = geohash::position_of(score);
                reply.array(2);
                reply_coordinate(reply, long);
                reply_coordinate(reply, lat);
            }
            None => reply.null_array(),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_print_as_redis_prints_them() {
        assert_eq!(distance_text(166274.15156960033), "166274.1516");
        assert_eq!(distance_text(0.0), "0.0000");
        assert_eq!(distance_text(-1.5), "-1.5000");
        assert_eq!(
            coordinate_text(13.361_389_338_970_184),
            "13.36138933897018433"
        );
        assert_eq!(coordinate_text(2.5), "2.5");
        assert_eq!(coordinate_text(-0.0), "0");
    }
}
