#!/usr/bin/env bash
# The main job on a local default: a PostgreSQL 15 source and a ClickHouse
# server under ./var/demo, walshadow running the reference pipeline
# (resources/pipelines/pg_to_clickhouse.yaml: physical WAL → catalog-only
# shadow → walshadow_decode → clickhouse_ddl), a pgbench + DDL workload on
# the source, then every table counted side by side in both databases until
# they match, and the ALTERed table's columns on both sides.
#
#   scripts/demo.sh        start (or reuse) the servers, run the workload, show
#   scripts/demo.sh stop   stop walshadow, ClickHouse and the source
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${WALSHADOW_PG_BINDIR:-/usr/lib/postgresql/15/bin}
chbin=${WALSHADOW_CLICKHOUSE_BIN:-$(command -v clickhouse-server || echo /usr/sbin/clickhouse-server)}
var=$PWD/var/demo
# ./var/demo is a link when the postgres user cannot reach this checkout
# (a clone under /root, say): the servers' files are then where it points.
[ -L "$var" ] && var=$(readlink -f "$var")
state=$var/walshadow
chdir=$var/clickhouse
bridge_dir=$PWD/pgext
shadow_port=54329
ch_tcp=${WALSHADOW_DEMO_CH_PORT:-19000}
ch_http=${WALSHADOW_DEMO_CH_HTTP_PORT:-18123}
http_port=${WALSHADOW_DEMO_HTTP_PORT:-14195}
ch_db=walshadow_demo
# (From /: the checkout may be a directory the postgres user cannot enter.)
as_pg() { if [ "$(id -u)" = 0 ]; then (cd / && runuser -u postgres -- "$@"); else "$@"; fi; }

stop_pid() { # stop_pid <pidfile>
  if [ -f "$1" ]; then
    kill "$(cat "$1")" 2>/dev/null || true
    for _ in $(seq 1 60); do kill -0 "$(cat "$1")" 2>/dev/null || break; sleep 1; done
    rm -f "$1"
  fi
}
if [ "${1:-}" = stop ]; then
  stop_pid "$var/walshadow.pid"
  stop_pid "$var/clickhouse.pid"
  # A server started by an earlier demo whose pid file is gone.
  pkill -f -- "--config-file=$chdir/config.xml" 2>/dev/null && sleep 2 || true
  [ -d "$var/pg" ] && as_pg "$bin/pg_ctl" -D "$var/pg" -m fast stop || true
  exit 0
fi

# Every run starts afresh: walshadow replicates the changes it streams, so
# the source's tables are created and loaded after it starts (copying rows
# that predate walshadow is the initial load, a later issue).
"$0" stop >/dev/null 2>&1 || true
rm -rf "$var"
mkdir -p "$var"
if [ "$(id -u)" = 0 ]; then
  chown postgres "$var" && chmod o+x "$PWD" "$PWD/var"
  if ! runuser -u postgres -- test -w "$var" 2>/dev/null; then
    # A directory above the checkout is closed to the postgres user, which
    # runs the source and the shadow: keep their files where it can reach
    # them rather than opening that directory up.
    alt=/var/tmp/walshadow-demo-$(printf %s "$PWD" | cksum | cut -d' ' -f1)
    echo "== the postgres user cannot reach $var (a directory above it is closed to others): the demo keeps its servers' files in $alt, linked from ./var/demo"
    rm -rf "$var" "$alt"
    mkdir -p "$alt"
    chown postgres "$alt"
    ln -s "$alt" "$PWD/var/demo"
    var=$alt state=$alt/walshadow chdir=$alt/clickhouse
  fi
  if ! runuser -u postgres -- test -r "$bridge_dir/walshadow.so" 2>/dev/null; then
    # The shadow's postmaster loads the bridge module as postgres too.
    mkdir -p "$var/pgext"
    cp pgext/walshadow.so "$var/pgext/"
    bridge_dir=$var/pgext
  fi
fi
if [ ! -d "$var/pg" ]; then
  as_pg "$bin/initdb" -D "$var/pg" -A trust -N >/dev/null
  cat >>"$var/pg/postgresql.conf" <<CONF
wal_level = logical
listen_addresses = ''
unix_socket_directories = '$var'
port = 5432
wal_compression = lz4
max_prepared_transactions = 5
CONF
fi
if ! as_pg "$bin/pg_ctl" -D "$var/pg" status >/dev/null 2>&1; then
  as_pg "$bin/pg_ctl" -D "$var/pg" -l "$var/postgres.log" -w start >/dev/null
