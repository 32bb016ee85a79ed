"""The memory-safety gate's own tests, cheap enough for the CPU suite (a few seconds).

Here: the case list is reproducible and exactly sized where it says so, the output parser counts a
realistic compute-sanitizer transcript right, the driver's verdicts and exit codes (with a stand-in
sanitizer that replays a transcript), its refusals (no CUDA, no sanitizer), and that the deliberately
out-of-bounds kernel still computes the right numbers, so only a memory checker can catch it. The
gate itself needs a GPU: ``python -m tests.sanitize``.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from properties.case import DTYPES, LAYOUTS, Case
from tests.sanitize import __main__ as driver
from tests.sanitize import cases as gate_cases
from tests.sanitize.report import parse

ROOT = Path(__file__).resolve().parents[2]

CASE_A = "Case(n_q=65, n_k=65, head_dim=16, leading=(), dtype='float32', is_causal=False, " \
         "layout='contiguous', distribution='normal', scale=1.0, seed=0)"
CASE_B = "Case(n_q=1, n_k=129, head_dim=3, leading=(), dtype='float32', is_causal=False, " \
         "layout='contiguous', distribution='normal', scale=1.0, seed=0)"
CASE_C = "Case(n_q=63, n_k=255, head_dim=24, leading=(3, 1), dtype='float16', is_causal=False, " \
         "layout='heads_last', distribution='normal', scale=1.0, seed=0)"

# What compute-sanitizer (memcheck, --show-backtrace device) and tests.sanitize.cases print together
# for a kernel that reads past the end of k and v: two errors in the first case, one in the third.
OUT_OF_BOUNDS_OUTPUT = f"""\
========= COMPUTE-SANITIZER
CASE 1/3 corpus {CASE_A}
========= Invalid __global__ read of size 4 bytes
=========     at _out_of_bounds_forward_kernel+0x7b0 in /repo/tests/sanitize/out_of_bounds.py:77
=========     by thread (64,0,0) in block (1,0,0)
=========     Address 0x7f2e5e001040 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f2e5e000000 of size 4,160 bytes
=========
========= Invalid __global__ read of size 4 bytes
=========     at _out_of_bounds_forward_kernel+0x9c0 in /repo/tests/sanitize/out_of_bounds.py:88
=========     by thread (65,0,0) in block (1,0,0)
=========     Address 0x7f2e5e003050 is out of bounds
=========     and is 17 bytes after the nearest allocation at 0x7f2e5e002000 of size 4,160 bytes
=========
  ok 1.93 s
CASE 2/3 edge {CASE_B}
  ok 0.40 s
CASE 3/3 fuzz {CASE_C}
========= Invalid __global__ read of size 2 bytes
=========     at _out_of_bounds_forward_kernel+0x7b0 in /repo/tests/sanitize/out_of_bounds.py:77
=========     by thread (0,0,0) in block (0,0,0)
=========     Address 0x7f2e5e010ff8 is out of bounds
=========     and is 2 bytes after the nearest allocation at 0x7f2e5e008000 of size 36,720 bytes
=========
  ok 0.71 s
SANITIZE-CASES done: 3 of 3 cases in 3.1 s
========= ERROR SUMMARY: 3 errors
"""

CLEAN_OUTPUT = f"""\
========= COMPUTE-SANITIZER
CASE 1/2 corpus {CASE_A}
  ok 2.10 s
CASE 2/2 edge {CASE_B}
  ok 0.38 s
SANITIZE-CASES done: 2 of 2 cases in 2.5 s
========= ERROR SUMMARY: 0 errors
"""

# Past --print-limit the sanitizer counts errors without printing them, on a second summary line.
PRINT_LIMIT_OUTPUT = f"""\
========= COMPUTE-SANITIZER
CASE 1/1 corpus {CASE_A}
========= Invalid __global__ read of size 4 bytes
=========     at _out_of_bounds_forward_kernel+0x7b0 in /repo/tests/sanitize/out_of_bounds.py:77
=========     by thread (64,0,0) in block (1,0,0)
=========     Address 0x7f2e5e001040 is out of bounds
=========
  ok 1.93 s
