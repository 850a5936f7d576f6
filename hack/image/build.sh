#!/usr/bin/env bash
# Builds the multicloud-ccm container image without a container engine or
# any registry but the Go module proxy and Debian's archive:
#
#   base layer    CA certificates and zoneinfo from Debian's (pinned)
#                 ca-certificates and tzdata packages, /etc/passwd and
#                 /etc/group with the nonroot user 65532, /tmp, /home/nonroot
#   binary layer  the static binary `make build` wrote
#   config        entrypoint, user 65532:65532, port 10258, OCI labels
#
# assembled by crane (github.com/google/go-containerregistry, pinned, built
# into _output/tools/bin) through a throwaway registry on loopback. Layers are
# tarred with sorted names, mtime 0 and numeric owners, and nothing in the
# image carries a build time, so the same inputs (binary, package versions,
# VERSION) give the same digest.
#
# Writes under _output/image (or $IMAGE_OUT):
#   oci/                    an OCI image layout, tag $VERSION (umoci, skopeo)
#   multicloud-ccm.tar      a docker-archive tarball tagged $IMAGE_REPO:$VERSION
#                           (docker load, podman load, ctr images import)
#   digest                  the image's manifest digest
# and prints the digest and sizes.
#
# Environment: VERSION (required, as `make image` passes it), BIN (default
# _output/bin/multicloud-ccm), IMAGE_REPO (default
# ghcr.io/multicloud-ccm/multicloud-ccm).
set -euo pipefail
umask 022

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUT=${IMAGE_OUT:-$ROOT/_output/image}
TOOLS=${TOOLS:-$ROOT/_output/tools/bin}
BIN=${BIN:-$ROOT/_output/bin/multicloud-ccm}
IMAGE_REPO=${IMAGE_REPO:-ghcr.io/multicloud-ccm/multicloud-ccm}
: "${VERSION:?set VERSION (make image does)}"

CRANE_VERSION=v0.22.1
# Debian bookworm (security) versions of the base's two packages. Bump them
# here; a bump changes the image digest, nothing else does.
CA_CERTIFICATES_VERSION=20250419~deb12u2
TZDATA_VERSION=2026f-0+deb12u1

export CGO_ENABLED=0 GOFLAGS="$(bash "$ROOT/hack/goflags.sh")"
CRANE=$TOOLS/crane

install_crane() {
  if [ -x "$CRANE" ] && [ "$("$CRANE" version 2>/dev/null)" = "$CRANE_VERSION" ]; then
    return
  fi
  mkdir -p "$TOOLS"
  GOBIN=$TOOLS go install -trimpath -ldflags "-s -w" "github.com/google/go-containerregistry/cmd/crane@$CRANE_VERSION"
}

# fetch_debs DIR: the two pinned packages, downloaded once (apt verifies them
# against the archive's signed index).
fetch_debs() {
  local dir=$1
  mkdir -p "$dir"
  local want=("ca-certificates_${CA_CERTIFICATES_VERSION}_all.deb" "tzdata_${TZDATA_VERSION}_all.deb")
  if [ -f "$dir/${want[0]}" ] && [ -f "$dir/${want[1]}" ]; then
    return
  fi
  # A machine whose package lists are missing or older than the pins
  # needs one apt-get update first.
  (cd "$dir" && apt-get download "ca-certificates=$CA_CERTIFICATES_VERSION" "tzdata=$TZDATA_VERSION") ||
    { apt-get update -qq && (cd "$dir" && apt-get download "ca-certificates=$CA_CERTIFICATES_VERSION" "tzdata=$TZDATA_VERSION"); } || {
    echo "hack/image/build.sh: cannot download ca-certificates=$CA_CERTIFICATES_VERSION and tzdata=$TZDATA_VERSION;" >&2
    echo "  run apt-get update, or bump the versions in this script to what apt-cache policy offers" >&2
    exit 1
  }
}

# base_rootfs DEBS DIR: the base layer's files in DIR.
base_rootfs() {
  local debs=$1 dir=$2 x
  x=$(mktemp -d -p "$WORK")
  dpkg-deb -x "$debs/ca-certificates_${CA_CERTIFICATES_VERSION}_all.deb" "$x/ca"
  dpkg-deb -x "$debs/tzdata_${TZDATA_VERSION}_all.deb" "$x/tz"
  mkdir -p "$dir/etc/ssl/certs" "$dir/usr/share/doc/ca-certificates" "$dir/usr/share/doc/tzdata" \
    "$dir/tmp" "$dir/home/nonroot" "$dir/usr/local/bin"
  # What update-ca-certificates would write: every certificate the package
  # ships, in name order.
  find "$x/ca/usr/share/ca-certificates" -name '*.crt' | LC_ALL=C sort | xargs cat > "$dir/etc/ssl/certs/ca-certificates.crt"
  cp -a "$x/tz/usr/share/zoneinfo" "$dir/usr/share/zoneinfo"
  cp "$x/ca/usr/share/doc/ca-certificates/copyright" "$dir/usr/share/doc/ca-certificates/copyright"
  cp "$x/tz/usr/share/doc/tzdata/copyright" "$dir/usr/share/doc/tzdata/copyright"
  printf '%s\n' 'root:x:0:0:root:/root:/sbin/nologin' 'nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin' \
    'nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin' > "$dir/etc/passwd"
  printf '%s\n' 'root:x:0:' 'nobody:x:65534:' 'nonroot:x:65532:' > "$dir/etc/group"
  printf '%s\n' 'hosts: files dns' > "$dir/etc/nsswitch.conf"
  chmod -R u=rwX,go=rX "$dir"
  chown -R 0:0 "$dir"
  chmod 1777 "$dir/tmp"
  chmod 0700 "$dir/home/nonroot"
  chown 65532:65532 "$dir/home/nonroot"
}

