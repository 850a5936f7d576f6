#!/usr/bin/env bash
# neutron-up.sh starts a real Neutron (neutron-server, ML2 with no agents
# running, the L3 router service plugin) on 127.0.0.1:9696 beside
# the Keystone + Octavia stack of up.sh, which must be running: it
# authenticates tokens against that Keystone and uses its RabbitMQ. Networks,
# subnets, ports, routers with an external gateway, extra routes and floating
# IPs all work at the API level; nothing is plugged (ports stay DOWN). The
# openvswitch mechanism driver binds the ports of a host with a live Open
# vSwitch agent: nova-up.sh registers one for its compute host. It is
# idempotent: with Neutron running it only prints the environment. up.sh
# calls it; it can also be run alone against a stack already up.
#
# Usage: hack/openstack/neutron-up.sh   # prints export lines on stdout
#
# Neutron is not added to Keystone's catalog: the tests that use it pass
# NEUTRON_ENDPOINT as the backend's endpoints.network, so every other test
# keeps a catalog without Neutron (their API-call counts assume none).
#
# It also starts a second Octavia API on 127.0.0.1:9877 (OCTAVIA_NEUTRON_ENDPOINT:
# the same database and worker) whose network driver is the real one
# (allowed_address_pairs_driver) against this Neutron: it reads a given VIP
# port's fixed IPs (loadbalancer.openstack.org/port-id), which the noop
# driver of the main API invents as none, and allocates VIP ports, with
# additional_vips, in Neutron. The worker keeps the noop drivers: a VIP port
# this API allocates stays until its network is deleted.
set -euo pipefail
export PATH=/usr/sbin:/usr/bin:/sbin:/bin:$PATH

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dir="${MCCM_OS_DIR:-/var/tmp/mccm-openstack}"
region=RegionOne
keystone_url=http://127.0.0.1:5000/v3
neutron_url=http://127.0.0.1:9696

