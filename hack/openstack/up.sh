#!/usr/bin/env bash
# up.sh starts a real Keystone and Octavia (amphora provider with the noop
# compute, network, amphora and image drivers, octavia-worker and RabbitMQ)
# and Neutron (neutron-up.sh: ML2 without agents, routers, floating IPs) and
# Nova (nova-up.sh: the fake virt driver, with Placement and Glance)
# on 127.0.0.1 for the OpenStack backend's tests, installing the Debian
# packages first if they are missing. Every service's database is in one
# MariaDB (lib.sh's start_mariadb, 127.0.0.1:3306), made by the service's own
# schema migrations. It is idempotent: with the stack
# already running it only prints the environment.
#
# Usage: hack/openstack/up.sh            # prints export lines on stdout
#        eval "$(hack/openstack/up.sh)"  # then: go test ./pkg/backends/openstack/...
#
# State, logs and credentials live in $MCCM_OS_DIR (default
# /var/tmp/mccm-openstack). hack/openstack/down.sh stops everything.
# Ports (all on 127.0.0.1): MariaDB 3306, Keystone 5000, Octavia API 9876, Neutron 9696,
# Nova API 8774, Placement 8778, Glance 9292, RabbitMQ 5672, Erlang
# distribution 25672, epmd 4369.
set -euo pipefail
# Debian's python3 (the OpenStack packages) comes first, not a pyenv or venv one.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin:$PATH

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dir="${MCCM_OS_DIR:-/var/tmp/mccm-openstack}"
region=RegionOne
keystone_url=http://127.0.0.1:5000/v3
octavia_url=http://127.0.0.1:9876

