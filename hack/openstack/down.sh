#!/usr/bin/env bash
# down.sh stops the OpenStack test stack started by up.sh (Keystone,
# Octavia, Neutron, Nova with Placement and Glance, RabbitMQ, and last the
# MariaDB holding their databases).
# --purge also removes its state ($MCCM_OS_DIR, default
# /var/tmp/mccm-openstack), so the next up.sh starts from scratch.
# --quiet prints nothing.
set -uo pipefail

dir="${MCCM_OS_DIR:-/var/tmp/mccm-openstack}"
purge=false quiet=false
for a in "$@"; do
  case "$a" in
  --purge) purge=true ;;
  --quiet) quiet=true ;;
  *) echo "usage: $0 [--purge] [--quiet]" >&2; exit 2 ;;
  esac
done

log() { $quiet || printf 'down.sh: %s\n' "$*" >&2; }

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
. "$here/lib.sh"

stop_service nova-compute
stop_service nova-scheduler
stop_service nova-conductor
stop_service nova-api
stop_service glance-api
stop_service placement
stop_service neutron-server
stop_service octavia-api-neutron
stop_service octavia-worker
stop_service octavia-api
stop_service keystone
stop_service mariadb
if command -v rabbitmqctl >/dev/null && rabbitmqctl -q -n rabbit@localhost status >/dev/null 2>&1; then
  log "stopping RabbitMQ"
  rabbitmqctl -q -n rabbit@localhost stop >/dev/null 2>&1 || true
fi
if $purge; then
  log "removing $dir"
  rm -rf "$dir"
  rm -rf /var/lib/rabbitmq/mnesia/rabbit@localhost*
fi
exit 0
