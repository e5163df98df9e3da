#!/usr/bin/env bash
# bench-series.sh: runs `granary bench` several times, each run in a JVM of its own, and prints every run's put and
# get values/s with their median, lowest and highest, and how many runs reached the targets. On a shared machine whose
# speed drifts within minutes, a target is judged on such a series, not on one run.
#
# Usage: benchmarks/bench-series.sh [--runs N] [--put-target V] [--get-target V] [-- BENCH-ARGS...]
#   --runs N          runs in the series, 1-99 (default 8)
#   --put-target V    puts/s a run must reach to count (default 300000, issue 4's 4 KiB x 128 target)
#   --get-target V    gets/s likewise (default 500000)
#   BENCH-ARGS        the bench's arguments (default: the 4 KiB x 128 target shape, four callers:
#                     --local --pre-touch --size 4KiB --batch 128 --concurrency 4 --op both --count 1024000);
#                     --json is added.
# Environment: GRANARY_JAVA_OPTS is passed on to bin/granary.
set -euo pipefail

ROOT="$(cd -P "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
GRANARY="$ROOT/bin/granary"

usage() { sed -n '2,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
fail() { echo "bench-series.sh: $*" >&2; exit 2; }
is_count() { [[ "$1" =~ ^[0-9]+$ ]]; }

runs=8
put_target=300000
get_target=500000
while [ $# -gt 0 ]; do
    case "$1" in
        --runs)
            [ $# -ge 2 ] && is_count "$2" && [ "$2" -ge 1 ] && [ "$2" -le 99 ] || fail "--runs must be 1-99"
            runs="$2"; shift ;;
        --put-target)
            [ $# -ge 2 ] && is_count "$2" || fail "--put-target must be a whole number of values/s"
            put_target="$2"; shift ;;
        --get-target)
            [ $# -ge 2 ] && is_count "$2" || fail "--get-target must be a whole number of values/s"
            get_target="$2"; shift ;;
        --) shift; break ;;
        -h|--help) usage; exit 0 ;;
        *) fail "unknown argument '$1' (see --help)" ;;
    esac
    shift
done
if [ $# -eq 0 ]; then
    set -- --local --pre-touch --size 4KiB --batch 128 --concurrency 4 --op both --count 1024000
fi

WORK="$(mktemp -d "${TMPDIR:-/tmp}/bench-series.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

# value_of LINE KEY: KEY's value in one flat JSON object as granary bench --json prints it.
value_of() {
    sed -n "s/.*\"$2\":\"\{0,1\}\([^,\"}]*\)\"\{0,1\}[,}].*/\1/p" <<<"$1" | head -n 1
}

echo "== bench-series: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== $runs runs of: granary bench $* --json"
: >"$WORK/rows"
for run in $(seq 1 "$runs"); do
    "$GRANARY" bench "$@" --json >"$WORK/out.json" 2>"$WORK/err" ||
        { echo "bench-series.sh: run $run failed: $(tail -n 5 "$WORK/err")" >&2; exit 1; }
    put="$(value_of "$(grep '"type":"granary"' "$WORK/out.json" | grep '"phase":"put"' | head -n 1)" valuesPerSec)"
    get="$(value_of "$(grep '"type":"granary"' "$WORK/out.json" | grep '"phase":"get"' | head -n 1)" valuesPerSec)"
    [ -n "$put$get" ] || { echo "bench-series.sh: run $run printed no put or get row" >&2; exit 1; }
    printf '%s\t%s\t%s\n' "$(date -u +%H:%M:%S)" "${put:--}" "${get:--}" | tee -a "$WORK/rows" |
        awk -F'\t' -v r="$run" 'function v(x) { return x == "-" ? "-" : sprintf("%.0f", x) }
            { printf "run %2d at %s: put %s values/s, get %s values/s\n", r, $1, v($2), v($3) }'
done

awk -F'\t' -v pt="$put_target" -v gt="$get_target" '
    function summary(name, list, n, target,    a, i, j, t, med, met) {
        if (n == 0) return
        split(list, a, " ")
        for (i = 2; i <= n; i++) { t = a[i] + 0; for (j = i - 1; j >= 1 && a[j] + 0 > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
        med = n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
        met = 0
        for (i = 1; i <= n; i++) if (a[i] + 0 >= target) met++
        printf "%s: median %.0f values/s, lowest %.0f, highest %.0f; %d of %d runs at %d or more\n", name, med, a[1], a[n], \
            met, n, target
    }
    $2 != "-" { puts = puts " " $2; np++ }
    $3 != "-" { gets = gets " " $3; ng++ }
    END { summary("put", puts, np, pt); summary("get", gets, ng, gt) }' "$WORK/rows"
