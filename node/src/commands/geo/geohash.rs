//! Geohashes as Redis computes them: 26 steps of longitude and latitude bits interleaved into a
//! 52-bit integer (the sorted-set score), latitude limited to the Web Mercator range
//! ±85.05112878, the 3x3 boxes that cover a search area, and haversine distances on Redis's
//! earth radius. The arithmetic follows Redis's order of operations so results agree to the
//! last digit.

use std::f64::consts::PI;

pub const LAT_MIN: f64 = -85.05112878;
pub const LAT_MAX: f64 = 85.05112878;
pub const LONG_MIN: f64 = -180.0;
pub const LONG_MAX: f64 = 180.0;
/// Steps of the stored hashes: 26 * 2 = 52 bits, exact in a double score.
pub const STEP_MAX: u8 = 26;
/// Earth's quadratic mean radius for WGS-84, as Redis uses it.
pub const EARTH_RADIUS_M: f64 = 6372797.560856;
const MERCATOR_MAX: f64 = 20037726.37;
const D_R: f64 = PI / 180.0;

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Range {
    pub min: f64,
    pub max: f64,
}

pub const LONG_RANGE: Range = Range {
    min: LONG_MIN,
    max: LONG_MAX,
};
pub const LAT_RANGE: Range = Range {
    min: LAT_MIN,
    max: LAT_MAX,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Hash {
    pub bits: u64,
    pub step: u8,
}

impl Hash {
    /// A box dropped from a search (Redis's `GZERO`).
    pub fn is_zero(&self) -> bool {
        self.bits == 0 && self.step == 0
    }

    /// The hash as a 52-bit score prefix.
    pub fn align52(&self) -> u64 {
        self.bits << (52 - self.step as u32 * 2)
    }
}

#[derive(Clone, Copy, Debug)]
pub struct Area {
    pub longitude: Range,
    pub latitude: Range,
}

fn deg_rad(a: f64) -> f64 {
    a * D_R
}

fn rad_deg(a: f64) -> f64 {
    a / D_R
}

/// Spreads the 32 bits of `v` to the even bit positions of a u64.
fn spread(v: u32) -> u64 {
    let mut x = v as u64;
    x = (x | (x << 16)) & 0x0000_FFFF_0000_FFFF;
    x = (x | (x << 8)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x << 4)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x << 2)) & 0x3333_3333_3333_3333;
    (x | (x << 1)) & 0x5555_5555_5555_5555
}

/// The even bits of `v`, packed into the low 32 bits.
fn squash(v: u64) -> u64 {
    let mut x = v & 0x5555_5555_5555_5555;
    x = (x | (x >> 1)) & 0x3333_3333_3333_3333;
    x = (x | (x >> 2)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x >> 4)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x >> 8)) & 0x0000_FFFF_0000_FFFF;
    (x | (x >> 16)) & 0x0000_0000_FFFF_FFFF
}

/// Latitude bits at even positions, longitude bits at odd ones.
fn interleave(lat: u32, long: u32) -> u64 {
    spread(lat) | (spread(long) << 1)
}

/// (latitude bits, longitude bits) of an interleaved hash.
fn deinterleave(bits: u64) -> (u32, u32) {
    (squash(bits) as u32, squash(bits >> 1) as u32)
}

pub fn encode(long_range: Range, lat_range: Range, long: f64, lat: f64, step: u8) -> Option<Hash> {
    if !(1..=32).contains(&step)
        || !(LONG_MIN..=LONG_MAX).contains(&long)
        || !(LAT_MIN..=LAT_MAX).contains(&lat)
        || lat < lat_range.min
        || lat > lat_range.max
        || long < long_range.min
        || long > long_range.max
    {
        return None;
    }
    let scale = (1u64 << step) as f64;
    let lat_offset = (lat - lat_range.min) / (lat_range.max - lat_range.min) * scale;
    let long_offset = (long - long_range.min) / (long_range.max - long_range.min) * scale;
    Some(Hash {
        bits: interleave(lat_offset as u32, long_offset as u32),
        step,
    })
}

/// The 52-bit score of a position (already checked to be in range).
pub fn score_of(long: f64, lat: f64) -> Option<u64> {
    encode(LONG_RANGE, LAT_RANGE, long, lat, STEP_MAX).map(|h| h.align52())
}

