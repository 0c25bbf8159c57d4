#!/usr/bin/env bash
# Runs every Go fuzz target in the module for a bounded time each
# (FUZZTIME, default 10s). Any crash fails the run; the failing input is
# written under the package's testdata/fuzz for a regression test.
set -euo pipefail
fuzztime=${FUZZTIME:-10s}
status=0
passed=0
failed=0
for pkg in $(go list ./...); do
  targets=$(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true)
  for t in $targets; do
    echo "fuzz $pkg $t ($fuzztime)"
    ok=0
    for attempt in 1 2; do
      if go test -run '^$' -fuzz "^${t}\$" -fuzztime "$fuzztime" -fuzzminimizetime 1x "$pkg" >/tmp/walshadow-fuzz.log 2>&1; then
        ok=1; break
      fi
      # A real finding writes its input under testdata/fuzz and says so; Go's
      # fuzz coordinator can also fail at the deadline ("context deadline
      # exceeded") without any finding: run such a target once more.
      grep -q 'Failing input written' /tmp/walshadow-fuzz.log && break
      grep -q 'context deadline exceeded' /tmp/walshadow-fuzz.log || break
      echo "  (coordinator deadline error without a finding; running $t again)"
    done
    if [ $ok = 1 ]; then
      passed=$((passed + 1))
    else
      cat /tmp/walshadow-fuzz.log; status=1; failed=$((failed + 1))
    fi
  done
done
echo "fuzz: $passed passed, $failed failed"
exit $status
