//! A small mutational fuzzer on stable Rust, for machines without a nightly toolchain (which
//! cargo-fuzz needs): it runs the same oracles as the cargo-fuzz targets in `fuzz/`
//! (`proto::resp::fuzz_checks`) on inputs grown from valid RESP and mutated at random.
//!
//! It has no coverage feedback, so it finds less than libFuzzer per second; what it keeps in
//! its pool are inputs that still decode (or parse) to something, so mutation keeps reaching
//! past the first few bytes. Everything comes from one seed: a failure replays from the seed
//! the run printed, and the failing input is written out as well.
//!
//! Shared by the `fuzz_resp` example (time-bounded runs from scripts/fuzz.sh) and the
//! `fuzz_smoke` test (a fixed seed and count, in every `cargo test`).

use proto::resp::fuzz_checks;
use proto::resp::Frame;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

/// The fuzz targets, by the names the cargo-fuzz targets have.
pub const TARGETS: &[&str] = &["resp_decode", "request_parser", "bus_envelope"];

/// Most inputs kept for mutation: the pool is replaced at random once full.
const POOL_MAX: usize = 4096;

/// How long a run may go.
#[derive(Clone, Copy, Debug)]
pub enum Budget {
    Time(Duration),
    Inputs(u64),
}

#[derive(Debug)]
pub struct Stats {
    pub inputs: u64,
    pub pool: usize,
}

/// An input on which an oracle panicked.
#[derive(Debug)]
pub struct Crash {
    pub input: Vec<u8>,
    pub message: String,
}

/// Runs `target` within `budget`, on inputs of at most `len_max` bytes, from `seed`.
pub fn run(
    target: &str,
    seed: u64,
    budget: Budget,
    len_max: usize,
) -> Result<Result<Stats, Crash>, String> {
    let check: fn(&[u8]) = match target {
        "resp_decode" => fuzz_checks::resp_decode,
        "request_parser" => fuzz_checks::request_parser,
        "bus_envelope" => proto::bus::fuzz_checks::bus_envelope,
        other => return Err(format!("unknown target {other:?}; targets: {TARGETS:?}")),
    };
    let mut rng = Rng::new(seed);
    let mut pool: Vec<Vec<u8>> = seeds(target, &mut rng);
    let started = Instant::now();
    let mut inputs = 0u64;
    loop {
        let done = match budget {
            // The clock is read once every 256 inputs.
            Budget::Time(limit) => inputs & 0xff == 0 && started.elapsed() >= limit,
            Budget::Inputs(limit) => inputs >= limit,
        };
        if done {
            return Ok(Ok(Stats {
                inputs,
                pool: pool.len(),
            }));
        }
        inputs += 1;
        let input = next_input(target, &pool, &mut rng, len_max);
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| check(&input))) {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "panic without a message".to_string());
            return Ok(Err(Crash { input, message }));
        }
        if keep(target, &input) {
            if pool.len() < POOL_MAX {
                pool.push(input);
            } else {
                let at = rng.below(pool.len());
                pool[at] = input;
            }
        }
    }
}

/// Whether an input is worth mutating further: it still means something to the code under
/// test, so its mutants reach deeper than random bytes would.
fn keep(target: &str, input: &[u8]) -> bool {
    match target {
        "resp_decode" => matches!(proto::resp::decode(input), Ok(Some(_))),
        "bus_envelope" => {
            use prost::Message as _;
            proto::bus::BusMessage::decode(input).is_ok()
        }
        _ => {
            let limits = proto::resp::RequestLimits::default();
            let run = fuzz_checks::run_request_parser(
                input.get(1..).unwrap_or_default(),
                [usize::MAX],
                &limits,
            );
            !run.requests.is_empty()
        }
    }
}

fn next_input(target: &str, pool: &[Vec<u8>], rng: &mut Rng, len_max: usize) -> Vec<u8> {
    let mut input = match rng.below(20) {
        0 => (0..rng.below(64)).map(|_| rng.byte()).collect(),
        1 => seed_input(target, rng),
        _ => pool[rng.below(pool.len())].clone(),
    };
    for _ in 0..1 + rng.below(4) {
        mutate(&mut input, pool, rng);
    }
    input.truncate(len_max);
    input
}

/// Numbers at the edges of what the parsers accept.
const NUMBERS: &[&[u8]] = &[
    b"-1",
    b"-2",
    b"0",
    b"1",
    b"2",
    b"3",
    b"10",
    b"2147483647",
    b"2147483648",
    b"536870912",
    b"536870913",
    b"16384",
    b"16385",
    b"65536",
    b"9223372036854775807",
    b"9223372036854775808",
    b"-9223372036854775808",
    b"01",
];

