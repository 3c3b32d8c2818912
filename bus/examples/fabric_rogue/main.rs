//! A rogue local process against a node's fabric memory (issue 15's acceptance test): it
//! connects like any client, learns its own advert, and tries every guess of `guesses.rs`
//! as READ and WRITE through the public bus API; on `ofi:shm` it also tries cross-memory
//! attach into the victim (`--pid`). Prints one `rogue: ...` line (and `rogue-cma: ...`) and
//! exits 1 if anything succeeded, a secret was read, its own write-only window was readable,
//! or an attempt never reached the victim.
//!
//! ```text
//! fabric_rogue probe-stream --fabric ofi:tcp --addr 127.0.0.1:8000 [--density full|sampled|lane]
//!     [--secret TEXT]... [--victim-advert ADDR:LEN:RKEY]... [--pid PID] [--parallel N]
//! fabric_rogue forge-ack --fabric ofi:tcp --addr 127.0.0.1:<repl-fabric-port> --offset N ...
//! ```
//! `probe-stream` aims at a node's fabric port (a Stream server: the rogue gets a window of
//! its own to guess from); `forge-ack` at its replication port (nothing is advertised to an
//! unproven connection): 8-byte WRITEs of offset N, as a replica acknowledges, and READs.
//! The modules are shared with `bus/tests/ofi_rogue.rs` and the verbs lane (`#[path]`).

mod cma;
mod guesses;
mod probe;

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use bus::select::{with_provider, WithProvider};
use bus::{BusError, Provider, RemoteRegion};

/// How long an attempt may go unanswered: a refusal on shm (which never answers one); a
/// victim that accepted it answers within milliseconds.
const ATTEMPT_DEADLINE: Duration = Duration::from_millis(200);
/// Connections per wave of attempts (each refused attempt costs its connection).
const PARALLEL_DEFAULT: usize = 8;
/// A replication ack or applied word.
const ACK_WORD_LEN: u64 = 8;

struct Args {
    mode: String,
    fabric: String,
    addr: SocketAddr,
    density: Option<guesses::Density>,
    seed: u64,
    secrets: Vec<Vec<u8>>,
    exact: Vec<RemoteRegion>,
    pid: Option<i32>,
    parallel: usize,
    offset: u64,
}

fn parse_advert(text: &str) -> Result<RemoteRegion, String> {
    let parts: Vec<&str> = text.split(':').collect();
    let [addr, len, rkey] = parts[..] else {
        return Err(format!("--victim-advert {text:?}: want ADDR:LEN:RKEY"));
    };
    let num = |s: &str| {
        let s = s.trim_start_matches("0x");
        u64::from_str_radix(s, 16).map_err(|e| format!("{s:?}: {e}"))
    };
    Ok(RemoteRegion {
        addr: num(addr)?,
        len: num(len)?,
        rkey: num(rkey)?,
    })
}

fn parse() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let mode = it
        .next()
        .ok_or("usage: fabric_rogue probe-stream --fabric F --addr A ...")?;
    let mut args = Args {
        mode,
        fabric: "ofi:tcp".into(),
        addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        density: None,
        seed: 0x5eed,
        secrets: Vec::new(),
        exact: Vec::new(),
        pid: None,
        parallel: PARALLEL_DEFAULT,
        offset: 1,
    };
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let bad = |e: &dyn std::fmt::Display| format!("{flag} {value}: {e}");
        match flag.as_str() {
            "--fabric" => args.fabric = value,
            "--addr" => args.addr = value.parse().map_err(|e| bad(&e))?,
            "--density" => {
                args.density = Some(match value.as_str() {
                    "full" => guesses::Density::FULL,
                    "sampled" => guesses::Density::SAMPLED,
                    "lane" => guesses::Density::LANE,
                    _ => return Err(bad(&"want full, sampled or lane")),
                })
            }
            "--seed" => args.seed = value.parse().map_err(|e| bad(&e))?,
            "--secret" => args.secrets.push(value.into_bytes()),
            "--victim-advert" => args.exact.push(parse_advert(&value)?),
            "--pid" => args.pid = Some(value.parse().map_err(|e| bad(&e))?),
            "--parallel" => args.parallel = value.parse().map_err(|e| bad(&e))?,
            "--offset" => args.offset = value.parse().map_err(|e| bad(&e))?,
            other => return Err(format!("unknown flag {other}")),
        }
    }
    Ok(args)
}

/// Whether the provider refuses a bad key without answering (libfabric shm 1.17).
pub fn refuses_silently(fabric: &str) -> bool {
    fabric == "ofi:shm"
}

struct StreamJob<'a>(&'a Args);

impl WithProvider for StreamJob<'_> {
    type Output = Result<probe::Report, BusError>;
    fn run<P: Provider>(self, provider: P) -> Self::Output {
        let a = self.0;
        let mut opts =
            probe::ProbeOptions::stream(ATTEMPT_DEADLINE, refuses_silently(&a.fabric), a.parallel);
        opts.secrets = a.secrets.clone();
        if a.mode == "forge-ack" {
            opts.victim = probe::Victim::Bare;
            opts.len = ACK_WORD_LEN;
            opts.value = a.offset;
        }
        let density = a.density.unwrap_or(guesses::Density::SAMPLED);
        let make = |own: Option<&RemoteRegion>| {
            probe::attempts_of(&guesses::guesses(own, density, a.seed, &a.exact))
        };
        let report = probe::probe(&provider, a.addr, make, &opts)?;
        Ok(report)
    }
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("fabric_rogue: {e}");
            return ExitCode::from(2);
        }
    };
    if refuses_silently(&args.fabric) {
        // Our shm endpoints inject WRITEs in pieces, which "complete" whether or not the
        // victim took them: the rogue must learn which of its guesses were accepted.
        bus::ofi::answer_writes();
    }
    let mut cma_addrs: Vec<u64> = args.exact.iter().map(|r| r.addr).collect();
    let held = match args.mode.as_str() {
        "probe-stream" | "forge-ack" => {
            match with_provider(&args.fabric, StreamJob(&args)).and_then(|r| r) {
                Ok(report) => {
                    println!("{}", report.line());
                    for b in &report.breaches {
                        println!("rogue-breach: {b}");
                    }
                    cma_addrs.extend(report.own.map(|o| o.addr));
                    report.victim_held()
                }
                Err(e) => {
                    eprintln!("fabric_rogue: {e}");
                    return ExitCode::from(2);
                }
            }
        }
        other => {
            eprintln!("fabric_rogue: unknown mode {other}");
            return ExitCode::from(2);
        }
    };
    let cma_held = match args.pid {
        Some(pid) => {
            let report = cma::try_cma(pid, &cma_addrs, guesses::GUESS_LEN as usize);
            println!("{}", report.line());
            report.succeeded == 0
        }
        None => true,
    };
    if held && cma_held {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
