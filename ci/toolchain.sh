#!/usr/bin/env bash
# Makes sure the toolchain rust-toolchain.toml names is the one cargo runs
# here. Machines of this kind have exactly one toolchain, `stable`, and
# cannot download another; when it is the named version but not installed
# under that name, it is linked under it (as the machine's own setup
# does), and any other version is an error that says what to do.
set -euo pipefail
cd "$(dirname "$0")/.."
want=$(sed -n 's/^channel = "\(.*\)"$/\1/p' rust-toolchain.toml)
triple=$(RUSTUP_TOOLCHAIN=stable rustc -vV | sed -n 's/^host: //p')
if ! rustup toolchain list | grep -q "^$want-$triple"; then
    have=$(RUSTUP_TOOLCHAIN=stable rustc -vV | sed -n 's/^release: //p')
    if [ "$have" != "$want" ]; then
        echo "rust-toolchain.toml names $want; this machine has $have as stable: install $want (rustup toolchain install $want) or move rust-toolchain.toml to $have in a commit of its own" >&2
        exit 1
    fi
    ln -s "$(RUSTUP_TOOLCHAIN=stable rustc --print sysroot)" "${RUSTUP_HOME:-$HOME/.rustup}/toolchains/$want-$triple"
    echo "linked the stable toolchain ($have) as $want-$triple"
fi
got=$(rustc -vV | sed -n 's/^release: //p')
[ "$got" = "$want" ] || { echo "cargo runs rustc $got here, rust-toolchain.toml names $want" >&2; exit 1; }
echo "rustc $got, as rust-toolchain.toml names"
