//! The tests, named and built as redis-benchmark 7.0 builds them (checked with MONITOR against
//! redis-server): same titles, same commands and keys, `__rand_int__` placeholders in keys that
//! `-r N` replaces per request with a 12-digit random number below N.

use bytes::BytesMut;
use proto::resp::{encode, Frame};
use rand::Rng;

/// The placeholder redis-benchmark randomizes; its replacement has the same length, so a
/// request is randomized in place.
pub const RAND_PLACEHOLDER: &[u8] = b"__rand_int__";
const RAND_DIGITS: usize = 12;
const _: () = assert!(RAND_PLACEHOLDER.len() == RAND_DIGITS);

/// How many keys MSET writes per request (redis-benchmark's "MSET (10 keys)").
pub const MSET_KEYS: usize = 10;

/// One request's bytes and where its placeholders are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    bytes: Vec<u8>,
    placeholders: Vec<usize>,
}

impl Request {
    /// A multi-bulk (RESP array) request.
    pub fn command(args: &[&[u8]]) -> Request {
        let mut out = BytesMut::new();
        encode(&Frame::command(args), &mut out);
        Request::from_bytes(out.to_vec())
    }

    /// An inline request (`PING\r\n`).
    pub fn inline(line: &str) -> Request {
        Request::from_bytes(format!("{line}\r\n").into_bytes())
    }

    fn from_bytes(bytes: Vec<u8>) -> Request {
        let placeholders = bytes
            .windows(RAND_PLACEHOLDER.len())
            .enumerate()
            .filter(|(_, w)| *w == RAND_PLACEHOLDER)
            .map(|(i, _)| i)
            .collect();
        Request {
            bytes,
            placeholders,
        }
    }

    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Appends the request to `out`; with a keyspace, each placeholder becomes a random number
    /// below it, zero-padded to 12 digits (as redis-benchmark does). Without one the
    /// placeholder stays as it is: every request hits the same key.
    pub fn append_to(&self, out: &mut Vec<u8>, keyspace: Option<u64>, rng: &mut impl Rng) {
        let start = out.len();
        out.extend_from_slice(&self.bytes);
        let Some(keyspace) = keyspace else {
            return;
        };
        for &at in &self.placeholders {
            let mut n = rng.gen_range(0..keyspace);
            for digit in out[start + at..start + at + RAND_DIGITS].iter_mut().rev() {
                *digit = b'0' + (n % 10) as u8;
                n /= 10;
            }
        }
    }
}

/// A benchmark test: its title (as redis-benchmark prints it) and its request.
#[derive(Clone, Debug)]
pub struct Test {
    pub title: &'static str,
    pub request: Request,
}

/// Every test in redis-benchmark's order, with the `-t` names that select it.
const CATALOG: &[(&str, &[&str])] = &[
    ("PING_INLINE", &["ping_inline", "ping"]),
    ("PING_MBULK", &["ping_mbulk", "ping"]),
    ("SET", &["set"]),
    ("GET", &["get"]),
    ("INCR", &["incr"]),
    ("LPUSH", &["lpush"]),
    ("RPUSH", &["rpush"]),
    ("LPOP", &["lpop"]),
    ("RPOP", &["rpop"]),
    ("SADD", &["sadd"]),
    ("HSET", &["hset"]),
    ("SPOP", &["spop"]),
    ("ZADD", &["zadd"]),
    ("ZPOPMIN", &["zpopmin"]),
    (
        "LPUSH (needed to benchmark LRANGE)",
        &[
            "lrange",
            "lrange_100",
            "lrange_300",
            "lrange_500",
            "lrange_600",
        ],
    ),
    ("LRANGE_100 (first 100 elements)", &["lrange", "lrange_100"]),
    ("LRANGE_300 (first 300 elements)", &["lrange", "lrange_300"]),
    ("LRANGE_500 (first 500 elements)", &["lrange", "lrange_500"]),
    ("LRANGE_600 (first 600 elements)", &["lrange", "lrange_600"]),
    ("MSET (10 keys)", &["mset"]),
];

