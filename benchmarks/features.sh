#!/usr/bin/env bash
# The feature benchmarks of issue #15 (benchmarks/bench_features.py) on one CUDA GPU:
#
#   benchmarks/features.sh OUTDIR [PYTEST ARGS]
#
# runs pytest once per part ($PARTS, default "bf16 fp16": each a -k expression), so that a run cut
# short (a time limit) keeps the JSON of the parts that finished: pytest-benchmark writes its JSON
# only at the end of a session. It writes, in OUTDIR:
#   features-<part>.json  pytest-benchmark's JSON of each part
#   features-<part>.log   pytest's output (with the 25 slowest tests: a benchmark's first, untimed
#                         call is where FlexAttention and Triton compile)
#   features.md           python -m benchmarks.report_features over every part's JSON: the ratios as
#                         Markdown, with date, machine and command, for docs/speed.md
# and prints the Markdown. PYTEST ARGS go to every part's pytest (not -k: use PARTS, e.g.
# PARTS="bf16 and gqa"; PARTS=all runs everything in one pytest). Environment: PYTHON (python3),
# PARTS. Exit status: 0 if every part's pytest passed, else the last failing one's; the report is
# written from whichever JSON files exist.
set -uo pipefail
[ $# -ge 1 ] || { echo "usage: benchmarks/features.sh OUTDIR [PYTEST ARGS]" >&2; exit 2; }
mkdir -p "$1" && out=$(cd "$1" && pwd)
shift
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
PYTHON=${PYTHON:-python3}
PARTS=${PARTS:-bf16 fp16}
start=$SECONDS
rc=0
runs=()

for part in $PARTS; do
    name=${part// /_}
    select=()
    [ "$part" = all ] || select=(-k "$part")
    rm -f "$out/features-$name.json"
    echo "features.sh: part '$part' (at $((SECONDS - start)) s)"
    "$PYTHON" -m pytest benchmarks/bench_features.py -m gpu -p no:cacheprovider ${select[@]+"${select[@]}"} \
        --benchmark-json="$out/features-$name.json" --benchmark-columns=min,median,iqr,rounds,iterations \
        --durations=25 "$@" 2>&1 | tee "$out/features-$name.log"
    part_rc=${PIPESTATUS[0]}
    [ "$part_rc" -eq 0 ] || rc=$part_rc
    [ -f "$out/features-$name.json" ] && runs+=("$out/features-$name.json")
done

if [ ${#runs[@]} -gt 0 ]; then
    "$PYTHON" -m benchmarks.report_features "${runs[@]}" \
        --command "PARTS='$PARTS' benchmarks/features.sh $out${*:+ $*}" > "$out/features.md" \
        && cat "$out/features.md"
else
    echo "features.sh: pytest wrote no JSON; no report" >&2
fi
echo "features.sh: exit $rc; $((SECONDS - start)) s in all"
exit "$rc"
