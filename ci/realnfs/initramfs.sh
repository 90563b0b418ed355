#!/usr/bin/env bash
# Builds the guests' initramfs: a static busybox and the modules that
# reach the root filesystem (virtio, 9p, overlay). Its /init mounts the
# host's root read-only over virtio-9p with a tmpfs on top, so every host
# binary (nfs-utils, python3, the kaas release binary) is in the guest
# with no image to build, then runs ci/realnfs/guest.sh as PID 1.
#
#   bash ci/realnfs/initramfs.sh OUT KERNEL_VERSION
set -euo pipefail
out=$1 kver=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work"/{bin,dev,proc,sys,lower,upper,newroot,modules}
cp /bin/busybox "$work/bin/busybox"
: >"$work/modules.order"
for m in virtio_pci 9pnet_virtio 9p overlay; do
    modprobe --show-depends -S "$kver" "$m" | awk '$1 == "insmod" { print $2 }'
done | awk '!seen[$0]++' | while read -r ko; do
    cp "$ko" "$work/modules/"
    basename "$ko" >>"$work/modules.order"
done
cat >"$work/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in $(cat /modules.order); do insmod "/modules/$m"; done
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144,cache=loose hostroot /lower || exec sh
mount -t tmpfs -o size=512m tmpfs /upper
mkdir -p /upper/u /upper/w
mount -t overlay overlay -o lowerdir=/lower,upperdir=/upper/u,workdir=/upper/w /newroot || exec sh
dir=$(sed -n 's/.* kaas\.dir=\([^ ]*\).*/\1/p' /proc/cmdline)
umount /proc /sys
umount /dev
exec switch_root /newroot /bin/bash "$dir/ci/realnfs/guest.sh"
INIT
chmod +x "$work/init"
(cd "$work" && find . | cpio -o -H newc --quiet | gzip -1) >"$out"