log() { printf '%s up.sh: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
# shellcheck source=lib.sh
. "$here/lib.sh"

# print_env writes what a test needs, as shell export lines.
print_env() {
  cat <<EOF
export OS_AUTH_URL=$keystone_url
export OS_USERNAME=admin
export OS_PASSWORD_FILE=$dir/admin-password
export OS_PROJECT_NAME=admin
export OS_USER_DOMAIN_NAME=Default
export OS_PROJECT_DOMAIN_NAME=Default
export OS_REGION_NAME=$region
export OCTAVIA_ENDPOINT=$octavia_url
export OCTAVIA_E2E=1
EOF
}

# wait_http waits until url answers with any HTTP status.
wait_http() {
  local url=$1 what=$2 i
  for i in $(seq 1 120); do
    if curl -s -o /dev/null --max-time 2 "$url"; then return 0; fi
    sleep 0.5
  done
  log "$what did not answer at $url; see $dir/log"
  exit 1
}

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

running() {
  db_ready && alive "$dir/keystone.pid" && alive "$dir/octavia-api.pid" && alive "$dir/octavia-worker.pid" &&
    curl -s -o /dev/null --max-time 2 "$keystone_url" &&
    curl -s -o /dev/null --max-time 2 "$octavia_url"
}

if [ -f "$dir/.initialized" ] && running; then
  print_env
  "$here/neutron-up.sh"
  "$here/nova-up.sh"
  exit 0
fi

"$here/install.sh" >&2
mkdir -p "$dir/log"
chmod 0700 "$dir"

start_rabbitmq() {
  export RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 RABBITMQ_NODE_PORT=5672 ERL_EPMD_ADDRESS=127.0.0.1
  export RABBITMQ_NODENAME=rabbit@localhost RABBITMQ_DIST_PORT=25672
  export RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
  if rabbitmqctl -q -n rabbit@localhost status >/dev/null 2>&1; then return 0; fi
  log "starting RabbitMQ"
  rabbitmq-server >"$dir/log/rabbitmq.log" 2>&1 </dev/null &
  rabbitmqctl -q -n rabbit@localhost wait --timeout 120 "/var/lib/rabbitmq/mnesia/rabbit@localhost.pid" >/dev/null 2>&1 ||
    rabbitmqctl -q -n rabbit@localhost await_startup --timeout 120 >/dev/null
}

keystone_conf() {
  cat <<EOF
[DEFAULT]
log_file = $dir/log/keystone.log
[database]
connection = $(db_url keystone)
[token]
provider = fernet
[fernet_tokens]
key_repository = $dir/fernet-keys
[fernet_receipts]
key_repository = $dir/fernet-keys
[credential]
key_repository = $dir/credential-keys
# bcrypt's cheapest cost (2^4 rounds, against the default 2^12) for the
# password every service and test signs in with: each token request
# checks it, about 0.3 CPU-seconds apiece at the default, and the tests
# ask for a few hundred. Set before the bootstrap, which hashes it.
[identity]
password_hash_rounds = 4
EOF
}

init_keystone() {
  log "initialising Keystone"
  recreate_db keystone
  local km=(keystone-manage --config-file "$dir/keystone.conf")
  "${km[@]}" db_sync
  "${km[@]}" fernet_setup --keystone-user root --keystone-group root
  "${km[@]}" credential_setup --keystone-user root --keystone-group root
  "${km[@]}" bootstrap --bootstrap-password "$(cat "$dir/admin-password")" \
    --bootstrap-admin-url "$keystone_url/" --bootstrap-internal-url "$keystone_url/" \
    --bootstrap-public-url "$keystone_url/" --bootstrap-region-id "$region"
}

# Every uwsgi-served API (Keystone, Octavia, Nova, Placement) runs behind
# uwsgi's HTTP router (--http, its http plugin) with HTTP/1.1 keep-alive:
# the router holds the clients' idle keep-alive connections and hands each
# request to a free worker. Served by the workers themselves
# (--http11-socket), each single-threaded worker stays with one client's
# keep-alive connection while that client keeps sending requests: with more
# clients polling than workers (the backend's tests run in parallel), the
# others waited over the backend's 30 s request timeout (6 clients polling
# GET / every 300 ms: none answered within 30 s; through the router, 288
# requests, the slowest 95 ms). --http-socket (HTTP/1.0 in the worker)
# resets Go's keep-alive connections.
start_keystone() {
  alive "$dir/keystone.pid" && return 0
  log "starting Keystone on 127.0.0.1:5000"
  uwsgi --plugin python3,http --http-keepalive --http-auto-chunked --http 127.0.0.1:5000 --wsgi-file /usr/bin/keystone-wsgi-public \
    --master --processes 3 --threads 1 --die-on-term --need-app \
    --env "OS_KEYSTONE_CONFIG_FILES=$dir/keystone.conf" \
    --pidfile "$dir/keystone.pid" --daemonize "$dir/log/keystone-uwsgi.log"
  sleep 0.5
  wait_http "$keystone_url" Keystone
}

# register_octavia adds the load-balancer service and its endpoints (one
# python process: the openstack CLI takes seconds per command).
register_octavia() {
  log "registering the load-balancer service in Keystone"
  OS_PASSWORD="$(cat "$dir/admin-password")" python3 - "$keystone_url" "$region" "$octavia_url" <<'PY'
import os, sys
from keystoneauth1 import session
from keystoneauth1.identity import v3
from keystoneclient.v3 import client
auth_url, region, url = sys.argv[1:4]
auth = v3.Password(auth_url=auth_url, username="admin", password=os.environ["OS_PASSWORD"],
                   project_name="admin", user_domain_name="Default", project_domain_name="Default")
ks = client.Client(session=session.Session(auth=auth))
svc = ks.services.create(name="octavia", type="load-balancer", description="Octavia")
for iface in ("public", "internal", "admin"):
    ks.endpoints.create(service=svc, url=url, interface=iface, region=region)
PY
}

make_ca() {
  log "creating the Octavia CA (encrypted key)"
  openssl rand -hex 16 >"$dir/ca-passphrase"
  openssl req -x509 -newkey rsa:2048 -sha256 -days 3650 -subj /CN=mccm-octavia-test-ca \
    -keyout "$dir/ca.key" -passout "file:$dir/ca-passphrase" -out "$dir/ca.pem" 2>/dev/null
  # The controller's client certificate towards amphorae (unused by the noop
  # amphora driver, but read at start).
  openssl req -newkey rsa:2048 -nodes -subj /CN=mccm-octavia-controller \
    -keyout "$dir/client.key" -out "$dir/client.csr" 2>/dev/null
  openssl x509 -req -in "$dir/client.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" \
    -passin "file:$dir/ca-passphrase" -CAcreateserial -days 3650 -out "$dir/client.crt" 2>/dev/null
  cat "$dir/client.crt" "$dir/client.key" >"$dir/client.pem"
}

octavia_conf() {
  local pw
  pw="$(cat "$dir/admin-password")"
  cat <<EOF
[DEFAULT]
transport_url = rabbit://guest:guest@127.0.0.1:5672/
log_dir = $dir/log
[api_settings]
bind_host = 127.0.0.1
bind_port = 9876
auth_strategy = keystone
enabled_provider_drivers = amphora:The Octavia Amphora driver (noop drivers)
default_provider_driver = amphora
[database]
connection = $(db_url octavia)
[keystone_authtoken]
www_authenticate_uri = $keystone_url
$(auth_section)
[service_auth]
auth_url = $keystone_url
auth_type = password
project_domain_name = Default
user_domain_name = Default
project_name = admin
username = admin
password = $pw
[certificates]
ca_certificate = $dir/ca.pem
ca_private_key = $dir/ca.key
ca_private_key_passphrase = $(cat "$dir/ca-passphrase")
server_certs_key_passphrase = $(head -c 32 "$dir/server-certs-passphrase")
[haproxy_amphora]
client_cert = $dir/client.pem
server_ca = $dir/ca.pem
[controller_worker]
client_ca = $dir/ca.pem
compute_driver = compute_noop_driver
network_driver = network_noop_driver
amphora_driver = amphora_noop_driver
image_driver = image_noop_driver
loadbalancer_topology = SINGLE
workers = 1
amp_boot_network_list = 00000000-0000-0000-0000-000000000001
amp_flavor_id = noop
amp_image_tag = amphora
amp_secgroup_list = 00000000-0000-0000-0000-000000000002
[task_flow]
jobboard_enabled = False
[oslo_messaging]
topic = octavia_prov
[oslo_concurrency]
lock_path = $dir/lock
[house_keeping]
load_balancer_expiry_age = 60
EOF
}

init_octavia() {
  log "initialising Octavia"
  recreate_db octavia
  # Octavia's migrations also seed its lookup tables and the DELETED
  # placeholder flavor and availability zone.
  octavia-db-manage --config-file "$dir/octavia.conf" upgrade head >"$dir/log/octavia-db-manage.log" 2>&1
  register_octavia
}

start_octavia() {
  if ! alive "$dir/octavia-api.pid"; then
    log "starting the Octavia API on 127.0.0.1:9876"
    uwsgi --plugin python3,http --http-keepalive --http-auto-chunked --http 127.0.0.1:9876 --wsgi-file /usr/bin/octavia-wsgi \
      --pyargv "--config-file $dir/octavia.conf" \
      --master --processes 2 --threads 1 --die-on-term --need-app \
      --pidfile "$dir/octavia-api.pid" --daemonize "$dir/log/octavia-api-uwsgi.log"
  fi
  if ! alive "$dir/octavia-worker.pid"; then
    log "starting octavia-worker"
    setsid octavia-worker --config-file "$dir/octavia.conf" >"$dir/log/octavia-worker.out" 2>&1 </dev/null &
    echo $! >"$dir/octavia-worker.pid"
  fi
  sleep 0.5
  wait_http "$octavia_url" "Octavia API"
}

# write_configs (re)writes the config files from this script on every start.
write_configs() {
  umask 077
  keystone_conf >"$dir/keystone.conf"
  octavia_conf >"$dir/octavia.conf"
}

start=$(date +%s)
if [ ! -f "$dir/.initialized" ]; then
  "$here/down.sh" --quiet || true
  rm -rf "${dir:?}"/*
  mkdir -p "$dir/log" "$dir/lock"
  openssl rand -hex 16 >"$dir/admin-password"
  chmod 0600 "$dir/admin-password"
  make_ca
  openssl rand -hex 16 >"$dir/server-certs-passphrase"
  start_mariadb
  write_configs
  start_rabbitmq
  init_keystone
  start_keystone
  init_octavia
  touch "$dir/.initialized"
else
  start_mariadb
  write_configs
  start_rabbitmq
fi
start_keystone
start_octavia
log "Keystone and Octavia up in $(($(date +%s) - start))s (state in $dir)"
print_env
"$here/neutron-up.sh"
"$here/nova-up.sh"
