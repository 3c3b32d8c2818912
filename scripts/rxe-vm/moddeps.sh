#!/usr/bin/env bash
# Print the .ko files needed to load the given kernel modules, dependencies first (a
# post-order walk of `modinfo -F depends`), each once. Used to put the rdma_rxe closure into
# the guest's initramfs.
#
# Usage: moddeps.sh <lib/modules/VERSION dir> <module>...
set -euo pipefail
moddir=$1
shift
declare -A seen=()
order=()
visit() {
    local name=$1 file deps dep
    [[ -n "${seen[$name]:-}" ]] && return 0
    seen[$name]=1
    # Module names use '_' but files may use '-' (and vice versa): match both.
    file=$(find "$moddir" -name "${name}.ko*" -o -name "${name//_/-}.ko*" | head -n1)
    if [[ -z "$file" ]]; then
        echo "moddeps: module $name not found under $moddir" >&2
        return 1
    fi
    deps=$(modinfo -F depends "$file" | tr ',' ' ')
    for dep in $deps; do visit "$dep"; done
    order+=("$file")
}
for m in "$@"; do visit "$m"; done
printf '%s\n' "${order[@]}"