/// Why a `-t` list was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown test '{name}' in -t; known tests: {known}")]
pub struct UnknownTest {
    pub name: String,
    pub known: String,
}

/// The tests a `-t` list (comma separated, any case) selects, in redis-benchmark's order; all
/// of them without a list. `payload` is the `-d` value; `randomized` says whether `-r` was
/// given (ZADD's score is then random too, as in redis-benchmark).
pub fn select(
    list: Option<&str>,
    payload: &[u8],
    randomized: bool,
) -> Result<Vec<Test>, UnknownTest> {
    let names: Option<Vec<String>> = list.map(|l| {
        l.split(',')
            .map(|n| n.trim().to_ascii_lowercase())
            .filter(|n| !n.is_empty())
            .collect()
    });
    if let Some(names) = &names {
        for name in names {
            if !CATALOG.iter().any(|(_, sel)| sel.contains(&name.as_str())) {
                let mut known: Vec<&str> = CATALOG
                    .iter()
                    .flat_map(|(_, s)| s.iter().copied())
                    .collect();
                known.sort_unstable();
                known.dedup();
                return Err(UnknownTest {
                    name: name.clone(),
                    known: known.join(","),
                });
            }
        }
    }
    Ok(CATALOG
        .iter()
        .filter(|(_, selectors)| match &names {
            None => true,
            Some(names) => names.iter().any(|n| selectors.contains(&n.as_str())),
        })
        .map(|(title, _)| Test {
            title,
            request: request_for(title, payload, randomized),
        })
        .collect())
}

fn request_for(title: &str, payload: &[u8], randomized: bool) -> Request {
    let rand_key = |prefix: &str| format!("{prefix}:__rand_int__").into_bytes();
    match title {
        "PING_INLINE" => Request::inline("PING"),
        "PING_MBULK" => Request::command(&[b"PING"]),
        "SET" => Request::command(&[b"SET", &rand_key("key"), payload]),
        "GET" => Request::command(&[b"GET", &rand_key("key")]),
        "INCR" => Request::command(&[b"INCR", &rand_key("counter")]),
        "LPUSH" | "LPUSH (needed to benchmark LRANGE)" => {
            Request::command(&[b"LPUSH", b"mylist", payload])
        }
        "RPUSH" => Request::command(&[b"RPUSH", b"mylist", payload]),
        "LPOP" => Request::command(&[b"LPOP", b"mylist"]),
        "RPOP" => Request::command(&[b"RPOP", b"mylist"]),
        "SADD" => Request::command(&[b"SADD", b"myset", &rand_key("element")]),
        "HSET" => Request::command(&[b"HSET", b"myhash", &rand_key("element"), payload]),
        "SPOP" => Request::command(&[b"SPOP", b"myset"]),
        "ZADD" => {
            let score: &[u8] = if randomized { RAND_PLACEHOLDER } else { b"0" };
            Request::command(&[b"ZADD", b"myzset", score, &rand_key("element")])
        }
        "ZPOPMIN" => Request::command(&[b"ZPOPMIN", b"myzset"]),
        "MSET (10 keys)" => {
            let key = rand_key("key");
            let mut args: Vec<&[u8]> = vec![b"MSET"];
            for _ in 0..MSET_KEYS {
                args.push(&key);
                args.push(payload);
            }
            Request::command(&args)
        }
        lrange => {
            // "LRANGE_<n> (first <n> elements)"
            let n: u32 = lrange
                .trim_start_matches("LRANGE_")
                .split(' ')
                .next()
                .and_then(|n| n.parse().ok())
                .unwrap_or(100);
            let last = (n - 1).to_string();
            Request::command(&[b"LRANGE", b"mylist", b"0", last.as_bytes()])
        }
    }
}

