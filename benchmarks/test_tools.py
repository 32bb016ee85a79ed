"""CPU tests of the benchmark tooling: grids, FLOPs, memory estimates, gate, report and plot.

They run on synthetic runs laid out as pytest-benchmark writes them (the fields
:mod:`benchmarks.runs` reads), so no GPU and no timing is involved: ``python -m pytest benchmarks``
runs these on any machine and skips the GPU benchmarks with their reason.
"""

from __future__ import annotations

import importlib
import json
import math
from pathlib import Path

import pytest
import torch

from benchmarks import gate, plot, report, tune
from benchmarks.backends import ATTENTION_BACKENDS, dense_memory_reason
from benchmarks.runs import RunError, load
from benchmarks.shapes import Shape, attention_grid, baseline_grid, shape

# TFLOP/s of each backend in the synthetic runs (roughly an H100's order of magnitude).
SPEED = {"kernel": 300.0, "sdpa_flash": 350.0, "sdpa_cudnn": 450.0, "flex": 320.0, "dense": 80.0}


def fake_run(path: Path, *, grid: str = "quick", kernel_module: str = "flash", backends=ATTENTION_BACKENDS,
             slowdown: dict[str, float] | None = None, shapes: list[Shape] | None = None) -> Path:
    """A pytest-benchmark JSON of ``test_attention_speed.py``; ``slowdown`` multiplies times per backend."""
    slowdown = slowdown or {}
    benchmarks = []
    for s in shapes or attention_grid(grid):
        for pass_, func in (("fwd", "test_forward"), ("fwd+bwd", "test_forward_backward")):
            for backend in backends:
                flops = s.flops(pass_)
                median = flops / (SPEED[backend] * 1e12) * slowdown.get(backend, 1.0)
                info = {"backend": backend, "pass": pass_, "dtype": s.dtype, "head_dim": s.head_dim,
                        "seq_len": s.seq_len, "batch": s.batch, "heads": s.heads, "causal": s.causal,
                        "flops": flops, "device": "NVIDIA H100 80GB HBM3", "median_ms": median * 1e3,
                        "tflops": flops / median / 1e12}
                if backend == "kernel":
                    info["kernel_module"] = kernel_module
                name = f"{func}[{s.id}-{backend}]"
                benchmarks.append({
                    "group": s.group(pass_), "name": name,
                    "fullname": f"benchmarks/test_attention_speed.py::{name}",
                    "params": {"shape": s.id, "backend": backend}, "param": f"{s.id}-{backend}",
                    "extra_info": info, "options": {"timer": "perf_counter"},
                    "stats": {"min": median * 0.98, "max": median * 1.05, "mean": median, "median": median,
                              "stddev": median * 0.01, "rounds": 10, "iterations": 3, "ops": 1 / median,
                              "data": [median] * 10},
                })
    data = {"machine_info": {"node": "h100", "flash_bench": {"gpu": "NVIDIA H100 80GB HBM3",
                                                             "torch": "2.11", "triton": "3.6.0"}},
            "commit_info": {}, "benchmarks": benchmarks, "datetime": "2026-11-29T00:00:00+00:00",
            "version": "5.3.1"}
    path.write_text(json.dumps(data))
    return path


def test_grids():
    quick, targets, full = attention_grid("quick"), attention_grid("targets"), attention_grid("full")
    assert len(quick) == 24 and len(targets) == 40 and len(full) == 112
    for grid in (quick, targets, full, baseline_grid("quick")):
        assert len({s.id for s in grid}) == len(grid)
        assert all(Shape.parse(s.id) == s for s in grid)
        assert all(s.heads * s.head_dim == 2048 and s.batch >= 1 for s in grid)
    assert {(s.seq_len, s.batch) for s in quick} == {(1024, 16), (4096, 4), (16384, 1)}
    assert set(baseline_grid("quick")) <= set(quick)


def test_flops():
    s = Shape("bfloat16", 64, 1024, 2, 3, False)
    assert s.flops("fwd") == 4 * 2 * 3 * 1024**2 * 64
    assert s.flops("fwd+bwd") == 3.5 * s.flops("fwd")
    assert Shape("bfloat16", 64, 1024, 2, 3, True).flops("fwd") == s.flops("fwd") / 2


def test_dense_memory_reason():
    # batch 4 x 16 heads at 16k: one bf16 score matrix alone is 32 GiB.
    big = Shape("bfloat16", 128, 16384, 4, 16, False)
    reason = dense_memory_reason(big, "fwd+bwd", 79 * 2**30)
    assert reason and "32.0 GiB each" in reason and "79 GiB free" in reason
    # The quick grid's longest shapes fit on an 80 GB card.
    for s in attention_grid("quick"):
        assert dense_memory_reason(s, "fwd+bwd", 79 * 2**30) is None


