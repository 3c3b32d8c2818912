#!/usr/bin/env bash
# Runs every test of the project: the one command the README names and .ci/run calls.
#
#   scripts/test.sh
#
# Steps (each must pass): system packages; formatting; clippy with warnings as errors;
# unit, property and integration tests (real node processes driven by redis-cli,
# redis-benchmark and the `redis` client crate); a bounded fuzz run of the RESP decoder and
# the request parser.
#
# Environment: FUZZ_SECONDS (per fuzz target, default 30), SKIP_DEPS=1 (skip apt).
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n== %s\n' "$*"; }

if [[ "${SKIP_DEPS:-0}" != 1 ]]; then
    step "system packages"
    bash scripts/install-deps.sh
fi

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "build"
cargo build --workspace --bins --locked

step "tests"
cargo test --workspace --locked

step "fuzz (bounded)"
FUZZ_SECONDS="${FUZZ_SECONDS:-30}" bash scripts/fuzz.sh

step "all passed"
