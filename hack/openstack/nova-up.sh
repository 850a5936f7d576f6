#!/usr/bin/env bash
# nova-up.sh starts a real Nova (API, conductor, scheduler and nova-compute
# with the fake virt driver), with the Placement and Glance it needs, on
# 127.0.0.1 beside the Keystone, RabbitMQ and Neutron of up.sh and
# neutron-up.sh, which must be running. Servers boot to ACTIVE with their
# Neutron ports bound and their addresses, flavor and zone as a real cloud
# shows them; nothing runs (the fake driver only keeps state).
#
# Port binding needs an L2 agent on the compute host: Neutron's openvswitch
# mechanism driver binds a port to a host whose Open vSwitch agent is alive.
# No agent runs here: this script writes that agent's row into Neutron's
# database, with a heartbeat in 2099 (alive for good). Nova waits for no
# vif-plugged event (vif_plugging_timeout = 0).
#
# It is idempotent: with Nova running it only prints the environment.
# Usage: hack/openstack/nova-up.sh   # prints export lines on stdout
# Ports (127.0.0.1): Nova API 8774, Placement 8778, Glance 9292.
#
# Nova, Placement and Glance are not added to Keystone's catalog (Nova finds
# them through endpoint_override): tests pass NOVA_ENDPOINT as the backend's
# endpoints.compute.
set -euo pipefail
export PATH=/usr/sbin:/usr/bin:/sbin:/bin:$PATH

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dir="${MCCM_OS_DIR:-/var/tmp/mccm-openstack}"
region=RegionOne
keystone_url=http://127.0.0.1:5000/v3
nova_url=http://127.0.0.1:8774/v2.1/
compute_host=mccm-compute