def test_load_rejects_what_is_not_a_run(tmp_path):
    (tmp_path / "x.json").write_text("[1, 2]")
    with pytest.raises(RunError, match="not a pytest-benchmark JSON"):
        load(tmp_path / "x.json")
    assert gate.main(["check", str(tmp_path / "x.json"), "--baseline", str(tmp_path / "x.json")]) == 2


def test_record_writes_the_whole_run_and_a_kernel_only_file(tmp_path):
    run = fake_run(tmp_path / "run.json")
    assert gate.main(["record", str(run), "--out", str(tmp_path / "base" / "h100.json")]) == 0
    whole = json.loads((tmp_path / "base" / "h100.json").read_text())
    kernel = json.loads((tmp_path / "base" / "h100.kernel.json").read_text())
    assert len(whole["benchmarks"]) == 24 * 2 * len(ATTENTION_BACKENDS)
    assert len(kernel["benchmarks"]) == 24 * 2
    assert {b["extra_info"]["backend"] for b in kernel["benchmarks"]} == {"kernel"}


@pytest.mark.parametrize(
    ("slowdown", "expected"),
    [
        ({}, 0),  # the same numbers
        ({"kernel": 1.35, "sdpa_flash": 1.35, "sdpa_cudnn": 1.35, "flex": 1.35, "dense": 1.35}, 0),  # drifted
        ({"sdpa_flash": 0.95}, 0),  # SDPA 5% faster this run: kernel/SDPA +5%, within both limits
        ({"sdpa_flash": 0.85}, 1),  # SDPA 15% faster (a new PyTorch?): the ratio moved; re-record
        ({"kernel": 1.15}, 1),  # 15% slower everywhere: over the geometric-mean limit (10%)
        ({"kernel": 4.0}, 1),  # the slowed kernel
    ],
)
def test_gate_check(tmp_path, slowdown, expected):
    base = fake_run(tmp_path / "base.json")
    run = fake_run(tmp_path / "run.json", slowdown=slowdown, backends=("kernel", "sdpa_flash"))
    assert gate.main(["check", str(run), "--baseline", str(base)]) == expected


def test_gate_fails_one_slow_shape(tmp_path, capsys):
    base = fake_run(tmp_path / "base.json")
    quick = attention_grid("quick")
    one = quick[5]
    run = tmp_path / "run.json"
    data = json.loads(fake_run(run).read_text())
    for b in data["benchmarks"]:
        if b["extra_info"]["backend"] == "kernel" and b["params"]["shape"] == one.id:
            b["stats"]["median"] *= 1.3
    run.write_text(json.dumps(data))
    assert gate.main(["check", str(run), "--baseline", str(base)]) == 1
    assert f"{one.id}: kernel/sdpa_flash" in capsys.readouterr().err


def test_gate_fails_when_nothing_is_compared(tmp_path):
    base = fake_run(tmp_path / "base.json", backends=("kernel", "sdpa_cudnn"))
    run = fake_run(tmp_path / "run.json", backends=("kernel", "sdpa_flash"))
    assert gate.main(["check", str(run), "--baseline", str(base)]) == 2


def test_report(tmp_path, capsys):
    run = fake_run(tmp_path / "run.json", kernel_module="benchmarks.slowed")
    assert report.main([str(run)]) == 0
    out = capsys.readouterr().out
    assert "kernel benchmarks.slowed" in out and "### fwd+bwd" in out
    row = next(line for line in out.splitlines() if line.startswith("| bf16 | 64 | 1024 | 16 | 32 | no |"))
    # kernel, sdpa_flash, sdpa_cudnn, flex, dense, kernel/flash, kernel/cudnn, kernel/flex
    assert row.split("|")[7:15] == [" 300.0 ", " 350.0 ", " 450.0 ", " 320.0 ", " 80.0 ", " 0.86 ", " 0.67 ",
                                    " 0.94 "]