fi
psql() { as_pg "$bin/psql" -X -q -v ON_ERROR_STOP=1 -h "$var" -d postgres "$@"; }
shadow_psql() { as_pg "$bin/psql" -X -q -At -h "$state/shadow" -p $shadow_port -d postgres "$@"; }
chq() { curl -sS --fail-with-body "http://127.0.0.1:$ch_http/" --data-binary "$1"; }
chcount() { curl -sf "http://127.0.0.1:$ch_http/" --data-binary "$1" 2>/dev/null || echo "-"; }

echo "== ClickHouse under $chdir (native port $ch_tcp, HTTP $ch_http)"
if ! chq "SELECT 1" >/dev/null 2>&1; then
  mkdir -p "$chdir/log"
  cat >"$chdir/config.xml" <<XML
<?xml version="1.0"?>
<yandex>
    <logger><level>information</level><log>$chdir/log/clickhouse-server.log</log><errorlog>$chdir/log/clickhouse-server.err.log</errorlog><size>100M</size><count>1</count><console>0</console></logger>
    <listen_host>127.0.0.1</listen_host>
    <http_port>$ch_http</http_port>
    <tcp_port>$ch_tcp</tcp_port>
    <path>$chdir/data/</path>
    <tmp_path>$chdir/tmp/</tmp_path>
    <user_files_path>$chdir/user_files/</user_files_path>
    <format_schema_path>$chdir/format_schemas/</format_schema_path>
    <users_config>$chdir/users.xml</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <timezone>UTC</timezone>
    <mark_cache_size>268435456</mark_cache_size>
    <max_concurrent_queries>100</max_concurrent_queries>
    <mlock_executable>false</mlock_executable>
</yandex>
XML
  cat >"$chdir/users.xml" <<'XML'
<?xml version="1.0"?>
<yandex>
    <profiles><default><max_memory_usage>2000000000</max_memory_usage></default></profiles>
    <users><default><password></password><networks><ip>127.0.0.1</ip><ip>::1</ip></networks><profile>default</profile><quota>default</quota></default></users>
    <quotas><default><interval><duration>3600</duration><queries>0</queries><errors>0</errors><result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time></interval></default></quotas>
</yandex>
XML
  nohup "$chbin" --config-file="$chdir/config.xml" >"$chdir/stdout.log" 2>&1 </dev/null &
  echo $! >"$var/clickhouse.pid"
  for _ in $(seq 1 60); do chq "SELECT 1" >/dev/null 2>&1 && break; sleep 1; done
  chq "SELECT 1" >/dev/null || { echo "ClickHouse did not start; see $chdir/log"; exit 1; }
fi
echo "   ClickHouse $(chq 'SELECT version()') is up"

echo "== rows that exist before walshadow first starts: demo_existing, 100,000 rows (the initial load copies them, then the stream follows)"
psql -q <<'SQL'
create table demo_existing (id int primary key, name text, amount numeric(12,2), created timestamptz);
insert into demo_existing select i, 'existing ' || i, i / 7.0, timestamptz '2026-01-01' - i * interval '1 minute' from generate_series(1, 100000) i;
SQL

echo "== starting walshadow (resources/pipelines/pg_to_clickhouse.yaml); log in $var/walshadow.log"
stop_pid "$var/walshadow.pid"
mkdir -p "$state"
PG_SOURCE_DSN="host=$var port=5432 user=postgres dbname=postgres" WALSHADOW_STATE_DIR="$state" \
  WALSHADOW_SLOT=walshadow_demo WALSHADOW_SHADOW_PORT=$shadow_port WALSHADOW_BRIDGE_DIR="$bridge_dir" \
  CLICKHOUSE_DSN="clickhouse://default:@127.0.0.1:$ch_tcp/default" CLICKHOUSE_DATABASE=$ch_db \
  WALSHADOW_HTTP_ADDRESS=127.0.0.1:$http_port \
  nohup bin/walshadow run resources/pipelines/pg_to_clickhouse.yaml >"$var/walshadow.log" 2>&1 &
echo $! >"$var/walshadow.pid"

alive() { kill -0 "$(cat "$var/walshadow.pid")" 2>/dev/null || { echo "walshadow exited:"; tail -20 "$var/walshadow.log"; exit 1; }; }
wait_shadow() {
  for _ in $(seq 1 180); do
    [ "$(shadow_psql -c "select pg_last_wal_replay_lsn() >= '$1'::pg_lsn" 2>/dev/null || true)" = t ] && return 0
    alive; sleep 1
  done
  echo "the shadow did not catch up; see $var/walshadow.log"; exit 1
}
wait_shadow "$(psql -Atc "select pg_current_wal_lsn()")"
echo "   the catalog-only shadow is up and has caught up"

