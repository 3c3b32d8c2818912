//! Goal: every `cargo test` runs the fuzz oracles on a few thousand mutated inputs, so a
//! regression a fuzzer would find shows up without a fuzzing run. Method: the stable fuzz
//! driver of `examples/fuzz_resp` with fixed seeds and a fixed count, so a failure is
//! reproducible as it stands (`FUZZ_SMOKE_INPUTS` raises the count).

// The example uses all of the driver; this test uses part of it.
#[allow(dead_code)]
#[path = "../examples/fuzz_resp/driver.rs"]
mod driver;

use driver::{Budget, TARGETS};

fn inputs() -> u64 {
    std::env::var("FUZZ_SMOKE_INPUTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000)
}

#[test]
fn fuzz_targets_hold_on_mutated_inputs() {
    for target in TARGETS {
        for seed in [1, 2] {
            match driver::run(target, seed, Budget::Inputs(inputs()), 4096) {
                Ok(Ok(stats)) => assert_eq!(stats.inputs, inputs()),
                Ok(Err(crash)) => panic!(
                    "{target} failed with seed {seed}: {}\ninput: {:?}",
                    crash.message,
                    String::from_utf8_lossy(&crash.input)
                ),
                Err(usage) => panic!("{usage}"),
            }
        }
    }
}