log() { printf '%s nova-up.sh: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
# shellcheck source=lib.sh
. "$here/lib.sh"

print_env() {
  cat <<EOF2
export NOVA_ENDPOINT=$nova_url
export NOVA_E2E=1
export NOVA_IMAGE_ID=$(cat "$dir/nova-image-id")
export NOVA_FLAVOR=m1.mccm
EOF2
}

# alive reports whether the pid file's process runs a command matching $2.
alive() { [ -f "$dir/$1.pid" ] && grep -qs -- "$2" "/proc/$(cat "$dir/$1.pid")/cmdline"; }

answering() { curl -sf -o /dev/null --max-time 2 "$1"; }

running() {
  alive placement placement-api && alive glance-api glance-api && alive nova-api nova-api-wsgi &&
    alive nova-conductor nova-conductor && alive nova-scheduler nova-scheduler && alive nova-compute nova-compute &&
    answering http://127.0.0.1:8778/ && answering http://127.0.0.1:8774/
}

if [ -f "$dir/.nova-initialized" ] && db_ready && running; then
  print_env
  exit 0
fi
if ! answering http://127.0.0.1:9696/; then
  log "no Neutron at 127.0.0.1:9696: start the stack with hack/openstack/up.sh"
  exit 1
fi
if ! command -v nova-conductor >/dev/null || ! command -v placement-api >/dev/null || ! command -v glance-api >/dev/null; then
  "$here/install.sh" >&2
fi

placement_conf() {
  cat <<EOF2
[DEFAULT]
log_file = $dir/log/placement.log
[api]
auth_strategy = keystone
[placement_database]
connection = $(db_url placement)
[keystone_authtoken]
www_authenticate_uri = $keystone_url
$(auth_section)
EOF2
}

glance_conf() {
  cat <<EOF2
[DEFAULT]
bind_host = 127.0.0.1
bind_port = 9292
# One process: with workers = 1 Glance forks a child and the parent polls
# it 100 times a second (wait4, then a 10 ms sleep), about 0.02 cores for
# the whole run; 0 serves from the one process (Glance's "profiling,
# test, debug" mode).
workers = 0
log_file = $dir/log/glance-api.log
enabled_backends = file:file
[glance_store]
default_backend = file
[file]
filesystem_store_datadir = $dir/images
[database]
connection = $(db_url glance)
[paste_deploy]
flavor = keystone
[keystone_authtoken]
www_authenticate_uri = $keystone_url
$(auth_section)
EOF2
}

nova_conf() {
  cat <<EOF2
[DEFAULT]
log_dir = $dir/log
transport_url = rabbit://guest:guest@127.0.0.1:5672/
compute_driver = fake.FakeDriver
host = $compute_host
my_ip = 127.0.0.1
state_path = $dir/nova-state
instances_path = $dir/nova-state/instances
vif_plugging_is_fatal = false
vif_plugging_timeout = 0
# Neutron does not notify Nova here: floating IPs reach a server's addresses
# when nova-compute refreshes its network info from Neutron.
heal_instance_info_cache_interval = 2
[api]
auth_strategy = keystone
[api_database]
connection = $(db_url nova_api)
[database]
connection = $(db_url nova)
[conductor]
workers = 1
[scheduler]
workers = 1
discover_hosts_in_cells_interval = -1
[oslo_concurrency]
lock_path = $dir/lock
[glance]
endpoint_override = http://127.0.0.1:9292
[placement]
endpoint_override = http://127.0.0.1:8778
$(auth_section)
[neutron]
endpoint_override = http://127.0.0.1:9696
$(auth_section)
[keystone_authtoken]
www_authenticate_uri = $keystone_url
$(auth_section)
EOF2
}

# ovs_agent_row makes Neutron see a live Open vSwitch agent on the compute
# host, so that its openvswitch mechanism driver binds the host's ports.
ovs_agent_row() {
  local conf='{"bridge_mappings": {}, "tunnel_types": ["vxlan"], "integration_bridge": "br-int", "datapath_type": "system", "ovs_hybrid_plug": false, "l2_population": false, "enable_distributed_routing": false}'
  db_client neutron -e "INSERT IGNORE INTO agents (id, agent_type, \`binary\`, topic, host, admin_state_up, created_at, started_at, heartbeat_timestamp, configurations, \`load\`) VALUES ('6d2f0c7e-0b5a-4c1e-9a43-6f0e3b1d2c01', 'Open vSwitch agent', 'neutron-openvswitch-agent', 'N/A', '$compute_host', 1, '2026-01-01 00:00:00', '2026-01-01 00:00:00', '2099-01-01 00:00:00', '$conf', 0);"
}

init_databases() {
  log "initialising the Placement, Glance and Nova databases"
  local nm=(nova-manage --config-file "$dir/nova.conf") db
  for db in placement glance nova_api nova_cell0 nova; do
    recreate_db "$db"
  done
  placement-manage --config-file "$dir/placement/placement.conf" db sync
  glance-manage --config-file "$dir/glance-api.conf" db_sync >/dev/null
  "${nm[@]}" api_db sync
  "${nm[@]}" cell_v2 map_cell0 --database_connection "$(db_url nova_cell0)"
  "${nm[@]}" db sync
  "${nm[@]}" cell_v2 create_cell --name cell1 >/dev/null
}

# start runs a daemon in its own session, its pid in $dir/$1.pid.
start() {
  local name=$1
  shift
  log "starting $name"
  setsid "$@" >"$dir/log/$name.out" 2>&1 </dev/null &
  echo $! >"$dir/$name.pid"
}

start_services() {
  alive placement placement-api || start placement uwsgi --plugin python3,http --http-keepalive --http-auto-chunked --http 127.0.0.1:8778 --wsgi-file /usr/bin/placement-api \
    --master --processes 1 --threads 1 --die-on-term --need-app --env "OS_PLACEMENT_CONFIG_DIR=$dir/placement"
  alive glance-api glance-api || start glance-api glance-api --config-file "$dir/glance-api.conf"
  alive nova-api nova-api-wsgi || start nova-api uwsgi --plugin python3,http --http-keepalive --http-auto-chunked --http 127.0.0.1:8774 \
    --wsgi-file /usr/bin/nova-api-wsgi --master --processes 2 --threads 1 --die-on-term --need-app \
    --env "OS_NOVA_CONFIG_DIR=$dir" --env "OS_NOVA_CONFIG_FILES=nova-api-paste.ini;nova.conf"
  alive nova-conductor nova-conductor || start nova-conductor nova-conductor --config-file "$dir/nova.conf"
  alive nova-scheduler nova-scheduler || start nova-scheduler nova-scheduler --config-file "$dir/nova.conf"
  # Debian's nova-compute package pulls in libvirt and QEMU; python3-nova
  # holds the service, run here with the fake driver.
  alive nova-compute nova-compute || start nova-compute python3 -c \
    'import sys; from nova.cmd.compute import main; sys.argv[0] = "nova-compute"; sys.exit(main())' --config-file "$dir/nova.conf" \
    --log-file "$dir/log/nova-compute.log"
}

wait_for() {
  local what=$1 i
  shift
  for i in $(seq 1 180); do
    if "$@"; then return 0; fi
    sleep 0.5
  done
  log "$what not ready; see $dir/log"
  exit 1
}

compute_mapped() {
  nova-manage --config-file "$dir/nova.conf" cell_v2 discover_hosts >/dev/null 2>&1 &&
    [ "$(db_client -N -B nova_api -e "SELECT count(*) FROM host_mappings WHERE host='$compute_host';")" = 1 ]
}

# seed creates the image and flavor the tests boot servers from.
seed() {
  log "creating the image and the flavor"
  OS_PASSWORD="$(cat "$dir/admin-password")" python3 - "$keystone_url" "$dir/nova-image-id" <<'PY'
import os, sys
from keystoneauth1 import session
from keystoneauth1.identity import v3
auth_url, out = sys.argv[1:3]
auth = v3.Password(auth_url=auth_url, username="admin", password=os.environ["OS_PASSWORD"],
                   project_name="admin", user_domain_name="Default", project_domain_name="Default")
s = session.Session(auth=auth)
img = s.post("http://127.0.0.1:9292/v2/images", json={"name": "mccm-fake", "disk_format": "raw",
             "container_format": "bare", "visibility": "public"}).json()
s.put("http://127.0.0.1:9292/v2/images/%s/file" % img["id"], data=b"\0" * 1024,
      headers={"Content-Type": "application/octet-stream"})
s.post("http://127.0.0.1:8774/v2.1/flavors", json={"flavor": {"name": "m1.mccm", "ram": 512, "vcpus": 1, "disk": 1}})
with open(out, "w") as f:
    f.write(img["id"])
PY
}

start_time=$(date +%s)
mkdir -p "$dir/log" "$dir/lock" "$dir/placement" "$dir/images" "$dir/nova-state"
(
  umask 077
  placement_conf >"$dir/placement/placement.conf"
  glance_conf >"$dir/glance-api.conf"
  nova_conf >"$dir/nova.conf"
)
cp /etc/nova/api-paste.ini "$dir/nova-api-paste.ini"
start_mariadb
ovs_agent_row
if [ ! -f "$dir/.nova-initialized" ]; then
  # A half-done start: begin again with no service holding the databases.
  for n in nova-compute nova-scheduler nova-conductor nova-api glance-api placement; do
    stop_service "$n"
  done
  init_databases
fi
start_services
wait_for Placement answering http://127.0.0.1:8778/
wait_for Glance answering http://127.0.0.1:9292/versions
wait_for "the Nova API" answering http://127.0.0.1:8774/
wait_for "nova-compute's host mapping" compute_mapped
if [ ! -f "$dir/.nova-initialized" ]; then
  seed
  touch "$dir/.nova-initialized"
fi
log "Nova up in $(($(date +%s) - start_time))s"
print_env
