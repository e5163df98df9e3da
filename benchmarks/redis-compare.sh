#!/usr/bin/env bash
# redis-compare.sh: Redis (redis-benchmark) and Granary (granary bench --local --baseline) at the same value sizes and
# concurrency, measured one after the other in one run on this machine, printed side by side.
#
# Installs redis-server and redis-tools from Debian when missing (needs root or sudo), starts a throw-away
# redis-server on 127.0.0.1 and a free port (no persistence), and stops it on exit. Granary runs in-process
# (bin/granary builds it on first use) with its loopback baseline, so the same run also shows how far each is from
# what plain Java sockets move over loopback.
#
# Usage: benchmarks/redis-compare.sh [--quick]     (--quick: about a tenth of the requests, for a smoke run)
# Environment: GRANARY_JAVA_OPTS is passed on to bin/granary.
set -euo pipefail

ROOT="$(cd -P "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
GRANARY="$ROOT/bin/granary"

quick=0
case "${1:-}" in
    --quick) quick=1 ;;
    "") ;;
    -h|--help) sed -n '2,11p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "redis-compare.sh: unknown argument '$1' (only --quick)" >&2; exit 2 ;;
esac

die() {
    echo "redis-compare.sh: $*" >&2
    exit 1
}

# --- Redis: install if missing ----------------------------------------------------------------------------------------
if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-benchmark >/dev/null 2>&1 ||
    ! command -v redis-cli >/dev/null 2>&1; then
    echo "== installing redis-server and redis-tools from Debian" >&2
    if [ "$(id -u)" -eq 0 ]; then
        as_root=()
    elif command -v sudo >/dev/null 2>&1; then
        as_root=(sudo)
    else
        die "redis-server/redis-benchmark are missing and this user cannot install packages (not root, no sudo)"
    fi
    "${as_root[@]}" apt-get update -qq >&2
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        redis-server redis-tools >&2
    # Debian's package starts a system redis on 6379; ours runs on its own port and does not need it.
fi

# --- a free port on 127.0.0.1 ------------------------------------------------------------------------------------------
free_port() {
    local port
    for _ in $(seq 1 50); do
        port=$((20000 + RANDOM % 40000))
        # A refused connection means nothing listens there.
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            echo "$port"
            return 0
        fi
    done
    die "no free port found on 127.0.0.1"
}

PORT="$(free_port)"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/redis-compare.XXXXXX")"
REDIS_PID=""

