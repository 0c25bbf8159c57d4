#!/usr/bin/env bash
# The tests that depend on the source's PostgreSQL major, run against real
# PostgreSQL 17 and 18 servers (MAJORS, default "17 18"): walshadow's own
# suite runs on 15, Debian 12's package.
#
# Per major, with WALSHADOW_PG_BINDIR pointing at that major's programs
# (scripts/pgmajor.sh lays them out under ./var/pg<major>; it is called
# here, as root or through sudo, when they are missing):
#   - wal stats against that major's pg_waldump --stats (pgbench + DDL under
#     every wal_compression), and the WAL reader's record layouts;
#   - the shadow: bootstrap, catalog-only replay, restarts, GUC floors, the
#     bridge module built with the major's PGXS (DECODE and SCAN checked
#     against the server's own output functions);
#   - the randomized DML+DDL workload end to end into ClickHouse;
#   - the crash drill, DRILL_CYCLES SIGKILLs (default 3);
#   - the initial load in copy and base_backup modes.
# Prints one line per major and step, and fails when any step fails.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
majors=${MAJORS:-17 18}
cycles=${DRILL_CYCLES:-3}
status=0
summary=()
for major in $majors; do
  bindir=$top/var/pg$major/usr/lib/postgresql/$major/bin
  if [ ! -x "$bindir/postgres" ]; then
    as_root=()
    [ "$(id -u)" = 0 ] || as_root=(sudo -n)
    if [ "$(id -u)" = 0 ] || sudo -n true 2>/dev/null; then
      "${as_root[@]}" bash scripts/pgmajor.sh "$major" || { summary+=("PostgreSQL $major: FAIL laying out its binaries (scripts/pgmajor.sh $major)"); status=1; continue; }
    else
      summary+=("PostgreSQL $major: FAIL no binaries in $bindir (run sudo scripts/pgmajor.sh $major)")
      status=1
      continue
    fi
  fi
  version=$("$bindir/postgres" --version)
  echo "== $version ($bindir)"
  run() {
    local name=$1
    shift
    local began=$SECONDS log
    log=$(mktemp /tmp/walshadow-majors.XXXXXX.log)
    # SERVER_LOCK: a lock file each step holds, to share the machine's
    # servers with other suites (flock).
    if WALSHADOW_PG_BINDIR=$bindir WALSHADOW_DRILL_CYCLES=$cycles ${SERVER_LOCK:+flock "$SERVER_LOCK"} go test -count=1 -v "$@" >"$log" 2>&1; then
      summary+=("PostgreSQL $major: ok   $name ($((SECONDS - began))s)")
    else
      summary+=("PostgreSQL $major: FAIL $name ($((SECONDS - began))s), output kept in $log")
      grep -E '^(--- FAIL|FAIL|panic)|_test.go:[0-9]+:' "$log" | tail -40
      status=1
      return
    fi
    grep -hE 'pg_waldump agrees|tables? (equal|match)|cycles?|loaded' "$log" | sed 's/^ */    /' | tail -8
    rm -f "$log"
  }
  run "wal stats == pg_waldump, WAL layouts" -run 'TestAcceptancePGBenchDDLAllCompressions' ./internal/walstats/
  run "shadow and bridge" -timeout 20m ./internal/shadow/
  run "randomized workload into ClickHouse" -run 'TestClickHouseRandomWorkloadMatchesSource' -timeout 20m ./output/
  run "crash drill ($cycles kills)" -run 'TestCrashDrill' -timeout 30m ./e2e/drill/
  run "initial load, copy and base_backup" -run 'TestInitialLoad$' -timeout 30m ./e2e/load/
done
printf '%s\n' "${summary[@]}"
passed=0
failed=0
for line in "${summary[@]}"; do
  case $line in *": ok "*) passed=$((passed + 1)) ;; *) failed=$((failed + 1)) ;; esac
done
echo "majors: $passed passed, $failed failed"
exit $status
