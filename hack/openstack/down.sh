#!/usr/bin/env bash
# down.sh stops the OpenStack test stack started by up.sh (Keystone,
# Octavia, Neutron, Nova with Placement and Glance, RabbitMQ).
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

# stop ends the process (group) whose id is in a pid file.
stop() {
  local f="$dir/$1.pid" pid i
  [ -f "$f" ] || return 0
  pid="$(cat "$f")"
  if kill -0 "$pid" 2>/dev/null; then
    log "stopping $1 ($pid)"
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null
    for i in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

stop nova-compute
stop nova-scheduler
stop nova-conductor
stop nova-api
stop glance-api
stop placement
stop neutron-server
stop octavia-worker
stop octavia-api
stop keystone
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
