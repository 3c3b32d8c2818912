#!/usr/bin/env bash
# The verbs lane (DESIGN §4.3): run the `verbs` provider's tests against a real soft-RoCE device.
#
# This host's kernel has no RDMA, so the lane boots Debian's stock kernel (which ships rdma_rxe)
# under QEMU with software emulation (TCG: KVM is not usable here) and no network card, creates
# rxe0 on a dummy netdev inside the guest and runs the tests there (scripts/rxe-vm/). The exit
# status is the guest tests' result: 0 only if the guest printed `VERBS-LANE-RESULT: pass`.
#
# Usage: scripts/verbs-lane.sh [extra test binary...]
#   Builds and runs the bus crate's guest test runner (bus/examples/verbs_lane/) plus any
#   binaries given (each a `list`/`<name>` runner or a plain program; exit 0 = pass). Also
#   builds the node, which the runner's node_* checks start inside the guest.
# Env:
#   VERBS_LANE_TIMEOUT_S  whole-VM bound in seconds (default 600): a hung guest fails the lane
#   VERBS_LANE_CACHE      kernel/initramfs cache (default target/rxe-vm; not committed)
#   VERBS_LANE_NO_DEPS=1  skip scripts/install-deps.sh (e.g. when not root and deps are present);
#                         SKIP_DEPS=1 (scripts/test.sh's switch) does the same
#   RXE_KERNEL_VERSION    pin the Debian kernel (default: what linux-image-amd64 depends on)
#   VERBS_LANE_IDLE_CLIENTS  clients node_idle_clients holds at once (default 1000: ~30 s
#                         under TCG; the node takes ~0.5 MiB per idle verbs client, the
#                         kernel and the clients ~0.4 MiB more, hence the guest's memory)
#   VERBS_LANE_SRQ_DEPTH  the node's `rdma-srq-depth` in node_idle_clients (default: the
#                         node's own, a receive pool of 255; 0: a receive queue per client)
#   VERBS_LANE_MEM_MB     guest memory (default 5120)
#   VERBS_LANE_CHECK_TIMEOUT_S  bound on each guest check in seconds (default 180)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
vm="$repo/scripts/rxe-vm"
target=${CARGO_TARGET_DIR:-$repo/target}
cache=${VERBS_LANE_CACHE:-$target/rxe-vm}
timeout_s=${VERBS_LANE_TIMEOUT_S:-600}
log() { printf 'verbs-lane: %s\n' "$*" >&2; }
idle_clients=${VERBS_LANE_IDLE_CLIENTS:-1000}
check_timeout_s=${VERBS_LANE_CHECK_TIMEOUT_S:-180}
mem_mb=${VERBS_LANE_MEM_MB:-5120}
srq_depth=${VERBS_LANE_SRQ_DEPTH:-}
[[ -z "$srq_depth" || "$srq_depth" =~ ^[0-9]+$ ]] || {
    log "VERBS_LANE_SRQ_DEPTH must be a number"
    exit 2
}
# node_idle_clients needs a few clients (up to 5 leave) and a check bound above its 40 s margin.
[[ "$idle_clients" =~ ^[0-9]+$ && "$check_timeout_s" =~ ^[0-9]+$ && "$mem_mb" =~ ^[0-9]+$ &&
    $idle_clients -ge 8 && $check_timeout_s -gt 60 ]] || {
    log "VERBS_LANE_IDLE_CLIENTS (>= 8), VERBS_LANE_CHECK_TIMEOUT_S (> 60) and VERBS_LANE_MEM_MB must be numbers"
    exit 2
}

if [[ "${VERBS_LANE_NO_DEPS:-}" != 1 && "${SKIP_DEPS:-}" != 1 ]]; then
    "$repo/scripts/install-deps.sh"
fi
mkdir -p "$cache"

log "building the guest test runner and the node"
(cd "$repo" && cargo build -q --locked -p bus --example verbs_lane &&
    cargo build -q --locked -p node --bin node)
bins=("$target/debug/examples/verbs_lane" "$@")
helpers=("$target/debug/node")

version=$("$vm/kernel.sh" "$cache") || {
    log "FAIL: no guest kernel (see above); the lane cannot run without it"
    exit 1
}
ktree="$cache/kpkg-$version"
initrd="$cache/initrd.gz"
"$vm/initramfs.sh" "$ktree" "$version" "$initrd" "${bins[@]}" -- "${helpers[@]}"

console="$cache/console.log"
log "booting $version under QEMU TCG (bound ${timeout_s}s); console in $console"
# -nic none: the guest needs no network card, rxe runs over a dummy netdev. 5 GiB holds the
# unpacked initramfs and the tests' registered memory (node_idle_clients: 1,000 connections,
# ~2.8 MiB each for both ends). The console is the only output channel.
qemu_pid=
cleanup() { [[ -n "$qemu_pid" ]] && kill "$qemu_pid" 2>/dev/null || true; }
trap cleanup EXIT INT TERM
timeout --kill-after=10 "$timeout_s" \
    qemu-system-x86_64 -accel tcg,thread=multi -cpu max -smp 2 -m "$mem_mb" \
    -kernel "$ktree/boot/vmlinuz-$version" -initrd "$initrd" \
    -append "console=ttyS0 quiet loglevel=3 rdinit=/init panic=-1 lane.idle_clients=$idle_clients lane.check_timeout=$check_timeout_s${srq_depth:+ lane.srq_depth=$srq_depth}" \
    -nographic -no-reboot -nic none </dev/null >"$console.raw" 2>&1 &
qemu_pid=$!
set +e
wait "$qemu_pid"
qemu_rc=$?
set -e
qemu_pid=
# Strip terminal escapes and carriage returns from the serial console.
sed 's/\x1b\[[0-9;?]*[a-zA-Z]//g' "$console.raw" | tr -d '\r' >"$console"
grep -E '^(VERBS-TEST|VERBS-LANE-SUMMARY|rxe-guest:|    )' "$console" >&2 || true

if [[ $qemu_rc -eq 124 || $qemu_rc -eq 137 ]]; then
    log "FAIL: the guest did not finish within ${timeout_s}s (see $console)"
    exit 1
fi
result=$(grep -E '^VERBS-LANE-RESULT: ' "$console" | tail -n1 || true)
case "$result" in
"VERBS-LANE-RESULT: pass "*)
    log "PASS (${result#VERBS-LANE-RESULT: })"
    exit 0
    ;;
"")
    log "FAIL: no result line from the guest (qemu exit $qemu_rc); see $console"
    tail -n 40 "$console" >&2
    exit 1
    ;;
*)
    log "FAIL (${result#VERBS-LANE-RESULT: }); failing checks' output is in $console"
    exit 1
    ;;
esac
