#!/usr/bin/env bash
# Build the guest's initramfs: static busybox, the rdma_rxe module closure of the given kernel,
# the RDMA tools and test binaries with every shared library they load (including the ones
# sideway dlopens at run time and the rxe libibverbs provider), the guest /init and test plan.
#
# Usage: initramfs.sh <kernel tree (extracted .deb)> <kernel version> <out.cpio.gz> \
#            <test binary>... [-- <helper binary>...]
#   Test binaries go into /t and into the plan (/t/lane-bins); helper binaries (the node the
#   tests start) only into /t. Binaries are copied without debug info when `strip` exists: a
#   debug build of the node is ~70 MB, most of it DWARF, and the whole image is gzipped and
#   unpacked into the guest's RAM on every run.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ktree=$1 version=$2 out=$3
shift 3
tests=() helpers=()
while [[ $# -gt 0 && "$1" != -- ]]; do tests+=("$1"); shift; done
[[ $# -gt 0 ]] && shift
helpers=("$@")
log() { printf 'rxe-vm: %s\n' "$*" >&2; }

root=$(mktemp -d "${TMPDIR:-/tmp}/rxe-root.XXXXXX")
trap 'rm -rf "$root"' EXIT
mkdir -p "$root"/{bin,sbin,proc,sys,dev,tmp,etc,mods,t,run}

cp /bin/busybox "$root/bin/busybox"
# ldd succeeds only on dynamic executables; the guest has no libc of its own for busybox.
if ldd /bin/busybox >/dev/null 2>&1; then
    log "/bin/busybox is not static (install busybox-static)"
    exit 1
fi

# Kernel modules, dependencies first. rxe computes its ICRC with crypto_alloc_shash("crc32"),
# which nothing declares as a module dependency: without crc32_generic `rdma link add` fails
# with ENOENT.
moddir="$ktree/lib/modules/$version"
: >"$root/mods/order"
{
    find "$moddir" -name 'crc32_generic.ko*' | head -n1
    "$here/moddeps.sh" "$moddir" dummy rdma_rxe ib_uverbs rdma_ucm
} | while read -r ko; do
    case "$ko" in
    *.ko) ;;
    *) log "module $ko is compressed; busybox insmod needs plain .ko"; exit 1 ;;
    esac
    cp "$ko" "$root/mods/"
    basename "$ko" >>"$root/mods/order"
done
[[ -s "$root/mods/order" ]] || { log "no modules collected from $moddir"; exit 1; }

# Copy a file with its path, following symlinks (the target keeps the link's name).
copy_path() {
    mkdir -p "$root$(dirname "$1")"
    cp -L "$1" "$root$1"
}
# A file plus the shared libraries ldd says it needs (ld.so included).
copy_with_libs() {
    local lib
    for lib in $(ldd "$1" 2>/dev/null | grep -oE '/[^ ]+\.so[^ ]*' || true); do
        [[ -e "$root$lib" ]] || copy_path "$lib"
    done
}
copy_bin() {
    cp -L "$1" "$root/t/"
    copy_with_libs "$1"
}
# A project binary: as copy_bin, without its debug info.
copy_project_bin() {
    copy_bin "$1"
    if command -v strip >/dev/null; then
        strip --strip-debug "$root/t/$(basename "$1")"
    fi
}

tools=(/usr/sbin/ip /usr/bin/rdma)
for t in ibv_devices ibv_devinfo rping; do tools+=("$(command -v "$t")"); done
for b in "${tools[@]}"; do
    [[ -x "$b" ]] || { log "missing binary $b"; exit 1; }
    copy_bin "$b"
done
for b in "${tests[@]}" "${helpers[@]}"; do
    [[ -x "$b" ]] || { log "missing binary $b"; exit 1; }
    copy_project_bin "$b"
done

# What is dlopened at run time (ldd cannot see it): libibverbs and librdmacm by sideway, the
# rxe provider by libibverbs, libgcc_s by glibc's pthread_exit (rping aborts without it); and
# the rxe driver file (only rxe's: libibverbs warns about every listed provider it cannot load).
multiarch=/usr/lib/x86_64-linux-gnu
for lib in "$multiarch/libibverbs.so.1" "$multiarch/librdmacm.so.1" \
    "$multiarch/libibverbs/librxe-rdmav34.so" "$multiarch/libgcc_s.so.1"; do
    [[ -e "$lib" ]] || { log "missing $lib (install rdma-core, ibverbs-providers)"; exit 1; }
    copy_path "$lib"
    copy_with_libs "$lib"
done
mkdir -p "$root/etc/libibverbs.d"
cp /etc/libibverbs.d/rxe.driver "$root/etc/libibverbs.d/"

printf '127.0.0.1 localhost vm\n10.11.12.13 rxehost\n' >"$root/etc/hosts"
printf 'hosts: files\n' >"$root/etc/nsswitch.conf"
install -m 755 "$here/init.sh" "$root/init"
install -m 755 "$here/guest-tests.sh" "$root/t/guest-tests.sh"
# The plan runs these (the project's test binaries), in the order given.
: >"$root/t/lane-bins"
for b in "${tests[@]}"; do echo "/t/$(basename "$b")" >>"$root/t/lane-bins"; done

(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) >"$out"
log "initramfs $(du -h "$out" | cut -f1) with $(wc -l <"$root/mods/order") modules, binaries: $(ls "$root/t" | tr '\n' ' ')"