log() { printf '%s neutron-up.sh: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
# shellcheck source=lib.sh
. "$here/lib.sh"

octavia_neutron_url=http://127.0.0.1:9877

print_env() {
  cat <<EOF2
export NEUTRON_ENDPOINT=$neutron_url
export NEUTRON_E2E=1
export OCTAVIA_NEUTRON_ENDPOINT=$octavia_neutron_url
EOF2
}

# octavia_neutron_conf is up.sh's Octavia config with the real network
# driver, on port 9877.
octavia_neutron_conf() {
  sed -e 's/^network_driver = .*/network_driver = allowed_address_pairs_driver/' \
    -e 's/^bind_port = 9876$/bind_port = 9877/' "$dir/octavia.conf"
  printf '[neutron]\nendpoint = %s\n' "$neutron_url"
}

# start_octavia_neutron starts the second Octavia API unless it runs.
start_octavia_neutron() {
  local pidf="$dir/octavia-api-neutron.pid"
  if [ -f "$pidf" ] && grep -qs octavia-neutron.conf "/proc/$(cat "$pidf")/cmdline" &&
    curl -s -o /dev/null --max-time 2 "$octavia_neutron_url"; then
    return 0
  fi
  stop_service octavia-api-neutron
  (umask 077 && octavia_neutron_conf >"$dir/octavia-neutron.conf")
  log "starting the Octavia API with the Neutron network driver on 127.0.0.1:9877"
  uwsgi --plugin python3,http --http-keepalive --http-auto-chunked --http 127.0.0.1:9877 --wsgi-file /usr/bin/octavia-wsgi \
    --pyargv "--config-file $dir/octavia-neutron.conf" \
    --master --processes 2 --threads 1 --die-on-term --need-app \
    --pidfile "$pidf" --daemonize "$dir/log/octavia-api-neutron-uwsgi.log"
  for _ in $(seq 1 120); do
    if curl -s -o /dev/null --max-time 2 "$octavia_neutron_url"; then return 0; fi
    sleep 0.5
  done
  log "the Octavia API with the Neutron network driver did not answer; see $dir/log/octavia-api-neutron-uwsgi.log"
  exit 1
}

# alive reports whether the pid file's process is a running neutron-server
# (a pid left from before a reboot may belong to something else).
alive() { [ -f "$1" ] && grep -qs neutron-server "/proc/$(cat "$1")/cmdline"; }

# answering reports whether Neutron serves its version document.
answering() { curl -sf -o /dev/null --max-time 2 "$neutron_url/"; }

if [ -f "$dir/.neutron-initialized" ] && db_ready && alive "$dir/neutron-server.pid" && answering; then
  start_octavia_neutron
  print_env
  exit 0
fi

if [ ! -f "$dir/admin-password" ] || ! curl -s -o /dev/null --max-time 2 "$keystone_url"; then
  log "no Keystone at $keystone_url: start the stack with hack/openstack/up.sh"
  exit 1
fi
if ! command -v neutron-server >/dev/null; then
  "$here/install.sh" >&2
fi

neutron_conf() {
  cat <<EOF2
[DEFAULT]
core_plugin = ml2
service_plugins = router
auth_strategy = keystone
bind_host = 127.0.0.1
bind_port = 9696
api_workers = 1
rpc_workers = 0
rpc_state_report_workers = 0
transport_url = rabbit://guest:guest@127.0.0.1:5672/
notify_nova_on_port_status_changes = false
notify_nova_on_port_data_changes = false
allow_overlapping_ips = true
log_file = $dir/log/neutron-server.log
[database]
connection = $(db_url neutron)
[keystone_authtoken]
www_authenticate_uri = $keystone_url
$(auth_section)
[ml2]
type_drivers = flat,vlan,vxlan
tenant_network_types = vxlan
mechanism_drivers = openvswitch
extension_drivers = port_security
[ml2_type_flat]
flat_networks = public
[ml2_type_vlan]
network_vlan_ranges = physnet1:100:199
[ml2_type_vxlan]
vni_ranges = 1:4000
[oslo_concurrency]
lock_path = $dir/lock
EOF2
}

start=$(date +%s)
mkdir -p "$dir/log" "$dir/lock"
start_mariadb
(umask 077 && neutron_conf >"$dir/neutron.conf")
if [ ! -f "$dir/.neutron-initialized" ]; then
  stop_service neutron-server # A half-done start: no server on the old database.
  log "initialising Neutron's database"
  recreate_db neutron
  # Neutron's migrations; the ML2 type drivers fill their allocation tables
  # at start.
  neutron-db-manage --config-file "$dir/neutron.conf" upgrade heads >"$dir/log/neutron-db-manage.log" 2>&1
  touch "$dir/.neutron-initialized"
fi
if ! alive "$dir/neutron-server.pid"; then
  log "starting neutron-server on 127.0.0.1:9696"
  setsid neutron-server --config-file "$dir/neutron.conf" >"$dir/log/neutron-server.out" 2>&1 </dev/null &
  echo $! >"$dir/neutron-server.pid"
fi
for _ in $(seq 1 120); do
  if answering; then
    start_octavia_neutron
    log "Neutron up in $(($(date +%s) - start))s"
    print_env
    exit 0
  fi
  # The process, not its command line: until the background shell has
  # exec'd neutron-server its cmdline is this script's, and stop 47's CI
  # gave up here in the same second it started the server.
  kill -0 "$(cat "$dir/neutron-server.pid")" 2>/dev/null ||
    pgrep -f "neutron-server --config-file $dir/neutron.conf" >/dev/null || break
  sleep 0.5
done
log "Neutron did not answer at $neutron_url; see $dir/log/neutron-server.log and neutron-server.out"
tail -n 20 "$dir/log/neutron-server.out" "$dir/log/neutron-server.log" >&2 2>/dev/null || true
exit 1
