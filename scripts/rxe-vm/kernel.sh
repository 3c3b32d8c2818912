#!/usr/bin/env bash
# Make Debian's stock kernel (which, unlike this host's, ships rdma_rxe) available in a cache
# directory and print the kernel version. Downloads the .deb with `apt-get download` once and
# re-uses it; extracts it next to it.
#
# Usage: kernel.sh <cache dir>
# Env:   RXE_KERNEL_VERSION  pin a version (e.g. 6.1.0-57-amd64); default: what
#                            linux-image-amd64 depends on in the current apt lists.
set -euo pipefail
cache=$1
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
log() { printf 'rxe-vm: %s\n' "$*" >&2; }
# The lane cannot run without the kernel: say why plainly and fail (never skip silently).
fail_download() {
    log "FAIL: cannot download $1 (no network or apt mirror?). The verbs lane needs Debian's"
    log "kernel package once (~70 MB, cached in $cache); put a linux-image-*-amd64_*.deb there"
    log "by hand or retry with network access."
    exit 1
}

version=${RXE_KERNEL_VERSION:-}
if [[ -z "$version" ]]; then
    # Prefer a kernel already in the cache: no apt lists needed, and runs stay reproducible.
    cached=$(find "$cache" -maxdepth 1 -name 'linux-image-*-amd64_*.deb' -printf '%f\n' 2>/dev/null |
        sed -E 's/^linux-image-([^_]+)_.*/\1/' | sort -V | tail -n1)
    if [[ -n "$cached" ]]; then
        version=$cached
    else
        version=$(apt-cache depends linux-image-amd64 2>/dev/null |
            grep -oE 'linux-image-[0-9][^ ]*-amd64' | head -n1 | sed 's/^linux-image-//')
    fi
fi
if [[ -z "$version" ]]; then
    log "cannot tell which kernel to use: apt-cache knows no linux-image-amd64 (run apt-get update) and none is cached in $cache"
    exit 1
fi

deb=$(find "$cache" -maxdepth 1 -name "linux-image-${version}_*.deb" | head -n1)
if [[ -z "$deb" ]]; then
    log "downloading linux-image-$version into $cache"
    if ! (cd "$cache" && apt-get download -q "linux-image-$version" >&2); then
        # Stale lists can name a kernel the mirror no longer has (security updates bump the
        # ABI number): refresh them once and ask again which kernel is current.
        [[ -z "${RXE_KERNEL_VERSION:-}" ]] || fail_download "linux-image-$version"
        log "download failed; refreshing apt lists and retrying"
        apt-get update -q >&2 || fail_download "the apt lists (apt-get update)"
        version=$(apt-cache depends linux-image-amd64 2>/dev/null |
            grep -oE 'linux-image-[0-9][^ ]*-amd64' | head -n1 | sed 's/^linux-image-//')
        [[ -n "$version" ]] || { log "apt-cache knows no linux-image-amd64"; exit 1; }
        (cd "$cache" && apt-get download -q "linux-image-$version" >&2) ||
            fail_download "linux-image-$version"
    fi
    deb=$(find "$cache" -maxdepth 1 -name "linux-image-${version}_*.deb" | head -n1)
    [[ -n "$deb" ]] || { log "apt-get download linux-image-$version produced no .deb"; exit 1; }
fi

tree="$cache/kpkg-$version"
if [[ ! -f "$tree/boot/vmlinuz-$version" ]]; then
    log "extracting $(basename "$deb")"
    rm -rf "$tree.tmp"
    dpkg-deb -x "$deb" "$tree.tmp"
    rm -rf "$tree"
    mv "$tree.tmp" "$tree"
fi
echo "$version"
