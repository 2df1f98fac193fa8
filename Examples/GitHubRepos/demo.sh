#!/usr/bin/env bash
# The GitHub repositories demo, offline: a local server answering like GitHub's search API
# (from a bundled fixture), the http source plugin, logging, and the SQLite store.
#   1. the first run fetches pages over HTTP and stores them in SQLite;
#   2. the second run is served from SQLite: the server sees no request;
#   3. in a terminal, `pager browse` shows the list as an infinite scroll (q quits).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="/opt/swift/usr/bin:$PATH"

scripts/install-deps.sh
swift build
bin=$(swift build --show-bin-path)
example=Examples/GitHubRepos
rm -f "$example"/offline.db "$example"/offline.db-wal "$example"/offline.db-shm

log=$(mktemp)
"$bin/github-fixture-server" "$example/fixture/repositories.json" --port 18765 2>"$log" >"$log.out" &
server=$!
trap 'kill $server 2>/dev/null; rm -f "$log" "$log.out"' EXIT
for _ in $(seq 50); do grep -q listening "$log.out" 2>/dev/null && break; sleep 0.1; done
requests() { grep -c "GET " "$log" || true; }

items=$(mktemp)
trap 'kill $server 2>/dev/null; rm -f "$log" "$log.out" "$items"' EXIT

echo "== first run: pages fetched over HTTP, stored in SQLite"
"$bin/pager" run "$example/offline.json" --refresh --append 2 >"$items"
head -n 3 "$items"
echo "   ... $(wc -l <"$items") repositories; HTTP requests made: $(requests)"

echo "== second run: served from SQLite"
before=$(requests)
"$bin/pager" run "$example/offline.json" --refresh --append 2 >"$items"
head -n 3 "$items"
echo "   ... $(wc -l <"$items") repositories; HTTP requests made: $(( $(requests) - before ))"

if [ -t 0 ] && [ -t 1 ]; then
    echo "== browse: j/k move, space pages, r refreshes, q quits"
    sleep 1
    "$bin/pager" browse "$example/offline.json"
fi
