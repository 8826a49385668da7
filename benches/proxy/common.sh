# Shared by benches/proxy/run.sh and benches/proxy/instructions.sh
# (sourced, not run): where things are built, the release build, a
# scratch directory whose processes are killed on exit, waiting for a
# port, and the protections both benchmarks give `tripline proxy`.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
PROTECT=${PROTECT:-1}

build_release() { # bench examples to build besides the tripline binary…
    local examples=() e
    for e in "$@"; do examples+=(--example "$e"); done
    echo "building (release)" >&2
    (cd "$ROOT" && cargo build --release -q -p tripline-cli --bin tripline \
        && cargo build --release -q -p tripline-benches --features proxy "${examples[@]}")
}

WORK=$(mktemp -d)
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

wait_port() { # port: something accepts connections on it
    for _ in $(seq 100); do
        (echo >"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.1
    done
    echo "nothing listens on $1" >&2
    return 1
}

wait_answer() { # port: something answers HTTP on it
    for _ in $(seq 600); do
        curl -s -o /dev/null "http://127.0.0.1:$1/" && return 0
        sleep 0.1
    done
    echo "nothing answers on $1" >&2
    return 1
}

# The benchmark's protections (PROTECT=1): a route breaker and a retry
# budget on the route, outlier detection on the cluster.
ROUTE_PROTECTION=""
CLUSTER_PROTECTION=""
if [[ $PROTECT == 1 ]]; then
    ROUTE_PROTECTION='breaker = { window = { kind = "count", size = 100 }, minimum_calls = 20, failure_rate_threshold = 0.5, open_duration = "5s" }
retry = { attempts = 2, budget = { ratio = 0.2 } }'
    CLUSTER_PROTECTION='outlier = { interval = "1s", consecutive_failures = { threshold = 5 } }'
fi
# HEALTH=1: an active HTTP health check on the cluster too (off the
# request path; the path only reads the endpoint's routability).
if [[ ${HEALTH:-0} == 1 ]]; then
    CLUSTER_PROTECTION+='
health_check = { http = { path = "/", expect = [200] }, interval = "1s", timeout = "500ms" }'
fi
# LIMITS=1: every overflow limit on the cluster too, set high enough
# never to refuse (the path pays for admission, not for refusals).
if [[ ${LIMITS:-0} == 1 ]]; then
    CLUSTER_PROTECTION+='
limits = { max_requests = 100000, max_connections = 100000, max_pending_requests = 1000, max_retries = 1000 }
endpoint_limits = { max_concurrent = 100000 }'
fi

# tripline as the benchmarks measure it: one route to one endpoint with
# the protections above; the [proxy] section's lines and an admin listener
# (when a port is given) as each benchmark needs.
tripline_config() { # file listen_port upstream_port [proxy_lines] [admin_port]
    {
        if [[ -n ${4:-} ]]; then printf '[proxy]\n%s\n\n' "$4"; fi
        printf '[[listeners]]\naddress = "127.0.0.1:%s"\n\n' "$2"
        if [[ -n ${5:-} ]]; then printf '[admin]\naddress = "127.0.0.1:%s"\n\n' "$5"; fi
        cat <<EOF
[[routes]]
name = "bench"
cluster = "upstream"
$ROUTE_PROTECTION

[clusters.upstream]
endpoints = ["127.0.0.1:$3"]
$CLUSTER_PROTECTION
EOF
    } >"$1"
}

# Settings of the load benchmarks: clients never time out, and the pool
# keeps every connection the load opens.
BENCH_PROXY_LINES='header_read_timeout = "300s"
keep_alive_timeout = "300s"
pool_max_idle_per_endpoint = 256'

# HAProxy as the benchmarks measure it: `mode http`, keep-alive to the
# upstream, nothing else.
haproxy_config() { # file listen_port upstream_port threads [maxconn]
    {
        echo "global"
        echo "    nbthread $4"
        [[ -n ${5:-} ]] && echo "    maxconn $5"
        cat <<EOF

defaults
    mode http
    timeout connect 1s
    timeout client 300s
    timeout server 30s
    timeout http-keep-alive 300s

frontend bench
    bind 127.0.0.1:$2
    default_backend upstream

backend upstream
    server up 127.0.0.1:$3
EOF
    } >"$1"
}
