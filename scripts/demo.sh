#!/usr/bin/env bash
# What runs today (issue 2, the foundation): a local PostgreSQL 15 under
# ./var/demo, a pgbench + DDL workload, and walshadow's WAL decoder reading
# the server's own WAL segments — `walshadow wal stats` side by side with
# pg_waldump --stats. The full replication pipeline to ClickHouse arrives
# with the end-to-end issue.
#
#   scripts/demo.sh        start (or reuse) the server, run the workload, compare
#   scripts/demo.sh stop   stop the server
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${WALSHADOW_PG_BINDIR:-/usr/lib/postgresql/15/bin}
var=$PWD/var/demo
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

if [ "${1:-}" = stop ]; then
  [ -d "$var/pg" ] && as_pg "$bin/pg_ctl" -D "$var/pg" -m fast stop || true
  exit 0
fi

mkdir -p "$var"
[ "$(id -u)" = 0 ] && chown postgres "$var" && chmod o+x "$PWD" "$PWD/var"
if [ ! -d "$var/pg" ]; then
  as_pg "$bin/initdb" -D "$var/pg" -A trust -N >/dev/null
  cat >>"$var/pg/postgresql.conf" <<CONF
wal_level = logical
listen_addresses = ''
unix_socket_directories = '$var'
port = 5432
wal_compression = lz4
CONF
fi
if ! as_pg "$bin/pg_ctl" -D "$var/pg" status >/dev/null 2>&1; then
  as_pg "$bin/pg_ctl" -D "$var/pg" -l "$var/postgres.log" -w start >/dev/null
fi
psql() { as_pg "$bin/psql" -X -q -v ON_ERROR_STOP=1 -h "$var" -d postgres "$@"; }
start=$(psql -Atc "select pg_walfile_name(pg_current_wal_lsn())")
echo "== workload: pgbench -s 5, 2000 transactions, and DDL"
as_pg "$bin/pgbench" -q -h "$var" -i -s 5 postgres >/dev/null 2>&1
as_pg "$bin/pgbench" -h "$var" -c 2 -t 1000 postgres 2>&1 | grep -E '^(tps|number of transactions actually)' || true
psql <<'SQL'
create table if not exists demo_items (id int primary key, name text, price numeric(10,2));
insert into demo_items select i, 'item ' || i, i * 1.25 from generate_series(1, 1000) i on conflict (id) do nothing;
alter table demo_items add column if not exists note text default 'new';
update demo_items set price = price + 1 where id % 10 = 0;
delete from demo_items where id % 100 = 0;
truncate pgbench_history;
SQL
end=$(psql -Atc "select pg_walfile_name(pg_current_wal_lsn())")
psql -c "select pg_switch_wal()" >/dev/null
segs=()
for f in $(ls "$var/pg/pg_wal" | grep -E '^[0-9A-F]{24}$' | sort); do
  [[ "$f" < "$start" ]] && continue
  [[ "$f" > "$end" ]] && continue
  segs+=("$var/pg/pg_wal/$f")
done
echo "== walshadow wal stats over ${#segs[@]} segments ($start .. $end)"
t0=$(date +%s%N)
bin/walshadow wal stats "${segs[@]}" >"$var/stats.json" || [ $? -eq 2 ]
t1=$(date +%s%N)
python3 - "$var/stats.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"records {r['records']}  bytes {r['total_bytes']}  fpi {r['fpi_count']} ({r['fpi_bytes']} bytes)  crc failures {r['crc_failures']}  stop: {r['stop']['reason']} at {r['stop']['lsn']}")
for m in r['rmgrs']:
    print(f"  {m['name']:<14} {m['count']:>9} records {m['combined_bytes']:>12} bytes")
PY
echo "   ($(( (t1 - t0) / 1000000 )) ms; full JSON in $var/stats.json)"
echo "== pg_waldump --stats on the same segments"
"$bin/pg_waldump" --stats -p "$var/pg/pg_wal" "$start" "$end" 2>&1 | grep -E '^(Total|WAL statistics)' || true
echo "Stop the server with: go tool task demo:stop"