SANITIZE-CASES done: 1 of 1 cases in 2.0 s
========= ERROR SUMMARY: 4096 errors
========= ERROR SUMMARY: 4095 errors were not printed. Use --print-limit option to adjust the number of printed errors
"""  # noqa: E501 (a transcript, verbatim)

# A crash in the child (an API error after a fault), no case finished: one error, singular.
API_ERROR_OUTPUT = f"""\
========= COMPUTE-SANITIZER
CASE 1/2 corpus {CASE_A}
========= Program hit cudaErrorLaunchFailure (error 719) due to "unspecified launch failure" on CUDA API call to cudaStreamSynchronize.
=========     Saved host backtrace up to driver entry point at error
=========         Host Frame: [0x4d0e05] in libcuda.so.1
=========
RuntimeError: CUDA error: unspecified launch failure
FAILED CASE 1/2 corpus {CASE_A}
========= Target application returned an error
========= ERROR SUMMARY: 1 error
"""  # noqa: E501 (a transcript, verbatim)

# Killed at the timeout: the sanitizer never printed its summary.
KILLED_OUTPUT = f"""\
========= COMPUTE-SANITIZER
CASE 1/2 corpus {CASE_A}
  ok 2.10 s
CASE 2/2 edge {CASE_B}
"""


# -- the case list --

def test_fuzz_sample_is_reproducible():
    first = gate_cases.sample_cases(12, seed=3)
    assert first == gate_cases.sample_cases(12, seed=3)
    assert [str(c) for c in first] == [str(c) for c in gate_cases.sample_cases(12, seed=3)]
    assert first != gate_cases.sample_cases(12, seed=4)
    assert all(Case.parse(str(c)) == c for c in first)
    # A longer sample starts with the shorter one: raising --sample keeps the cases already run.
    assert gate_cases.sample_cases(20, seed=3)[:12] == first


def test_fuzz_sample_covers_the_building_blocks():
    sample = gate_cases.sample_cases(300, seed=0, size="gpu")
    assert {c.layout for c in sample} == set(LAYOUTS)
    assert {c.dtype for c in sample} == set(DTYPES)
    assert {c.is_causal for c in sample} == {False, True}
    assert any(c.n_q != c.n_k for c in sample) and any(c.n_q == c.n_k for c in sample)
    lengths = {n for c in sample for n in (c.n_q, c.n_k)}
    assert {1, 63, 64, 65, 127, 128, 129} <= lengths
    assert any(c.head_dim % 2 for c in sample) and any(c.head_dim == 256 for c in sample)
    assert all(math.prod(c.leading) * c.n_q * c.n_k <= gate_cases.MAX_WORK for c in sample)
    assert "bfloat16" not in {c.dtype for c in gate_cases.sample_cases(100, size="cpu")}


def test_case_list_order_and_sources():
    labelled = gate_cases.all_cases(sample=4, seed=0)
    sources = [c.source for c in labelled]
    n_corpus = len(gate_cases.corpus_cases())
    assert n_corpus >= 1
    assert sources == ["corpus"] * n_corpus + ["edge"] * len(gate_cases.EDGE_CASES) + ["fuzz"] * 4
    assert len({c.case for c in labelled if c.source == "corpus"}) == n_corpus  # no duplicates


@pytest.mark.parametrize("case", gate_cases.EDGE_CASES, ids=str)
def test_edge_cases_are_exactly_sized(case):
    # On "meta", as on CUDA, every tensor is copied into storage of its own (on the CPU, .to() is a
    # no-op and a broadcast slice would still share the buffer it was cut from).
    q, k, v = case.make_qkv("meta")[:3]  # a VarlenCase also gives cu_seqlens and max lengths
    do = case.make_grad_out("meta")
    for name, t in (("q", q), ("k", k), ("v", v), ("do", do)):
        storage = t.untyped_storage().nbytes() // t.element_size()
        distinct = math.prod(n for n, s in zip(t.shape, t.stride()) if s != 0)
        assert storage == distinct, f"{name} of {case} is a view into a larger buffer"
        assert storage % 64, f"{name} of {case} has a multiple of 64 elements"
        assert t.storage_offset() == 0


# -- reading the sanitizer's output --

def test_parse_counts_and_places_errors():
    report = parse(OUT_OF_BOUNDS_OUTPUT)
    assert report.error_count == 3 and len(report.errors) == 3
    assert report.summaries == [3]
    assert report.kinds() == {"Invalid __global__ read of size 4 bytes": 2,
                              "Invalid __global__ read of size 2 bytes": 1}
    assert report.kernels() == ["_out_of_bounds_forward_kernel"]
    assert report.cases_with_errors() == [f"CASE 1/3 corpus {CASE_A}", f"CASE 3/3 fuzz {CASE_C}"]
    first = report.errors[0]
    assert first.text.splitlines()[0] == "========= Invalid __global__ read of size 4 bytes"
    assert "out_of_bounds.py:77" in first.text and "of size 4,160 bytes" in first.text
    assert len(first.lines) == 5
    assert len(report.cases_started) == 3 and report.cases_finished == 3 and report.done
    assert report.cases_total == 3 and not report.tool_problems


def test_parse_clean_run():
    report = parse(CLEAN_OUTPUT)
    assert report.has_summary and report.error_count == 0 and not report.errors
    assert report.cases_finished == 2 and report.done


def test_parse_errors_past_the_print_limit_count_once():
    report = parse(PRINT_LIMIT_OUTPUT)
    assert report.error_count == 4096 and len(report.errors) == 1 and report.not_printed == 4095


def test_parse_api_error_and_failed_child():
    report = parse(API_ERROR_OUTPUT)
    assert report.error_count == 1
    assert report.errors[0].kind.startswith("Program hit cudaErrorLaunchFailure (error 719)")
    assert report.errors[0].case == f"CASE 1/2 corpus {CASE_A}"
    assert report.cases_finished == 0 and not report.done


@pytest.mark.parametrize("output, code, ok, reason", [
    (CLEAN_OUTPUT, 0, True, "PASS"),
    (OUT_OF_BOUNDS_OUTPUT, driver.SANITIZER_ERROR_EXIT, False, "compute-sanitizer reported 3 errors"),
    (PRINT_LIMIT_OUTPUT, driver.SANITIZER_ERROR_EXIT, False, "reported 4096 errors"),
    (API_ERROR_OUTPUT, driver.SANITIZER_ERROR_EXIT, False, "did not all run (0 of 2 finished)"),
    (CLEAN_OUTPUT, 1, False, "the sanitized process failed (exit code 1)"),
    (KILLED_OUTPUT, None, False, "timed out after 60 s"),
    (KILLED_OUTPUT, -9, False, "no ERROR SUMMARY"),
    ("========= COMPUTE-SANITIZER\n========= Error: No attachable process found. compute-sanitizer "
     "timed-out.\n========= ERROR SUMMARY: 0 errors\n", 1, False, "a problem of its own"),
])
def test_verdicts(output, code, ok, reason):
    report = parse(output)
    verdict, lines = driver.summarize(report, code=code, timeout=60, n_cases=report.cases_total or 2)
    assert verdict is ok
    assert reason in lines[-1], "\n".join(lines)


# -- the driver --

def _fake_sanitizer(tmp_path: Path, monkeypatch, output: str, code: int) -> Path:
    """A stand-in compute-sanitizer that prints ``output`` and exits ``code``."""
    transcript = tmp_path / "transcript.txt"
    transcript.write_text(output)
    script = tmp_path / "compute-sanitizer"
    script.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = "--version" ]; then echo "Version 2099.1.0 (stand-in)"; exit 0; fi\n'
        f'cat "{transcript}"\n'
        f"exit {code}\n"
    )
    script.chmod(0o755)
    monkeypatch.setattr(driver, "cuda_available", lambda: True)
    return script


@pytest.mark.skipif(os.name != "posix", reason="the stand-in sanitizer is a shell script")
@pytest.mark.parametrize("output, code, want", [
    (CLEAN_OUTPUT, 0, 0),
    (OUT_OF_BOUNDS_OUTPUT, driver.SANITIZER_ERROR_EXIT, 1),
])
def test_driver_verdict_with_a_stand_in_sanitizer(tmp_path, monkeypatch, capsys, output, code, want):
    script = _fake_sanitizer(tmp_path, monkeypatch, output, code)
    log = tmp_path / "run.log"
    rc = driver.main(["--sanitizer", str(script), "--warm-jobs", "0", "--sample", "1",
                      "--log", str(log), "--timeout", "60"])
    out = capsys.readouterr().out
    assert rc == want, out
    assert log.read_text() == output
    assert "Version 2099.1.0 (stand-in)" in out
    if want:
        assert "FAIL: compute-sanitizer reported 3 errors" in out
        assert f"first error, in: CASE 1/3 corpus {CASE_A}" in out
    else:
        assert "PASS: no memory errors" in out


def test_sanitizer_command_line():
    args = driver._parser().parse_args(["--kernel", "tests.sanitize.out_of_bounds", "--sample", "5",
                                        "--seed", "7", "--sanitizer-arg=--report-api-errors=no"])
    cmd = driver.sanitizer_command(args, "/cuda/bin/compute-sanitizer")
    joined = " ".join(cmd)
    for option in ("--tool memcheck", f"--error-exitcode {driver.SANITIZER_ERROR_EXIT}",
                   "--print-limit 100", "--target-processes all", "--destroy-on-device-error kernel",
                   "--report-api-errors=no"):
        assert option in joined
    tail = cmd[cmd.index(sys.executable):]
    assert tail == [sys.executable, "-m", "tests.sanitize.cases", "--kernel",
                    "tests.sanitize.out_of_bounds", "--sample", "5", "--seed", "7", "--size", "gpu"]


def test_finds_the_sanitizer_named_by_the_environment(tmp_path, monkeypatch):
    script = _fake_sanitizer(tmp_path, monkeypatch, CLEAN_OUTPUT, 0)
    monkeypatch.setenv(driver.SANITIZER_ENV, str(script))
    assert driver.find_sanitizer()[0] == str(script)


def test_no_sanitizer_exits_2(monkeypatch, capsys):
    monkeypatch.setattr(driver, "cuda_available", lambda: True)
    assert driver.main(["--sanitizer", "/nonexistent/compute-sanitizer"]) == 2
    err = capsys.readouterr().err
    assert "compute-sanitizer not found" in err and "--sanitizer PATH" in err


@pytest.mark.skipif(torch.cuda.is_available(), reason="tests the message on a machine without CUDA")
def test_no_cuda_exits_2():
    proc = subprocess.run([sys.executable, "-m", "tests.sanitize"], cwd=ROOT, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "no CUDA device" in proc.stderr


# -- the kernels --

def _nan_padded(t: torch.Tensor, rows: int) -> torch.Tensor:
    """``t`` ([n, d]) as the first rows of a ``[rows, d]`` buffer whose other rows are NaN."""
    big = torch.full((rows, t.shape[-1]), math.nan, dtype=t.dtype, device=t.device)
    big[: t.shape[0]] = t
    return big[: t.shape[0]]


def _check_out_of_bounds_numbers(device: str) -> None:
    """The out-of-bounds kernel reads the NaN rows past the end of k and v (inside the buffer here,
    so nothing faults) and still matches the float64 oracle: its bug is invisible to the numbers.
    (Against the oracle, not flash: the mutation gate mutates flash, and must not be helped here.)"""
    from oracle.dense import dense_attention
    from tests.sanitize import out_of_bounds

    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(65, 16, generator=gen).to(device) for _ in range(3))
    k, v = _nan_padded(k, 128), _nan_padded(v, 128)
    for is_causal in (False, True):
        o, lse = out_of_bounds.attention_with_lse(q, k, v, is_causal)
        o64, lse64 = dense_attention(q, k, v, is_causal)
        assert not o.isnan().any() and not lse.isnan().any()
        torch.testing.assert_close(o.double(), o64, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(lse.double(), lse64, rtol=1e-5, atol=1e-5)


def test_out_of_bounds_kernel_numbers_are_right():
    if torch.cuda.is_available():
        pytest.skip("the interpreter's run; test_out_of_bounds_kernel_numbers_are_right_on_gpu is the GPU's")
    _check_out_of_bounds_numbers("cpu")


@pytest.mark.gpu
def test_out_of_bounds_kernel_numbers_are_right_on_gpu():
    _check_out_of_bounds_numbers("cuda")


def test_run_case_runs_forward_and_backward():
    import flash

    calls = []

    class Spy:
        @staticmethod
        def attention_with_lse(q, k, v, is_causal=False):
            calls.append((tuple(q.shape), is_causal, q.requires_grad))
            return flash.attention_with_lse(q, k, v, is_causal)

    case = Case(n_q=3, n_k=5, head_dim=4, leading=(), dtype="float32", layout="contiguous")
    gate_cases.run_case(Spy, case, "cuda" if torch.cuda.is_available() else "cpu")
    assert calls == [((3, 4), False, True)]


def test_case_runner_refuses_without_cuda_and_lists_shards(capsys):
    if not torch.cuda.is_available():
        assert gate_cases.main(["--sample", "0"]) == 2
        assert "no CUDA device" in capsys.readouterr().err
    assert gate_cases.main(["--sample", "3", "--shard", "1/4", "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    n = len(gate_cases.all_cases(sample=3))
    assert [line.split()[1] for line in lines] == [f"{i}/{n}" for i in range(2, n + 1, 4)]
    assert gate_cases.main(["--shard", "4/4", "--list"]) == 2
