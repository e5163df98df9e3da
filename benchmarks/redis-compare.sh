#!/usr/bin/env bash
# redis-compare.sh: Redis (redis-benchmark) and Granary (granary bench --local --baseline) at the same value sizes and
# concurrency, measured in turns in one run on this machine, printed side by side.
#
# Installs redis-server and redis-tools from Debian when missing (needs root or sudo), starts a throw-away
# redis-server on 127.0.0.1 and a free port (no persistence), and stops it on exit. Granary runs in-process
# (bin/granary builds it on first use) with its loopback baseline, so the same run also shows how far each is from
# what plain Java sockets move over loopback. With --rounds N every shape is measured N times, Redis and Granary
# in turn, and the table gives medians (the ratios are medians of each round's ratio), so a slow stretch of a shared
# machine that falls on one side's turn does not decide the comparison.
#
# Usage: benchmarks/redis-compare.sh [--quick] [--rounds N] [--shape PREFIX]
#   --quick         about a tenth of the requests, for a smoke run
#   --rounds N      turns per shape, 1-9 (default 1)
#   --shape PREFIX  only the shapes whose label starts with PREFIX (e.g. "1m c=1"; default: all)
# Environment: GRANARY_JAVA_OPTS is passed on to bin/granary.
set -euo pipefail

ROOT="$(cd -P "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
GRANARY="$ROOT/bin/granary"

