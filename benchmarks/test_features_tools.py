"""CPU tests of the feature benchmarks' tooling (``features.py``, ``bench_features.py``,
``report_features.py``): no GPU and no timing that means anything.

- the cases and backends are the issue's (#15) list, and each backend computes the contract call it
  says it does: FlexAttention's mask and score_mod, SDPA and the kernel call against the oracle
  (:mod:`oracle.dense`), FlexAttention run eagerly on the CPU (forward only);
- the window FlexAttention is given is the kernel's ``window=(1023, 0)``: its ``mask_mod`` and its
  block mask against ``oracle.dense.visible_mask``;
- the report's ratios, targets and header on synthetic runs, and on a real (CPU, meaningless-time)
  run of ``bench_features.py`` end to end.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from benchmarks import report, report_features
from benchmarks.features import (
    BACKENDS,
    COMPARISONS,
    SOFTCAP,
    WINDOW,
    Call,
    build,
    case_by_id,
    cases,
    flops,
    mask_mod,
    score_mod,
    variants,
    visible_pairs,
)
from benchmarks.runs import load
from oracle.adapters import dense as dense_kernel
from oracle.dense import dense_attention, visible_mask

ROOT = Path(__file__).resolve().parent.parent
CPU = torch.device("cpu")


# -- the cases and their backends --

def test_quick_cases_are_the_issues_list():
    quick = cases("quick")
    assert len({c.id for c in quick}) == len(quick) == 16
    assert all(case_by_id(c.id) == c for c in quick + cases("cpu"))
    for dtype in ("bfloat16", "float16"):
        for d in (64, 128):
            mine = {c.scenario: [] for c in quick}
            for c in quick:
                if (c.dtype, c.head_dim) == (dtype, d):
                    mine[c.scenario].append(c)
            assert {(c.batch, c.heads, c.kv_heads, c.seq_len, c.causal) for c in mine["gqa"]} == {
                (4, 32, 4, 4096, False), (4, 32, 4, 4096, True)}
            [window] = mine["window"]
            assert (window.batch, window.heads, window.kv_heads, window.seq_len, window.causal,
                    window.window) == (1, 16, 16, 16384, True, (1023, 0))
            [capped] = mine["softcap"]
            assert (capped.batch, capped.heads, capped.seq_len, capped.causal, capped.softcap) == (
                1, 16, 16384, True, 30.0)


@pytest.mark.parametrize("case", cases("quick"), ids=lambda c: c.id)
def test_variants(case):
    table = variants(case)
    assert tuple(table) == BACKENDS[case.scenario]
    plain = Call(case.causal)
    for name, v in table.items():
        assert v.kv_heads == (case.heads if name == "kernel_mha" else case.kv_heads)
        engine = "flex" if name.startswith("flex") else "kernel" if name.startswith("kernel") else name
        assert v.engine == engine
    if case.scenario == "gqa":
        assert {v.call for v in table.values()} == {plain}
    else:
        feature = Call(True, window=WINDOW) if case.scenario == "window" else Call(True, softcap=SOFTCAP)
        assert table["kernel"].call == table["flex"].call == feature  # the same call, two engines
        baseline = "kernel_causal" if case.scenario == "window" else "kernel_nocap"
        flex_baseline = "flex_causal" if case.scenario == "window" else "flex_nocap"
        assert table[baseline].call == table[flex_baseline].call == plain
    # Every comparison names backends of its scenario.
    for c in COMPARISONS:
        if c.scenario == case.scenario:
            assert {c.ours, c.peer} <= set(table)


def test_kernel_calls_are_the_extended_contracts():
    """What the benchmarks hand the kernel: positional ``is_causal``, the features as keywords, and a
    plain call with no keyword at all (so our own baselines are the calls the speed gate times)."""
    seen = []

    def attention(q, k, v, is_causal=False, **features):
        seen.append((tuple(k.shape), is_causal, features))
        return q

    kernel = SimpleNamespace(attention=attention, __name__="recorder")
    t = torch.zeros
    for case in (c for c in cases("quick") if c.dtype == "bfloat16" and c.head_dim == 64):
        for v in variants(case).values():
            if v.engine == "kernel":
                build(v, case, kernel, CPU).fn(t(1, case.heads, 2, 2), t(1, v.kv_heads, 2, 2), None)
    assert seen == [
        ((1, 4, 2, 2), False, {}), ((1, 32, 2, 2), False, {}),   # gqa: GQA, MHA
        ((1, 4, 2, 2), True, {}), ((1, 32, 2, 2), True, {}),     # gqa causal
        ((1, 16, 2, 2), True, {"window": (1023, 0)}), ((1, 16, 2, 2), True, {}),
        ((1, 16, 2, 2), True, {"softcap": 30.0}), ((1, 16, 2, 2), True, {}),
    ]


@pytest.mark.parametrize("case", cases("cpu"), ids=lambda c: c.id)
def test_backends_compute_the_call_they_name(case):
    """Each backend, built as the benchmark builds it (the oracle as the kernel, FlexAttention eager
    on the CPU, SDPA's flash backend's CPU kernel), against the oracle of its :class:`Call`."""
    gen = torch.Generator().manual_seed(0)
    outputs = {}
    for name, v in variants(case).items():
        if v.engine == "sdpa_cudnn":
            continue  # CUDA only
        q = torch.randn(case.batch, case.heads, case.seq_len, case.head_dim, generator=gen)
        k, v_ = (torch.randn(case.batch, v.kv_heads, case.seq_len, case.head_dim, generator=gen)
                 for _ in range(2))
        built = build(v, case, dense_kernel, CPU)
        with built.context():
            o = built.fn(q, k, v_)
        expected, _ = dense_attention(q, k, v_, v.call.is_causal, **v.call.features())
        torch.testing.assert_close(o.double(), expected, atol=2e-5, rtol=2e-5, msg=f"{case.id} {name}")
        outputs[name] = expected
    if case.scenario in ("window", "softcap"):  # the case is big enough for the feature to matter
        baseline = "kernel_causal" if case.scenario == "window" else "kernel_nocap"
        assert not torch.allclose(outputs["kernel"], outputs[baseline], atol=1e-3)


# -- FlexAttention's mask is the kernel's window --

MASKS = [(True, None), (True, (5, 0)), (True, (0, 0)), (False, (3, 2)), (False, (-1, 4)), (False, (4, -1)),
         (True, (-1, -1)), (False, (-1, -1)), (False, None), (True, (7, 3))]


def mask_grid(mod, n_q: int, n_k: int) -> torch.Tensor:
    """``mod`` evaluated on every (query, key) pair, as FlexAttention's ``create_mask`` would."""
    q_idx, kv_idx = torch.arange(n_q)[:, None], torch.arange(n_k)[None, :]
    return mod(torch.tensor(0), torch.tensor(0), q_idx, kv_idx).expand(n_q, n_k)


