"""CPU tests of issue #16's benchmarks: the ``targets`` grid, the decode shapes, FlexAttention as a
grid backend, and :mod:`benchmarks.report_speed`'s verdicts on synthetic runs (and on a real one:
the benchmarks' plumbing run on the CPU with ``--bench-allow-cpu``, whose times mean nothing)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from benchmarks import report_speed
from benchmarks.backends import flex_attention, plain_attention
from benchmarks.runs import load
from benchmarks.shapes import ODD_LENGTHS, DecodeShape, Shape, attention_grid, decode_grid
from benchmarks.test_tools import SPEED, fake_run

ROOT = Path(__file__).resolve().parent.parent
DECODE_TBPS = {"kernel": 3.6, "sdpa_flash": 3.9, "sdpa_cudnn": 4.0, "flex": 0.9}


def fake_decode(path: Path, tbps: dict[str, float] | None = None, n_ks=(4096, 16384, 32768, 131072)) -> Path:
    """A pytest-benchmark JSON of ``test_decode_speed.py`` with these bandwidths (TB/s) per backend."""
    benchmarks = []
    for n_k in n_ks:
        s = DecodeShape("bfloat16", 128, n_k, 8, 32, 8)
        for backend, speed in (tbps or DECODE_TBPS).items():
            median = s.kv_bytes / (speed * 1e12)
            info = {"kind": "decode", "backend": backend, "dtype": s.dtype, "head_dim": s.head_dim, "n_q": 1,
                    "n_k": n_k, "batch": s.batch, "heads": s.heads, "kv_heads": s.kv_heads,
                    "kv_bytes": s.kv_bytes, "median_ms": median * 1e3, "kv_tbps": speed}
            benchmarks.append({"group": s.group(), "name": f"test_decode[{s.id}-{backend}]",
                               "extra_info": info, "stats": {"median": median, "min": median}})
    path.write_text(json.dumps({"machine_info": {"flash_bench": {"gpu": "NVIDIA H200", "grid": "targets"}},
                                "benchmarks": benchmarks, "datetime": "2026-12-07T00:00:00+00:00"}))
    return path


def targets_line(out: str, start: str) -> str:
    return next(line for line in out.splitlines() if line.startswith(f"- {start}"))


def test_the_targets_grid_puts_each_odd_length_beside_its_neighbour():
    quick, targets = attention_grid("quick"), attention_grid("targets")
    assert set(quick) <= set(targets) and len({s.id for s in targets}) == len(targets) == 40
    odd = [s for s in targets if s.seq_len in ODD_LENGTHS]
    assert len(odd) == 16
    for s in odd:  # the neighbour's batch and heads: the same work per token and the same programs
        even = Shape(s.dtype, s.head_dim, ODD_LENGTHS[s.seq_len], s.batch, s.heads, s.causal)
        assert even in quick and Shape.parse(s.id) == s


def test_decode_shapes():
    shapes = decode_grid("targets")
    assert [s.n_k for s in shapes] == [4096, 16384, 32768, 131072] and decode_grid("quick") == shapes
    for s in shapes + decode_grid("cpu"):
        assert DecodeShape.parse(s.id) == s
    assert shapes[0].kv_bytes == 2 * 8 * 8 * 4096 * 128 * 2
    with pytest.raises(ValueError, match="unknown grid"):
        decode_grid("huge")


@pytest.mark.parametrize("is_causal", [False, True])
def test_flex_backend_computes_the_contracts_call(is_causal):
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 40, 16, generator=gen) for _ in range(3))
    want = plain_attention(q, k, v, is_causal)
    torch.testing.assert_close(flex_attention(q, k, v, is_causal), want, atol=1e-5, rtol=1e-5)


def test_report_speed_meets_every_target_of_a_fast_kernel(tmp_path, capsys):
    speed = {"kernel": 500.0, "sdpa_flash": 350.0, "sdpa_cudnn": 450.0, "flex": 400.0}
    grid = fake_run(tmp_path / "grid.json", grid="targets", backends=tuple(speed), slowdown={
        b: SPEED[b] / s for b, s in speed.items()})
    decode = fake_decode(tmp_path / "decode.json", {**DECODE_TBPS, "kernel": 3.8})
    assert report_speed.main([str(grid), str(decode)]) == 0
    out = capsys.readouterr().out
    assert " (miss) |" not in out and "**8 of 8 targets met on every row they cover.**" in out
    assert "met on 40 of 40 rows" in targets_line(out, "fwd: kernel vs flex")
    # d = 64 (20 shapes) and d = 128 at n >= 4096 (12): the forward's cuDNN target covers 32 rows
    assert "met on 32 of 32 rows" in targets_line(out, "fwd: kernel vs sdpa_cudnn")
    assert "met on 32 of 32 rows" in targets_line(out, "odd lengths")
    assert "met on 2 of 2 rows" in targets_line(out, "decode: kernel vs sdpa_cudnn KV bandwidth >= 0.90")


def test_report_speed_names_each_miss_and_what_was_not_measured(tmp_path, capsys):
    # The kernel at 300 TFLOP/s: slower than flex (320) and SDPA flash (350) everywhere; one odd
    # shape 20% slower than its neighbour; cuDNN missing from the grid; decode at 0.85x cuDNN.
    odd = Shape("bfloat16", 128, 4097, 4, 16, True)
    grid = fake_run(tmp_path / "grid.json", grid="targets", backends=("kernel", "sdpa_flash", "flex"))
    data = json.loads(grid.read_text())
    for bench in data["benchmarks"]:
        if bench["name"] == f"test_forward[{odd.id}-kernel]":
            bench["stats"]["median"] /= 0.8
    grid.write_text(json.dumps(data))
    decode = fake_decode(tmp_path / "decode.json", {**DECODE_TBPS, "kernel": 3.4})
    assert report_speed.main([str(grid), str(decode)]) == 0
    out = capsys.readouterr().out
    assert "0.94 (miss)" in out  # 300 / 320
    line = targets_line(out, "fwd: kernel vs flex")
    assert "met on 0 of 40 rows; lowest 0.75 (bf16 d=128 n=4097 causal)" in line
    line = targets_line(out, "fwd: kernel vs sdpa_cudnn")
    assert "met on 0 of 32 rows; 32 not measured **not met**" in line
    line = targets_line(out, "odd lengths")
    assert "met on 31 of 32 rows; lowest 0.80 (fwd bf16 d=128 n=4097 causal)" in line
    assert "0.85 (miss)" in out and "met on 0 of 2 rows" in targets_line(out, "decode: kernel vs sdpa_cudnn "
                                                                          "KV bandwidth >= 0.90")
    assert "met on 1 of 1 rows" in targets_line(out, "decode: kernel vs sdpa_cudnn KV bandwidth >= 0.80")
    assert "**1 of 8 targets met on every row they cover.**" in out


def test_report_speed_lists_the_targets_a_run_has_no_row_for(tmp_path, capsys):
    assert report_speed.main([str(fake_decode(tmp_path / "decode.json"))]) == 0
    out = capsys.readouterr().out
    assert "fwd: kernel vs flex >= 1.00 (every shape): no row in these runs **not met**" in out
    assert "**2 of 8 targets met" in out  # decode: 3.6 / 4.0 = 0.9, both targets met


def test_decode_results_stay_out_of_the_grid_readers(tmp_path):
    assert load(fake_decode(tmp_path / "decode.json")).results == []


def test_the_benchmarks_plumbing_on_the_cpu_feeds_the_report(tmp_path):
    """The decode and grid benchmarks with every backend, on the CPU grid (the kernel in Triton's
    interpreter; flex eager, forward only; cuDNN refused there, so skipped), then the report."""
    out = tmp_path / "cpu.json"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "benchmarks/test_decode_speed.py", "benchmarks/test_attention_speed.py", "--bench-allow-cpu",
         "--bench-backends", "kernel,sdpa_flash,sdpa_cudnn,flex", "-k", "n80 or k80",
         f"--benchmark-json={out}"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    data = json.loads(out.read_text())
    kinds = {(b["extra_info"].get("kind"), b["extra_info"]["backend"]) for b in data["benchmarks"]}
    assert ("decode", "flex") in kinds and ("decode", "kernel") in kinds and (None, "flex") in kinds
    text = report_speed.report([out])
    assert "### Decode" in text and "### fwd:" in text and "| fp32 | 32 | 80 |" in text
