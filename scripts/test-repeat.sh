#!/usr/bin/env bash
# Runs the test suite RUNS times in a row (10 when not given), each run as scripts/test.sh runs
# it (in parallel, one worker per core) with the property tests derandomized as in CI, to find
# tests that fail only now and then. Prints one line per run and, at the end, how many runs
# failed and where every run's whole output is kept; exits 1 if any run failed. Arguments
# after RUNS pass through to pytest (e.g. `scripts/test-repeat.sh 3 tests/store`).
set -uo pipefail
cd "$(dirname "$0")/.."
runs="${1:-10}"
if ! [[ "$runs" =~ ^[1-9][0-9]*$ ]]; then
  echo "test-repeat: the number of runs must be a whole number of at least 1, got '$runs'" >&2
  exit 2
fi
[ $# -gt 0 ] && shift
logs="$(mktemp -d "${TMPDIR:-/tmp}/context-broker-test-repeat.XXXXXX")"
failed=0
for i in $(seq 1 "$runs"); do
  started=$(date +%s)
  if HYPOTHESIS_PROFILE=ci scripts/test.sh -q -rs -p no:cacheprovider "$@" >"$logs/run$i.log" 2>&1; then
    result="passed"
  else
    result="FAILED"
    failed=$((failed + 1))
  fi
  echo "run $i/$runs $result in $(($(date +%s) - started)) s: $(tail -n 1 "$logs/run$i.log")"
done
echo "$failed of $runs runs failed; each run's output is in $logs"
[ "$failed" -eq 0 ]
