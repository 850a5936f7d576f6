# lib.sh: shell functions the OpenStack stack scripts share. Source it after
# setting dir (the state folder) and log.

# stop_service ends the process group whose leader's pid is in
# $dir/$1.pid (TERM, then KILL after 10 s) and removes the pid file. Only a
# process whose command line names $dir is ours: a pid left from before a
# reboot may be anyone's.
stop_service() {
  local f="$dir/$1.pid" pid
  [ -f "$f" ] || return 0
  pid="$(cat "$f")"
  if grep -qs -- "$dir" "/proc/$pid/cmdline"; then
    log "stopping $1 ($pid)"
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

# auth_section prints the Keystone credentials of a service's
# [keystone_authtoken] section (the stack's admin, in $region), for the
# services' configuration files. It reads $keystone_url and $region.
auth_section() {
  cat <<EOF2
auth_url = $keystone_url
auth_type = password
project_domain_name = Default
user_domain_name = Default
project_name = admin
username = admin
password = $(cat "$dir/admin-password")
region_name = $region
EOF2
}
