#!/usr/bin/env bash
# What runs today: a local PostgreSQL 15 under ./var/demo as the source,
# walshadow streaming its physical WAL (resources/pipelines/decode_to_file.yaml)
# with a catalog-only shadow standby following it and every row change and
# schema event decoded into ./var/demo/walshadow/changes.jsonl, a pgbench +
# DDL workload, the shadow shown catching up (LSNs, the ALTERed table's
# columns on both, sizes), the decoded changes counted per table and
# operation beside the source's own counts, and `walshadow wal stats` beside
# pg_waldump. Rows reach ClickHouse with a later issue.
#
#   scripts/demo.sh        start (or reuse) the servers, run the workload, show
#   scripts/demo.sh stop   stop walshadow and the source
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${WALSHADOW_PG_BINDIR:-/usr/lib/postgresql/15/bin}
var=$PWD/var/demo
state=$var/walshadow
shadow_port=54329
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

stop_walshadow() {
  if [ -f "$var/walshadow.pid" ]; then
    kill "$(cat "$var/walshadow.pid")" 2>/dev/null || true
    for _ in $(seq 1 60); do kill -0 "$(cat "$var/walshadow.pid")" 2>/dev/null || break; sleep 1; done
    rm -f "$var/walshadow.pid"
  fi
}
if [ "${1:-}" = stop ]; then
  stop_walshadow
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
max_prepared_transactions = 5
CONF
fi
if ! as_pg "$bin/pg_ctl" -D "$var/pg" status >/dev/null 2>&1; then
  as_pg "$bin/pg_ctl" -D "$var/pg" -l "$var/postgres.log" -w start >/dev/null
fi
psql() { as_pg "$bin/psql" -X -q -v ON_ERROR_STOP=1 -h "$var" -d postgres "$@"; }
shadow_psql() { as_pg "$bin/psql" -X -q -At -h "$state/shadow" -p $shadow_port -d postgres "$@"; }
if [ "$(psql -Atc "select count(*) from pg_class where relname = 'pgbench_accounts'")" = 0 ]; then
  echo "== loading pgbench -s 5 into the source"
  as_pg "$bin/pgbench" -q -h "$var" -i -s 5 postgres >/dev/null 2>&1
fi

changes=$state/changes.jsonl
echo "== starting walshadow (resources/pipelines/decode_to_file.yaml); log in $var/walshadow.log, changes in $changes"
stop_walshadow
mkdir -p "$state"
PG_SOURCE_DSN="host=$var port=5432 user=postgres dbname=postgres" WALSHADOW_STATE_DIR="$state" \
  WALSHADOW_SLOT=walshadow_demo WALSHADOW_SHADOW_PORT=$shadow_port WALSHADOW_BRIDGE_DIR="$PWD/pgext" \
  WALSHADOW_CHANGES_FILE="$changes" \
  nohup bin/walshadow run resources/pipelines/decode_to_file.yaml >"$var/walshadow.log" 2>&1 &
echo $! >"$var/walshadow.pid"

wait_shadow() {
  local target=$1
  for _ in $(seq 1 120); do
    got=$(shadow_psql -c "select pg_last_wal_replay_lsn() >= '$target'::pg_lsn" 2>/dev/null || true)
    [ "$got" = t ] && return 0
    kill -0 "$(cat "$var/walshadow.pid")" 2>/dev/null || { echo "walshadow exited:"; tail -20 "$var/walshadow.log"; exit 1; }
    sleep 1
  done
  echo "the shadow did not catch up; see $var/walshadow.log"; exit 1
}
wait_shadow "$(psql -Atc "select pg_current_wal_lsn()")"
echo "   shadow is up and has caught up"

