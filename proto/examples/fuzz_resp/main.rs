//! A stable-Rust fuzz driver for the RESP decoder and the request parser: the fallback of
//! scripts/fuzz.sh where cargo-fuzz (which needs nightly) cannot run. See driver.rs.
//!
//! ```text
//! cargo run --release -p proto --example fuzz_resp -- [TARGET...]
//! ```
//! Targets: `resp_decode`, `request_parser`, `bus_envelope` (default: all, one after the other).
//! Environment: `FUZZ_SECONDS` per target (default 20) or `FUZZ_INPUTS` (a count instead of a
//! time, for a run that is the same on any machine), `FUZZ_SEED` (default: from the clock;
//! printed, so a failure replays), `FUZZ_MAX_LEN` bytes per input (default 4096),
//! `FUZZ_ARTIFACTS` directory for failing inputs (default `fuzz/artifacts`).
//! Exits 1 when an input fails a check, 2 on bad usage.

mod driver;

use driver::{Budget, TARGETS};
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn env_u64(name: &str) -> Result<Option<u64>, String> {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .map(Some)
            .map_err(|_| format!("{name}={v:?} is not a whole number")),
        Err(_) => Ok(None),
    }
}

fn main() -> ExitCode {
    match fuzz() {
        Ok(code) => code,
        Err(message) => {
            eprintln!("fuzz_resp: {message}");
            ExitCode::from(2)
        }
    }
}

fn fuzz() -> Result<ExitCode, String> {
    let seconds = env_u64("FUZZ_SECONDS")?.unwrap_or(20);
    let inputs = env_u64("FUZZ_INPUTS")?;
    let len_max = env_u64("FUZZ_MAX_LEN")?.unwrap_or(4096) as usize;
    let seed = match env_u64("FUZZ_SEED")? {
        Some(seed) => seed,
        None => SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_err(|e| e.to_string())?
            .as_nanos() as u64,
    };
    let artifacts = std::env::var("FUZZ_ARTIFACTS").unwrap_or_else(|_| "fuzz/artifacts".into());
    let mut targets: Vec<String> = std::env::args().skip(1).collect();
    if targets.is_empty() {
        targets = TARGETS.iter().map(|t| t.to_string()).collect();
    }
    for target in &targets {
        let budget = match inputs {
            Some(n) => Budget::Inputs(n),
            None => Budget::Time(Duration::from_secs(seconds)),
        };
        println!("fuzz_resp: {target} for {budget:?}, seed {seed} (FUZZ_SEED={seed} replays)");
        match driver::run(target, seed, budget, len_max)? {
            Ok(stats) => println!(
                "fuzz_resp: {target}: {} inputs, no failure ({} kept for mutation)",
                stats.inputs, stats.pool
            ),
            Err(crash) => {
                let dir = std::path::Path::new(&artifacts).join(target);
                let path = dir.join(format!("crash-seed-{seed}"));
                std::fs::create_dir_all(&dir)
                    .and_then(|()| std::fs::write(&path, &crash.input))
                    .map_err(|e| format!("writing {}: {e}", path.display()))?;
                eprintln!(
                    "fuzz_resp: {target} FAILED: {}\n  input ({} bytes): {:?}\n  saved to {}",
                    crash.message,
                    crash.input.len(),
                    String::from_utf8_lossy(&crash.input),
                    path.display()
                );
                return Ok(ExitCode::from(1));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
