#!/usr/bin/env bash
# The portable release binary (README "Install"): statically linked against glibc
# (`-C target-feature=+crt-static` on the gnu target), built with the `dist` profile
# (fat LTO, one codegen unit, symbols stripped), so that one file runs on nodes with an
# older glibc or none. Checks that the result has no dynamic section and that it runs in
# an empty environment, then prints its path.
#
#   scripts/build-static.sh [OUT]    (default: target/dist/kresidue)
#
# CARGO_TARGET_DIR defaults to target/dist-build here, apart from the usual target dir,
# so that a test can build it while cargo holds the other.
set -euo pipefail
# OUT is the caller's path: resolved before moving to the repository.
out=$(realpath -m "${1:-$(dirname "$0")/../target/dist/kresidue}")
cd "$(dirname "$0")/.."
host=$(rustc -vV | sed -n 's/^host: //p')
case "$host" in
  *-linux-gnu) ;;
  *) echo "build-static.sh: a static build needs a *-linux-gnu host, not $host" >&2; exit 2 ;;
esac
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target/dist-build}
# --target keeps the flag off build scripts and proc macros, which cannot be static.
RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static" \
  cargo build --locked --quiet --profile dist --target "$host" --bin kresidue
bin="$CARGO_TARGET_DIR/$host/dist/kresidue"
# Static (or static-pie): no program interpreter, no shared library needed. readelf's
# output is captured first, so that its failure stops the script (set -e).
headers=$(readelf -lW "$bin")
dynamic=$(readelf -dW "$bin")
if grep -q 'INTERP' <<<"$headers" || grep -q '(NEEDED)' <<<"$dynamic"; then
  echo "build-static.sh: $bin is dynamically linked" >&2
  exit 1
fi
env -i "$bin" --version >/dev/null
mkdir -p "$(dirname "$out")"
install -m 0755 "$bin" "$out"
echo "$out"
