#!/bin/busybox sh
# The lane's test plan, run inside the guest. Each check prints `VERBS-TEST <name>: pass|fail`
# (a failing check's output follows it), then one sentinel line the host script greps:
# `VERBS-LANE-RESULT: pass <passed>` or `VERBS-LANE-RESULT: fail <failed>`.
#
# Every check runs under `timeout`: TCG emulation is slow and the machine is shared, so the
# bound is generous (CHECK_TIMEOUT_S); it only stops a hung test from hanging the lane.
# The host script passes both on the kernel command line (`lane.check_timeout=S
# lane.idle_clients=N [lane.srq_depth=N]`, from VERBS_LANE_CHECK_TIMEOUT_S,
# VERBS_LANE_IDLE_CLIENTS and VERBS_LANE_SRQ_DEPTH).
# cmdline_value KEY (dots escaped): the number after ` KEY=`, whole words only.
cmdline_value() { echo " $(cat /proc/cmdline) " | sed -n "s/.* $1=\([0-9][0-9]*\) .*/\1/p"; }
CHECK_TIMEOUT_S=$(cmdline_value 'lane\.check_timeout')
CHECK_TIMEOUT_S=${CHECK_TIMEOUT_S:-180}
IDLE_CLIENTS=$(cmdline_value 'lane\.idle_clients')
IDLE_CLIENTS=${IDLE_CLIENTS:-1000}
# Empty unless the host set VERBS_LANE_SRQ_DEPTH: node_idle_clients then leaves the node's own.
SRQ_DEPTH=$(cmdline_value 'lane\.srq_depth')
RXE_IP=10.11.12.13
passed=0
failed=0
# Start on a fresh line: the console may still hold firmware escape codes.
echo

# A passing check's last lines (what it measured: records, bytes, rounds) follow its result
# line, indented, with its emulated run time; a failing check's output follows in full.
check() {
    name=$1
    shift
    start=$(date +%s)
    if timeout "$CHECK_TIMEOUT_S" "$@" >"/tmp/$name.log" 2>&1; then
        echo "VERBS-TEST $name: pass"
        tail -n 4 "/tmp/$name.log" | sed 's/^/    /'
        passed=$((passed + 1))
    else
        echo "VERBS-TEST $name: fail (exit $?)"
        sed 's/^/    /' "/tmp/$name.log" | tail -n 60
        failed=$((failed + 1))
    fi
    echo "    ($(($(date +%s) - start)) s)"
}

# The device exists and libibverbs finds it through the rxe provider.
check ibv_devices sh -c 'ibv_devices | grep -q rxe0'
check ibv_devinfo sh -c 'ibv_devinfo -d rxe0 | grep -q PORT_ACTIVE'
# rdma_cm end to end with the stock tool: a server and a client over rxe0.
check rping sh -c "rping -s -a $RXE_IP -C 3 & srv=\$!; sleep 1; rping -c -a $RXE_IP -C 3 -v; rc=\$?; wait \$srv; exit \$rc"

# The project's own tests: every binary in /t/lane-bins, each either a multi-test runner
# (`<bin> list` prints test names, `<bin> <name>` runs one) or a plain program.
for bin in $(cat /t/lane-bins 2>/dev/null); do
    names=$("$bin" list 2>/dev/null)
    if [ -n "$names" ]; then
        for n in $names; do
            check "$(basename "$bin")-$n" env RXE_IP=$RXE_IP GID_IDX=1 \
                CHECK_TIMEOUT_S=$CHECK_TIMEOUT_S IDLE_CLIENTS=$IDLE_CLIENTS NODE_SRQ_DEPTH=$SRQ_DEPTH \
                "$bin" "$n"
        done
    else
        check "$(basename "$bin")" env RXE_IP=$RXE_IP GID_IDX=1 "$bin"
    fi
done

echo "VERBS-LANE-SUMMARY: $passed passed, $failed failed"
if [ "$failed" = 0 ] && [ "$passed" -gt 0 ]; then
    echo "VERBS-LANE-RESULT: pass $passed"
else
    echo "VERBS-LANE-RESULT: fail $failed"
fi
