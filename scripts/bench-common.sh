# Shared by scripts/bench-*.sh (sourced): the binaries the suites run and a helper to turn
# environment variables into `operator bench <suite>` flags. The suites themselves live in
# operator/src/bench/suite/ and start and stop their own servers.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PROFILE="${PROFILE:-release}"
profile_dir="$PROFILE"
[[ "$PROFILE" == dev ]] && profile_dir=debug
target_dir="${CARGO_TARGET_DIR:-$ROOT/target}"
[[ "$target_dir" == /* ]] || target_dir="$ROOT/$target_dir"
if [[ -z "${NODE_BIN:-}" || -z "${OPERATOR_BIN:-}" ]]; then
    (cd "$ROOT" && cargo build --profile "$PROFILE" -p node --bin node -p operator --bin operator)
fi
NODE_BIN="${NODE_BIN:-$target_dir/$profile_dir/node}"
OPERATOR_BIN="${OPERATOR_BIN:-$target_dir/$profile_dir/operator}"
OUT="${OUT:-$ROOT/BENCHMARKS.md}"

FLAGS=(--node-bin "$NODE_BIN" --out "$OUT")
# flag_from VAR --flag: adds `--flag "$VAR"` when VAR is set (empty counts as set).
flag_from() {
    if [[ -n "${!1+x}" ]]; then FLAGS+=("$2" "${!1}"); fi
}
# words_to_list "a b c": "a,b,c" (the scripts' lists are space separated, the flags' commas).
words_to_list() {
    local out
    out="$(tr -s ' ' ',' <<<"$1")"
    out="${out#,}"
    echo "${out%,}"
}
need() {
    local tool
    for tool in "$@"; do
        command -v "$tool" >/dev/null || { echo "$0: $tool missing (scripts/install-deps.sh)" >&2; exit 1; }
    done
}
if [[ "${KEEP_TMP:-0}" == 1 ]]; then FLAGS+=(--keep); fi

# run_suite SUITE: runs `operator bench SUITE "${FLAGS[@]}"` in a session of its own, so that
# when this script is interrupted or killed the whole group (the operator and the servers it
# started) is stopped by its id; the suite stops its servers itself when it ends.
run_suite() {
    setsid "$OPERATOR_BIN" bench "$1" "${FLAGS[@]}" &
    SUITE_PID=$!
    trap 'kill -TERM -- "-$SUITE_PID" 2>/dev/null || true' EXIT
    trap 'exit 130' INT TERM
    local rc=0
    wait "$SUITE_PID" || rc=$?
    return "$rc"
}