/// Pieces of RESP that mutations insert: type bytes, line ends, edge-case numbers.
const TOKENS: &[&[u8]] = &[
    b"\r\n",
    b"\r",
    b"\n",
    b"*",
    b"$",
    b"%",
    b"~",
    b">",
    b"|",
    b"=",
    b"!",
    b"(",
    b",",
    b"#",
    b"_",
    b":",
    b"+",
    b"-",
    b"txt:",
    b"inf",
    b"-inf",
    b"nan",
    b"t",
    b"f",
    b"*1\r\n",
    b"$-1\r\n",
    b"*-1\r\n",
    b"_\r\n",
    b":0\r\n",
    b"$0\r\n\r\n",
    b"%1\r\n",
    b"|1\r\n",
    b"|0\r\n",
    b",nan\r\n",
    b"\"",
    b"'",
    b" ",
    b"\\x41",
    b"\\",
    b"\t",
    b"\0",
];

fn mutate(input: &mut Vec<u8>, pool: &[Vec<u8>], rng: &mut Rng) {
    let len = input.len();
    match rng.below(9) {
        0 if len > 0 => {
            let at = rng.below(len);
            input[at] ^= 1 << rng.below(8);
        }
        1 if len > 0 => {
            let at = rng.below(len);
            input[at] = *rng.pick(b"\r\n*$%~>|=!(,#_:+-0123456789 \"'\\\0\xff");
        }
        2 => {
            let at = rng.below(len + 1);
            let token = if rng.below(3) == 0 {
                rng.pick(NUMBERS)
            } else {
                rng.pick(TOKENS)
            };
            input.splice(at..at, token.iter().copied());
        }
        3 if len > 0 => {
            let at = rng.below(len);
            let end = (at + 1 + rng.below(16)).min(len);
            input.drain(at..end);
        }
        4 if len > 0 => {
            // Repeat a piece: nests aggregates, repeats elements.
            let at = rng.below(len);
            let end = (at + 1 + rng.below(32)).min(len);
            let piece = input[at..end].to_vec();
            let to = rng.below(len + 1);
            input.splice(to..to, piece);
        }
        5 if len > 0 => {
            input.truncate(rng.below(len));
        }
        6 => {
            // Splice: this input's head, another's tail.
            let other = &pool[rng.below(pool.len())];
            let head = rng.below(len + 1);
            let tail = rng.below(other.len() + 1);
            input.truncate(head);
            input.extend_from_slice(&other[tail..]);
        }
        7 => {
            // Replace a number with an edge case.
            let from = rng.below(len + 1);
            if let Some(start) = input[from..]
                .iter()
                .position(|b| b.is_ascii_digit())
                .map(|p| from + p)
            {
                let end = input[start..]
                    .iter()
                    .position(|b| !b.is_ascii_digit())
                    .map_or(input.len(), |p| start + p);
                let number = rng.pick(NUMBERS);
                input.splice(start..end, number.iter().copied());
            }
        }
        _ => {
            let other = &pool[rng.below(pool.len())];
            let at = rng.below(len + 1);
            input.splice(at..at, other.iter().copied());
        }
    }
}

fn seeds(target: &str, rng: &mut Rng) -> Vec<Vec<u8>> {
    let mut seeds: Vec<Vec<u8>> = match target {
        "resp_decode" => vec![
            b"%2\r\n+a\r\n:1\r\n+b\r\n:2\r\n".to_vec(),
            b">3\r\n+message\r\n+channel\r\n$5\r\nhello\r\n".to_vec(),
            b"=15\r\ntxt:Some string\r\n".to_vec(),
            b"(3492890328409238509324850943850943825024385\r\n".to_vec(),
            b",1.23\r\n".to_vec(),
            b",inf\r\n".to_vec(),
            b"#t\r\n".to_vec(),
            b"!21\r\nSYNTAX invalid syntax\r\n".to_vec(),
            b"|1\r\n+key-popularity\r\n%2\r\n$1\r\na\r\n,0.1923\r\n$1\r\nb\r\n,0.0012\r\n*2\r\n:2039123\r\n:9543892\r\n".to_vec(),
            b"*3\r\n$-1\r\n*-1\r\n_\r\n".to_vec(),
        ],
        "bus_envelope" => Vec::new(),
        _ => vec![
            b"\x00*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n".to_vec(),
            b"\x08PING\r\nget \"a\\x41\" 'b'\n*0\r\n\r\n".to_vec(),
            b"\x05*2\r\n$4\r\nAUTH\r\n$3\r\npwd\r\n*11\r\n".to_vec(),
        ],
    };
    for _ in 0..64 {
        seeds.push(seed_input(target, rng));
    }
    seeds
}

