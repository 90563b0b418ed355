#!/bin/bash
# PID 1 of a real-NFS test host (a QEMU guest on the host's own root, see
# initramfs.sh). Brings up its network and its role, then serves the
# orchestrator's commands (agent.py) until it is powered off. The kernel
# command line says what it is: kaas.role (server or client), kaas.ip,
# kaas.name, kaas.dir (the checkout) and, for the server, kaas.mkfs=1 on
# its first boot only (a restart keeps what the export held).
set -u
arg() { sed -n "s/.* kaas\.$1=\([^ ]*\).*/\1/p" /proc/cmdline; }
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /dev/shm
role=$(arg role) ip=$(arg ip) name=$(arg name) dir=$(arg dir)
hostname "$name"
echo "$name" >/etc/hostname
modprobe virtio_net
modprobe virtio_blk
ip link set lo up
ip addr add "$ip/24" dev eth0
ip link set eth0 up
# The orchestrator's share, writable: logs that outlive a power loss.
mkdir -p /logs
modprobe 9pnet_virtio
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 logs /logs
exec >>"/logs/$name.guest.log" 2>&1
echo "$(date -u +%T) $name up as $role at $ip"
case "$role" in
server)
    modprobe ext4
    modprobe nfsd
    # The disk holds the export and nfsd's client records, so that a
    # restarted server knows whom to let reclaim in its grace period; no
    # blocks reserved for root, so that a full disk is full for the
    # brokers too.
    if [ "$(arg mkfs)" = 1 ]; then
        mkfs.ext4 -q -F -m 0 /dev/vda
    fi
    mkdir -p /srv
    mount /dev/vda /srv
    mkdir -p /srv/export /srv/nfs-state/v4recovery /var/lib/nfs
    chmod 1777 /srv/export
    mount --bind /srv/nfs-state /var/lib/nfs
    echo "/srv/export ${ip%.*}.0/24(rw,sync,no_subtree_check,no_root_squash,fsid=0)" >/etc/exports
    mount -t nfsd nfsd /proc/fs/nfsd
    # kaas.lease and kaas.grace (seconds) stand in for an operator's
    # settings; without them nfsd keeps its defaults (90 s each).
    lease=$(arg lease) grace=$(arg grace)
    [ -n "$lease" ] && echo "$lease" >/proc/fs/nfsd/nfsv4leasetime
    [ -n "$grace" ] && echo "$grace" >/proc/fs/nfsd/nfsv4gracetime
    mkdir -p /run/rpcbind
    rpcbind -w
    exportfs -ra
    rpc.mountd -N 2 -N 3
    rpc.nfsd -N 3 -V 4.1 -V 4.2 4
    echo "$(date -u +%T) nfsd serving /srv/export (lease $(cat /proc/fs/nfsd/nfsv4leasetime) s, grace $(cat /proc/fs/nfsd/nfsv4gracetime) s)"
    ;;
client)
    modprobe nfsv4
    mkdir -p /mnt/kaas
    ;;
esac
cd "$dir"
# PID 1 stays a shell: it reaps what the agent's commands leave behind.
python3 ci/realnfs/agent.py --listen "$ip:7000" &
while :; do
    wait
    sleep 1
done
