#!/usr/bin/env bash
# The node-scale benchmark (docs/PERFORMANCE.md): installs ripgrep for the comparison when
# it is missing, then runs `cargo bench --bench node` with any arguments given
# (`--large`, `--rounds N`, `--rg-rounds N`, `--threads N`). The generated node is kept under
# target/tmp/node-bench/ between runs.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v rg >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends ripgrep \
      || { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends ripgrep; }
  else
    cargo install ripgrep
  fi
fi
exec cargo bench --bench node -- "$@"
