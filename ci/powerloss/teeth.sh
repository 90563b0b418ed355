#!/usr/bin/env bash
# Teeth of the power-loss rounds: each patch in ci/powerloss/teeth/ takes
# one durability step out of the production code (PosixVfs and atomic
# replace); the rounds must fail with it. Each is built from a copy of this
# tree (target/teeth/src, its own target directory), so the tree itself is
# never changed. Prints one line a patch: caught or SURVIVED; exits 1 if
# any survived. Arguments go to rounds.py (default: round (a) only, or what
# the patch's `rounds:` line names).
set -euo pipefail
cd "$(dirname "$0")/../.."
source ci/powerloss/fuse.sh
if [ -n "$fuse_missing" ]; then
    echo "teeth.sh needs FUSE: $fuse_missing" >&2
    exit 1
fi
given=("$@")
cargo build --locked --release -q -p testvol
source ci/clients/venv.sh
src=target/teeth/src
survived=0
# ONLY=glob picks some of the patches (ONLY='no-fsync-*').
for patch in ci/powerloss/teeth/${ONLY:-*}.patch; do
    name=$(basename "$patch" .patch)
    rm -rf "$src" && mkdir -p "$src"
    git ls-files -co --exclude-standard | grep -v '^target/' | tar -cT - | tar -x -C "$src"
    # A repository of its own: run inside this one's target/, git apply
    # would skip every path outside target/teeth/src without a word.
    (cd "$src" && git init -q && git apply "$OLDPWD/$patch")
    for f in $(cd "$src" && git apply --numstat "$OLDPWD/$patch" | cut -f3); do
        if cmp -s "$f" "$src/$f"; then
            echo "$patch did not change $f in the copy" >&2
            exit 1
        fi
    done
    CARGO_TARGET_DIR="$PWD/target/teeth/build" cargo build --locked --release -q -p broker --manifest-path "$src/Cargo.toml"
    log=target/teeth/$name.log
    args=("${given[@]}")
    if [ ${#args[@]} -eq 0 ]; then
        read -r -a args <<<"$(sed -n 's/^rounds: //p' "$patch" | head -1)"
    fi
    [ ${#args[@]} -gt 0 ] || args=(--only a --rounds-a 20)
    start=$SECONDS
    KAAS_BIN=target/teeth/build/release/kaas "$venv/bin/python" -u ci/powerloss/rounds.py "${args[@]}" >"$log" 2>&1 || true
    # Caught only by what the rounds check: acknowledged records lost or
    # read twice, committed offsets gone back, a broker that cannot start
    # again. Any other failure (the volume, the clients) proves nothing.
    verdict=$(grep -m1 -E '^FAILED: .*(acknowledged records|committed offsets went back|kaas exited|did not listen)' "$log" || true)
    if [ -n "$verdict" ]; then
        echo "caught   $name in $((SECONDS - start)) s: $(cut -c1-400 <<<"$verdict")"
    else
        echo "SURVIVED $name ($(sed -n 1p "$patch")): no check of the rounds failed; see $log"
        survived=1
    fi
done
exit "$survived"
