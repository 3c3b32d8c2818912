#!/bin/busybox sh
# The guest's /init: mount the basics, load the soft-RoCE modules, put rxe0 on a dummy netdev
# (there is no network card: all RDMA traffic is rxe loopback inside this guest), run the test
# plan and power off. The host reads the console; the plan prints the result sentinel.
/bin/busybox --install -s /bin
export PATH=/t:/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
# Registered memory is pinned: lift the locked-memory limit for the tests.
ulimit -l unlimited
# A thousand clients in one test process: two descriptors each (rdma_cm channel, CQ channel).
ulimit -n 65536
setup_ok=1
for m in $(cat /mods/order); do
    insmod "/mods/$m" || { echo "rxe-guest: insmod $m failed"; setup_ok=0; }
done
ip link set lo up
ip link show dummy0 >/dev/null 2>&1 || ip link add dummy0 type dummy
ip addr add 10.11.12.13/24 dev dummy0
ip link set dummy0 up
rdma link add rxe0 type rxe netdev dummy0 || { echo "rxe-guest: rdma link add failed"; setup_ok=0; }
hostname vm
if [ "$setup_ok" = 1 ]; then
    sh /t/guest-tests.sh
else
    echo "VERBS-LANE-RESULT: fail setup"
fi
echo "rxe-guest: powering off"
sync
poweroff -f
