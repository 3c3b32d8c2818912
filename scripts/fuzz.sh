#!/usr/bin/env bash
# Fuzzes the RESP decoder, the server's request parser and the cluster bus decoder for a bounded time, with the best
# engine this machine has. Exits non-zero when an input fails a check (or nothing could run).
#
#   scripts/fuzz.sh [TARGET...]        targets: resp_decode request_parser bus_envelope (default: all)
#
# Environment:
#   FUZZ_SECONDS  seconds per target (default 60)
#   FUZZ_ENGINE   auto (default) | cargo-fuzz | stable
#   FUZZ_MAX_LEN  largest input in bytes (default 4096)
#   FUZZ_INSTALL  1: install cargo-fuzz from crates.io first if it is missing (takes minutes)
#
# Engines, in the order auto tries them:
#   1. cargo-fuzz (libFuzzer, coverage-guided) on nightly, with AddressSanitizer;
#   2. cargo-fuzz on stable with `--sanitizer none` (still coverage-guided; proto has no
#      unsafe code, so the sanitizer adds little);
#   3. the stable-Rust driver `proto/examples/fuzz_resp` (mutational, no coverage feedback),
#      which needs nothing beyond the workspace's own toolchain.
# cargo-fuzz keeps its corpus in fuzz/corpus/TARGET (seeded from fuzz/seeds/TARGET) and writes
# failing inputs to fuzz/artifacts/TARGET; the stable driver writes them there as well.
set -uo pipefail

cd "$(dirname "$0")/.."

seconds="${FUZZ_SECONDS:-60}"
engine="${FUZZ_ENGINE:-auto}"
max_len="${FUZZ_MAX_LEN:-4096}"
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(resp_decode request_parser bus_envelope)
fi
for target in "${targets[@]}"; do
    case "$target" in
        resp_decode | request_parser | bus_envelope) ;;
        *)
            echo "fuzz.sh: unknown target '$target' (resp_decode, request_parser, bus_envelope)" >&2
            exit 2
            ;;
    esac
done

have_cargo_fuzz() { cargo fuzz --version >/dev/null 2>&1; }
have_nightly() { cargo +nightly --version >/dev/null 2>&1; }

if [ "${FUZZ_INSTALL:-0}" = 1 ] && ! have_cargo_fuzz; then
    echo "fuzz.sh: installing cargo-fuzz"
    cargo install cargo-fuzz --locked || echo "fuzz.sh: cargo-fuzz did not install" >&2
fi

# cargo-fuzz's toolchain and sanitizer arguments, if it can build the targets here.
fuzz_args=()
sanitizer=()
label=""
pick_cargo_fuzz() {
    have_cargo_fuzz || return 1
    if have_nightly; then
        fuzz_args=(+nightly fuzz)
        sanitizer=()
        label="cargo-fuzz on nightly (AddressSanitizer)"
    else
        fuzz_args=(fuzz)
        sanitizer=(--sanitizer none)
        label="cargo-fuzz on stable (no sanitizer)"
    fi
    echo "fuzz.sh: building the fuzz targets with $label"
    local log
    log="$(mktemp)"
    if ! cargo "${fuzz_args[@]}" build --fuzz-dir fuzz "${sanitizer[@]}" >"$log" 2>&1; then
        tail -n 30 "$log" >&2
        rm -f "$log"
        echo "fuzz.sh: building with $label failed" >&2
        return 1
    fi
    rm -f "$log"
    return 0
}

run_cargo_fuzz() {
    local status=0
    for target in "${targets[@]}"; do
        mkdir -p "fuzz/corpus/$target"
        echo "fuzz.sh: $target for ${seconds}s with $label"
        cargo "${fuzz_args[@]}" run --fuzz-dir fuzz "${sanitizer[@]}" "$target" \
            "fuzz/corpus/$target" "fuzz/seeds/$target" -- \
            -max_total_time="$seconds" -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 \
            -print_final_stats=1 2>&1 | grep -vE '^#[0-9]+[[:space:]]+(NEW|REDUCE|pulse)'
        local rc=${PIPESTATUS[0]}
        if [ "$rc" -ne 0 ]; then
            echo "fuzz.sh: $target FAILED (exit $rc); failing input in fuzz/artifacts/$target" >&2
            status=1
        fi
    done
    return $status
}

run_stable() {
    echo "fuzz.sh: building the stable driver (proto/examples/fuzz_resp)"
    FUZZ_SECONDS="$seconds" FUZZ_MAX_LEN="$max_len" FUZZ_ARTIFACTS=fuzz/artifacts \
        cargo run --quiet --release -p proto --example fuzz_resp -- "${targets[@]}"
}

case "$engine" in
    auto)
        if pick_cargo_fuzz; then
            run_cargo_fuzz
        else
            echo "fuzz.sh: cargo-fuzz unavailable here (FUZZ_INSTALL=1 installs it); using the stable driver"
            run_stable
        fi
        ;;
    cargo-fuzz)
        pick_cargo_fuzz || { echo "fuzz.sh: cargo-fuzz cannot run here" >&2; exit 2; }
        run_cargo_fuzz
        ;;
    stable)
        run_stable
        ;;
    *)
        echo "fuzz.sh: FUZZ_ENGINE must be auto, cargo-fuzz or stable" >&2
        exit 2
        ;;
esac
