#!/usr/bin/env bash
# ab-pairs.sh: compares two builds of Granary with `granary bench`, run in pairs, a JVM each run, the order alternating
# A B, B A, A B, ... so that neither build always runs first: on this project's shared VMs the second run of a pair was
# the faster one in 16 of 20 pairs (docs/benchmarks.md, thirtieth session), which a fixed order credits to one build.
# Prints every run, each build's median and range, and B against A: the median of the pairs' B/A ratios (lowest and
# highest), the pairs B won, and the pairs the second run won.
#
# Usage: benchmarks/ab-pairs.sh --a JAR --b JAR [--pairs N] [-- BENCH-ARGS...]
#   --a JAR, --b JAR  the two runnable jars (cli/target/granary-cli-*-all.jar of each build; keep a copy of the old one)
#   --pairs N         pairs to run, 1-99 (default 10)
#   BENCH-ARGS        the bench's arguments (default: the 4 KiB x 128 target shape, four callers:
#                     --local --pre-touch --size 4KiB --batch 128 --concurrency 4 --op both --count 1024000);
#                     --json is added.
# Environment: GRANARY_JAVA_OPTS is passed on to bin/granary.
set -euo pipefail

ROOT="$(cd -P "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
GRANARY="$ROOT/bin/granary"

usage() { sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
fail() { echo "ab-pairs.sh: $*" >&2; exit 2; }
is_count() { [[ "$1" =~ ^[0-9]+$ ]]; }

jar_a=""
jar_b=""
pairs=10
while [ $# -gt 0 ]; do
    case "$1" in
        --a) [ $# -ge 2 ] && [ -f "$2" ] || fail "--a needs an existing jar"; jar_a="$2"; shift ;;
        --b) [ $# -ge 2 ] && [ -f "$2" ] || fail "--b needs an existing jar"; jar_b="$2"; shift ;;
        --pairs)
            [ $# -ge 2 ] && is_count "$2" && [ "$2" -ge 1 ] && [ "$2" -le 99 ] || fail "--pairs must be 1-99"
            pairs="$2"; shift ;;
        --) shift; break ;;
        -h|--help) usage; exit 0 ;;
        *) fail "unknown argument '$1' (see --help)" ;;
    esac
    shift
done
[ -n "$jar_a" ] && [ -n "$jar_b" ] || fail "--a JAR and --b JAR are both needed (see --help)"
if [ $# -eq 0 ]; then
    set -- --local --pre-touch --size 4KiB --batch 128 --concurrency 4 --op both --count 1024000
fi

WORK="$(mktemp -d "${TMPDIR:-/tmp}/ab-pairs.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

# value_of LINE KEY: KEY's value in one flat JSON object as granary bench --json prints it.
value_of() {
    sed -n "s/.*\"$2\":\"\{0,1\}\([^,\"}]*\)\"\{0,1\}[,}].*/\1/p" <<<"$1" | head -n 1
}

# run PAIR LABEL JAR: one bench run, its row appended to rows (pair, label, time, put/s, get/s).
run() {
    GRANARY_JAR="$3" "$GRANARY" bench "${bench_args[@]}" --json >"$WORK/out.json" 2>"$WORK/err" ||
        { echo "ab-pairs.sh: pair $1, build $2 failed: $(tail -n 5 "$WORK/err")" >&2; exit 1; }
    local put get
    put="$(value_of "$(grep '"type":"granary"' "$WORK/out.json" | grep '"phase":"put"' | head -n 1)" valuesPerSec)"
    get="$(value_of "$(grep '"type":"granary"' "$WORK/out.json" | grep '"phase":"get"' | head -n 1)" valuesPerSec)"
    [ -n "$put$get" ] || { echo "ab-pairs.sh: pair $1, build $2 printed no put or get row" >&2; exit 1; }
    printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$(date -u +%H:%M:%S)" "${put:--}" "${get:--}" | tee -a "$WORK/rows" |
        awk -F'\t' 'function v(x) { return x == "-" ? "-" : sprintf("%.0f", x) }
            { printf "pair %2d, %s at %s: put %s values/s, get %s values/s\n", $1, $2, $3, v($4), v($5) }'
}

bench_args=("$@")
echo "== ab-pairs: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== A = $jar_a"
echo "== B = $jar_b"
echo "== $pairs pairs (A B, B A, ...) of: granary bench $* --json"
: >"$WORK/rows"
for pair in $(seq 1 "$pairs"); do
    if [ $((pair % 2)) -eq 1 ]; then
        run "$pair" A "$jar_a"; run "$pair" B "$jar_b"
    else
        run "$pair" B "$jar_b"; run "$pair" A "$jar_a"
    fi
done

awk -F'\t' '
    function sort(a, n,    i, j, t) {
        for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    }
    function median(a, n) { return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
    function report(name, col,    p, n, i, a, b, ratios, nr, wins, second, k) {
        n = 0
        for (p = 1; p <= pairs; p++) {
            if (!((p, "A", col) in v) || !((p, "B", col) in v)) continue
            n++; a[n] = v[p, "A", col]; b[n] = v[p, "B", col]; ratios[n] = b[n] / a[n]
            if (b[n] > a[n]) wins++
            if ((p % 2 == 1 && b[n] > a[n]) || (p % 2 == 0 && a[n] > b[n])) second++
        }
        if (n == 0) return
        sort(a, n); sort(b, n); sort(ratios, n)
        printf "%s: A median %.0f values/s [%.0f-%.0f], B median %.0f [%.0f-%.0f]; B/A %.3f [%.3f-%.3f]; " \
            "B ahead in %d of %d pairs; the second run ahead in %d of %d\n", name, median(a, n), a[1], a[n], \
            median(b, n), b[1], b[n], median(ratios, n), ratios[1], ratios[n], wins + 0, n, second + 0, n
    }
    { if ($1 > pairs) pairs = $1; if ($4 != "-") v[$1, $2, 4] = $4 + 0; if ($5 != "-") v[$1, $2, 5] = $5 + 0 }
    END { report("put", 4); report("get", 5) }' "$WORK/rows"
