#!/usr/bin/env bash
# Installs Debian's tools the image and real-node tests run the image with:
# umoci (unpacks the OCI layout), runc (runs it) and containerd (the real
# node's runtime, test/e2e/node); and iproute2, whose `ip netns` the wire
# tests (test/e2e/netns, test/e2e/wire) build their networks with.
# Idempotent; .ci/run calls it. Needs root.
set -euo pipefail

pkgs=(umoci runc containerd iproute2)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# policy-rc.d: the packages' postinst scripts start no services (the tests
# start containerd themselves, with their own state folders).
restore=false
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
  chmod +x /usr/sbin/policy-rc.d
  restore=true
fi
apt-get install -y -qq --no-install-recommends "${missing[@]}"
if $restore; then rm -f /usr/sbin/policy-rc.d; fi
