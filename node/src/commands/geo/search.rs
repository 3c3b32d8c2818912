//! GEOSEARCH, GEOSEARCHSTORE and the GEORADIUS family: one parser and one search, as Redis's
//! `georadiusGeneric`. The search scans the sorted set's score ranges of the nine geohash
//! boxes around the centre and keeps the members inside the shape.

use super::geohash::{self, Search, Shape};
use super::{distance_text, long_lat, reply_coordinate, unit, zset};
use crate::command_framework::error::err;
use crate::command_framework::{args, CmdError, CmdResult, Ctx};
use crate::commands::zsets::zset_limits;
use crate::db::zset::ZSet;
use crate::db::Value;
use smallvec::SmallVec;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Variant {
    Radius,
    RadiusByMember,
    Search,
    SearchStore,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Order {
    None,
    Asc,
    Desc,
}

/// A match: its member, distance (metres), score and position.
struct Found {
    member: Box<[u8]>,
    dist: f64,
    score: f64,
    long: f64,
    lat: f64,
}

/// GEORADIUS(BYMEMBER) keys: the source, and the STORE/STOREDIST destination if given.
pub fn radius_keys(args: &[&[u8]]) -> SmallVec<[usize; 16]> {
    let mut keys = SmallVec::new();
    keys.push(1);
    let mut i = 2;
    while i + 1 < args.len() {
        if args[i].eq_ignore_ascii_case(b"store") || args[i].eq_ignore_ascii_case(b"storedist") {
            keys.push(i + 1);
            i += 2;
        } else {
            i += 1;
        }
    }
    keys
}

pub fn georadius(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    run(ctx, args, Variant::Radius, true)
}

pub fn georadius_ro(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    run(ctx, args, Variant::Radius, false)
}

pub fn georadiusbymember(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    run(ctx, args, Variant::RadiusByMember, true)
}

pub fn georadiusbymember_ro(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    run(ctx, args, Variant::RadiusByMember, false)
}

pub fn geosearch(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    run(ctx, args, Variant::Search, false)
}

pub fn geosearchstore(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    run(ctx, args, Variant::SearchStore, false)
}

fn member_position(z: &ZSet, member: &[u8]) -> Result<(f64, f64), CmdError> {
    match z.score(member) {
        Some(score) => Ok(geohash::position_of(score)),
        None => err("ERR could not decode requested zset member"),
    }
}

fn radius(value: &[u8], unit_arg: &[u8]) -> Result<(f64, f64), CmdError> {
    let r = args::parse_float(value).ok_or_else(|| CmdError::new("ERR need numeric radius"))?;
    if r < 0.0 {
        return err("ERR radius cannot be negative");
    }
    Ok((r, unit(unit_arg)?))
}

struct Request {
    search: Option<Search>,
    store: Option<(Vec<u8>, bool)>,
    with_dist: bool,
    with_hash: bool,
    with_coord: bool,
    order: Order,
    count: usize,
    any: bool,
}

fn parse(
    ctx: &mut Ctx<'_>,
    args: &[&[u8]],
    variant: Variant,
    can_store: bool,
) -> Result<Request, CmdError> {
    let src = if variant == Variant::SearchStore {
        2
    } else {
        1
    };
    let z = zset(&mut ctx.db, args[src])?;
    let mut centre: Option<(f64, f64)> = None;
    let mut shape: Option<(Shape, f64)> = None;
    let base = match variant {
        Variant::Radius => {
            centre = Some(long_lat(args[2], args[3])?);
            let (r, conv) = radius(args[4], args[5])?;
            shape = Some((Shape::Circle { radius: r }, conv));
            6
        }
        Variant::RadiusByMember => {
            if let Some(z) = z {
                centre = Some(member_position(z, args[2])?);
                let (r, conv) = radius(args[3], args[4])?;
                shape = Some((Shape::Circle { radius: r }, conv));
            }
            5
        }
        Variant::Search => 2,
        Variant::SearchStore => 3,
    };
    let searching = matches!(variant, Variant::Search | Variant::SearchStore);
    let mut r = Request {
        search: None,
        store: (variant == Variant::SearchStore).then(|| (args[1].to_vec(), false)),
        with_dist: false,
        with_hash: false,
        with_coord: false,
        order: Order::None,
        count: 0,
        any: false,
    };
    let (mut from_member, mut from_lonlat, mut by_radius, mut by_box) =
        (false, false, false, false);
    let rest = &args[base..];
    let mut i = 0;
    while i < rest.len() {
        let left = rest.len() - i - 1;
        match rest[i].to_ascii_lowercase().as_slice() {
            b"withdist" => r.with_dist = true,
            b"withhash" => r.with_hash = true,
            b"withcoord" => r.with_coord = true,
            b"any" => r.any = true,
            b"asc" => r.order = Order::Asc,
            b"desc" => r.order = Order::Desc,
            b"count" if left >= 1 => {
                let n = args::int(rest[i + 1])?;
                if n <= 0 {
                    return err("ERR COUNT must be > 0");
                }
                r.count = n as usize;
                i += 1;
            }
            kw @ (b"store" | b"storedist") if left >= 1 && can_store && !searching => {
                r.store = Some((rest[i + 1].to_vec(), kw == b"storedist"));
                i += 1;
            }
            b"storedist" if variant == Variant::SearchStore => {
                if let Some(s) = r.store.as_mut() {
                    s.1 = true;
                }
            }
            b"frommember" if left >= 1 && searching && !from_lonlat => {
                if let Some(z) = z {
                    centre = Some(member_position(z, rest[i + 1])?);
                }
                from_member = true;
                i += 1;
            }
            b"fromlonlat" if left >= 2 && searching && !from_member => {
                centre = Some(long_lat(rest[i + 1], rest[i + 2])?);
                from_lonlat = true;
                i += 2;
            }
            b"byradius" if left >= 2 && searching && !by_box => {
                let (radius, conv) = radius(rest[i + 1], rest[i + 2])?;
                shape = Some((Shape::Circle { radius }, conv));
                by_radius = true;
                i += 2;
            }
            b"bybox" if left >= 3 && searching && !by_radius => {
                let width = args::parse_float(rest[i + 1])
                    .ok_or_else(|| CmdError::new("ERR need numeric width"))?;
                let height = args::parse_float(rest[i + 2])
                    .ok_or_else(|| CmdError::new("ERR need numeric height"))?;
                if width < 0.0 || height < 0.0 {
                    return err("ERR height or width cannot be negative");
                }
                shape = Some((Shape::Box { width, height }, unit(rest[i + 3])?));
                by_box = true;
                i += 3;
            }
            _ => return Err(CmdError::Syntax),
        }
        i += 1;
    }
    if r.store.is_some() && (r.with_dist || r.with_hash || r.with_coord) {
        let what = if variant == Variant::SearchStore {
            "GEOSEARCHSTORE"
        } else {
            "STORE option in GEORADIUS"
        };
        return err(format!(
            "ERR {what} is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
        ));
    }
    let name = String::from_utf8_lossy(args[0]);
    if searching && !(from_member || from_lonlat) {
        return err(format!(
            "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for {name}"
        ));
    }
    if searching && !(by_radius || by_box) {
        return err(format!(
            "ERR exactly one of BYRADIUS and BYBOX can be specified for {name}"
        ));
    }
    if r.any && r.count == 0 {
        return err("ERR the ANY argument requires COUNT argument");
    }
    if let (Some(_), Some((long, lat)), Some((shape, conversion))) = (z, centre, shape) {
        r.search = Some(Search {
            long,
            lat,
            shape,
            conversion,
        });
    }
    Ok(r)
}

/// The members inside the search, box by box in Redis's order; stops at `limit` (ANY).
fn find(z: &ZSet, search: &Search, limit: usize) -> Vec<Found> {
    let boxes = search.boxes();
    let mut found = Vec::new();
    let mut last = 0usize;
    for (i, hash) in boxes.iter().enumerate() {
        if hash.is_zero() {
            continue;
        }
        // Huge radii make neighbours coincide: scan each distinct box once.
        if last != 0 && *hash == boxes[last] {
            continue;
        }
        if limit > 0 && found.len() >= limit {
            break;
        }
        let min = hash.align52() as f64;
        let max = geohash::Hash {
            bits: hash.bits + 1,
            step: hash.step,
        }
        .align52() as f64;
        let start = z.partition_point(|score, _| score < min);
        let end = z.partition_point(|score, _| score < max);
        for (member, score) in z.range(start, end.saturating_sub(start), false) {
            let (long, lat) = geohash::position_of(score);
            if let Some(dist) = search.contains(long, lat) {
                found.push(Found {
                    member: member.into(),
                    dist,
                    score,
                    long,
                    lat,
                });
            }
            if limit > 0 && found.len() >= limit {
                break;
            }
        }
        last = i;
    }
    found
}

fn run(ctx: &mut Ctx<'_>, args: &[&[u8]], variant: Variant, can_store: bool) -> CmdResult {
    let r = parse(ctx, args, variant, can_store)?;
    let src = if variant == Variant::SearchStore {
        2
    } else {
        1
    };
    let Some(search) = r.search else {
        // No source key: nothing matches; a destination is deleted.
        return match r.store {
            Some((dest, _)) => {
                if ctx.db.remove(&dest).is_some() {
                    ctx.modified(&dest);
                }
                ctx.reply.integer(0);
                Ok(())
            }
            None => {
                ctx.reply.array(0);
                Ok(())
            }
        };
    };
    let mut order = r.order;
    if r.count != 0 && order == Order::None && !r.any {
        // The N closest need an order.
        order = Order::Asc;
    }
    let mut found = match zset(&mut ctx.db, args[src])? {
        Some(z) => find(z, &search, if r.any { r.count } else { 0 }),
        None => Vec::new(),
    };
    match order {
        Order::Asc => found.sort_by(|a, b| a.dist.total_cmp(&b.dist)),
        Order::Desc => found.sort_by(|a, b| b.dist.total_cmp(&a.dist)),
        Order::None => {}
    }
    if r.count > 0 {
        found.truncate(r.count);
    }
    let conversion = search.conversion;
    if let Some((dest, store_dist)) = r.store {
        let n = found.len();
        if n == 0 {
            if ctx.db.remove(&dest).is_some() {
                ctx.modified(&dest);
            }
        } else {
            let limits = zset_limits(ctx);
            let pairs = found
                .iter()
                .map(|f| {
                    let score = if store_dist {
                        f.dist / conversion
                    } else {
                        f.score
                    };
                    (f.member.clone(), score)
                })
                .collect();
            // Members come from one sorted set, so they are distinct; scores are numbers.
            let z = ZSet::from_distinct_pairs(pairs, limits).unwrap_or_default();
            ctx.db.set(&dest, Value::ZSet(Box::new(z)));
            ctx.modified(&dest);
            ctx.signal_ready(&dest);
        }
        ctx.reply.integer(n as i64);
        return Ok(());
    }
    let options = r.with_dist as usize + r.with_hash as usize + r.with_coord as usize;
    let reply = &mut ctx.reply;
    reply.array(found.len());
    for f in &found {
        if options > 0 {
            reply.array(options + 1);
        }
        reply.bulk(&f.member);
        if r.with_dist {
            reply.bulk(distance_text(f.dist / conversion).as_bytes());
        }
        if r.with_hash {
            reply.integer(f.score as i64);
        }
        if r.with_coord {
            reply.array(2);
            reply_coordinate(reply, f.long);
            reply_coordinate(reply, f.lat);
        }
    }
    Ok(())
}