@pytest.mark.parametrize(("is_causal", "window"), MASKS)
def test_mask_mod_is_the_contracts_visible_set(is_causal, window):
    n = 37
    expected = visible_mask(n, n, is_causal=is_causal, window=window)
    mod = mask_mod(is_causal, window)
    if expected is None or bool(expected.all()):
        assert mod is None or bool(mask_grid(mod, n, n).all())
    else:
        assert torch.equal(mask_grid(mod, n, n), expected)
    assert visible_pairs(n, Call(is_causal, window)) == (n * n if expected is None else int(expected.sum()))


def test_the_benchmarked_window_and_its_block_mask():
    """``window=(1023, 0)`` causal: 1024 keys with the diagonal; the mask_mod FlexAttention gets is
    that set, and so is its block mask, block by block (partial and full blocks), at n = 2048."""
    from torch.nn.attention.flex_attention import create_block_mask

    n, block = 2048, 128
    expected = visible_mask(n, n, is_causal=True, window=WINDOW)
    assert int(expected.sum(dim=1).max()) == 1024 and bool(expected.diagonal().all())
    assert torch.equal(mask_grid(mask_mod(True, WINDOW), n, n), expected)
    block_mask = create_block_mask(mask_mod(True, WINDOW), None, None, n, n, device=CPU)
    tiles = expected.reshape(n // block, block, n // block, block)
    assert torch.equal(block_mask.to_dense()[0, 0].bool(), tiles.any(dim=(1, 3)))
    assert int(block_mask.full_kv_num_blocks.sum()) == int(tiles.all(dim=(1, 3)).sum())


def test_visible_pairs_and_flops_of_the_quick_cases():
    n = 16384
    window = next(c for c in cases("quick") if c.scenario == "window")
    assert visible_pairs(n, Call(True, WINDOW)) == 1024 * n - 1023 * 1024 // 2
    assert visible_pairs(n, Call(True)) == n * (n + 1) // 2
    assert flops(window, Call(True), "fwd") == 4.0 * 16 * window.head_dim * n * (n + 1) // 2
    assert flops(window, Call(True), "fwd+bwd") == 3.5 * flops(window, Call(True), "fwd")
    gqa = next(c for c in cases("quick") if c.scenario == "gqa" and not c.causal)
    assert flops(gqa, Call(False), "fwd") == 4.0 * 4 * 32 * gqa.head_dim * 4096**2


def test_softcap_score_mod():
    mod = score_mod(SOFTCAP)
    s = torch.tensor([-100.0, -1.0, 0.0, 3.0, 1e4])
    torch.testing.assert_close(mod(s, 0, 0, 0, 0), 30 * torch.tanh(s / 30))
    assert score_mod(None) is None and score_mod(SOFTCAP) is mod  # cached: one object, one graph


# -- the report --

def fake_feature_run(path: Path, medians: dict[tuple, float], *, datetime="2026-12-02T08:00:00+00:00",
                     command="pytest benchmarks/bench_features.py -m gpu") -> Path:
    """A pytest-benchmark JSON of bench_features.py: ``medians[(case_id, backend, pass)]`` in ms."""
    benchmarks = []
    for (case_id, backend, pass_), ms in medians.items():
        case = case_by_id(case_id)
        v = variants(case)[backend]
        info = {"scenario": case.scenario, "case": case.id, "title": case.title, "backend": backend,
                "engine": v.engine, "pass": pass_, "dtype": case.dtype, "head_dim": case.head_dim,
                "seq_len": case.seq_len, "batch": case.batch, "heads": case.heads, "kv_heads": v.kv_heads,
                "causal": v.call.is_causal, "window": v.call.window, "softcap": v.call.softcap,
                "flops": flops(case, v.call, pass_), "device": "NVIDIA H200", "command": command,
                "median_ms": ms}
        if v.engine == "kernel":
            info["kernel_module"] = "flash"
        if v.engine == "flex":
            info["flex_compiled"] = True
        func = "test_forward" if pass_ == "fwd" else "test_forward_backward"
        name = f"{func}[{case.id}-{backend}]"
        median = ms / 1e3
        benchmarks.append({"group": case.group(pass_), "name": name,
                           "fullname": f"benchmarks/bench_features.py::{name}",
                           "params": {"case": case.id, "backend": backend}, "extra_info": info,
                           "stats": {"min": median, "max": median, "mean": median, "median": median,
                                     "rounds": 5, "iterations": 1}})
    path.write_text(json.dumps({
        "machine_info": {"node": "h200-box", "flash_bench": {"gpu": "NVIDIA H200", "torch": "2.11.0+cu130",
                                                            "triton": "3.6.0", "cuda": "13.0"}},
        "commit_info": {}, "benchmarks": benchmarks, "datetime": datetime, "version": "5.1.0"}))
    return path


BF16_64 = {c.scenario + ("_causal" if c.causal else ""): c.id for c in cases("quick")
           if c.dtype == "bfloat16" and c.head_dim == 64}


def row(out: str, title_part: str, start: str) -> list[str]:
    """The cells of the row that starts with ``start`` in the table whose heading has ``title_part``."""
    section = out.split(title_part, 1)[1].split("\n### ", 1)[0]
    line = next(x for x in section.splitlines() if x.startswith(start))
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_report_ratios_targets_and_header(tmp_path):
    gqa, window, cap = BF16_64["gqa_causal"], BF16_64["window_causal"], BF16_64["softcap_causal"]
    medians = {
        (gqa, "kernel", "fwd"): 10.0, (gqa, "kernel_mha", "fwd"): 10.0, (gqa, "sdpa_flash", "fwd"): 12.0,
        (gqa, "flex", "fwd"): 9.0,  # sdpa_cudnn skipped
        (window, "kernel", "fwd"): 1.0, (window, "kernel_causal", "fwd"): 4.0, (window, "flex", "fwd"): 1.5,
        (window, "flex_causal", "fwd"): 5.0,
        (cap, "kernel", "fwd+bwd"): 11.6, (cap, "kernel_nocap", "fwd+bwd"): 10.0,
        (cap, "flex", "fwd+bwd"): 20.0, (cap, "flex_nocap", "fwd+bwd"): 16.0,
    }
    run = fake_feature_run(tmp_path / "features.json", medians)
    out = report_features.report([run], command="benchmarks/features.sh /out")
    head = out.split("\n### ", 1)[0]
    assert head.startswith("## Feature benchmarks (issue #15): NVIDIA H200, 2026-12-02")
    assert "2026-12-02T08:00:00+00:00 on NVIDIA H200 (node `h200-box`)" in head
    assert "torch 2.11.0+cu130, triton 3.6.0, cuda 13.0; kernel module `flash`" in head
    assert "- command: `benchmarks/features.sh /out`" in head
    assert "- pytest: `pytest benchmarks/bench_features.py -m gpu`" in head
    assert "torch.compile(flex_attention, dynamic=False)" in head

    # dtype d causal pass | kernel kernel_mha sdpa_flash sdpa_cudnn flex (ms) | vs mha, flash, flex, cudnn
    assert row(out, "GQA 8:1 prefill: b=4, h_q=32, h_kv=4, n=4096", "| bf16 | 64 | yes | fwd |") == [
        "bf16", "64", "yes", "fwd", "10.000", "10.000", "12.000", "-", "9.000",
        "1.00", "1.20", "0.90 (miss)", "-"]
    # kernel kernel_causal flex flex_causal | vs flex (1.5), vs causal (4.0: below 5), flex's gain (3.33)
    assert row(out, "window=(1023, 0), causal", "| bf16 | 64 | yes | fwd |")[4:] == [
        "1.000", "4.000", "1.500", "5.000", "1.50", "4.00 (miss)", "3.33"]
    # 16% slower with softcap: 10 / 11.6 = 0.862, below 1 / 1.15 = 0.870
    assert row(out, "softcap=30, causal", "| bf16 | 64 | yes | fwd+bwd |")[8:] == [
        "0.86 (miss)", "0.80", "1.72"]
    assert ("- kernel vs kernel_mha (>= 1.00) (no slower than our MHA call): met in 1 of 1 row; "
            "lowest 1.00 (bf16 d=64 causal fwd)") in out
    assert "- kernel vs kernel_causal (>= 5.00) (our full causal call): met in 0 of 1 row; lowest 4.00" in out
    assert ("- kernel vs kernel_nocap (>= 0.87) (at most 15% slower than without softcap): "
            "met in 0 of 1 row") in out


def test_report_reads_several_runs_as_one(tmp_path, capsys):
    gqa = BF16_64["gqa"]
    fp16 = next(c.id for c in cases("quick") if c.scenario == "gqa" and c.dtype == "float16" and not c.causal)
    a = fake_feature_run(tmp_path / "a.json", {(gqa, "kernel", "fwd"): 2.0, (gqa, "flex", "fwd"): 3.0})
    b = fake_feature_run(tmp_path / "b.json", {(fp16, "kernel", "fwd"): 2.0, (fp16, "flex", "fwd"): 1.0},
                         datetime="2026-12-02T09:00:00+00:00")
    assert report_features.main([str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "- run `a.json`: 2026-12-02T08:00" in out and "- run `b.json`: 2026-12-02T09:00" in out
    assert "python -m benchmarks.report_features a.json b.json" in out
    assert row(out, "GQA", "| bf16 | 64 | no | fwd |")[11] == "1.50"
    assert row(out, "GQA", "| fp16 | 64 | no | fwd |")[11] == "0.50 (miss)"
    assert "kernel vs flex (>= 1.00): met in 1 of 2 rows; lowest 0.50 (fp16 d=64 fwd)" in out
    assert "kernel vs sdpa_flash (>= 1.00): not measured in any of 2 rows" in out


def test_report_rejects_what_is_not_a_run(tmp_path, capsys):
    (tmp_path / "x.json").write_text("[]")
    assert report_features.main([str(tmp_path / "x.json")]) == 2
    assert "not a pytest-benchmark JSON" in capsys.readouterr().err


def test_the_grid_tools_ignore_feature_runs(tmp_path, capsys):
    """A feature run's GQA ``kernel_mha`` is a shape of the speed gate's grid (bf16 d=64 n=4096 b=4
    h=32): report.py and gate.py must not read it as one."""
    run = fake_feature_run(tmp_path / "f.json", {(BF16_64["gqa"], "kernel_mha", "fwd"): 1.0})
    assert load(run).results == []
    assert report.main([str(run)]) == 0
    assert "(no speed benchmarks of benchmarks/ in this file)" in capsys.readouterr().out


def test_bench_features_end_to_end_on_the_cpu(tmp_path):
    """bench_features.py itself, on its tiny CPU cases (``--bench-allow-cpu``; the mock as the
    kernel, for the flash kernel may not take the features yet), window scenario, forward: the JSON
    it writes is what the report reads. Its times mean nothing."""
    out = tmp_path / "features.json"
    # Without xdist's variables: pytest-benchmark disables itself in a process that has them (and
    # writes an empty JSON), which this subprocess would inherit when the suite runs under -n.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "benchmarks/bench_features.py", "-q", "-p", "no:cacheprovider",
         "--bench-allow-cpu", "--bench-kernel", "oracle.adapters.mock", "-k", "window and not backward",
         f"--benchmark-json={out}"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "4 passed" in done.stdout
    text = report_features.report([out])
    assert "--bench-kernel oracle.adapters.mock -k 'window and not backward'" in text
    cells = row(text, "window=(15, 0), causal: b=1, h_q=2, n=80", "| fp32 | 32 | yes | fwd |")
    assert len(cells) == 11 and "-" not in cells
    assert "eager `flex_attention`" in text
    data = json.loads(out.read_text())
    info = data["benchmarks"][0]["extra_info"]
    assert {"scenario", "case", "backend", "pass", "median_ms", "tflops", "calls_per_round"} <= set(info)
    assert case_by_id(info["case"]).scenario == "window"
