#!/usr/bin/env bash
# Install the Debian packages that building and testing `node` needs.
#
# Idempotent: packages already installed are skipped (checked with dpkg), so a
# second run does no apt work at all and takes well under a second.
# Must run as root (it calls apt-get directly; no sudo in our containers).
#
# Debian's redis-server package starts a system redis on port 6379 when it is
# installed. Our tests and benchmarks start their own servers on their own
# ports, and a stray system redis would skew benchmarks and hold port 6379, so
# this script prevents that start and stops the service if it runs anyway.
#
# Env:
#   APT_LISTS_MAX_AGE_MIN  refresh package lists older than this (default 1440)
#   APT_LOCK_TIMEOUT       seconds to wait for another apt/dpkg (default 600)
set -euo pipefail

# The one list of system packages. Add to it here (libfabric, rdma-core,
# qemu, ... as later issues need them); nothing else in this file changes.
PACKAGES=(
    build-essential # cc + make: tikv-jemallocator builds jemalloc from source
    pkg-config      # *-sys crates locate system libraries with it
    redis-server    # the reference server for side-by-side benchmarks/tests
    redis-tools     # redis-cli and redis-benchmark
    procps          # ps/pgrep/free, used by scripts and tests
    util-linux      # lscpu (machine description in BENCHMARKS.md)
    linux-perf      # perf record/report: profiles of the node under redis-benchmark
    valgrind        # callgrind: scripts/instructions-per-request.sh (work per request, load-proof)
    python3         # tests/py/cluster_load.py (redis-py, a third-party cluster client)
    tcl             # tclsh: Redis's own test suite (scripts/redis-suite.sh)
    python3-grpc-tools # tests/py/admin_client.py: a client generated from proto/admin.proto
    python3-grpcio     # its runtime
    python3-prometheus-client # tests/py/parse_metrics.py: the metrics endpoint parsed by Prometheus's own parser
    # verbs lane (scripts/verbs-lane.sh): soft-RoCE in a QEMU guest, DESIGN §4.3
    qemu-system-x86   # boots Debian's stock kernel under TCG (no KVM here)
    busybox-static    # the guest's userland
    kmod              # modinfo: rdma_rxe module closure for the initramfs
    cpio              # packs the initramfs
    iproute2          # ip and rdma (rxe0 on a dummy netdev) copied into the guest
    rdma-core         # rdma-core userspace (sideway dlopens libibverbs/librdmacm)
    libibverbs1       # libibverbs, copied into the guest with its provider files
    ibverbs-providers # librxe provider for the soft-RoCE device
    librdmacm1        # rdma_cm, used for RC connection set-up
    ibverbs-utils     # ibv_devices / ibv_devinfo: lane sanity checks
    rdmacm-utils      # rping: lane sanity check of rdma_cm
    cmake             # builds rdma-mummy-sys (sideway's dlopen shim over rdma-core)
    libclang-dev      # bindgen in rdma-mummy-sys's build script needs libclang
    libfabric1      # the bus `ofi` provider (tcp;ofi_rxm, shm, efa), opened at run time
    libfabric-bin   # fi_info, to see which libfabric providers a host offers
)

APT_LISTS_MAX_AGE_MIN="${APT_LISTS_MAX_AGE_MIN:-1440}"
APT_LOCK_TIMEOUT="${APT_LOCK_TIMEOUT:-600}"

log() { printf 'install-deps: %s\n' "$*" >&2; }

if [[ "$(id -u)" -ne 0 ]]; then
    log "must run as root (uses apt-get directly)"
    exit 1
fi

