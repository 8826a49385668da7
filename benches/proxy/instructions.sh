#!/usr/bin/env bash
# Instructions the proxy executes per request, counted by callgrind: a
# machine-independent figure for the request path (wrk's req/s moves with
# the machine and its load; this does not), for comparing changes to the
# proxy itself.
#
# The release `tripline proxy` (the same route breaker, retry budget and
# outlier detection as benches/proxy/run.sh) runs under valgrind's
# callgrind in front of the bench upstream; after a warm-up the counters
# are zeroed, REQUESTS keep-alive GETs go through one connection (curl's
# URL range), and the counters are dumped: instructions / REQUESTS is the
# figure, idle timers and the warm-up excluded.
#
#   ./benches/proxy/instructions.sh             (REQUESTS=2000 PROTECT=1)
#   DUMP=/tmp/proxy.callgrind ./benches/proxy/instructions.sh
#                                   (keeps the dump: callgrind_annotate it)
#   PROXY=haproxy ./benches/proxy/instructions.sh
#                                   (the same count for HAProxy, one thread,
#                                    configured as in benches/proxy/run.sh)
#
# A benchmark, not a test: CI does not run it. Needs valgrind and curl
# (Debian packages valgrind, curl).
set -euo pipefail

# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"
REQUESTS=${REQUESTS:-2000}
UPSTREAM_PORT=18180
PROXY_PORT=18181

for tool in valgrind callgrind_control curl; do
    command -v "$tool" >/dev/null || { echo "needs $tool (Debian packages valgrind, curl)" >&2; exit 1; }
done

build_release proxy-upstream

"$TARGET/release/examples/proxy-upstream" "127.0.0.1:$UPSTREAM_PORT" 1 >"$WORK/upstream.log" 2>&1 &
PIDS+=($!)
wait_answer $UPSTREAM_PORT

tripline_config "$WORK/proxy.toml" "$PROXY_PORT" "$UPSTREAM_PORT"

haproxy_config "$WORK/haproxy.cfg" "$PROXY_PORT" "$UPSTREAM_PORT" 1

# One runtime thread: callgrind serialises threads anyway, and one keeps
# the count free of work-stealing noise.
if [[ ${PROXY:-tripline} == haproxy ]]; then
    command -v haproxy >/dev/null || { echo "needs haproxy (Debian package haproxy)" >&2; exit 1; }
    measured=(haproxy -db -f "$WORK/haproxy.cfg")
else
    measured=("$TARGET/release/tripline" proxy --config "$WORK/proxy.toml" --threads 1)
fi
valgrind --tool=callgrind --callgrind-out-file="$WORK/callgrind.out.%p" \
    "${measured[@]}" >"$WORK/proxy.log" 2>&1 &
PROXY=$!
PIDS+=("$PROXY")
wait_answer $PROXY_PORT
# Warm-up: the pool's connection, the allocator's arenas, lazy statics.
curl -s "http://127.0.0.1:$PROXY_PORT/[1-200]" >/dev/null

callgrind_control -z "$PROXY" >/dev/null 2>&1
curl -s "http://127.0.0.1:$PROXY_PORT/[1-$REQUESTS]" >/dev/null
callgrind_control -d "$PROXY" >/dev/null 2>&1
sleep 1

dump=$(ls -t "$WORK"/callgrind.out.* | head -1)
total=$(awk '/^summary:/ {print $2}' "$dump")
if [[ -n ${DUMP:-} ]]; then cp "$dump" "$DUMP"; fi
awk -v t="$total" -v n="$REQUESTS" 'BEGIN {
    printf "instructions per request: %.0f (%d instructions / %d requests)\n", t / n, t, n }'
