#!/usr/bin/env bash
# node-rss-soak.sh: a storage node's memory while it is full of small values and churned by evictions.
#
# Starts a master and one storage node as separate processes on 127.0.0.1 (the node with a fixed, pre-touched heap
# and a pre-touched segment), then runs `granary bench --op mixed` against them again and again for M minutes. Every
# run pre-fills 40 % of the segment with new values and reads and writes half and half, so the segment overflows and
# the master evicts all the time. Every 30 s it prints the node's RSS, RSS minus the segment, the ledgers' entries and
# heap, COMMITs refused for want of heap, and JDK direct-buffer bytes; at the end the JVM's own memory (NMT) and a
# summary. Exits 1 if a process died or the RSS grew by more than 5 % of the segment after the first sample.
#
# Usage: benchmarks/node-rss-soak.sh [--minutes M] [--segment SIZE] [--heap SIZE] [--value SIZE]
#        defaults: 10 minutes, a 2g segment, a 256m node heap, 4k values
# Environment: GRANARY_SOAK_PORT_BASE (default 17100; ports BASE+1..BASE+5 are used).
set -euo pipefail

ROOT="$(cd -P "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
GRANARY="$ROOT/bin/granary"

minutes=10
segment=2g
heap=256m
value=4k
while [ $# -gt 0 ]; do
    case "$1" in
        --minutes) minutes="${2:?--minutes needs a value}"; shift 2 ;;
        --segment) segment="${2:?--segment needs a value}"; shift 2 ;;
        --heap) heap="${2:?--heap needs a value}"; shift 2 ;;
        --value) value="${2:?--value needs a value}"; shift 2 ;;
        -h|--help) sed -n '2,13p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "node-rss-soak.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done

die() {
    echo "node-rss-soak.sh: $*" >&2
    exit 1
}

# SIZE with an optional k/m/g suffix (powers of 1024) in bytes.
bytes_of() {
    local s="${1,,}"
    case "$s" in
        *[0-9]k) echo $(( ${s%k} << 10 )) ;;
        *[0-9]m) echo $(( ${s%m} << 20 )) ;;
        *[0-9]g) echo $(( ${s%g} << 30 )) ;;
        *[0-9]) echo "$s" ;;
        *) die "not a size: '$1' (a number with an optional k, m or g)" ;;
    esac
}

command -v curl >/dev/null 2>&1 || die "needs curl (apt-get install curl) to read the admin ports"
[[ "$minutes" =~ ^[1-9][0-9]*$ ]] || die "--minutes must be a positive whole number, was '$minutes'"
segment_bytes=$(bytes_of "$segment")
value_bytes=$(bytes_of "$value")
bytes_of "$heap" >/dev/null
[ "$value_bytes" -ge 1 ] && [ "$segment_bytes" -ge $(( value_bytes * 1000 )) ] ||
    die "the segment ($segment) must hold at least 1000 values of $value"
count=$(( segment_bytes / value_bytes * 2 / 5 ))

base="${GRANARY_SOAK_PORT_BASE:-17100}"
master_port=$((base + 1)) master_admin=$((base + 2)) master_lookup=$((base + 3))
node_port=$((base + 4)) node_admin=$((base + 5))

work="$(mktemp -d)"
pids=()
# Stops every process it started: SIGTERM, then SIGKILL for one still there after 30 s (a service must stop on
# SIGTERM; one that does not is reported and fails the run instead of hanging it).
cleanup() {
    local rc=$? p deadline stuck=""
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    deadline=$((SECONDS + 30))
    for p in "${pids[@]}"; do
        while kill -0 "$p" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
        if kill -0 "$p" 2>/dev/null; then
            stuck="$stuck $p"
            if command -v jcmd >/dev/null 2>&1; then # where it hangs, for the report
                jcmd "$p" Thread.print 2>/dev/null | grep -A 12 '^"main"' >&2 || true
            fi
            kill -9 "$p" 2>/dev/null || true
        fi
    done
    wait 2>/dev/null || true
    rm -rf "$work"
    if [ -n "$stuck" ]; then
        echo "node-rss-soak.sh: process(es)$stuck did not stop within 30 s of SIGTERM (killed)" >&2
        [ "$rc" -ne 0 ] || rc=1
    fi
    exit "$rc"
}
trap cleanup EXIT

