#!/usr/bin/env bash
# The proxy benchmark: one hyper upstream on loopback, measured in the same
# run directly, through `tripline proxy` (route breaker, cluster outlier
# detection and retry budget on), through HAProxy and through nginx (both
# plain reverse proxies keeping connections to the upstream alive).
#
# For each: wrk -t2 -c64 -d10s --latency (after a 2 s warm-up), req/s,
# p50/p99, the proxy's CPU seconds per 1 000 requests (utime + stime of
# every process of the proxy, from /proc/PID/stat before and after; also
# split into user and kernel microseconds per request, to tell the proxy's
# own work from the kernel's), and the resident memory of each proxy
# holding 10 000 idle keep-alive connections.
#
# The proxies are measured in ROUNDS rounds, in turn (tripline, HAProxy,
# nginx; the next round in the opposite order), each started fresh for its
# turn and stopped after it, so that nothing of one runs beside another
# and a drift of the shared machine during a run falls on all of them.
# The report ends with tripline's ratio to HAProxy in each round.
#
# A benchmark, not a test: CI does not run it. Needs root (or sudo) the
# first time, to install wrk, haproxy and nginx-light from Debian.
#
# Environment:
#   PROXY_CPUS   CPUs the proxies run on (taskset list), default "1"
#   LOAD_CPUS    CPUs wrk and the upstream run on, default "0"
#                (PROXY_CPUS=0,1 LOAD_CPUS=0,1: nothing pinned apart)
#   THREADS      threads / workers of every proxy, default 1
#   RUNTIME      tripline's --runtime: per-core (default) or multi-thread
#   DURATION     wrk duration, default 10s
#   CONNECTIONS  wrk connections, default 64
#   IDLE         idle connections for the memory figure, default 10000
#   PROTECT      1 (default): route breaker, outlier detection and retry
#                budget on; 0: tripline as a plain proxy (what they cost)
#   ROUNDS       rounds of the proxies' measurements, default 3
#   ONLY         space-separated subset of: direct tripline haproxy nginx idle
#   CARGO_TARGET_DIR  where cargo builds (default: target/ of the workspace)
set -euo pipefail

# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"
PROXY_CPUS=${PROXY_CPUS:-1}
LOAD_CPUS=${LOAD_CPUS:-0}
THREADS=${THREADS:-1}
RUNTIME=${RUNTIME:-per-core}
DURATION=${DURATION:-10s}
CONNECTIONS=${CONNECTIONS:-64}
IDLE=${IDLE:-10000}
ROUNDS=${ROUNDS:-3}
ONLY=${ONLY:-direct tripline haproxy nginx idle}

UPSTREAM_PORT=18080
TRIPLINE_PORT=18081
HAPROXY_PORT=18082
NGINX_PORT=18083
ADMIN_PORT=18091

want() { [[ " $ONLY " == *" $1 "* ]]; }
LOAD_AT_START=$(cut -d" " -f1-3 /proc/loadavg)

