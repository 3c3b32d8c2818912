#!/usr/bin/env bash
# Runs the store: builds the node (release) and starts it in the foreground.
#
#   scripts/run.sh [--option value ...]      e.g. scripts/run.sh --port 7000 --maxmemory 1gb
#
# Defaults: port 6379 on loopback, data in .work/data. Options use redis.conf names and
# override the defaults. Stop it with Ctrl-C (SIGINT) or `redis-cli -p PORT SHUTDOWN`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cargo build --release -p node
mkdir -p .work/data
exec target/release/node --port 6379 --bind 127.0.0.1 --dir .work/data "$@"
