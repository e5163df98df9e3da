#!/usr/bin/env bash
# process-cpu.sh: CPU time per value of the master, a storage node and the bench client, as separate processes.
#
# Starts a master and one storage node on 127.0.0.1 (free ports, fixed pre-touched 2 GiB heaps, the node's segment
# pre-touched), runs `granary bench --master ... --op both --keep` with the given bench flags, samples each process's
# CPU time (/proc/PID/stat, user + system) every 50 ms, and prints per measured phase the values/s and the CPU
# microseconds per value each process spent. CPU per value moves much less between runs than values/s does on a shared
# machine, so it shows what a change costs or saves where throughput alone drowns in noise. The phases are placed by
# time: the put phase from the bench's "warmup:" line on for its SECONDS, the get phase right after it.
#
# Usage: benchmarks/process-cpu.sh [--master-java-opts OPTS] [--node-java-opts OPTS] [--master-args FLAGS]
#                                   [--segment SIZE] [-- BENCH FLAGS]
#        default bench flags: --size 4KiB --batch 128 --concurrency 2 --count 1536000; default segment 10g
# --master-args adds master flags (e.g. "--data-tokens false").
# Example (the JVM's own G1 refinement on the master, against bin/granary's settings, docs/benchmarks.md):
#   benchmarks/process-cpu.sh --master-java-opts "-XX:+G1UseAdaptiveConcRefinement -XX:G1ConcRefinementGreenZone=0 \
#       -XX:G1ConcRefinementYellowZone=0 -XX:G1ConcRefinementRedZone=0"
set -euo pipefail

ROOT="$(cd -P "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
GRANARY="$ROOT/bin/granary"

master_opts=""
node_opts=""
master_args=""
segment=10g
while [ $# -gt 0 ]; do
    case "$1" in
        --master-java-opts) master_opts="${2?--master-java-opts needs a value}"; shift 2 ;;
        --node-java-opts) node_opts="${2?--node-java-opts needs a value}"; shift 2 ;;
        --master-args) master_args="${2?--master-args needs a value}"; shift 2 ;;
        --segment) segment="${2:?--segment needs a value}"; shift 2 ;;
        --) shift; break ;;
        -h|--help) sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "process-cpu.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
if [ $# -eq 0 ]; then
    set -- --size 4KiB --batch 128 --concurrency 2 --count 1536000
fi

work="$(mktemp -d)"
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

await_line() { # file pattern pid what
    local deadline=$((SECONDS + 120))
    until grep -q "$2" "$1" 2>/dev/null; do
        kill -0 "$3" 2>/dev/null || { echo "process-cpu.sh: the $4 exited:" >&2; tail -n 20 "$1" >&2; exit 1; }
        [ "$SECONDS" -lt "$deadline" ] || { echo "process-cpu.sh: the $4 is not ready after 120 s" >&2; exit 1; }
        sleep 0.05
    done
}

GRANARY_JAVA_OPTS="-Xms2g -Xmx2g -XX:+AlwaysPreTouch $master_opts" \
    "$GRANARY" master --port 0 --lookup-port 0 --admin-port -1 $master_args > "$work/master.log" 2>&1 &
pids+=($!); master_pid=$!
await_line "$work/master.log" "^granary master ready" "$master_pid" master
master_addr="$(grep -o "^granary master ready grpc=[^ ]*" "$work/master.log" | cut -d= -f2)"

GRANARY_JAVA_OPTS="-Xms2g -Xmx2g -XX:+AlwaysPreTouch $node_opts" \
    "$GRANARY" node --master "$master_addr" --port 0 --admin-port -1 --segment-size "$segment" --pre-touch \
    > "$work/node.log" 2>&1 &
pids+=($!); node_pid=$!
await_line "$work/node.log" "^granary node ready" "$node_pid" node

"$GRANARY" bench --master "$master_addr" --keep --op both "$@" > "$work/bench.log" 2>&1 &
bench_pid=$!
pids+=("$bench_pid")
await_line "$work/bench.log" "^warmup:" "$bench_pid" bench
# bin/granary execs java, so these pids are the JVMs themselves.
cpu() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }
start="$(date +%s.%N)"
while kill -0 "$bench_pid" 2>/dev/null; do
    echo "$(date +%s.%N) $(cpu "$master_pid") $(cpu "$node_pid") $(cpu "$bench_pid")"
    sleep 0.05
done > "$work/cpu.txt"
bench_rc=0
wait "$bench_pid" || bench_rc=$?
cat "$work/bench.log"
if [ "$bench_rc" -ne 0 ]; then
    echo "process-cpu.sh: the bench failed with exit code $bench_rc" >&2
    exit 1
fi

awk -v start="$start" -v hz="$(getconf CLK_TCK)" -v n=0 -v k=0 '
    FNR == NR { t[n] = $1; m[n] = $2; d[n] = $3; b[n] = $4; n++; next }
    $2 ~ /^(put|get)$/ && $3 ~ /^[0-9]+$/ { ops[k] = $3; secs[k] = $5; rate[k] = $6; phase[k] = $2; k++ }
    function at(col, x,   i, f) {
        for (i = 1; i < n && t[i] < x; i++) {}
        if (i >= n) i = n - 1
        f = (t[i] > t[i - 1]) ? (x - t[i - 1]) / (t[i] - t[i - 1]) : 0
        if (col == 1) return m[i - 1] + (m[i] - m[i - 1]) * f
        if (col == 2) return d[i - 1] + (d[i] - d[i - 1]) * f
        return b[i - 1] + (b[i] - b[i - 1]) * f
    }
    END {
        if (n < 2) { print "process-cpu.sh: too few CPU samples" > "/dev/stderr"; exit 1 }
        from = start
        for (j = 0; j < k; j++) {
            to = from + secs[j]
            printf "cpu: %s %.0f values/s; CPU us per value: master %.2f, node %.2f, bench %.2f\n", phase[j], rate[j],
                (at(1, to) - at(1, from)) / hz / ops[j] * 1e6, (at(2, to) - at(2, from)) / hz / ops[j] * 1e6,
                (at(3, to) - at(3, from)) / hz / ops[j] * 1e6
            from = to
        }
    }' "$work/cpu.txt" "$work/bench.log"
