#!/usr/bin/env bash
# Produces the PostgreSQL 15 WAL the heap golden records come from: a scratch
# cluster runs statements that write each Heap/Heap2 record type, first at
# wal_level=logical, then at replica (full-page images without tuple data,
# prefix/suffix-compressed updates). The segments and pg_waldump's listing
# land in $1 (default: a new temp dir). The golden records were then picked
# by LSN from $1/waldump.txt and copied here with
#   go run ./internal/wal/testdata/heap/extract.go -wal $1/wal -out internal/wal/testdata/heap name=LSN...
# (names and LSNs as in heapGoldenFiles, heap_golden_test.go), and their
# pg_waldump lines (with blkref lines) saved as waldump.txt, the tests' oracle.
#
# Usage: internal/wal/testdata/heap/gen.sh [outdir]   (as root or as postgres)
set -euo pipefail
bin=${WALSHADOW_PG_BINDIR:-/usr/lib/postgresql/15/bin}
out=${1:-$(mktemp -d)}
work=$(mktemp -d)
trap '"$bin/pg_ctl" -D "$work/pg" -m immediate stop >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
[ "$(id -u)" = 0 ] && chown postgres "$work"
as_pg "$bin/initdb" -D "$work/pg" -A trust --wal-segsize=1 -N >/dev/null
cat >>"$work/pg/postgresql.conf" <<CONF
wal_level = logical
listen_addresses = ''
unix_socket_directories = '$work'
fsync = off
full_page_writes = on
wal_keep_size = 1GB
max_wal_size = 1GB
checkpoint_timeout = 1h
autovacuum = off
CONF
as_pg "$bin/pg_ctl" -D "$work/pg" -l "$work/log" -w start >/dev/null
sql() { as_pg "$bin/psql" -X -q -v ON_ERROR_STOP=1 -h "$work" -d postgres "$@"; }
sql -c "checkpoint" >/dev/null
start=$(sql -Atc "select pg_current_wal_lsn()")
sql <<'SQL' >/dev/null
create table t (id int primary key, a text, b int);
insert into t values (1, 'one', 10);
insert into t values (2, null, 20);
copy t from stdin;
3	three	30
4	four	40
5	\N	50
\.
update t set b = b + 1 where id = 1;
update t set id = 100 where id = 2;
alter table t replica identity full;
update t set a = 'THREE' where id = 3;
delete from t where id = 4;
alter table t replica identity default;
delete from t where id = 5;
insert into t values (200, 'spec', 1) on conflict do nothing;
begin; select * from t where id = 1 for update; commit;
create table s (id serial primary key);
truncate t, s restart identity cascade;
create table p (k int, v text) partition by list (k);
create table p1 partition of p for values in (1);
create table p2 partition of p for values in (2);
insert into p values (1, 'move me');
update p set k = 2;
create table w (id int, pad text);
insert into w select i, repeat('x', 300) from generate_series(1, 30) i;
update w set id = 6 where id = 1;
vacuum freeze w;
create table m (id int);
copy m from stdin;
1
2
\.
SQL
sql -c "alter system set wal_level = replica" >/dev/null
as_pg "$bin/pg_ctl" -D "$work/pg" -l "$work/log" -w restart >/dev/null
sql <<'SQL' >/dev/null
create table r (id int, a text);
insert into r values (1, 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-0-bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb');
checkpoint;
insert into r values (2, 'after checkpoint');
update r set a = 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-1-bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb' where id = 1;
copy r from stdin;
3	c
4	d
\.
checkpoint;
update r set a = 'z' where id = 2;
checkpoint;
copy r from stdin;
5	e
6	f
\.
checkpoint;
vacuum r;
SQL
end=$(sql -Atc "select pg_current_wal_lsn()")
sql -c "checkpoint" >/dev/null
as_pg "$bin/pg_ctl" -D "$work/pg" -m fast stop >/dev/null
mkdir -p "$out/wal"
cp "$work"/pg/pg_wal/0000000* "$out/wal/"
"$bin/pg_waldump" --bkp-details -p "$out/wal" -s "$start" -e "$end" >"$out/waldump.txt" 2>&1 || true
echo "$start $end" >"$out/range"
echo "$out"
