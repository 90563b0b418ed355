#!/usr/bin/env bash
# third_party/kafka-protocol is the published crate plus one committed
# diff (third_party/kafka-protocol.patch), nothing else: this downloads
# the release from crates.io, checks it against the checksum the registry
# published, drops what the copy leaves out, applies the diff and fails on
# any difference from the copy. Edit the copy, then regenerate the diff:
#
#   bash ci/vendored.sh              check
#   bash ci/vendored.sh --write      rewrite the .patch from today's copy
set -euo pipefail
cd "$(dirname "$0")/.."
version=0.18.0
# The registry index's `cksum` of kafka-protocol 0.18.0 (index.crates.io).
sha256=099d5c2f1b40cd830cbf18ca4d2a0805f2875b811ca18f0372b2433e68fe2dda
# In the release, left out of the copy: its tests (and their containers),
# its CI, its lock file and toolchain pin, cargo's packaging leftovers.
dropped=(.cargo_vcs_info.json .github .gitignore Cargo.lock Cargo.toml.orig rust-toolchain.toml tests)
copy=third_party/kafka-protocol
diff_file=third_party/kafka-protocol.patch
work=target/vendored-check

grep -q "^version = \"$version\"" "$copy/Cargo.toml" ||
    { echo "$copy/Cargo.toml is not version $version: update ci/vendored.sh with the new release" >&2; exit 1; }
rm -rf "$work"
mkdir -p "$work/a" "$work/b"
curl -fsSL --retry 3 -o "$work/crate.tar.gz" \
    "https://static.crates.io/crates/kafka-protocol/kafka-protocol-$version.crate"
echo "$sha256  $work/crate.tar.gz" | sha256sum -c --quiet -
tar xzf "$work/crate.tar.gz" -C "$work"
mv "$work/kafka-protocol-$version" "$work/a/kafka-protocol"
(cd "$work/a/kafka-protocol" && rm -rf "${dropped[@]}")

if [ "${1:-}" = --write ]; then
    cp -r "$copy" "$work/b/kafka-protocol"
    rm "$work/b/kafka-protocol/KAAS-PATCH.md"
    (cd "$work" && diff -ruN a b >"patch" || [ $? = 1 ])
    sed -E 's/^(---|\+\+\+) ([^\t]*)\t.*$/\1 \2/' "$work/patch" >"$diff_file"
    echo "wrote $diff_file ($(grep -c '^+++ ' "$diff_file") files)"
    exit 0
fi

git apply -p1 --directory="$work/a" "$diff_file"
if ! diff -r --exclude=KAAS-PATCH.md "$work/a/kafka-protocol" "$copy"; then
    echo "$copy is not kafka-protocol $version plus $diff_file: edit the copy, then run bash ci/vendored.sh --write and say why in $copy/KAAS-PATCH.md" >&2
    exit 1
fi
echo "$copy is kafka-protocol $version (checksum $sha256) plus $diff_file"
