#!/usr/bin/env bash
# Runs every Go fuzz target in the module for a bounded time each
# (FUZZTIME, default 10s). Any crash fails the run; the failing input is
# written under the package's testdata/fuzz for a regression test.
set -euo pipefail
fuzztime=${FUZZTIME:-10s}
status=0
passed=0
failed=0
log=$(mktemp /tmp/walshadow-fuzz.XXXXXX.log)
trap 'rm -f "$log"' EXIT
for pkg in $(go list ./...); do
  targets=$(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true)
  for t in $targets; do
    echo "fuzz $pkg $t ($fuzztime)"
    ok=0
    limit=$fuzztime
    for attempt in 1 2 3; do
      if go test -run '^$' -fuzz "^${t}\$" -fuzztime "$limit" -fuzzminimizetime 1x "$pkg" >"$log" 2>&1; then
        ok=1; break
      fi
      # A real finding writes its input under testdata/fuzz and says so. Go's
      # fuzz coordinator can also fail at a time limit ("context deadline
      # exceeded") without any finding, a race between its deadline and a
      # worker's reply. Run such a target again with a count limit instead
      # (the executions the timed run reached): a count-limited run has no
      # deadline, so that race cannot recur, and the target still gets the
      # same amount of fuzzing.
      grep -q 'Failing input written' "$log" && break
      grep -q 'context deadline exceeded' "$log" || break
      execs=$(grep -o 'execs: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || true)
      [ -n "$execs" ] && [ "$execs" -gt 0 ] || execs=100000
      limit="${execs}x"
      echo "  (coordinator deadline error without a finding; running $t again for $limit)"
    done
    if [ $ok = 1 ]; then
      passed=$((passed + 1))
    else
      cat "$log"; status=1; failed=$((failed + 1))
    fi
  done
done
echo "fuzz: $passed passed, $failed failed"
exit $status
