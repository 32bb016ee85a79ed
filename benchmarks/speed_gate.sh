#!/usr/bin/env bash
# The speed gate, on a CUDA machine, from the repository root:
#
#   benchmarks/speed_gate.sh record [PYTEST ARGS]   # (a) run everything, write the baseline
#   benchmarks/speed_gate.sh check  [PYTEST ARGS]   # (b) judge the kernel against the baseline
#   benchmarks/speed_gate.sh check --bench-kernel benchmarks.slowed   # (c) must fail
#   benchmarks/speed_gate.sh demo OUTDIR [PYTEST ARGS]  # (a), (b), (c); logs, JSON, exit codes
#
# `check` is two gates on one run of the kernel and SDPA's flash backend (quick grid):
#   1. pytest-benchmark: --benchmark-compare against the baseline's kernel-only file and
#      --benchmark-compare-fail=median:$ABS_MARGIN% (default 50%): a kernel benchmark whose median
#      time grew by more than that fails. Absolute times drift 25-35% between runs of one H100,
#      hence the wide margin; it catches gross regressions even where SDPA moved too.
#   2. benchmarks/gate.py: kernel time / SDPA-flash time, both from this run, against the same
#      ratio in the baseline: fails when one shape's ratio grew by more than $RATIO_MARGIN%
#      (default 25) or their geometric mean by more than $MEAN_MARGIN% (default 10).
# It exits 0 only if both pass. Environment: PYTHON (python3), BASELINE (benchmarks/baseline/h200:
# .json and .kernel.json are added), RESULTS (benchmarks/results: where run JSON goes),
# ABS_MARGIN, RATIO_MARGIN, MEAN_MARGIN.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

PYTHON=${PYTHON:-python3}
BASELINE=${BASELINE:-benchmarks/baseline/h200}
RESULTS=${RESULTS:-benchmarks/results}
ABS_MARGIN=${ABS_MARGIN:-50}
RATIO_MARGIN=${RATIO_MARGIN:-25}
MEAN_MARGIN=${MEAN_MARGIN:-10}
COLUMNS_OPT=--benchmark-columns=min,median,iqr,rounds,iterations

record() {
    mkdir -p "$RESULTS"
    "$PYTHON" -m pytest benchmarks -m gpu --benchmark-save=baseline "$COLUMNS_OPT" \
        --benchmark-json="$RESULTS/baseline-run.json" "$@"
    local rc=$?
    [ "$rc" -eq 0 ] || { echo "record: pytest exited $rc; baseline not written" >&2; return "$rc"; }
    "$PYTHON" -m benchmarks.gate record "$RESULTS/baseline-run.json" --out "$BASELINE.json"
}

check() {
    if [ ! -f "$BASELINE.json" ] || [ ! -f "$BASELINE.kernel.json" ]; then
        echo "no baseline at $BASELINE.json and $BASELINE.kernel.json: record one on the GPU" \
             "(benchmarks/speed_gate.sh record) and commit benchmarks/baseline/" >&2
        return 2
    fi
    mkdir -p "$RESULTS"
    local run_json="$RESULTS/gate-run.json"
    rm -f "$run_json"
    "$PYTHON" -m pytest benchmarks/test_attention_speed.py -m gpu --bench-backends kernel,sdpa_flash \
        --benchmark-compare="$BASELINE.kernel.json" --benchmark-compare-fail="median:${ABS_MARGIN}%" \
        --benchmark-save=gate "$COLUMNS_OPT" --benchmark-json="$run_json" "$@"
    local rc_abs=$?
    local rc_ratio=2
    if [ -f "$run_json" ]; then
        "$PYTHON" -m benchmarks.gate check "$run_json" --baseline "$BASELINE.json" \
            --margin "$RATIO_MARGIN" --mean-margin "$MEAN_MARGIN"
        rc_ratio=$?
    fi
    echo "speed gate: pytest-benchmark compare-fail (median +${ABS_MARGIN}%) exit $rc_abs;" \
         "ratio gate (shape +${RATIO_MARGIN}%, mean +${MEAN_MARGIN}%) exit $rc_ratio"
    [ "$rc_abs" -eq 0 ] && [ "$rc_ratio" -eq 0 ]
}

demo() {
    local out=${1:?usage: speed_gate.sh demo OUTDIR [PYTEST ARGS]}
    shift
    mkdir -p "$out"
    local t0=$SECONDS
    RESULTS="$out/a-record" record "$@" > "$out/a-record.log" 2>&1
    local rc_a=$?
    cp "$BASELINE.json" "$BASELINE.kernel.json" "$out/" 2>/dev/null
    local t1=$SECONDS
    RESULTS="$out/b-flash" check "$@" > "$out/b-gate-flash.log" 2>&1
    local rc_b=$?
    local t2=$SECONDS
    RESULTS="$out/c-slowed" check --bench-kernel benchmarks.slowed "$@" > "$out/c-gate-slowed.log" 2>&1
    local rc_c=$?
    local t3=$SECONDS
    for log in a-record b-gate-flash c-gate-slowed; do
        echo "== $log: $(grep -E '^speed gate:|^recorded|^=+ .* in [0-9.]+s' "$out/$log.log" | tail -n 3 | tr '\n' ' ')"
    done
    "$PYTHON" -m benchmarks.report "$out/a-record/baseline-run.json" > "$out/report.md" 2>&1
    "$PYTHON" -m benchmarks.plot "$out/a-record/baseline-run.json" -o "$out/tflops.png" > /dev/null 2>&1 \
        || echo "(no plot: $("$PYTHON" -c 'import matplotlib' 2>&1 | tail -n 1))"
    echo "exit codes: (a) record $rc_a [want 0] $((t1 - t0))s; (b) gate flash $rc_b [want 0] $((t2 - t1))s;" \
         "(c) gate slowed $rc_c [want non-zero] $((t3 - t2))s"
    [ "$rc_a" -eq 0 ] && [ "$rc_b" -eq 0 ] && [ "$rc_c" -ne 0 ]
}

cmd=${1:-}
shift || true
case "$cmd" in
    record|check|demo) "$cmd" "$@" ;;
    *) echo "usage: $0 record|check|demo [OUTDIR] [PYTEST ARGS]" >&2; exit 2 ;;
esac
