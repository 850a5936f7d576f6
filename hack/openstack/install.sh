#!/usr/bin/env bash
# install.sh installs the Debian packages of the OpenStack test stack
# (Keystone, Octavia API and worker, Neutron's server, Nova's API, conductor
# and scheduler (nova-compute runs from python3-nova: Debian's nova-compute
# package pulls in libvirt and QEMU), Placement, Glance, RabbitMQ, uwsgi,
# MariaDB (every service's database) and PyMySQL (the services' driver to it). It is idempotent: with
# everything installed it returns at once. Needs root and apt.
set -euo pipefail

packages=(keystone octavia-api octavia-worker neutron-server nova-api nova-conductor
  nova-scheduler placement-api glance-api rabbitmq-server uwsgi-core
  uwsgi-plugin-python3 python3-keystoneclient mariadb-server mariadb-client python3-pymysql
  openssl curl)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

# No service may start from a postinst: this script starts what it needs on
# loopback itself.
if [ ! -x /usr/sbin/policy-rc.d ] || ! grep -q 'exit 101' /usr/sbin/policy-rc.d; then
  printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
  chmod 0755 /usr/sbin/policy-rc.d
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq </dev/null
apt-get install -y -qq --no-install-recommends \
  -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
  "${missing[@]}" </dev/null