def test_plot(tmp_path):
    pytest.importorskip("matplotlib")
    shapes = [shape("bfloat16", 64, n, c, tokens=t) for n in (1023, 4096) for c in (False, True)
              for t in (16384, 65536)]
    run = fake_run(tmp_path / "run.json", shapes=shapes)
    panels = plot.series(load(run))
    assert len(panels) == 4 and "kernel, 65536 tokens" in panels[("bfloat16", 64, False, "fwd")]
    out = plot.draw(load(run), tmp_path / "plot.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_tune_candidates_are_launchable_configs():
    from flash.backward_triton import BackwardConfig, backward_config
    from flash.forward import ForwardConfig, forward_config

    def power_of_two_tile(block):
        return block >= 16 and block & (block - 1) == 0

    for cand in tune.FORWARD_CANDIDATES:
        config = ForwardConfig(*cand)
        assert power_of_two_tile(config.block_q) and power_of_two_tile(config.block_k)
    for cand in tune.BACKWARD_CANDIDATES:
        config = BackwardConfig(*cand)
        assert all(power_of_two_tile(b) for b in config[:4])
    # The tables' 16-bit choices were among the candidates measured.
    from flash.scores import resolve

    features = [None, resolve(128, True, softcap=30.0), resolve(128, True, window=(1023, 0))]
    for d in (64, 128):
        for f in features:
            assert tuple(forward_config(d, torch.float16, f)) in tune.FORWARD_CANDIDATES
        assert tuple(backward_config(d, torch.bfloat16)) in tune.BACKWARD_CANDIDATES


@pytest.mark.parametrize("tool, argv", [("tune", ["--pass", "fwd"]), ("compare_read_paths", None),
                                        ("tune_features", None), ("compare_trees", ["measure", "-k", "d64"]),
                                        ("large_scores", ["--part", "accuracy"])])
def test_gpu_tools_need_a_gpu(capsys, tool, argv):
    if torch.cuda.is_available():
        pytest.skip(f"has a GPU: {tool} would run")
    main = importlib.import_module(f"benchmarks.{tool}").main
    assert (main() if argv is None else main(argv)) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err


def test_compare_trees_keeps_each_sides_fastest_and_reports_new_over_old(tmp_path, capsys):
    from benchmarks import compare_trees

    def line(shape_id, bwd, fwd, package="/old/flash"):
        return json.dumps({"id": shape_id, "bwd_ms": bwd, "fwd_ms": fwd, "flash": package})

    old = [tmp_path / "A1.jsonl", tmp_path / "A2.jsonl"]
    new = [tmp_path / "B1.jsonl"]
    old[0].write_text(line("s1", 4.0, 1.0) + "\n" + line("s2", 2.0, 1.0) + "\n")
    old[1].write_text(line("s1", 5.0, 2.0) + "\n" + line("only-old", 1.0, 1.0) + "\n")
    new[0].write_text(line("s1", 2.0, 1.0, "/new/flash") + "\n" + line("s2", 4.0, 1.0, "/new/flash") + "\n")
    best, packages = compare_trees.fastest(old[0].read_text().splitlines() + old[1].read_text().splitlines())
    assert best["s1"] == {"bwd_ms": 4.0, "fwd_ms": 1.0} and packages == {"/old/flash"}
    assert compare_trees.main(["compare", "--old", *map(str, old), "--new", *map(str, new)]) == 0
    captured = capsys.readouterr()
    out = captured.out
    assert "| s1 | 4.000 | 2.000 | 0.500 |" in out and "| s2 | 2.000 | 4.000 | 2.000 |" in out
    assert "only-old" not in out
    assert "over 2 shapes: backward 1.000, forward 1.000" in out  # sqrt(0.5 * 2.0)
    assert "warning" not in captured.err
    with pytest.raises(SystemExit):
        compare_trees.main(["compare", str(old[0]), str(new[0])])  # which side is which?
    # Both sides timed the same package: the old runs were not given --flash.
    assert compare_trees.main(["compare", "--old", str(old[0]), "--new", str(old[1])]) == 0
    assert "both sides timed the same flash package (/old/flash)" in capsys.readouterr().err
    # Rows that name no package (written before measure recorded it) are no evidence either way.
    unnamed = tmp_path / "unnamed.jsonl"
    unnamed.write_text(json.dumps({"id": "s1", "bwd_ms": 1.0, "fwd_ms": 1.0}) + "\n")
    assert compare_trees.main(["compare", "--old", str(unnamed), "--new", str(unnamed)]) == 0
    assert "warning" not in capsys.readouterr().err


def test_compare_trees_measures_the_gates_and_the_feature_benchmarks_shapes():
    from benchmarks.compare_trees import shapes
    from benchmarks.features import cases

    ids = {s.id for s in shapes()}
    assert {s.id for s in cases("quick")} <= ids
    def key(s):
        return s.dtype, s.head_dim, s.seq_len, s.batch, s.heads, s.causal

    plain = {key(s) for s in shapes() if s.scenario == "plain"}
    assert {key(s) for s in attention_grid("quick")} <= plain


def test_compare_trees_shape_ids_are_unique():
    from benchmarks.compare_trees import shapes

    ids = [s.id for s in shapes()]
    assert len(ids) == len(set(ids))


def test_compare_trees_times_the_flash_it_is_given_or_refuses(tmp_path):
    """``--flash DIR`` must import DIR's flash: ``python -m`` puts the tree's own first on sys.path."""
    import shutil
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    shutil.copytree(root / "flash", tmp_path / "flash", ignore=shutil.ignore_patterns("__pycache__"))
    cmd = [sys.executable, "-m", "benchmarks.compare_trees", "measure", "-k", "no-such-shape", "--flash"]
    ok = subprocess.run([*cmd, str(tmp_path)], cwd=root, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    missing = subprocess.run([*cmd, str(tmp_path / "missing")], cwd=root, capture_output=True, text=True)
    assert missing.returncode != 0 and "imported" in missing.stderr and "instead" in missing.stderr


def test_compare_trees_packed_shapes_take_both_kinds_of_lengths():
    # A kernel may choose its code per sequence by whether its lengths are multiples of 16
    # (flash's backward does): one packed shape must have only such lengths, the other none.
    from benchmarks.compare_trees import PACKED, packed_lengths, shapes

    packed = {s.scenario: packed_lengths(s) for s in shapes() if s.scenario in PACKED}
    assert set(packed) == set(PACKED)
    assert all(n % 16 == 0 for n in packed["packed"])
    assert all(n % 16 for n in packed["packed_odd"])
    assert len(set(packed["packed"])) == len(packed["packed"]) > 1  # uneven sequences


def test_score_sass_counts_the_softcaps_special_functions():
    """The offline compile and disassembly (Triton's own ptxas and nvdisasm, no GPU): a forward
    step without softcap has one special-function instruction per score (its exp2), and a
    softcap adds at least one (tanh is not free) and float32 work."""
    import re
    import subprocess
    import sys

    # In a process of its own: score_sass must import flash compiled (TRITON_INTERPRET=0), and this
    # process may already hold flash interpreted (Triton reads the variable when a kernel is decorated).
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, "-m", "benchmarks.score_sass", "--head-dims", "64"], cwd=root,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = {}
    for line in done.stdout.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 9 and re.fullmatch(r"[\d.]+", cells[3]):
            rows[cells[0], cells[2]] = float(cells[3]), float(cells[4])
    assert set(rows) == {(p, v) for p in ("fwd", "bwd") for v in
                         ("no softcap", "softcap: flash's tanh", "softcap: tanh.approx.f32")}, done.stdout
    for pass_ in ("fwd", "bwd"):
        mufu, fp32 = rows[pass_, "no softcap"]
        assert mufu == 1.0, done.stdout
        capped_mufu, capped_fp32 = rows[pass_, "softcap: flash's tanh"]
        assert capped_mufu >= 2.0 and capped_fp32 > fp32, done.stdout


def test_forward_ptx_traces_each_exp2_argument():
    """The offline compile of flash's real forward launch (no GPU): every ``ex2`` of the PTX is
    traced to the instruction that defines its argument; compiled with ``enable_fp_fusion=False``,
    none of them is an FMA (what the fix of docs/findings.md, finding 20, would check)."""
    import re
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    tables = {}
    for flag in ("", "--no-fp-fusion"):
        # A process of its own, as for score_sass: flash compiled, not interpreted.
        done = subprocess.run([sys.executable, "-m", "benchmarks.forward_ptx", "--head-dim", "16",
                               "--n", "256", *([flag] if flag else [])], cwd=root,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
        rows = [[c.strip() for c in line.strip("|").split("|")] for line in done.stdout.splitlines()
                if re.match(r"\| \d+", line)]
        assert rows and all(opcode != "?" for _, opcode, _ in rows), done.stdout
        tables[flag] = rows
    assert all(not opcode.startswith("fma") for _, opcode, _ in tables["--no-fp-fusion"]), tables


def test_large_scores_inputs_reach_the_asked_score_and_errors_see_non_finite_outputs():
    from benchmarks.large_scores import inputs_at, worst_error

    for magnitude in (1e5, 1e9):
        q, k, v = inputs_at(magnitude, torch.float32, "cpu")
        peak = (q.double() @ k.double().transpose(-2, -1)).abs().max().item() / 8  # 1 / sqrt(64)
        assert peak == pytest.approx(magnitude, rel=1e-6)
    reference = torch.zeros(2, 3, dtype=torch.float64)
    out = torch.zeros(2, 3)
    out[1, 2] = 0.5
    assert worst_error(out, reference, torch.full((2, 3), 2.0)) == 0.25
    out[0, 0] = float("nan")
    assert math.isnan(worst_error(out, reference, torch.ones(2, 3)))
