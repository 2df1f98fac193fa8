#!/usr/bin/env bash
# Runs the concurrency stress test (ReliabilityTests) and the engine's tests (PagingTests) under
# ThreadSanitizer and AddressSanitizer, each in its own scratch folder.
#
#   scripts/sanitizers.sh            # both sanitizers
#   scripts/sanitizers.sh thread     # one of them
#
# PAGING_STRESS_CALLS sizes the stress test (calls per task; default 2000 here too).
# --export-dynamic: the plugins are dlopen'ed and must see the sanitizer runtime's symbols
# in the test binary. Exit status: non-zero when any run fails or any sanitizer report is printed.
#
# The engine and the host lock with pthread mutexes (Paging's `Locked`), which ThreadSanitizer
# understands: any report is worth reading. (Synchronization.Mutex locks with futex calls TSan
# does not see, so state under it shows up as races; keep it out of code run under TSan.)
set -uo pipefail
cd "$(dirname "$0")/.."

filter='ReliabilityTests\.StressTests|PagingTests\.'
status=0
for sanitizer in "${@:-thread address}"; do
  for s in $sanitizer; do
    case "$s" in
      thread)  flags=(--sanitize=thread -Xlinker --export-dynamic --scratch-path .build-tsan) ;;
      address) flags=(--sanitize=address --scratch-path .build-asan) ;;
      *) echo "unknown sanitizer '$s' (thread or address)" >&2; exit 2 ;;
    esac
    echo "== $s sanitizer: swift test ${flags[*]} --filter '$filter'"
    start=$(date +%s)
    if TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=0 second_deadlock_stack=1}" \
       ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0}" \
       swift test "${flags[@]}" --filter "$filter" 2>&1 | tee ".sanitizer-$s.log"; then
      echo "== $s sanitizer: passed in $(( $(date +%s) - start )) s"
    else
      status=1
      echo "== $s sanitizer: FAILED in $(( $(date +%s) - start )) s (log: .sanitizer-$s.log)"
    fi
    reports=$(grep -c "WARNING: ThreadSanitizer\|ERROR: AddressSanitizer" ".sanitizer-$s.log" || true)
    echo "== $s sanitizer: $reports sanitizer reports"
    [ "$reports" -eq 0 ] || status=1
  done
done
exit $status