# --- tools -----------------------------------------------------------------
missing=()
command -v wrk >/dev/null || missing+=(wrk)
command -v haproxy >/dev/null || missing+=(haproxy)
command -v nginx >/dev/null || missing+=(nginx-light)
if ((${#missing[@]})); then
    SUDO=""; [[ $(id -u) == 0 ]] || SUDO=sudo
    echo "installing ${missing[*]}" >&2
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

build_release proxy-upstream proxy-idle
TRIPLINE=$TARGET/release/tripline
UPSTREAM=$TARGET/release/examples/proxy-upstream
IDLER=$TARGET/release/examples/proxy-idle

# 10 000 idle connections need descriptors: the client's, each proxy's.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
FD_LIMIT=$(ulimit -n)
# HAProxy reserves two descriptors per connection (client and server side)
# and refuses to start when maxconn does not fit the limit.
HAPROXY_MAXCONN=$(( (FD_LIMIT - 300) / 2 < IDLE + 100 ? (FD_LIMIT - 300) / 2 : IDLE + 100 ))

# CPU ticks of the given pids and their children: "user kernel"
# (utime and stime).
ticks() {
    local user=0 kernel=0 pid
    for pid in "$@" $(for p in "$@"; do pgrep -P "$p" || true; done); do
        [[ -r /proc/$pid/stat ]] || continue
        # Fields after the command (which may hold spaces): utime is 14, stime 15.
        read -r -a f <<<"$(sed 's/^.*) //' "/proc/$pid/stat")"
        user=$((user + f[11]))
        kernel=$((kernel + f[12]))
    done
    echo "$user $kernel"
}

rss_kib() { # pids… (children included)
    local total=0 pid
    for pid in "$@" $(for p in "$@"; do pgrep -P "$p" || true; done); do
        total=$((total + $(awk '/^VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)))
    done
    echo "$total"
}

fds() { # pids…
    local total=0 pid
    for pid in "$@" $(for p in "$@"; do pgrep -P "$p" || true; done); do
        total=$((total + $(ls "/proc/$pid/fd" 2>/dev/null | wc -l)))
    done
    echo "$total"
}

to_ms() { # wrk's "1.23ms" / "456.00us" / "1.01s" → ms
    awk -v v="$1" 'BEGIN {
        n = v + 0; u = v; sub(/^[0-9.]+/, "", u);
        if (u == "us") n /= 1000; else if (u == "s") n *= 1000;
        printf "%.3f", n }'
}

HZ=$(getconf CLK_TCK)
ROWS=()

declare -A RPS P99
measure() { # name port pids…  (sets RPS[name] and P99[name])
    local name=$1 port=$2; shift 2
    local load=(taskset -c "$LOAD_CPUS" wrk -t2 -c"$CONNECTIONS")
    "${load[@]}" -d2s "http://127.0.0.1:$port/" >/dev/null
    local before after out
    before=$( (($#)) && ticks "$@" || echo "0 0")
    out=$("${load[@]}" -d"$DURATION" --latency "http://127.0.0.1:$port/")
    after=$( (($#)) && ticks "$@" || echo "0 0")
    echo "$out" >"$WORK/wrk-$name.txt"
    local rps p50 p99 requests errors cpu
    rps=$(awk '/^Requests\/sec/ {print $2}' <<<"$out")
    p50=$(to_ms "$(awk '$1 == "50%" {print $2}' <<<"$out")")
    p99=$(to_ms "$(awk '$1 == "99%" {print $2}' <<<"$out")")
    requests=$(awk '/requests in/ {print $1}' <<<"$out")
    errors=$(awk '/Non-2xx/ {n += $NF} /Socket errors/ {gsub(/,/, ""); n += $4 + $6 + $8 + $10} END {print n + 0}' <<<"$out")
    local user=– kernel=– cpu=–
    if (($#)); then
        read -r user kernel < <(awk -v b="$before" -v a="$after" -v hz="$HZ" -v r="$requests" \
            'BEGIN {split(b, x, " "); split(a, y, " ");
                    printf "%.2f %.2f\n", (y[1] - x[1]) / hz / r * 1e6, (y[2] - x[2]) / hz / r * 1e6}')
        cpu=$(awk -v u="$user" -v k="$kernel" 'BEGIN {printf "%.4f", (u + k) / 1000}')
    fi
    RPS[$name]=$rps
    P99[$name]=$p99
    ROWS+=("| $name | $rps | $p50 | $p99 | $cpu | $user | $kernel | $errors |")
    echo "$name: $rps req/s, p50 $p50 ms, p99 $p99 ms, $cpu CPU s/1000 req ($user µs user, $kernel µs kernel a request), $errors errors" >&2
}

idle_memory() { # name port pids…
    local name=$1 port=$2; shift 2
    local before after held
    before=$(rss_kib "$@")
    "$IDLER" "127.0.0.1:$port" "$IDLE" >"$WORK/idle-$name.txt" 2>&1 &
    local idler=$!
    for _ in $(seq 600); do
        grep -q holding "$WORK/idle-$name.txt" && break
        kill -0 "$idler" 2>/dev/null || break
        sleep 0.1
    done
    sleep 1
    after=$(rss_kib "$@")
    held=$(fds "$@")
    kill "$idler" 2>/dev/null || true
    wait "$idler" 2>/dev/null || true
    local holding
    holding=$(awk '/holding/ {print $3}' "$WORK/idle-$name.txt")
    holding=${holding:-0}
    IDLE_ROWS+=("| $name | $((before / 1024)) | $((after / 1024)) | $(awk -v a="$after" -v b="$before" -v n="$holding" 'BEGIN {printf "%.1f", n ? (a - b) / n : 0}') | $holding | $held |")
    echo "$name: RSS $((before / 1024)) MiB idle, $((after / 1024)) MiB holding $holding connections ($held descriptors open)" >&2
}
IDLE_ROWS=()

# --- upstream --------------------------------------------------------------
taskset -c "$LOAD_CPUS" "$UPSTREAM" "127.0.0.1:$UPSTREAM_PORT" 1 >"$WORK/upstream.log" 2>&1 &
PIDS+=($!)
wait_port $UPSTREAM_PORT
want direct && measure direct $UPSTREAM_PORT

# --- tripline --------------------------------------------------------------
tripline_config "$WORK/tripline.toml" "$TRIPLINE_PORT" "$UPSTREAM_PORT" "$BENCH_PROXY_LINES" "$ADMIN_PORT"
start_tripline() { # sets STARTED
    taskset -c "$PROXY_CPUS" "$TRIPLINE" proxy --config "$WORK/tripline.toml" \
        --threads "$THREADS" --runtime "$RUNTIME" >>"$WORK/tripline.log" 2>&1 &
    STARTED=$!
    PIDS+=("$STARTED")
    wait_port $TRIPLINE_PORT
}

# --- HAProxy ---------------------------------------------------------------
haproxy_config "$WORK/haproxy.cfg" "$HAPROXY_PORT" "$UPSTREAM_PORT" "$THREADS" "$HAPROXY_MAXCONN"
start_haproxy() { # sets STARTED
    taskset -c "$PROXY_CPUS" haproxy -db -f "$WORK/haproxy.cfg" >>"$WORK/haproxy.log" 2>&1 &
    STARTED=$!
    PIDS+=("$STARTED")
    wait_port $HAPROXY_PORT
}

# --- nginx -----------------------------------------------------------------
mkdir -p "$WORK/nginx"
cat >"$WORK/nginx.conf" <<EOF
worker_processes $THREADS;
worker_rlimit_nofile $FD_LIMIT;
pid $WORK/nginx.pid;
error_log $WORK/nginx-error.log warn;
events { worker_connections $((FD_LIMIT - 100)); }
http {
    access_log off;
    client_body_temp_path $WORK/nginx;
    proxy_temp_path $WORK/nginx;
    keepalive_timeout 300s;
    keepalive_requests 100000000;
    upstream upstream {
        server 127.0.0.1:$UPSTREAM_PORT;
        keepalive 256;
        keepalive_requests 100000000;
    }
    server {
        listen 127.0.0.1:$NGINX_PORT;
        location / {
            proxy_pass http://upstream;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
    }
}
EOF
start_nginx() { # sets STARTED
    taskset -c "$PROXY_CPUS" nginx -c "$WORK/nginx.conf" -g 'daemon off;' >>"$WORK/nginx.log" 2>&1 &
    STARTED=$!
    PIDS+=("$STARTED")
    wait_port $NGINX_PORT
}

stop() { # pid: stopped, and its port free for the next start
    kill "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
}

port_of() { # target
    case $1 in tripline) echo $TRIPLINE_PORT ;; haproxy) echo $HAPROXY_PORT ;; nginx) echo $NGINX_PORT ;; esac
}

label_of() { # target round
    case $1 in
        tripline) echo "tripline ($RUNTIME, $THREADS thread$([[ $PROTECT == 1 ]] || echo ", unprotected")), round $2" ;;
        haproxy) echo "HAProxy ($THREADS thread), round $2" ;;
        nginx) echo "nginx ($THREADS worker), round $2" ;;
    esac
}

# --- the rounds --------------------------------------------------------------
for round in $(seq "$ROUNDS"); do
    order=(tripline haproxy nginx)
    ((round % 2)) || order=(nginx haproxy tripline)
    for target in "${order[@]}"; do
        want "$target" || continue
        "start_$target"
        measure "$(label_of "$target" "$round")" "$(port_of "$target")" "$STARTED"
        stop "$STARTED"
    done
done

if want idle; then
    for target in tripline haproxy nginx; do
        "start_$target"
        idle_memory "$target" "$(port_of "$target")" "$STARTED"
        stop "$STARTED"
    done
fi

# --- report ----------------------------------------------------------------
echo
echo "load average at the start: $LOAD_AT_START, at the end: $(cut -d' ' -f1-3 /proc/loadavg); proxies on CPU $PROXY_CPUS, wrk and upstream on CPU $LOAD_CPUS"
echo
echo "| target | req/s | p50 ms | p99 ms | proxy CPU s / 1 000 req | of it user µs / req | kernel µs / req | errors |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
printf '%s\n' "${ROWS[@]}"
if want tripline && want haproxy; then
    echo
    echo "| round | tripline / HAProxy req/s | tripline / HAProxy p99 |"
    echo "|---|---:|---:|"
    for round in $(seq "$ROUNDS"); do
        t=$(label_of tripline "$round") h=$(label_of haproxy "$round")
        awk -v r="$round" -v tr="${RPS[$t]}" -v hr="${RPS[$h]}" -v tp="${P99[$t]}" -v hp="${P99[$h]}" \
            'BEGIN {printf "| %d | %.2f× | %.2f× |\n", r, tr / hr, tp / hp}'
    done
fi
if ((${#IDLE_ROWS[@]})); then
    echo
    echo "| proxy | RSS before MiB | RSS with the idle connections MiB | KiB per connection | connections held (of $IDLE) | descriptors open |"
    echo "|---|---:|---:|---:|---:|---:|"
    printf '%s\n' "${IDLE_ROWS[@]}"
fi
