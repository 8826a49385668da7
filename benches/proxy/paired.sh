#!/usr/bin/env bash
# tripline proxy against HAProxy in paired short runs, for a noisy machine.
#
# run.sh measures each proxy for 10 s in rounds, started fresh each turn;
# on a shared VM whose speed drifts by ±20 % within a minute (steal time),
# two measurements 20 s apart compare the machine's moments as much as the
# proxies. Here both proxies run side by side (the one not loaded is idle:
# neither does anything between requests) and are loaded in turn for D
# each, alternating which goes first (ABBA), PAIRS times; each pair's
# ratios compare two runs seconds apart. The report gives every pair, then
# the median and the geometric mean of the ratios with ±2 standard errors
# (the mean of the log ratios): a goal is met with evidence when the
# interval lies on its side of 1.0, and "level" when it straddles 1.0.
#
#   ./benches/proxy/paired.sh                   (PAIRS=30 D=3s)
#
# Same pinning, configs and protections as run.sh: proxies on CPU 1
# (PROXY_CPUS), wrk -t2 -c64 and the upstream on CPU 0 (LOAD_CPUS).
# Also prints each run's user and kernel microseconds per request of the
# proxy measured. A benchmark, not a test: CI does not run it.
set -euo pipefail

# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"
PROXY_CPUS=${PROXY_CPUS:-1}
LOAD_CPUS=${LOAD_CPUS:-0}
PAIRS=${PAIRS:-30}
D=${D:-3s}
CONNECTIONS=${CONNECTIONS:-64}
UPSTREAM_PORT=18280
TRIPLINE_PORT=18281
HAPROXY_PORT=18282

for tool in wrk haproxy; do
    command -v "$tool" >/dev/null || { echo "needs $tool (run benches/proxy/run.sh once: it installs it)" >&2; exit 1; }
done
build_release proxy-upstream

taskset -c "$LOAD_CPUS" "$TARGET/release/examples/proxy-upstream" "127.0.0.1:$UPSTREAM_PORT" 1 \
    >"$WORK/upstream.log" 2>&1 &
PIDS+=($!)
wait_port $UPSTREAM_PORT

tripline_config "$WORK/tripline.toml" "$TRIPLINE_PORT" "$UPSTREAM_PORT" "$BENCH_PROXY_LINES"
haproxy_config "$WORK/haproxy.cfg" "$HAPROXY_PORT" "$UPSTREAM_PORT" 1

taskset -c "$PROXY_CPUS" "$TARGET/release/tripline" proxy --config "$WORK/tripline.toml" --threads 1 \
    >"$WORK/tripline.log" 2>&1 &
TRIPLINE_PID=$!
PIDS+=("$TRIPLINE_PID")
taskset -c "$PROXY_CPUS" haproxy -db -f "$WORK/haproxy.cfg" >"$WORK/haproxy.log" 2>&1 &
HAPROXY_PID=$!
PIDS+=("$HAPROXY_PID")
wait_port $TRIPLINE_PORT
wait_port $HAPROXY_PORT

load() { taskset -c "$LOAD_CPUS" wrk -t2 -c"$CONNECTIONS" "$@"; }
load -d2s "http://127.0.0.1:$TRIPLINE_PORT/" >/dev/null
load -d2s "http://127.0.0.1:$HAPROXY_PORT/" >/dev/null

ticks() { # pid: "user kernel" clock ticks of all its threads
    awk '{s = $0; sub(/^.*\) /, "", s); split(s, f, " "); u += f[12]; k += f[13]}
         END {print u, k}' /proc/"$1"/task/*/stat
}

run() { # port pid: "req/s p99_ms user_us/kernel_us"
    local before after out
    before=$(ticks "$2")
    out=$(load -d"$D" --latency "http://127.0.0.1:$1/")
    after=$(ticks "$2")
    awk -v b="$before" -v a="$after" -v hz="$(getconf CLK_TCK)" '
        /^Requests\/sec/ {rps = $2}
        /requests in/ {n = $1}
        $1 == "99%" {v = $2; p = v + 0; if (v ~ /us$/) p /= 1000; else if (v !~ /ms$/) p *= 1000}
        END {split(b, x, " "); split(a, y, " ");
             printf "%s %.3f %.2f/%.2f\n", rps, p, (y[1] - x[1]) / hz / n * 1e6, (y[2] - x[2]) / hz / n * 1e6}' <<<"$out"
}

echo "| pair | tripline req/s | p99 ms | user/kernel µs a request | HAProxy req/s | p99 ms | user/kernel µs a request | req/s ratio | p99 ratio |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for i in $(seq "$PAIRS"); do
    if ((i % 2)); then
        t=$(run $TRIPLINE_PORT $TRIPLINE_PID); h=$(run $HAPROXY_PORT $HAPROXY_PID)
    else
        h=$(run $HAPROXY_PORT $HAPROXY_PID); t=$(run $TRIPLINE_PORT $TRIPLINE_PID)
    fi
    echo "$i $t $h"
done | awk '{printf "| %d | %s | %s | %s | %s | %s | %s | %.3f | %.3f |\n", $1, $2, $3, $4, $5, $6, $7, $2 / $5, $3 / $6}' \
    | tee "$WORK/pairs.md"

summary() { # column label
    awk -F'|' -v c="$1" '{print $c + 0}' "$WORK/pairs.md" | sort -g | awk -v label="$2" '
        {v[NR] = $1; l = log($1); s += l; q += l * l}
        END {
            n = NR; m = s / n; se = sqrt((q - n * m * m) / (n - 1) / n)
            med = (v[int((n + 1) / 2)] + v[int(n / 2) + 1]) / 2
            printf "%s: median %.3f, geometric mean %.3f (±2 SE %.3f–%.3f) over %d pairs\n",
                label, med, exp(m), exp(m - 2 * se), exp(m + 2 * se), n }'
}
echo
summary 9 "tripline / HAProxy req/s"
summary 10 "tripline / HAProxy p99"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg); proxies on CPU $PROXY_CPUS, wrk and upstream on CPU $LOAD_CPUS"