# layer DIR TAR: a tarball of DIR that depends only on the files' contents,
# modes and owners.
layer() {
  tar --sort=name --mtime=@0 --numeric-owner --format=gnu -C "$1" -cf "$2" .
}

# serve: a registry on loopback for the duration of the script; sets REG.
serve() {
  local port log=$WORK/registry.log
  # The log exists before the registry starts: the background job opens
  # it only once it runs, and sed below failing on a missing file ends the
  # script (set -e, pipefail). A cold .ci/run lost its e2e stage to that,
  # the machine loaded by the stages beside e2e.
  : > "$log"
  PORT= "$CRANE" registry serve --address 127.0.0.1:0 >> "$log" 2>&1 &
  REGISTRY_PID=$!
  for _ in $(seq 100); do
    port=$(sed -n 's/.*serving on port \([0-9]*\).*/\1/p' "$log" | head -n1)
    [ -n "$port" ] && break
    sleep 0.1
  done
  if [ -z "$port" ]; then
    echo "hack/image/build.sh: crane registry serve did not start:" >&2
    cat "$log" >&2
    exit 1
  fi
  REG=127.0.0.1:$port
}

# crane_q ARGS...: crane, its progress log shown only when it fails.
crane_q() {
  "$CRANE" "$@" 2> "$WORK/crane.log" || {
    local rc=$?
    cat "$WORK/crane.log" >&2
    return $rc
  }
}

cleanup() {
  if [ -n "${REGISTRY_PID:-}" ]; then kill "$REGISTRY_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}

if [ ! -x "$BIN" ]; then
  echo "hack/image/build.sh: no binary at $BIN (run make build)" >&2
  exit 1
fi
install_crane
mkdir -p "$OUT"
WORK=$(mktemp -d)
trap cleanup EXIT
fetch_debs "$ROOT/_output/tools/debs"

base_rootfs "$ROOT/_output/tools/debs" "$WORK/base"
mkdir -p "$WORK/bin/usr/local/bin"
install -m 0755 -o 0 -g 0 "$BIN" "$WORK/bin/usr/local/bin/multicloud-ccm"
chmod 0755 "$WORK/bin" "$WORK/bin/usr" "$WORK/bin/usr/local"
layer "$WORK/base" "$WORK/base.tar"
layer "$WORK/bin" "$WORK/bin.tar"

serve
ref=$REG/multicloud-ccm:$VERSION
crane_q append --insecure --oci-empty-base -f "$WORK/base.tar" -f "$WORK/bin.tar" -t "$REG/multicloud-ccm:layers" > /dev/null
mutate=(mutate --insecure "$REG/multicloud-ccm:layers"
  --set-platform linux/amd64
  --entrypoint /usr/local/bin/multicloud-ccm
  -u 65532:65532 -w /
  --exposed-ports 10258/tcp
  -e PATH=/usr/local/bin:/usr/bin:/bin
  -e SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
  -l org.opencontainers.image.title=multicloud-ccm
  -l "org.opencontainers.image.description=Kubernetes cloud-controller-manager for clusters spanning several clouds"
  -l org.opencontainers.image.source=https://github.com/multicloud-ccm/multicloud-ccm
  -l org.opencontainers.image.licenses=Apache-2.0
  -l "org.opencontainers.image.version=$VERSION"
  -l "io.multicloud-ccm.image.base=debian bookworm packages ca-certificates=$CA_CERTIFICATES_VERSION tzdata=$TZDATA_VERSION")
crane_q "${mutate[@]}" -t "$ref" > /dev/null
digest=$(crane_q digest --insecure "$ref")

# The OCI layout, with an index naming the image by its tag (umoci needs
# one; crane's --annotate-ref would record the throwaway registry's port).
rm -rf "$OUT/oci" "$OUT/multicloud-ccm.tar"
crane_q pull --insecure --format oci "$ref" "$OUT/oci"
msize=$(crane_q manifest --insecure "$ref" | wc -c)
mtype=$(crane_q manifest --insecure "$ref" | sed -n 's/.*"mediaType": *"\([^"]*manifest[^"]*\)".*/\1/p' | head -n1)
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"%s","size":%d,"digest":"%s","annotations":{"org.opencontainers.image.ref.name":"%s"}}]}\n' \
  "$mtype" "$msize" "$digest" "$VERSION" > "$OUT/oci/index.json"
# The docker-archive, tagged with the name the chart pulls (mutate -o
# writes it without pushing; the mutation is the same, so is the digest).
crane_q "${mutate[@]}" -t "$IMAGE_REPO:$VERSION" -o "$OUT/multicloud-ccm.tar" > /dev/null
echo "$digest" > "$OUT/digest"

compressed=$(find "$OUT/oci/blobs" -type f -printf '%s\n' | awk '{s += $1} END {print s}')
echo "image $IMAGE_REPO:$VERSION"
echo "  digest      $digest"
echo "  size        $compressed bytes compressed ($(( compressed / 1024 / 1024 )) MiB)"
echo "  oci layout  $OUT/oci (tag $VERSION)"
echo "  tarball     $OUT/multicloud-ccm.tar ($(stat -c %s "$OUT/multicloud-ccm.tar") bytes; docker load / ctr images import)"