usage() { sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

quick=0
rounds=1
only=""
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) quick=1 ;;
        --rounds)
            [ $# -ge 2 ] || { echo "redis-compare.sh: --rounds needs a number 1-9" >&2; exit 2; }
            [[ "$2" =~ ^[1-9]$ ]] || { echo "redis-compare.sh: --rounds must be 1-9, was '$2'" >&2; exit 2; }
            rounds="$2"
            shift ;;
        --shape)
            [ $# -ge 2 ] && [ -n "$2" ] || { echo "redis-compare.sh: --shape needs a label prefix" >&2; exit 2; }
            only="$2"
            shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "redis-compare.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done

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

echo "== redis-compare: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $(uname -srm), loopback only" >&2
echo "== $(redis-server --version | head -n 1)" >&2
echo "== $(java -version 2>&1 | head -n 1)" >&2
echo "== load average at start: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

rows="$WORK/rows.tsv"
: >"$rows"
measured=0
for shape in "${SHAPES[@]}"; do
    IFS='|' read -r label size rc rp rn gc gb gn gw <<<"$shape"
    if [ -n "$only" ] && [ "${label#"$only"}" = "$label" ]; then
        continue
    fi
    measured=$((measured + 1))
    if [ "$quick" = 1 ]; then
        rn=$((rn / 10))
        gn=$((gn / 10))
        gw=$((gw / 10))
    fi
    for round in $(seq 1 "$rounds"); do
        # Every turn measures Redis anew (also for a Redis shape another label used): its figure and Granary's
        # then come from the same minute of this machine.
        csv="$WORK/redis.csv"
        echo "-- $label, round $round/$rounds: redis-benchmark -t set,get -d $size -c $rc -P $rp -n $rn --csv" >&2
        redis-cli -h 127.0.0.1 -p "$PORT" flushall >/dev/null
        redis-benchmark -h 127.0.0.1 -p "$PORT" -t set,get -d "$size" -c "$rc" -n "$rn" -P "$rp" --csv \
            >"$csv" 2>/dev/null || die "redis-benchmark failed for $label"
        redis-cli -h 127.0.0.1 -p "$PORT" flushall >/dev/null
        set_rps="$(redis_rps "$csv" SET)"
        get_rps="$(redis_rps "$csv" GET)"
        [ -n "$set_rps" ] && [ -n "$get_rps" ] || die "no SET/GET rows in redis-benchmark output: $(cat "$csv")"

        json="$WORK/granary.json"
        echo "-- $label, round $round/$rounds: granary bench --local --pre-touch --baseline --json --op both" \
            "--size $size --concurrency $gc --batch $gb --count $gn --warmup $gw --warmup-seconds $warmup_seconds" \
            "--warmup-calls $warmup_calls" >&2
        "$GRANARY" bench --local --pre-touch --baseline --baseline-seconds "$baseline_seconds" --json --op both \
            --size "$size" --concurrency "$gc" --batch "$gb" --count "$gn" --warmup "$gw" \
            --warmup-seconds "$warmup_seconds" --warmup-calls "$warmup_calls" >"$json" 2>"$WORK/granary.err" ||
            die "granary bench failed for $label: $(tail -n 5 "$WORK/granary.err")"
        put_line="$(grep '"type":"granary"' "$json" | grep '"phase":"put"' | head -n 1)"
        get_line="$(grep '"type":"granary"' "$json" | grep '"phase":"get"' | head -n 1)"
        [ -n "$put_line" ] && [ -n "$get_line" ] || die "no put/get rows in granary bench output: $(cat "$json")"
        put_ops="$(json_field "$put_line" valuesPerSec)"
        get_ops="$(json_field "$get_line" valuesPerSec)"
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$label" "$size" "$round" "$set_rps" "$get_rps" \
            "$put_ops" "$get_ops" "$(json_field "$put_line" pctLimit)" "$(json_field "$get_line" pctLimit)" \
            "$(json_field "$put_line" limitGbPerSec)" "$(json_field "$get_line" limitGbPerSec)" >>"$rows"
    done
done
[ "$measured" -gt 0 ] || die "no shape's label starts with '$only' (labels: $(printf '"%s" ' "${SHAPES[@]%%|*}"))"

echo "== load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
echo
if [ "$rounds" -gt 1 ]; then
    echo "Each figure is the median of $rounds rounds (Redis then Granary in each round); put/SET and get/GET are the"
    echo "medians of each round's own ratio, with the lowest and highest round in brackets."
    echo
fi
# Medians per shape, in the order measured. Empty or "null" fields (no limit measured) print as "-".
awk -F'\t' -v rounds="$rounds" '
    function median(list,    n, a, i, j, t) {
        n = split(list, a, " ")
        if (n == 0) return ""
        for (i = 2; i <= n; i++) { t = a[i] + 0; for (j = i - 1; j >= 1 && a[j] + 0 > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    function lowest(list,    n, a, i, m) { n = split(list, a, " "); m = a[1] + 0; for (i = 2; i <= n; i++) if (a[i] + 0 < m) m = a[i] + 0; return m }
    function highest(list,    n, a, i, m) { n = split(list, a, " "); m = a[1] + 0; for (i = 2; i <= n; i++) if (a[i] + 0 > m) m = a[i] + 0; return m }
    function add(key, v) { if (v != "" && v != "null") vals[key] = vals[key] " " v }
    function pct(v) { return v == "" ? "-" : sprintf("%.1f", v) }
    function gbps(opsv, size) { return sprintf("%.3f", opsv * size / 1e9) }
    function span(key) { return rounds > 1 && vals[key] != "" ? sprintf(" [%.2f-%.2f]", lowest(vals[key]), highest(vals[key])) : "" }
    {
        if (!($1 in seen)) { seen[$1] = 1; order[++shapes] = $1; size[$1] = $2 }
        add($1 SUBSEP "set", $4); add($1 SUBSEP "get", $5); add($1 SUBSEP "put", $6); add($1 SUBSEP "gget", $7)
        add($1 SUBSEP "putpct", $8); add($1 SUBSEP "getpct", $9); add($1 SUBSEP "putlim", $10); add($1 SUBSEP "getlim", $11)
        if ($4 > 0) add($1 SUBSEP "rput", $6 / $4)
        if ($5 > 0) add($1 SUBSEP "rget", $7 / $5)
    }
    END {
        printf "%-31s | %9s %7s | %9s %7s | %9s %7s %6s | %9s %7s %6s | %17s %17s\n", "shape (value, callers, pipeline)", \
            "SET op/s", "GB/s", "GET op/s", "GB/s", "put op/s", "GB/s", "%LIM", "get op/s", "GB/s", "%LIM", "put/SET", "get/GET"
        printf "%-31s | %17s | %17s | %24s | %24s | %35s\n", "", "Redis SET", "Redis GET", "Granary put", "Granary get", \
            "Granary / Redis"
        for (i = 1; i <= shapes; i++) {
            l = order[i]; z = size[l]
            s = median(vals[l SUBSEP "set"]); g = median(vals[l SUBSEP "get"])
            p = median(vals[l SUBSEP "put"]); q = median(vals[l SUBSEP "gget"])
            rp = vals[l SUBSEP "rput"] == "" ? "-" : sprintf("%.2f", median(vals[l SUBSEP "rput"])) span(l SUBSEP "rput")
            rg = vals[l SUBSEP "rget"] == "" ? "-" : sprintf("%.2f", median(vals[l SUBSEP "rget"])) span(l SUBSEP "rget")
            printf "%-31s | %9.0f %7s | %9.0f %7s | %9.0f %7s %6s | %9.0f %7s %6s | %17s %17s\n", l, s, gbps(s, z), g, gbps(g, z), \
                p, gbps(p, z), pct(median(vals[l SUBSEP "putpct"])), q, gbps(q, z), pct(median(vals[l SUBSEP "getpct"])), rp, rg
        }
        print ""
        print "op/s = values per second; GB/s = 1e9 bytes/s of values. %LIM = Granary GB/s / loopback limit of the same shape"
        print "(plain blocking Java NIO sockets between threads, same size, callers and batch, measured in the same granary run)."
        print "Granary runs in-process (master, node and client in one JVM); Redis is one redis-server process. Shared 2-core"
        print "machine: every number includes the client, the server and the kernel on the same two cores."
        for (i = 1; i <= shapes; i++) {
            l = order[i]
            a = vals[l SUBSEP "putlim"] == "" ? "-" : sprintf("%.3f", median(vals[l SUBSEP "putlim"]))
            b = vals[l SUBSEP "getlim"] == "" ? "-" : sprintf("%.3f", median(vals[l SUBSEP "getlim"]))
            printf "loopback limit %s: put shape %s GB/s, get shape %s GB/s\n", l, a, b
        }
    }' "$rows"
if [ "$rounds" -gt 1 ]; then
    echo
    echo "Every round (label, round, SET op/s, GET op/s, put op/s, get op/s, put %LIM, get %LIM):"
    awk -F'\t' '{ printf "  %-31s %s  %10.0f %10.0f %10.0f %10.0f  %6.1f %6.1f\n", $1, $3, $4, $5, $6, $7, $8, $9 }' "$rows"
fi
