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

# The services' database: one MariaDB server (Debian's mariadb-server),
# started here by hand with its own data directory under $dir, listening on
# 127.0.0.1:3306 and on $dir/mariadb.sock only. Every service has its own
# database there (db_url), made by its own schema migrations. sqlite was
# used before: it answers "database is locked" at once, without waiting,
# when a transaction that read wants to write while another writer holds
# the lock, which Nova's conductor does in nested savepoints (#23).
db_port=3306

# db_client runs the mariadb client as the services' user, with its
# arguments (a database name, -e SQL, ...).
db_client() { mariadb --defaults-file="$dir/mariadb-client.cnf" "$@"; }

# db_url prints the SQLAlchemy URL of database $1 (PyMySQL, utf8 as
# DevStack creates them).
db_url() { printf 'mysql+pymysql://openstack:%s@127.0.0.1:%s/%s?charset=utf8' "$(cat "$dir/db-password")" "$db_port" "$1"; }

# db_ready reports whether our MariaDB answers.
db_ready() {
  mariadb-admin --no-defaults --socket="$dir/mariadb.sock" --user=root --connect-timeout=2 ping >/dev/null 2>&1
}

# start_mariadb starts MariaDB unless it is running, initialising its data
# directory and the services' user the first time. Idempotent.
start_mariadb() {
  if grep -qs -- "$dir/mariadb" "/proc/$(cat "$dir/mariadb.pid" 2>/dev/null)/cmdline" && db_ready; then
    return 0
  fi
  stop_service mariadb
  mkdir -p "$dir/log"
  if [ ! -f "$dir/mariadb/.mccm-initialized" ]; then
    log "initialising MariaDB in $dir/mariadb"
    rm -rf "$dir/mariadb"
    mariadb-install-db --no-defaults --datadir="$dir/mariadb" --user=root \
      --auth-root-authentication-method=socket --skip-test-db >"$dir/log/mariadb-install.log" 2>&1
    [ -f "$dir/db-password" ] || (umask 077 && openssl rand -hex 16 >"$dir/db-password")
    touch "$dir/mariadb/.mccm-initialized.pending"
  fi
  log "starting MariaDB on 127.0.0.1:$db_port"
  # Durability is not needed here (a crash means a new stack), speed is:
  # the log is flushed once a second, not at every commit.
  setsid mariadbd --no-defaults --user=root --datadir="$dir/mariadb" \
    --socket="$dir/mariadb.sock" --pid-file="$dir/mariadb/mariadbd.pid" \
    --bind-address=127.0.0.1 --port="$db_port" --skip-name-resolve \
    --max-connections=1000 --character-set-server=utf8 --collation-server=utf8_general_ci \
    --innodb-flush-log-at-trx-commit=2 --innodb-buffer-pool-size=256M \
    --log-error="$dir/log/mariadb.log" >"$dir/log/mariadb.out" 2>&1 </dev/null &
  echo $! >"$dir/mariadb.pid"
  local i
  for i in $(seq 1 120); do
    db_ready && break
    kill -0 "$(cat "$dir/mariadb.pid")" 2>/dev/null || break
    sleep 0.5
  done
  if ! db_ready; then
    log "MariaDB did not start; see $dir/log/mariadb.log"
    exit 1
  fi
  (umask 077 && printf '[client]\nuser=openstack\npassword=%s\nhost=127.0.0.1\nport=%s\n' \
    "$(cat "$dir/db-password")" "$db_port" >"$dir/mariadb-client.cnf")
  if [ -f "$dir/mariadb/.mccm-initialized.pending" ]; then
    mariadb --no-defaults --socket="$dir/mariadb.sock" --user=root -e \
      "CREATE USER IF NOT EXISTS 'openstack'@'127.0.0.1' IDENTIFIED BY '$(cat "$dir/db-password")'; GRANT ALL ON *.* TO 'openstack'@'127.0.0.1';"
    mv "$dir/mariadb/.mccm-initialized.pending" "$dir/mariadb/.mccm-initialized"
  fi
}

# recreate_db drops and creates database $1 (empty, utf8 as DevStack's).
recreate_db() {
  db_client -e "DROP DATABASE IF EXISTS \`$1\`; CREATE DATABASE \`$1\` CHARACTER SET utf8;"
}