# Waits up to 120 s for an admin port's /ready (the process must stay alive meanwhile).
await_ready() {
    local port=$1 pid=$2 what=$3 deadline=$((SECONDS + 120))
    until curl -sf "http://127.0.0.1:$port/ready" >/dev/null 2>&1; do
        kill -0 "$pid" 2>/dev/null || die "$what exited during start; its log: $(tail -5 "$work/$what.log")"
        [ $SECONDS -lt $deadline ] || die "$what not ready after 120 s; its log: $(tail -5 "$work/$what.log")"
        sleep 0.5
    done
}

"$GRANARY" --version >/dev/null # builds on first use
GRANARY_JAVA_OPTS="-Xms1g -Xmx1g" "$GRANARY" master --port "$master_port" --admin-port "$master_admin" \
    --lookup-port "$master_lookup" >"$work/master.log" 2>&1 &
master=$!
pids+=("$master")
await_ready "$master_admin" "$master" master
GRANARY_JAVA_OPTS="-Xms$heap -Xmx$heap -XX:+AlwaysPreTouch -XX:NativeMemoryTracking=summary" "$GRANARY" node \
    --master "127.0.0.1:$master_port" --port "$node_port" --admin-port "$node_admin" --segment-size "$segment" \
    --pre-touch --name soak >"$work/node.log" 2>&1 &
node=$!
pids+=("$node")
await_ready "$node_admin" "$node" node

metric() { # name, from the metrics text in $2
    awk -v n="$1" '$1 == n { printf "%.0f", $2; found = 1 } END { if (!found) printf "-" }' <<<"$2"
}
rss_kib() { awk '/^VmRSS/ { print $2 }' "/proc/$node/status"; }
first_rss=""
max_rss=0
sample() {
    kill -0 "$node" 2>/dev/null || die "the node died; its log: $(tail -5 "$work/node.log")"
    local m rss
    m="$(curl -sf "http://127.0.0.1:$node_admin/metrics" || true)"
    rss=$(rss_kib)
    [ -n "$first_rss" ] || first_rss=$rss
    [ "$rss" -le "$max_rss" ] || max_rss=$rss
    printf "%6s %12d %10.1f %10s %12s %9s %10s\n" "$1" "$rss" "$(awk -v r="$rss" -v s="$segment_bytes" 'BEGIN { print (r * 1024 - s) / 1048576 }')" \
        "$(metric granary_node_ledger_entries "$m")" "$(metric granary_node_ledger_heap_bytes "$m")" \
        "$(metric granary_node_ledger_refusals_total "$m")" "$(metric 'jvm_buffer_memory_used_bytes{id="direct"}' "$m")"
}

echo "node: segment $segment, heap $heap (fixed, pre-touched); load: bench --op mixed --read-ratio 0.5 of $count x $value values per run, for $minutes min"
printf "%6s %12s %10s %10s %12s %9s %10s\n" "t(s)" "RSS(KiB)" "-SEG(MiB)" "ENTRIES" "LEDGER(B)" "REFUSED" "DIRECT(B)"
sample 0
start=$SECONDS
(
    while [ $((SECONDS - start)) -lt $((minutes * 60)) ]; do
        "$GRANARY" bench --master "127.0.0.1:$master_port" --size "$value" --batch 128 --concurrency 2 --op mixed \
            --read-ratio 0.5 --count "$count" --keep --warmup 0 --warmup-seconds 0 2>&1 | grep -E "^[0-9].* mixed " || true
    done
) >"$work/bench.log" 2>&1 &
load=$!
pids+=("$load")
while kill -0 "$load" 2>/dev/null; do
    sleep 30
    sample $((SECONDS - start))
done
wait "$load" || true
sample end

runs=$(grep -c " mixed " "$work/bench.log" || true)
totals=$(awk '{ ops += $3; errors += $4 } END { printf "%d values, %d failed", ops, errors }' "$work/bench.log")
echo "load: $runs bench runs, $totals (gets of values already evicted count as failed)"
if command -v jcmd >/dev/null 2>&1; then
    echo "node JVM (NMT, committed):"
    jcmd "$node" VM.native_memory summary 2>/dev/null |
        grep -E "^Total|^-\s+(Java Heap|GC|Metaspace|Code|Shared class space|Class|Thread|Symbol|Other) " |
        sed -E 's/^-?\s+/  /; s/reserved=[0-9]+KB, //' || true
fi
last_rss=$(rss_kib)
growth=$((max_rss - first_rss))
limit=$((segment_bytes / 1024 / 20))
echo "RSS: $first_rss KiB at start, $max_rss at most, $last_rss at the end (segment $((segment_bytes / 1024)) KiB): grew by at most $growth KiB; 5 % of the segment is $limit KiB"
[ "$growth" -le "$limit" ] || die "the node's RSS grew by more than 5 % of its segment"
