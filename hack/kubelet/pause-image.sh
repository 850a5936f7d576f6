#!/usr/bin/env bash
# Builds the pod sandbox ("pause") image the real-node tests import into
# containerd: hack/kubelet/pause (built by hack/kubelet/build.sh) as
# /pause, run as 65535, tagged registry.k8s.io/pause:3.10 (containerd's
# sandbox_image in the tests' config). Public registries cannot be reached
# here. Writes _output/image/pause.tar (docker-archive); reproducible like
# hack/image/build.sh, whose crane it uses.
set -euo pipefail
umask 022

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUT=${IMAGE_OUT:-$ROOT/_output/image}
CRANE=${CRANE:-$ROOT/_output/tools/bin/crane}
PAUSE=${PAUSE:-$ROOT/_output/bin/pause}
TAG=registry.k8s.io/pause:3.10

for f in "$CRANE" "$PAUSE"; do
  [ -x "$f" ] || { echo "hack/kubelet/pause-image.sh: no $f (make image kubelet)" >&2; exit 1; }
done
WORK=$(mktemp -d)
REGISTRY_PID=
trap '[ -n "$REGISTRY_PID" ] && kill "$REGISTRY_PID" 2>/dev/null; rm -rf "$WORK"' EXIT

mkdir -p "$WORK/root" "$OUT"
install -m 0755 -o 0 -g 0 "$PAUSE" "$WORK/root/pause"
chmod 0755 "$WORK/root"
tar --sort=name --mtime=@0 --numeric-owner --format=gnu -C "$WORK/root" -cf "$WORK/layer.tar" .

PORT= "$CRANE" registry serve --address 127.0.0.1:0 > "$WORK/registry.log" 2>&1 &
REGISTRY_PID=$!
port=
for _ in $(seq 100); do
  port=$(sed -n 's/.*serving on port \([0-9]*\).*/\1/p' "$WORK/registry.log" | head -n1)
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { cat "$WORK/registry.log" >&2; exit 1; }
"$CRANE" append --insecure --oci-empty-base -f "$WORK/layer.tar" -t "127.0.0.1:$port/pause:layers" 2> "$WORK/crane.log" > /dev/null ||
  { cat "$WORK/crane.log" >&2; exit 1; }
"$CRANE" mutate --insecure "127.0.0.1:$port/pause:layers" --set-platform linux/amd64 --entrypoint /pause -u 65535:65535 \
  -t "$TAG" -o "$OUT/pause.tar" 2> "$WORK/crane.log" > /dev/null || { cat "$WORK/crane.log" >&2; exit 1; }
echo "pause image $TAG: $OUT/pause.tar"
