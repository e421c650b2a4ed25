#!/usr/bin/env bash
# Regenerates fixtures/: an example node tree (fixtures/node) and the kubectl JSON of the
# cluster's Secrets (fixtures/secrets.json). Every value is generated from a fixed seed
# (never a real credential), so the output is the same on every run.
set -euo pipefail
cd "$(dirname "$0")/.."
out=fixtures
rm -rf "$out/node" "$out/secrets.json" "$out/secrets-revoked.json"
K=$out/node/var/lib/kubelet/pods

# gen NAME LEN: a deterministic fake value (letters, digits, '-') derived from NAME.
gen() { printf '%s' "kresidue-fixture-$1" | sha256sum | head -c "$2" | tr '0-9' 'gqhrjskmnp' | sed 's/^\(....\)/\1-/'; }
b64() { printf '%s' "$1" | base64 -w0; }

DB_PASS="fake-$(gen db-password 24)"
API_TOKEN="fake-$(gen api-token 40)"
OLD_PASS="fake-$(gen old-db-password 24)"
REG_PASS="fake-$(gen registry-password 28)"
REG_AUTH=$(b64 "robot:$REG_PASS")
DOCKERCFG="{\"auths\":{\"registry.example.invalid\":{\"username\":\"robot\",\"password\":\"$REG_PASS\",\"auth\":\"$REG_AUTH\"}}}"
TLS_KEY=$(printf -- '-----BEGIN FAKE TEST KEY-----\n%s\n%s\n-----END FAKE TEST KEY-----\n' "$(gen tls-1 60)" "$(gen tls-2 60)")
TLS_CRT=$(printf -- '-----BEGIN CERTIFICATE-----\n%s\n-----END CERTIFICATE-----\n' "$(gen cert 60)")

cat >"$out/secrets.json" <<JSON
{
  "apiVersion": "v1",
  "kind": "List",
  "items": [
    {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
     "metadata": {"namespace": "shop", "name": "db-credentials"},
     "data": {"password": "$(b64 "$DB_PASS")", "user": "$(b64 "shop-app-user-account")"}},
    {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
     "metadata": {"namespace": "shop", "name": "payment-api"},
     "data": {"token": "$(b64 "$API_TOKEN")"}},
    {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
     "metadata": {"namespace": "shop", "name": "registry-pull"},
     "data": {".dockerconfigjson": "$(b64 "$DOCKERCFG")"}},
    {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
     "metadata": {"namespace": "shop", "name": "frontend-tls"},
     "data": {"tls.crt": "$(b64 "$TLS_CRT")", "tls.key": "$(b64 "$TLS_KEY")"}}
  ]
}
JSON

cat >"$out/secrets-revoked.json" <<JSON
{"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
 "metadata": {"namespace": "shop", "name": "db-credentials"},
 "data": {"password": "$(b64 "$OLD_PASS")"}}
JSON

# atomic VOLDIR TS KEY=VALUE...: kubelet's atomic-writer layout.
atomic() {
  local d=$1 ts=$2; shift 2
  mkdir -p "$d/$ts"
  ln -sfn "$ts" "$d/..data"
  for kv in "$@"; do
    local k=${kv%%=*} v=${kv#*=}
    printf '%s' "$v" >"$d/$ts/$k"
    ln -sfn "..data/$k" "$d/$k"
  done
}

# Pod 1 (orphaned shop pod): secret volume left on disk, with a stale older copy.
P1=$K/3f1c2a8e-5b7d-4e21-9a0c-6d8e2f4b1a77
atomic "$P1/volumes/kubernetes.io~secret/db" ..2026_11_02_08_15_42.2918274401 "password=$DB_PASS" "user=shop-app-user-account"
mkdir -p "$P1/volumes/kubernetes.io~secret/db/..2026_10_01_07_00_00.118227731"
printf '%s' "$OLD_PASS" >"$P1/volumes/kubernetes.io~secret/db/..2026_10_01_07_00_00.118227731/password"
mkdir -p "$P1/volumes/kubernetes.io~empty-dir/config"
printf 'spring:\n  datasource:\n    url: jdbc:postgresql://db:5432/shop\n    password: %s\n' "$DB_PASS" >"$P1/volumes/kubernetes.io~empty-dir/config/application.yaml"
mkdir -p "$P1/containers/app"
printf 'fatal: payment API rejected token %s\n' "$API_TOKEN" >"$P1/containers/app/5e0c1d2a"
printf '127.0.0.1 localhost\n' >"$P1/etc-hosts"

# Pod 2: a TLS volume (key found, public cert not), a subPath copy, a projected volume.
P2=$K/9b4e7d10-2c3a-4f5e-8d6b-1a2b3c4d5e6f
atomic "$P2/volumes/kubernetes.io~secret/tls" ..2026_11_20_12_00_01.77120934 "tls.crt=$TLS_CRT" "tls.key=$TLS_KEY"
mkdir -p "$P2/volume-subpaths/tls/nginx"
printf '%s' "$TLS_KEY" >"$P2/volume-subpaths/tls/nginx/0"
atomic "$P2/volumes/kubernetes.io~projected/kube-api-access-x7k2p" ..2026_11_20_12_00_01.3312 "namespace=shop"
mkdir -p "$P2/volumes/kubernetes.io~empty-dir/docker"
printf '{"auths":{"registry.example.invalid":{"auth":"%s"}}}\n' "$REG_AUTH" >"$P2/volumes/kubernetes.io~empty-dir/docker/config.json"

# Pod 3: a clean pod.
P3=$K/c0ffee00-1111-4222-8333-444455556666
atomic "$P3/volumes/kubernetes.io~projected/kube-api-access-q9w8e" ..2026_11_29_23_59_59.42 "namespace=default"
printf '127.0.0.1 localhost\n' >"$P3/etc-hosts"

mkdir -p "$out/node/etc"; echo "example-node-1" >"$out/node/etc/hostname"
echo "fixtures regenerated"