cleanup() {
    if [ -n "$REDIS_PID" ] && kill -0 "$REDIS_PID" 2>/dev/null; then
        kill "$REDIS_PID" 2>/dev/null || true
        wait "$REDIS_PID" 2>/dev/null || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

redis-server --bind 127.0.0.1 --port "$PORT" --save '' --appendonly no --daemonize no \
    --dir "$WORK" --logfile "$WORK/redis.log" &
REDIS_PID=$!
for _ in $(seq 1 100); do
    if [ "$(redis-cli -h 127.0.0.1 -p "$PORT" ping 2>/dev/null || true)" = "PONG" ]; then
        break
    fi
    kill -0 "$REDIS_PID" 2>/dev/null || die "redis-server exited at start: $(tail -n 5 "$WORK/redis.log" 2>/dev/null)"
    sleep 0.1
done
[ "$(redis-cli -h 127.0.0.1 -p "$PORT" ping 2>/dev/null || true)" = "PONG" ] ||
    die "redis-server did not answer PING on 127.0.0.1:$PORT within 10 s"

# --- the shapes ---------------------------------------------------------------------------------------------------------
# label | value bytes | Redis connections | Redis pipeline | Redis requests | Granary concurrency | Granary batch |
# Granary values per phase | Granary warmup values. Redis' C x P requests in flight are matched by Granary's
# C callers x batch values. The 1 MiB phases hold 8,000-10,000 values (about 1-2 s each at this machine's rates; the
# segment is sized to them): with 2,000-3,000 (0.3-0.5 s) one stall of this shared VM could halve a phase's figure.
SHAPES=(
    "1m c=1|1048576|1|1|6000|1|1|8000|2000"
    "1m c=8|1048576|8|1|12000|8|1|10000|2048"
    "1m c=1 P/batch=8|1048576|1|8|12000|1|8|10000|2048"
    "4k c=1|4096|1|1|100000|1|1|20000|20000"
    "4k c=8 P/batch=16|4096|8|16|2000000|8|16|200000|200000"
    "4k c=1 batch=128 (vs P=16 c=8)|4096|8|16|2000000|1|128|200000|200000"
)
baseline_seconds=3
warmup_seconds=15
warmup_calls=0
if [ "$quick" = 1 ]; then
    baseline_seconds=1
    warmup_seconds=3
    warmup_calls=0
fi

# field FILE KEY: KEY's value in the first JSON line of FILE (flat objects, as granary bench --json prints them).
json_field() {
    sed -n "s/.*\"$2\":\"\{0,1\}\([^,\"}]*\)\"\{0,1\}[,}].*/\1/p" <<<"$1" | head -n 1
}

# redis_rps CSV TEST: requests/s of TEST (SET or GET) in redis-benchmark --csv output.
redis_rps() {
    awk -F'","' -v t="\"$2" '$1 == t { gsub(/"/, "", $2); print $2; exit }' "$1"
}

gbps() { awk -v ops="$1" -v size="$2" 'BEGIN { printf "%.3f", ops * size / 1e9 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
ops() { awk -v v="$1" 'BEGIN { printf "%.0f", v }'; }
pct() { awk -v v="$1" 'BEGIN { if (v == "" || v == "null") print "-"; else printf "%.1f", v }'; }
num3() { awk -v v="$1" 'BEGIN { if (v == "" || v == "null") print "-"; else printf "%.3f", v }'; }

echo "== redis-compare: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $(uname -srm), loopback only" >&2
echo "== $(redis-server --version | head -n 1)" >&2
echo "== $(java -version 2>&1 | head -n 1)" >&2
echo "== load average at start: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

results=()
declare -A redis_done=()
for shape in "${SHAPES[@]}"; do
    IFS='|' read -r label size rc rp rn gc gb gn gw <<<"$shape"
    if [ "$quick" = 1 ]; then
        rn=$((rn / 10))
        gn=$((gn / 10))
        gw=$((gw / 10))
    fi
    # The same Redis shape is measured once per run.
    csv="$WORK/redis-$size-$rc-$rp.csv"
    if [ -z "${redis_done[$csv]:-}" ]; then
        echo "-- $label: redis-benchmark -t set,get -d $size -c $rc -P $rp -n $rn --csv" >&2
        redis-cli -h 127.0.0.1 -p "$PORT" flushall >/dev/null
        redis-benchmark -h 127.0.0.1 -p "$PORT" -t set,get -d "$size" -c "$rc" -n "$rn" -P "$rp" --csv \
            >"$csv" 2>/dev/null || die "redis-benchmark failed for $label"
        redis-cli -h 127.0.0.1 -p "$PORT" flushall >/dev/null
        redis_done[$csv]=1
    fi
    set_rps="$(redis_rps "$csv" SET)"
    get_rps="$(redis_rps "$csv" GET)"
    [ -n "$set_rps" ] && [ -n "$get_rps" ] || die "no SET/GET rows in redis-benchmark output: $(cat "$csv")"

    json="$WORK/granary.json"
    echo "-- $label: granary bench --local --pre-touch --baseline --json --op both --size $size --concurrency $gc" \
        "--batch $gb --count $gn --warmup $gw --warmup-seconds $warmup_seconds --warmup-calls $warmup_calls" >&2
    "$GRANARY" bench --local --pre-touch --baseline --baseline-seconds "$baseline_seconds" --json --op both \
        --size "$size" --concurrency "$gc" --batch "$gb" --count "$gn" --warmup "$gw" \
        --warmup-seconds "$warmup_seconds" --warmup-calls "$warmup_calls" >"$json" 2>"$WORK/granary.err" ||
        die "granary bench failed for $label: $(tail -n 5 "$WORK/granary.err")"
    put_line="$(grep '"type":"granary"' "$json" | grep '"phase":"put"' | head -n 1)"
    get_line="$(grep '"type":"granary"' "$json" | grep '"phase":"get"' | head -n 1)"
    [ -n "$put_line" ] && [ -n "$get_line" ] || die "no put/get rows in granary bench output: $(cat "$json")"
    put_ops="$(json_field "$put_line" valuesPerSec)"
    get_ops="$(json_field "$get_line" valuesPerSec)"
    results+=("$label|$size|$set_rps|$get_rps|$put_ops|$get_ops|$(json_field "$put_line" pctLimit)|$(json_field \
        "$get_line" pctLimit)|$(json_field "$put_line" limitGbPerSec)|$(json_field "$get_line" limitGbPerSec)")
done

echo "== load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
echo
printf '%-31s | %9s %7s | %9s %7s | %9s %7s %6s | %9s %7s %6s | %7s %7s\n' "shape (value, callers, pipeline)" \
    "SET op/s" "GB/s" "GET op/s" "GB/s" "put op/s" "GB/s" "%LIM" "get op/s" "GB/s" "%LIM" "put/SET" "get/GET"
printf '%-31s | %17s | %17s | %24s | %24s | %15s\n' "" "Redis SET" "Redis GET" "Granary put" "Granary get" \
    "Granary / Redis"
for row in "${results[@]}"; do
    IFS='|' read -r label size set_rps get_rps put_ops get_ops put_pct get_pct put_lim get_lim <<<"$row"
    printf '%-31s | %9s %7s | %9s %7s | %9s %7s %6s | %9s %7s %6s | %7s %7s\n' "$label" \
        "$(ops "$set_rps")" "$(gbps "$set_rps" "$size")" "$(ops "$get_rps")" "$(gbps "$get_rps" "$size")" \
        "$(ops "$put_ops")" "$(gbps "$put_ops" "$size")" "$(pct "$put_pct")" \
        "$(ops "$get_ops")" "$(gbps "$get_ops" "$size")" "$(pct "$get_pct")" \
        "$(ratio "$put_ops" "$set_rps")" "$(ratio "$get_ops" "$get_rps")"
done
echo
echo "op/s = values per second; GB/s = 1e9 bytes/s of values. %LIM = Granary GB/s / loopback limit of the same shape"
echo "(plain blocking Java NIO sockets between threads, same size, callers and batch, measured in the same granary run)."
echo "Granary runs in-process (master, node and client in one JVM); Redis is one redis-server process. Shared 2-core"
echo "machine: every number includes the client, the server and the kernel on the same two cores."
for row in "${results[@]}"; do
    IFS='|' read -r label size _ _ _ _ _ _ put_lim get_lim <<<"$row"
    echo "loopback limit $label: put shape $(num3 "$put_lim") GB/s, get shape $(num3 "$get_lim") GB/s"
done