/// A `-d` payload: `size` letters, deterministic (redis-benchmark also sends letters).
pub fn payload(size: usize) -> Vec<u8> {
    const LETTERS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    (0..size)
        .map(|i| LETTERS[(i * 7 + 3) % LETTERS.len()])
        .collect()
}

#[cfg(test)]
mod tests {
    //! Goal: `-t` selects what redis-benchmark selects, requests are the commands it sends, and
    //! `__rand_int__` is randomized in place within the keyspace.
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    fn titles(list: Option<&str>) -> Vec<&'static str> {
        select(list, b"xxx", false)
            .unwrap()
            .into_iter()
            .map(|t| t.title)
            .collect()
    }

    #[test]
    fn selection_follows_redis_benchmark_names_and_order() {
        assert_eq!(titles(Some("ping")), ["PING_INLINE", "PING_MBULK"]);
        assert_eq!(titles(Some("GET, set")), ["SET", "GET"]);
        assert_eq!(
            titles(Some("lrange_100")),
            [
                "LPUSH (needed to benchmark LRANGE)",
                "LRANGE_100 (first 100 elements)"
            ]
        );
        assert_eq!(titles(Some("lrange")).len(), 5);
        assert_eq!(titles(None).len(), CATALOG.len());
        let err = select(Some("set,nope"), b"", false).unwrap_err();
        assert_eq!(err.name, "nope");
        assert!(err.known.contains("zpopmin"));
    }

    #[test]
    fn requests_are_the_commands_redis_benchmark_sends() {
        let tests = select(Some("ping,set,zadd,mset,lrange_300"), b"abc", false).unwrap();
        let wire: Vec<String> = tests
            .iter()
            .map(|t| String::from_utf8(t.request.bytes.clone()).unwrap())
            .collect();
        assert_eq!(wire[0], "PING\r\n");
        assert_eq!(wire[1], "*1\r\n$4\r\nPING\r\n");
        assert_eq!(
            wire[2],
            "*3\r\n$3\r\nSET\r\n$16\r\nkey:__rand_int__\r\n$3\r\nabc\r\n"
        );
        assert_eq!(
            wire[3],
            "*4\r\n$4\r\nZADD\r\n$6\r\nmyzset\r\n$1\r\n0\r\n$20\r\nelement:__rand_int__\r\n"
        );
        assert_eq!(
            wire[5],
            "*4\r\n$6\r\nLRANGE\r\n$6\r\nmylist\r\n$1\r\n0\r\n$3\r\n299\r\n"
        );
        assert_eq!(wire[6].matches("key:__rand_int__").count(), MSET_KEYS);
        let randomized = select(Some("zadd"), b"abc", true).unwrap();
        assert_eq!(randomized[0].request.placeholders.len(), 2);
    }

    #[test]
    fn placeholders_become_zero_padded_numbers_below_the_keyspace() {
        let request = Request::command(&[b"SET", b"key:__rand_int__", b"v"]);
        let mut rng = SmallRng::seed_from_u64(7);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..200 {
            let mut out = Vec::new();
            request.append_to(&mut out, Some(5), &mut rng);
            assert_eq!(out.len(), request.len());
            let text = String::from_utf8(out).unwrap();
            let key = text.split("\r\n").nth(4).unwrap();
            assert!(key.starts_with("key:00000000000"), "{key}");
            let n: u64 = key["key:".len()..].parse().unwrap();
            assert!(n < 5);
            seen.insert(n);
        }
        assert_eq!(seen.len(), 5, "all of a small keyspace gets hit");
        let mut out = Vec::new();
        request.append_to(&mut out, None, &mut rng);
        assert!(String::from_utf8(out).unwrap().contains("key:__rand_int__"));
    }

    #[test]
    fn payload_has_the_requested_size() {
        assert_eq!(payload(0).len(), 0);
        assert_eq!(payload(1000).len(), 1000);
        assert!(payload(64).iter().all(u8::is_ascii_alphabetic));
    }
}
