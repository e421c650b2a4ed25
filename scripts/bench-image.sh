#!/usr/bin/env bash
# The image benchmark (docs/PERFORMANCE.md, "Images"): `scan --image` of a node's disk image
# against `scan --root` of the same tree, and of a container image archive against just
# inflating its layer (`tar -xzOf LAYER > /dev/null`). The tree is a copy of this machine's
# `/usr/lib/x86_64-linux-gnu` (or DIR) under a container layer's place, with a kubelet Secret volume.
# The same tree as an XFS disk image, and as a root filesystem tarball plain, gzip- and
# zstd-compressed, each against `cat`/`zcat`/`zstdcat` of it.
# Usage: scripts/bench-image.sh [ROUNDS] [DIR]. Needs mkfs.ext4 (e2fsprogs), mkfs.xfs
# (xfsprogs), GNU tar, gzip, zstd, sha256sum and /usr/bin/time. Work files are kept under
# target/tmp/image-bench/.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
src=${2:-/usr/lib/x86_64-linux-gnu}
cargo build --release -q
bin=$PWD/target/release/kresidue
w=$PWD/target/tmp/image-bench
rm -rf "$w"
mkdir -p "$w/root/var/lib/docker/overlay2/0123456789abcdef/diff" "$w/oci/blobs/sha256"
cp -a "$src/." "$w/root/var/lib/docker/overlay2/0123456789abcdef/diff/"
vol="$w/root/var/lib/kubelet/pods/0d15c0de-0000-4000-8000-000000000001/volumes/kubernetes.io~secret/s"
mkdir -p "$vol"
printf 'generated-value-%s' "$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')" > "$vol/token"
size=$(du -sm "$w/root" | cut -f1)
mkfs.ext4 -q -F -d "$w/root" "$w/node.img" "$((size * 3 / 2 + 64))M"
bash scripts/xfs-image.sh "$w/root" "$w/node-xfs.img" "$((size * 3 / 2 + 300))M"
tar -C "$w/root" -cf "$w/root.tar" .
gzip -1 -c "$w/root.tar" > "$w/root.tar.gz"
zstd -q -3 -c "$w/root.tar" > "$w/root.tar.zst"
# An OCI layout of one gzip layer holding the same tree.
tar -C "$w/root" -cf - . | gzip -1 > "$w/layer"
blob() { local d; d=$(sha256sum "$1" | cut -d' ' -f1); mv "$1" "$w/oci/blobs/sha256/$d"; echo "sha256:$d"; }
layer=$(blob "$w/layer")
printf '{"rootfs":{"diff_ids":[]}}' > "$w/config"
config=$(blob "$w/config")
printf '{"schemaVersion":2,"config":{"digest":"%s"},"layers":[{"digest":"%s"}]}' "$config" "$layer" > "$w/manifest"
manifest=$(blob "$w/manifest")
printf '{"manifests":[{"digest":"%s"}]}' "$manifest" > "$w/oci/index.json"
tar -C "$w/oci" -cf "$w/oci.tar" .
layer_file="$w/oci/blobs/sha256/${layer#sha256:}"
echo "tree: ${size} MiB from $src; disk image $(du -m "$w/node.img" | cut -f1) MiB (allocated); layer $(du -m "$layer_file" | cut -f1) MiB gzip"
run() { # name, command...: ROUNDS runs, median wall seconds and peak RSS
  local name=$1; shift
  local t=()
  for _ in $(seq "$rounds"); do
    /usr/bin/time -f '%e %M' -o "$w/time" "$@" > /dev/null 2>&1 || true
    t+=("$(cat "$w/time")")
  done
  printf '%s\n' "${t[@]}" | sort -n | awk -v n="$name" '{a[NR]=$1; m[NR]=$2} END {printf "%-34s median %.3f s  (min %.3f, max %.3f)  peak RSS %d MiB\n", n, a[int((NR+1)/2)], a[1], a[NR], m[int((NR+1)/2)]/1024}'
}
run "read the disk image (cat)" cat "$w/node.img"
run "scan --root (the tree, mounted)" "$bin" scan --root "$w/root" --no-cri -q --format json --fail-on never
run "scan --image node.img (ext4)" "$bin" scan --image "$w/node.img" -q --format json --fail-on never
run "scan --image node-xfs.img (XFS)" "$bin" scan --image "$w/node-xfs.img" -q --format json --fail-on never
run "read the tarball (cat root.tar)" cat "$w/root.tar"
run "scan --image root.tar" "$bin" scan --image "$w/root.tar" -q --format json --fail-on never
run "inflate root.tar.gz (zcat)" zcat "$w/root.tar.gz"
run "scan --image root.tar.gz" "$bin" scan --image "$w/root.tar.gz" -q --format json --fail-on never
run "inflate root.tar.zst (zstdcat)" zstdcat "$w/root.tar.zst"
run "scan --image root.tar.zst" "$bin" scan --image "$w/root.tar.zst" -q --format json --fail-on never
run "inflate the layer (tar -xzOf)" tar -xzOf "$layer_file"
run "scan --image oci.tar" "$bin" scan --image "$w/oci.tar" -q --format json --fail-on never
