#!/usr/bin/env bash
# An OCI image of the static kresidue binary, built without a registry or a container
# tool: one layer holding /usr/local/bin/kresidue (and an empty /tmp), a config whose
# entrypoint is the binary (no shell in the image) and whose default user is 65534
# (nobody; the DaemonSet runs it as root with DAC_READ_SEARCH only), in an OCI image
# layout tarball that `ctr images import` takes:
#
#   scripts/build-image.sh [OUT.tar] [NAME]
#       OUT.tar  default target/dist/kresidue-image.tar
#       NAME     default localhost/kresidue:<version>
#   ctr -n k8s.io images import target/dist/kresidue-image.tar
#
# KRESIDUE_BIN picks a binary already built (it must be static: checked); otherwise
# scripts/build-static.sh builds one. Needs bash, tar, gzip, sha256sum (coreutils) and
# readelf (binutils). The layer is reproducible: names sorted, owners 0, modes set,
# times set to the commit's (or SOURCE_DATE_EPOCH).
set -euo pipefail
# Paths given are the caller's: resolved before moving to the repository.
out=$(realpath -m "${1:-$(dirname "$0")/../target/dist/kresidue-image.tar}")
bin=${KRESIDUE_BIN:+$(realpath "$KRESIDUE_BIN")}
cd "$(dirname "$0")/.."
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n1)
name=${2:-localhost/kresidue:$version}
# An image reference: no quote, backslash or space can reach the JSON below.
if ! [[ "$name" =~ ^[a-z0-9][a-z0-9._/:-]*:[A-Za-z0-9_][A-Za-z0-9._-]*$ ]]; then
  echo "build-image.sh: not an image name with a tag: $name" >&2
  exit 2
fi
tag=${name##*:}
bin=${bin:-$(scripts/build-static.sh)}
headers=$(readelf -hlW "$bin")
if grep -q 'INTERP' <<<"$headers"; then
  echo "build-image.sh: $bin is dynamically linked; the image has no libc" >&2
  exit 2
fi
# The image's architecture is the binary's.
case "$(sed -n 's/^ *Machine: *//p' <<<"$headers")" in
  *X86-64*) arch=amd64 ;;
  AArch64) arch=arm64 ;;
  *) echo "build-image.sh: $bin: an architecture this script does not name" >&2; exit 2 ;;
esac
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/rootfs/usr/local/bin" "$work/rootfs/tmp" "$work/oci/blobs/sha256"
install -m 0755 "$bin" "$work/rootfs/usr/local/bin/kresidue"
chmod 0755 "$work/rootfs/usr" "$work/rootfs/usr/local" "$work/rootfs/usr/local/bin"
chmod 1777 "$work/rootfs/tmp"

tar --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner \
  -C "$work/rootfs" -cf "$work/layer.tar" usr tmp
diff_id=$(sha256sum "$work/layer.tar" | cut -d' ' -f1)
gzip -n -9 "$work/layer.tar"

# Stores file $1 as a blob; prints "<digest> <size>".
blob() {
  local d s
  d=$(sha256sum "$1" | cut -d' ' -f1)
  s=$(stat -c %s "$1")
  cp "$1" "$work/oci/blobs/sha256/$d"
  echo "$d $s"
}
read -r layer_d layer_s < <(blob "$work/layer.tar.gz")

created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)
cat > "$work/config.json" <<JSON
{"architecture":"$arch","os":"linux","created":"$created","config":{"User":"65534:65534","Entrypoint":["/usr/local/bin/kresidue"],"Cmd":["--help"],"WorkingDir":"/","Env":["PATH=/usr/local/bin"],"Labels":{"org.opencontainers.image.title":"kresidue","org.opencontainers.image.version":"$version"}},"rootfs":{"type":"layers","diff_ids":["sha256:$diff_id"]},"history":[{"created":"$created","created_by":"scripts/build-image.sh"}]}
JSON
read -r config_d config_s < <(blob "$work/config.json")

cat > "$work/manifest.json" <<JSON
{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:$config_d","size":$config_s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:$layer_d","size":$layer_s}]}
JSON
read -r manifest_d manifest_s < <(blob "$work/manifest.json")

cat > "$work/oci/index.json" <<JSON
{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:$manifest_d","size":$manifest_s,"platform":{"architecture":"$arch","os":"linux"},"annotations":{"io.containerd.image.name":"$name","org.opencontainers.image.ref.name":"$tag"}}]}
JSON
printf '{"imageLayoutVersion":"1.0.0"}' > "$work/oci/oci-layout"

mkdir -p "$(dirname "$out")"
tar --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner \
  -C "$work/oci" -cf "$out.tmp" oci-layout index.json blobs
mv "$out.tmp" "$out"
echo "$out"