pub fn decode(long_range: Range, lat_range: Range, hash: Hash) -> Area {
    let (ilat, ilong) = deinterleave(hash.bits);
    let scale = (1u64 << hash.step) as f64;
    let lat_scale = lat_range.max - lat_range.min;
    let long_scale = long_range.max - long_range.min;
    Area {
        latitude: Range {
            min: lat_range.min + (ilat as f64 / scale) * lat_scale,
            max: lat_range.min + ((ilat as u64 + 1) as f64 / scale) * lat_scale,
        },
        longitude: Range {
            min: long_range.min + (ilong as f64 / scale) * long_scale,
            max: long_range.min + ((ilong as u64 + 1) as f64 / scale) * long_scale,
        },
    }
}

/// The centre of a stored score's box: (longitude, latitude), clamped to the valid ranges.
pub fn position_of(score: f64) -> (f64, f64) {
    let area = decode(
        LONG_RANGE,
        LAT_RANGE,
        Hash {
            bits: score as u64,
            step: STEP_MAX,
        },
    );
    let long = ((area.longitude.min + area.longitude.max) / 2.0).clamp(LONG_MIN, LONG_MAX);
    let lat = ((area.latitude.min + area.latitude.max) / 2.0).clamp(LAT_MIN, LAT_MAX);
    (long, lat)
}

/// The standard 11-character geohash (latitude over ±90) of a stored score.
pub fn geohash_string(score: f64) -> String {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let (long, lat) = position_of(score);
    let standard_lat = Range {
        min: -90.0,
        max: 90.0,
    };
    let bits = encode(LONG_RANGE, standard_lat, long, lat, STEP_MAX)
        .map(|h| h.bits)
        .unwrap_or(0);
    (0..11)
        .map(|i| {
            // 52 bits make ten characters; the eleventh is always '0', as in Redis.
            let idx = if i == 10 {
                0
            } else {
                (bits >> (52 - (i + 1) * 5)) & 0x1f
            };
            ALPHABET[idx as usize] as char
        })
        .collect()
}

fn move_x(hash: &mut Hash, d: i8) {
    let shift = 64 - hash.step as u32 * 2;
    let mut x = hash.bits & 0xaaaa_aaaa_aaaa_aaaa;
    let y = hash.bits & 0x5555_5555_5555_5555;
    let zz = 0x5555_5555_5555_5555u64 >> shift;
    if d > 0 {
        x = x.wrapping_add(zz + 1);
    } else {
        x |= zz;
        x = x.wrapping_sub(zz + 1);
    }
    x &= 0xaaaa_aaaa_aaaa_aaaau64 >> shift;
    hash.bits = x | y;
}

fn move_y(hash: &mut Hash, d: i8) {
    let shift = 64 - hash.step as u32 * 2;
    let x = hash.bits & 0xaaaa_aaaa_aaaa_aaaa;
    let mut y = hash.bits & 0x5555_5555_5555_5555;
    let zz = 0xaaaa_aaaa_aaaa_aaaau64 >> shift;
    if d > 0 {
        y = y.wrapping_add(zz + 1);
    } else {
        y |= zz;
        y = y.wrapping_sub(zz + 1);
    }
    y &= 0x5555_5555_5555_5555u64 >> shift;
    hash.bits = x | y;
}

fn moved(hash: Hash, dx: i8, dy: i8) -> Hash {
    let mut h = hash;
    if dx != 0 {
        move_x(&mut h, dx);
    }
    if dy != 0 {
        move_y(&mut h, dy);
    }
    h
}

/// What a search covers: a circle of `radius` or a `width` x `height` box (both in the
/// unit `conversion` turns into metres) around (longitude, latitude).
#[derive(Clone, Copy, Debug)]
pub enum Shape {
    Circle { radius: f64 },
    Box { width: f64, height: f64 },
}

#[derive(Clone, Copy, Debug)]
pub struct Search {
    pub long: f64,
    pub lat: f64,
    pub shape: Shape,
    pub conversion: f64,
}

fn steps_for_radius(mut range_m: f64, lat: f64) -> u8 {
    if range_m == 0.0 {
        return 26;
    }
    let mut step: i32 = 1;
    while range_m < MERCATOR_MAX {
        range_m *= 2.0;
        step += 1;
    }
    step -= 2;
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, 26) as u8
}

impl Search {
    /// (min longitude, min latitude, max longitude, max latitude) of the searched area.
    fn bounds(&self) -> [f64; 4] {
        let (half_height, half_width) = match self.shape {
            Shape::Circle { radius } => (radius, radius),
            Shape::Box { width, height } => (height / 2.0, width / 2.0),
        };
        let height = self.conversion * half_height;
        let width = self.conversion * half_width;
        let lat_delta = rad_deg(height / EARTH_RADIUS_M);
        let long_delta_top = rad_deg(width / EARTH_RADIUS_M / deg_rad(self.lat + lat_delta).cos());
        let long_delta_bottom =
            rad_deg(width / EARTH_RADIUS_M / deg_rad(self.lat - lat_delta).cos());
        // Hemispheres widen towards opposite edges.
        let delta = if self.lat < 0.0 {
            long_delta_bottom
        } else {
            long_delta_top
        };
        [
            self.long - delta,
            self.lat - lat_delta,
            self.long + delta,
            self.lat + lat_delta,
        ]
    }