echo "== pgbench -i -s 2 on the source: tables, 200,000 rows, then primary keys (ClickHouse tables are rebuilt under the keys)"
as_pg "$bin/pgbench" -q -h "$var" -i -s 2 postgres >/dev/null 2>&1
echo "== workload on the source: TRUNCATE, pgbench (1000 transactions), a new table, ALTER TABLE, updates, deletes"
psql -c "truncate pgbench_history"
as_pg "$bin/pgbench" -h "$var" -c 2 -t 500 postgres 2>&1 | grep -E '^tps' | sed 's/^/   /' || true
psql <<'SQL'
create table if not exists demo_items (id int primary key, name text, price numeric(10,2));
insert into demo_items select i, 'item ' || i, i * 1.25 from generate_series(1, 1000) i on conflict (id) do nothing;
alter table demo_items add column if not exists note text default 'new';
update demo_items set price = price + 1, note = 'repriced' where id % 10 = 0;
delete from demo_items where id % 100 = 0;
update demo_existing set amount = amount + 1 where id % 1000 = 0;
delete from demo_existing where id > 99990;
SQL

echo "== rows per table: PostgreSQL | ClickHouse (SELECT count() FROM t FINAL WHERE _is_deleted = 0)"
tables=$(psql -Atc "select relname from pg_class c join pg_namespace n on n.oid = c.relnamespace where n.nspname = 'public' and c.relkind = 'r' order by 1")
for attempt in $(seq 1 120); do
  alive
  all=1; report=""
  for t in $tables; do
    pg=$(psql -Atc "select count(*) from public.$t")
    # A change log (tables.<name>.change_log) is inserted minus deleted
    # images; every other table, pgbench_history (no key, keyed by its rows'
    # physical identity) included, is FINAL WHERE _is_deleted = 0.
    if [ "$(chcount "SELECT sorting_key FROM system.tables WHERE database = '$ch_db' AND name = 'public.$t'")" = "_lsn, _seq" ]; then
      ch=$(chcount "SELECT toInt64(sum(if(_is_deleted = 1, -1, 1))) FROM \`$ch_db\`.\`public.$t\` FINAL")
    else
      ch=$(chcount "SELECT count() FROM \`$ch_db\`.\`public.$t\` FINAL WHERE _is_deleted = 0")
    fi
    [ "$pg" = "$ch" ] || all=0
    report+=$(printf '   %-22s %10s | %-10s' "$t" "$pg" "$ch")$'\n'
  done
  if [ $all = 1 ] || [ $((attempt % 10)) = 1 ]; then printf '%s' "$report"; fi
  [ $all = 1 ] && break
  [ "$attempt" = 120 ] && { echo "ClickHouse did not catch up in 2 minutes; see $var/walshadow.log"; exit 1; }
  sleep 1
  echo "   ... catching up"
done
echo "   every table matches"
echo "== the initial load (walshadow.log)"
grep -o 'initial load of [^"]*published[^"]*' "$var/walshadow.log" | sed 's/^/   /' || echo "   (no initial load logged)"
echo "== demo_items: a few rows, and its columns on both sides (the ALTER arrived)"
chq "SELECT id, name, price, note FROM \`$ch_db\`.\`public.demo_items\` FINAL WHERE _is_deleted = 0 AND id IN (1, 10, 999) ORDER BY id FORMAT PrettyCompactNoEscapes" | sed 's/^/   /'
paste <(psql -Atc "select attname || ' ' || format_type(atttypid, atttypmod) from pg_attribute where attrelid = 'demo_items'::regclass and attnum > 0 and not attisdropped order by attnum") \
      <(chq "SELECT name || ' ' || type FROM system.columns WHERE database = '$ch_db' AND table = 'public.demo_items' AND NOT startsWith(name, '_')") | sed 's/^/   /'
src_size=$(psql -Atc "select pg_size_pretty(sum(pg_database_size(oid))) from pg_database")
shadow_size=$(du -sh --exclude=pg_wal "$state/shadow" | cut -f1)
echo "== sizes: source databases $src_size; the catalog-only shadow $shadow_size (it holds no user data)"
echo "== lag (Prometheus metrics at http://127.0.0.1:$http_port/metrics)"
curl -sf "http://127.0.0.1:$http_port/metrics" | grep -E '^walshadow_(shadow|delivery)_lag_(bytes|seconds)' | sed -E 's/\{[^}]*\}//; s/^/   /' || echo "   (metrics not reachable)"
echo "== bin/walshadow status (the durable progress, the shadow, the lags)"
bin/walshadow status --state-dir "$state" --source-dsn "host=$var port=5432 user=postgres dbname=postgres" --slot walshadow_demo | sed 's/^/   /'
echo "walshadow keeps running: change the source and watch ClickHouse follow, e.g."
echo "   curl -s http://127.0.0.1:$ch_http/ --data-binary 'SELECT * FROM $ch_db.\`public.demo_items\` FINAL WHERE _is_deleted = 0 LIMIT 5'"
echo "stop everything with: go tool task demo:stop"