# True if dpkg knows the package as fully installed ("install ok installed").
is_installed() {
    [[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)" == "install ok installed" ]]
}

# apt-get waits for the dpkg frontend lock itself with DPkg::Lock::Timeout
# (another engineer's apt may be running). The lists lock used by `update` is
# not covered by that option on every apt version, so retry the whole command
# a few times as well.
apt_get() {
    local attempt
    for attempt in 1 2 3 4 5 6; do
        if DEBIAN_FRONTEND=noninteractive apt-get \
            -o DPkg::Lock::Timeout="$APT_LOCK_TIMEOUT" -q "$@"; then
            return 0
        fi
        log "apt-get $1 failed (attempt $attempt), apt may be locked; retrying in 10s"
        sleep 10
    done
    log "apt-get $* kept failing; giving up"
    return 1
}

# Package lists are "stale" if no Packages index exists or the newest one is
# older than APT_LISTS_MAX_AGE_MIN minutes.
lists_stale() {
    local fresh
    fresh="$(find /var/lib/apt/lists -maxdepth 1 -name '*_Packages*' \
        -mmin "-$APT_LISTS_MAX_AGE_MIN" -print -quit 2>/dev/null || true)"
    [[ -z "$fresh" ]]
}

# Stop Debian's redis-server service if it is running. We only touch the
# service's own process (via the service manager or its pid file), never
# redis-servers that tests or benchmarks started on other ports.
stop_system_redis() {
    local pidfile=/run/redis/redis-server.pid pid
    if command -v systemctl >/dev/null 2>&1 && [[ -d /run/systemd/system ]]; then
        # Real systemd: stop it now and keep it from starting at boot.
        systemctl stop redis-server.service >/dev/null 2>&1 || true
        systemctl disable redis-server.service >/dev/null 2>&1 || true
    elif command -v service >/dev/null 2>&1 && [[ -x /etc/init.d/redis-server ]]; then
        # Ask first: an unconditional `stop` costs ~1s even when not running.
        if service redis-server status >/dev/null 2>&1; then
            log "stopping the redis-server service"
            service redis-server stop >/dev/null 2>&1 || true
        fi
    fi
    if [[ -r "$pidfile" ]]; then
        pid="$(cat "$pidfile" 2>/dev/null || true)"
        if [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null; then
            log "stopping system redis-server (pid $pid from $pidfile)"
            kill "$pid" 2>/dev/null || true
            for _ in 1 2 3 4 5 6 7 8 9 10; do
                kill -0 "$pid" 2>/dev/null || break
                sleep 0.5
            done
        fi
    fi
}

missing=()
for pkg in "${PACKAGES[@]}"; do
    is_installed "$pkg" || missing+=("$pkg")
done

if [[ ${#missing[@]} -eq 0 ]]; then
    log "all ${#PACKAGES[@]} packages already installed"
else
    log "installing: ${missing[*]}"

    # Keep maintainer scripts from starting services (redis-server on 6379)
    # during the install: invoke-rc.d consults /usr/sbin/policy-rc.d and
    # exit code 101 means "action forbidden". Docker images often ship one
    # already; only add (and later remove) ours if none exists.
    policy=/usr/sbin/policy-rc.d
    if [[ ! -e "$policy" ]]; then
        printf '#!/bin/sh\n# temporary, from scripts/install-deps.sh\nexit 101\n' >"$policy"
        chmod 755 "$policy"
        trap 'rm -f "$policy"' EXIT
    fi

    if lists_stale; then
        apt_get update
    fi
    if ! apt_get install -y --no-install-recommends "${missing[@]}"; then
        # Lists may be stale in a way the age check missed (e.g. a package
        # version vanished from the mirror): refresh once and retry.
        apt_get update
        apt_get install -y --no-install-recommends "${missing[@]}"
    fi
fi

# Always check, not only after an install: an earlier install (ours or
# someone else's) may have started the service.
stop_system_redis

# The cluster tests drive the Python `redis` package's RedisCluster (a real cluster-aware
# client), installed from PyPI for the python3 that runs the tests.
if ! python3 -c 'import redis.cluster' 2>/dev/null; then
    log "installing the Python redis package from PyPI"
    python3 -m pip install --quiet --disable-pip-version-check 'redis>=5,<9'
fi
