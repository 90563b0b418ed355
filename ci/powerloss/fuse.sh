# Sourced: sets $fuse_missing to why FUSE mounts cannot be made here, or to
# nothing when they can.
fuse_missing=""
if [ ! -e /dev/fuse ]; then
    fuse_missing="/dev/fuse does not exist"
elif [ ! -r /dev/fuse ] || [ ! -w /dev/fuse ]; then
    fuse_missing="/dev/fuse is not readable and writable by $(id -un)"
elif [ "$(id -u)" != 0 ] && ! command -v fusermount3 >/dev/null && ! command -v fusermount >/dev/null; then
    fuse_missing="not root and no fusermount3 to mount with"
fi