start=$(psql -Atc "select pg_walfile_name(pg_current_wal_lsn())")
echo "== workload: pgbench (2000 transactions) and DDL on the source"
as_pg "$bin/pgbench" -h "$var" -c 2 -t 1000 postgres 2>&1 | grep -E '^tps' || true
psql <<'SQL'
create table if not exists demo_items (id int primary key, name text, price numeric(10,2));
insert into demo_items select i, 'item ' || i, i * 1.25 from generate_series(1, 1000) i on conflict (id) do nothing;
alter table demo_items add column if not exists note text default 'new';
update demo_items set price = price + 1 where id % 10 = 0;
delete from demo_items where id % 100 = 0;
truncate pgbench_history;
SQL
target=$(psql -Atc "select pg_current_wal_lsn()")
wait_shadow "$target"
printf '   %-28s %s\n' "source pg_current_wal_lsn" "$target" "shadow pg_last_wal_replay_lsn" "$(shadow_psql -c 'select pg_last_wal_replay_lsn()')"
echo "== demo_items columns: source | shadow"
paste <(psql -Atc "select attname || ' ' || format_type(atttypid, atttypmod) from pg_attribute where attrelid = 'demo_items'::regclass and attnum > 0 and not attisdropped order by attnum") \
      <(shadow_psql -c "select attname || ' ' || format_type(atttypid, atttypmod) from pg_attribute where attrelid = 'demo_items'::regclass and attnum > 0 and not attisdropped order by attnum") | sed 's/^/   /'
echo "== decoded changes since walshadow started (table, operation: count), and the source now"
marker=$(psql -Atc "create table if not exists demo_marker (id serial primary key, at timestamptz default now()); insert into demo_marker default values returning id")
for _ in $(seq 1 60); do grep -q "\"table\":\"public.demo_marker\".*\"id\":$marker[,}]" "$changes" 2>/dev/null && break; sleep 1; done
python3 - "$changes" <<'PY'
import collections, json, sys
counts, events = collections.Counter(), []
live = collections.defaultdict(set)
for line in open(sys.argv[1]):
    c = json.loads(line)
    if c["op"] == "schema":
        events.append(f'{c["event"]:8} {c["table"]} ({", ".join(col["name"] + " " + col["type"] for col in c["shape"].get("columns", []))})')
        continue
    counts[(c["table"], c["op"])] += 1
    if c["table"] == "public.demo_items":
        key = c["row"].get("id")
        if c["op"] in ("insert", "update"): live["demo_items"].add(key)
        elif c["op"] == "delete": live["demo_items"].discard(key)
        elif c["op"] == "truncate": live["demo_items"].clear()
for (table, op), n in sorted(counts.items()):
    print(f"   {table:28} {op:9} {n}")
print("   schema events:")
for e in events[-6:]:
    print("     " + e)
print(f"   demo_items rows rebuilt from the changes: {len(live['demo_items'])}")
PY
echo "   demo_items rows on the source:             $(psql -Atc 'select count(*) from demo_items')"
src_size=$(psql -Atc "select pg_size_pretty(sum(pg_database_size(oid))) from pg_database")
shadow_size=$(du -sh --exclude=pg_wal "$state/shadow" | cut -f1)
echo "== sizes: source databases $src_size; catalog-only shadow $shadow_size (without pg_wal)"
echo "   rows in pgbench_accounts on the source: $(psql -Atc 'select count(*) from pgbench_accounts'); the shadow holds no user data"

end=$(psql -Atc "select pg_walfile_name(pg_current_wal_lsn())")
psql -c "select pg_switch_wal()" >/dev/null
segs=()
for f in $(ls "$var/pg/pg_wal" | grep -E '^[0-9A-F]{24}$' | sort); do
  [[ "$f" < "$start" ]] && continue
  [[ "$f" > "$end" ]] && continue
  segs+=("$var/pg/pg_wal/$f")
done
echo "== walshadow wal stats over the workload's ${#segs[@]} segments ($start .. $end)"
bin/walshadow wal stats "${segs[@]}" >"$var/stats.json" || [ $? -eq 2 ]
python3 - "$var/stats.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"   records {r['records']}  bytes {r['total_bytes']}  fpi {r['fpi_count']} ({r['fpi_bytes']} bytes)  crc failures {r['crc_failures']}")
PY
"$bin/pg_waldump" --stats -p "$var/pg/pg_wal" "$start" "$end" 2>&1 | grep -E '^Total' | sed 's/^/   pg_waldump: /' || true
echo "walshadow keeps running; stop everything with: go tool task demo:stop"