    /// The boxes to scan, in Redis's order: centre, N, S, E, W, NE, NW, SE, SW (boxes
    /// that cannot hold a match are dropped as zero hashes).
    pub fn boxes(&self) -> [Hash; 9] {
        let [min_lon, min_lat, max_lon, max_lat] = self.bounds();
        let radius_m = match self.shape {
            Shape::Circle { radius } => radius,
            Shape::Box { width, height } => {
                ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt()
            }
        } * self.conversion;
        let mut steps = steps_for_radius(radius_m, self.lat);
        let centre =
            |steps| encode(LONG_RANGE, LAT_RANGE, self.long, self.lat, steps).unwrap_or_default();
        let mut hash = centre(steps);
        let area_of = |h| decode(LONG_RANGE, LAT_RANGE, h);
        let decrease = area_of(moved(hash, 0, 1)).latitude.max < max_lat
            || area_of(moved(hash, 0, -1)).latitude.min > min_lat
            || area_of(moved(hash, 1, 0)).longitude.max < max_lon
            || area_of(moved(hash, -1, 0)).longitude.min > min_lon;
        if steps > 1 && decrease {
            steps -= 1;
            hash = centre(steps);
        }
        let area = area_of(hash);
        let mut n = [
            hash,
            moved(hash, 0, 1),
            moved(hash, 0, -1),
            moved(hash, 1, 0),
            moved(hash, -1, 0),
            moved(hash, 1, 1),
            moved(hash, -1, 1),
            moved(hash, 1, -1),
            moved(hash, -1, -1),
        ];
        const N: usize = 1;
        const S: usize = 2;
        const E: usize = 3;
        const W: usize = 4;
        const NE: usize = 5;
        const NW: usize = 6;
        const SE: usize = 7;
        const SW: usize = 8;
        if steps >= 2 {
            let mut drop = |which: &[usize]| which.iter().for_each(|&i| n[i] = Hash::default());
            if area.latitude.min < min_lat {
                drop(&[S, SW, SE]);
            }
            if area.latitude.max > max_lat {
                drop(&[N, NE, NW]);
            }
            if area.longitude.min < min_lon {
                drop(&[W, SW, NW]);
            }
            if area.longitude.max > max_lon {
                drop(&[E, SE, NE]);
            }
        }
        n
    }

    /// The distance (metres) from the centre to a point, if the point is inside the shape.
    pub fn contains(&self, long: f64, lat: f64) -> Option<f64> {
        match self.shape {
            Shape::Circle { radius } => {
                let d = distance(self.long, self.lat, long, lat);
                (d <= radius * self.conversion).then_some(d)
            }
            Shape::Box { width, height } => {
                if lat_distance(lat, self.lat) > height * self.conversion / 2.0 {
                    return None;
                }
                if distance(long, lat, self.long, lat) > width * self.conversion / 2.0 {
                    return None;
                }
                Some(distance(self.long, self.lat, long, lat))
            }
        }
    }
}

fn lat_distance(lat1: f64, lat2: f64) -> f64 {
    EARTH_RADIUS_M * (deg_rad(lat2) - deg_rad(lat1)).abs()
}

/// Haversine distance in metres.
pub fn distance(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let (lon1r, lon2r) = (deg_rad(lon1), deg_rad(lon2));
    let v = ((lon2r - lon1r) / 2.0).sin();
    if v == 0.0 {
        return lat_distance(lat1, lat2);
    }
    let (lat1r, lat2r) = (deg_rad(lat1), deg_rad(lat2));
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS_M * a.sqrt().asin()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interleaving_round_trips() {
        for (a, b) in [
            (0u32, 0u32),
            (1, 2),
            (0x3ff_ffff, 0x155_5555),
            (u32::MAX, 7),
        ] {
            assert_eq!(deinterleave(interleave(a, b)), (a, b));
        }
    }

    #[test]
    fn palermo_has_redis_s_score_and_geohash() {
        // Values redis-server 7.0 gives for GEOADD Sicily 13.361389 38.115556 Palermo.
        let score = score_of(13.361389, 38.115556).unwrap();
        assert_eq!(score, 3479099956230698);
        assert_eq!(geohash_string(score as f64), "sqc8b49rny0");
    }
}
