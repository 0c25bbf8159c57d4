#!/usr/bin/env bash
# Regenerates testdata/pg15: a small, deterministic-in-shape PostgreSQL 15 WAL
# fixture (1 MiB segments) touching every record type internal/wal decodes,
# FPIs under each wal_compression method, page-crossing records, a
# XLOG_SWITCH, 2PC, savepoints, >64 subtransactions, TOAST, relmap updates.
# Alongside the segments it stores pg_waldump's view of the same bytes
# (stats per record type, and the full record listing) as the oracle.
#
# Usage: internal/wal/testdata/gen_pg15.sh   (as root or as postgres)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${WALSHADOW_PG_BINDIR:-/usr/lib/postgresql/15/bin}
work=$(mktemp -d)
trap '"$bin/pg_ctl" -D "$work/pg" -m immediate stop >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
[ "$(id -u)" = 0 ] && chown postgres "$work"
as_pg "$bin/initdb" -D "$work/pg" -A trust --wal-segsize=1 -N >/dev/null
cat >>"$work/pg/postgresql.conf" <<CONF
wal_level = logical
listen_addresses = ''
unix_socket_directories = '$work'
port = 5432
fsync = off
full_page_writes = on
max_prepared_transactions = 5
wal_keep_size = 1GB
max_wal_size = 1GB
checkpoint_timeout = 1h
autovacuum = off
wal_log_hints = on
CONF
as_pg "$bin/pg_ctl" -D "$work/pg" -l "$work/log" -w start >/dev/null
sql() { as_pg "$bin/psql" -X -q -v ON_ERROR_STOP=1 -h "$work" -d postgres "$@"; }
sql -c "create table warm (id int primary key, v text); checkpoint; select pg_switch_wal();" >/dev/null
start=$(sql -Atc "select pg_walfile_name(pg_current_wal_lsn())")
sql <<'SQL' >/dev/null
-- plain DML, HOT and non-HOT updates, key change, deletes
create table t (id int primary key, v text, n numeric) with (fillfactor = 50);
insert into t select i, md5(i::text), i * 1.5 from generate_series(1, 300) i;
update t set v = v || 'x' where id % 7 = 0;
update t set id = id + 1000 where id = 5;
delete from t where id % 11 = 0;
alter table t replica identity full;
update t set n = n + 1 where id < 20;
delete from t where id = 2;
-- COPY -> MULTI_INSERT
copy t (id, v, n) from program 'seq 2000 2400 | sed "s/.*/&\tv&\t&/"';
-- speculative insert + confirm, row lock
insert into t values (1, 'dup', 0) on conflict (id) do update set v = 'upserted';
insert into t values (5000, 'new', 0) on conflict do nothing;
begin; select * from t where id < 4 for update; commit;
-- TOAST: compressible and incompressible values, one page-crossing record
create table big (id int, body text);
insert into big values (1, repeat('compressible ', 20000));
insert into big select 2, string_agg(md5(i::text), '') from generate_series(1, 3000) i;
-- savepoints, rollback to, >64 subtransactions for XLOG_XACT_ASSIGNMENT
begin;
insert into t values (6000, 'sp', 0);
savepoint a; insert into t values (6001, 'gone', 0); rollback to a;
savepoint b; insert into t values (6002, 'kept', 0); release b;
commit;
do $$ begin for i in 1..70 loop begin insert into t values (7000 + i, 'sub', 0); exception when others then null; end; end loop; end $$;
-- 2PC
begin; insert into t values (8000, '2pc', 0); prepare transaction 'g1'; commit prepared 'g1';
begin; insert into t values (8001, '2pc-abort', 0); prepare transaction 'g2'; rollback prepared 'g2';
-- DDL
alter table t add column d int default 42;
alter table t rename column v to vv;
alter table t drop column d;
create index on t (vv);
truncate big;
drop table big;
vacuum full t;
vacuum t;
vacuum full pg_class;
-- heap truncation by vacuum (smgr TRUNCATE), freezing
delete from t where id >= 2000;
vacuum freeze t;
-- explicit abort
begin; insert into t values (9000, 'aborted', 0); rollback;
SQL
# FPIs under each compression method: the first change after a checkpoint.
for c in off pglz lz4 zstd; do
  sql -c "alter system set wal_compression = '$c'" -c "select pg_reload_conf()" >/dev/null
  sql -c "checkpoint" -c "update t set n = n + 1 where id % 3 = 0" >/dev/null
done
sql -c "select pg_switch_wal()" -c "insert into t values (9999, 'after switch', 0)" -c "checkpoint" >/dev/null
end=$(sql -Atc "select pg_walfile_name(pg_current_wal_lsn())")
as_pg "$bin/pg_ctl" -D "$work/pg" -m fast stop >/dev/null
rm -rf "$here/pg15"; mkdir -p "$here/pg15/wal"
for f in $(cd "$work/pg/pg_wal" && ls | grep -E '^[0-9A-F]{24}$' | sort); do
  if [[ "$f" > "$start" || "$f" == "$start" ]] && [[ "$f" < "$end" || "$f" == "$end" ]]; then cp "$work/pg/pg_wal/$f" "$here/pg15/wal/"; fi
done
( "$bin/pg_waldump" --stats=record -p "$here/pg15/wal" "$start" "$end" 2>&1 || true ) >"$here/pg15/waldump_stats_record.txt"
( "$bin/pg_waldump" --bkp-details -p "$here/pg15/wal" "$start" "$end" 2>&1 || true ) | gzip -9n >"$here/pg15/waldump_records.txt.gz"
echo "fixture: $start .. $end"; ls -la "$here/pg15/wal"
