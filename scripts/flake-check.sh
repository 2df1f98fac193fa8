#!/usr/bin/env bash
# Runs the whole test suite many times in a row to show it does not flake: QUIET runs on an
# otherwise idle machine, then LOADED runs while release builds of a copy of the repository keep
# both cores busy. Prints one line a run and a closing count; the log of every failed run is
# kept. Exit status: 0 when every run passed.
#
#   scripts/flake-check.sh              # 30 quiet runs, then 10 loaded ones
#   scripts/flake-check.sh 5 2          # 5 quiet, 2 loaded
#
# Builds the tests once first (`swift build --build-tests`); each run is `swift test --skip-build`.
set -uo pipefail
cd "$(dirname "$0")/.."

quiet=${1:-30}
loaded=${2:-10}
logs=$(mktemp -d "${TMPDIR:-/tmp}/flake-check.XXXXXX")
swift build --build-tests >"$logs/build.log" 2>&1 || { cat "$logs/build.log"; exit 2; }

failed=0
run() { # $1: label
  local log="$logs/run-$1.log" start=$(date +%s)
  if swift test --skip-build >"$log" 2>&1; then
    echo "$1: passed in $(( $(date +%s) - start )) s"
    rm -f "$log"
  else
    failed=$((failed + 1))
    echo "$1: FAILED in $(( $(date +%s) - start )) s (log: $log)"
    grep -E "✘ Test .* (recorded an issue|failed)" "$log" | head -5 | sed 's/^/    /'
  fi
}

for i in $(seq 1 "$quiet"); do run "quiet-$i"; done

if [ "$loaded" -gt 0 ]; then
  # The load: release builds of a copy of the repository, one after another, until the runs end.
  copy="$logs/load-copy"
  mkdir -p "$copy" && git archive HEAD | tar -x -C "$copy"
  ( while true; do swift build -c release --package-path "$copy" >/dev/null 2>&1; rm -rf "$copy/.build"; done ) &
  load=$!
  trap 'kill -- -$load 2>/dev/null; pkill -P $load 2>/dev/null; kill $load 2>/dev/null' EXIT
  sleep 5 # let the build get going
  for i in $(seq 1 "$loaded"); do run "loaded-$i"; done
fi

total=$((quiet + loaded))
echo "flake-check: $((total - failed)) of $total runs passed ($quiet quiet, $loaded under load); logs in $logs"
[ "$failed" -eq 0 ]