/// A valid input made from scratch: an encoded random frame, or a header byte and a stream of
/// random commands.
fn seed_input(target: &str, rng: &mut Rng) -> Vec<u8> {
    if target == "resp_decode" {
        return random_frame(rng, 4).to_bytes().to_vec();
    }
    if target == "bus_envelope" {
        return bus_seed(rng);
    }
    let mut input = vec![rng.byte()];
    for _ in 0..1 + rng.below(4) {
        let args: Vec<Vec<u8>> = (0..rng.below(5))
            .map(|_| (0..rng.below(10)).map(|_| rng.byte()).collect())
            .collect();
        let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        input.extend_from_slice(&Frame::command(&refs).to_bytes());
    }
    input
}

fn random_frame(rng: &mut Rng, depth: u32) -> Frame {
    let text = |rng: &mut Rng| -> Vec<u8> {
        (0..rng.below(12))
            .map(|_| *rng.pick(b"abcXYZ019 :-_"))
            .collect()
    };
    let kinds = if depth == 0 { 12 } else { 17 };
    match rng.below(kinds) {
        0 => Frame::Simple(text(rng).into()),
        1 => Frame::Error(text(rng).into()),
        2 => Frame::Integer(rng.next() as i64 >> rng.below(64)),
        3 => Frame::Bulk(
            (0..rng.below(20))
                .map(|_| rng.byte())
                .collect::<Vec<u8>>()
                .into(),
        ),
        4 => Frame::Null,
        5 => Frame::NullBulk,
        6 => Frame::NullArray,
        7 => Frame::Double(f64::from_bits(rng.next())),
        8 => Frame::Boolean(rng.below(2) == 1),
        9 => Frame::BigNumber(format!("-{}{}", rng.next(), rng.next()).into_bytes().into()),
        10 => Frame::Verbatim {
            format: *b"txt",
            text: text(rng).into(),
        },
        11 => Frame::BlobError(text(rng).into()),
        kind => {
            let n = rng.below(4);
            let mut items = Vec::new();
            for _ in 0..n {
                items.push(random_frame(rng, depth - 1));
            }
            let pairs = |rng: &mut Rng, items: Vec<Frame>| {
                items
                    .into_iter()
                    .map(|k| (k, random_frame(rng, depth - 1)))
                    .collect()
            };
            match kind {
                12 => Frame::Array(items),
                13 => Frame::Set(items),
                14 => Frame::Push(items),
                15 => Frame::Map(pairs(rng, items)),
                _ => Frame::Attribute {
                    attrs: pairs(rng, items),
                    data: Box::new(random_frame(rng, depth - 1)),
                },
            }
        }
    }
}

/// splitmix64: small, seedable, good enough to pick mutations.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n`; 0 when `n` is 0.
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }

    fn byte(&mut self) -> u8 {
        self.next() as u8
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// A bus message made from scratch: half the time sealed with the fuzz secret, half the time
/// the bare protobuf body (which the oracle also seals and opens).
fn bus_seed(rng: &mut Rng) -> Vec<u8> {
    use prost::Message as _;
    use proto::bus::*;
    let id = |rng: &mut Rng| -> String {
        (0..40)
            .map(|_| b"0123456789abcdef"[rng.below(16)] as char)
            .collect()
    };
    let header = Header {
        sender: id(rng),
        current_epoch: rng.below(100) as u64,
        config_epoch: rng.below(100) as u64,
        flags: rng.below(4) as u32,
        slots: vec![SlotRange {
            start: rng.below(100) as u32,
            end: 100 + rng.below(16284) as u32,
        }],
        ..Header::default()
    };
    let body = match rng.below(4) {
        0 => Body::Ping(Gossip {
            entries: (0..rng.below(4))
                .map(|_| GossipEntry {
                    node_id: id(rng),
                    port: rng.below(65536) as u32,
                    bus_addr: b"sim:3".to_vec(),
                    ..GossipEntry::default()
                })
                .collect(),
            stamp_ms: rng.below(1 << 20) as u64,
            echo_ms: rng.below(1 << 20) as u64,
            old_echo_age_ms: rng.below(1 << 20) as u64,
        }),
        1 => Body::Fail(Fail { node_id: id(rng) }),
        2 => Body::Update(Update {
            node_id: id(rng),
            config_epoch: 3,
            slots: vec![SlotRange { start: 5, end: 9 }],
        }),
        _ => Body::Publish(Publish {
            channel: b"ch".to_vec(),
            message: (0..rng.below(20)).map(|_| rng.byte()).collect(),
        }),
    };
    let msg = BusMessage {
        header: Some(header),
        body: Some(body),
    };
    if rng.below(2) == 0 {
        seal(&msg, proto::bus::fuzz_checks::FUZZ_SECRET).unwrap_or_default()
    } else {
        msg.encode_to_vec()
    }
}
