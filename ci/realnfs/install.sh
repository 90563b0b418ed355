#!/usr/bin/env bash
# The Debian packages a real-NFS cluster needs on a fresh machine: QEMU,
# the Debian kernel the guests boot (with its modules: nfs, nfsd, 9p,
# overlay), a static busybox for their initramfs, and the NFS server and
# client tools the guests run from the host's own root.
set -euo pipefail
need=()
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
ls /boot/vmlinuz-*-amd64 >/dev/null 2>&1 || need+=(linux-image-amd64)
[ -x /bin/busybox ] && /bin/busybox --list | grep -qx switch_root || need+=(busybox-static)
command -v rpc.nfsd >/dev/null || need+=(nfs-kernel-server)
command -v mount.nfs4 >/dev/null || need+=(nfs-common)
command -v mkfs.ext4 >/dev/null || need+=(e2fsprogs)
command -v cpio >/dev/null || need+=(cpio)
# The campaign cuts a host off from the server or the other brokers.
command -v iptables >/dev/null || need+=(iptables)
if [ ${#need[@]} -gt 0 ]; then
    echo "realnfs: installing ${need[*]}" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
