"""fuzz.out_of_memory: a test that ran the GPU out of memory runs again, alone on the card.

On the CPU the errors are raised by hand: what matters is which errors count as the GPU's memory,
that the second run is alone (no other worker's test in progress) and that it gives the verdict.
"""

from __future__ import annotations

import gc
import weakref

import pytest
import torch

from fuzz import out_of_memory
from tests.helpers import ROOT, run_as_a_person

CUDA_OOM = "CUDA out of memory. Tried to allocate 1.25 GiB. GPU 0 has a total capacity of 79.18 GiB"


@pytest.mark.parametrize("error", [
    torch.OutOfMemoryError(CUDA_OOM),
    RuntimeError("Triton Error [CUDA]: out of memory"),
    RuntimeError("CUDA error: out of memory\nCUDA kernel errors might be asynchronously reported"),
    ExceptionGroup("Hypothesis found 2 distinct failures.",
                   [AssertionError("x"), torch.OutOfMemoryError(CUDA_OOM)]),
], ids=["torch", "triton", "cuda-runtime", "group"])
def test_out_of_memory_is_recognised(error):
    assert out_of_memory.is_out_of_memory(error)
    wrapped = AssertionError("check_current_stream failed: the calls on a side stream crashed")
    wrapped.__cause__ = error  # as properties._common.crash_is_failure chains it
    assert out_of_memory.is_out_of_memory(wrapped)


@pytest.mark.parametrize("error", [
    AssertionError("output o: max error 3.1e-02 at (0, 5, 7), bound 1.2e-03"),
    RuntimeError("DefaultCPUAllocator: not enough memory: you tried to allocate 1099511627776 bytes."),
    ValueError("head_dim must be at most 256, got 300"),
    ExceptionGroup("two", [AssertionError("a"), TypeError("b")]),
], ids=["assertion", "host-memory", "value", "group"])
def test_other_errors_are_not(error):
    assert not out_of_memory.is_out_of_memory(error)


def test_drop_frames_frees_what_the_failed_call_held():
    class Big:
        pass

    def call():
        held = Big()
        ref.append(weakref.ref(held))
        raise torch.OutOfMemoryError(CUDA_OOM)

    ref: list = []
    error = _raised_in(call)
    group = ExceptionGroup("wrapped", [error])  # as Hypothesis keeps it
    gc.collect()
    assert ref[0]() is not None  # the traceback keeps the call's locals alive
    out_of_memory.drop_frames(group)
    gc.collect()
    assert ref[0]() is None


def _raised_in(call) -> BaseException:
    try:
        call()
    except BaseException as e:
        return e
    raise AssertionError("call did not raise")


RUNS_OUT = '''
import os, pathlib, time
import pytest, torch

STATE = pathlib.Path(os.environ["OOM_STATE"])


def test_out_once():
    flag = STATE / "out_once"
    if not flag.exists():  # the first run: raise while another worker's test is in progress
        flag.touch()
        deadline = time.monotonic() + 10
        while not list(STATE.glob("active-*")) and time.monotonic() < deadline:
            time.sleep(0.01)
        if list(STATE.glob("active-*")):
            (STATE / "overlapped").touch()
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
    busy = sorted(p.name for p in STATE.glob("active-*"))
    assert not busy, f"run again beside {busy}"


def test_out_always():
    raise RuntimeError("Triton Error [CUDA]: out of memory")


def test_wrong():
    assert 1 == 2, "a wrong answer is not run again"
'''

BUSY = '''
import os, pathlib, time
import pytest

STATE = pathlib.Path(os.environ["OOM_STATE"])


@pytest.mark.parametrize("i", range(12))
def test_busy(i):
    marker = STATE / f"active-{i}"
    marker.touch()
    time.sleep(0.3)
    marker.unlink()
'''


@pytest.mark.parametrize("workers", [["-n", "2", "--dist", "loadfile"], []], ids=["xdist", "one-process"])
def test_rerun_alone_gives_the_verdict(tmp_path, workers):
    state = tmp_path / "state"
    state.mkdir()
    (tmp_path / "test_runs_out.py").write_text(RUNS_OUT)
    (tmp_path / "test_busy.py").write_text(BUSY)  # --dist loadfile: on the other worker
    result = run_as_a_person("-m", "pytest", "-p", "fuzz.out_of_memory", "-p", "no:cacheprovider", "-q",
                             "-rf", *workers, "test_runs_out.py", "test_busy.py", cwd=tmp_path,
                             timeout=300, OOM_STATE=str(state), PYTHONPATH=str(ROOT))
    out = result.stdout + result.stderr
    assert "2 failed, 13 passed" in out
    assert "FAILED test_runs_out.py::test_wrong" in out
    assert "FAILED test_runs_out.py::test_out_always" in out
    section = out.split("run again alone after running the GPU out of memory")[1]
    assert ("PASSED alone: test_runs_out.py::test_out_once (first run: OutOfMemoryError: CUDA out of "
            "memory") in section
    assert "FAILED alone: test_runs_out.py::test_out_always (first run: RuntimeError: Triton Error" in section
    assert "test_wrong" not in section.split("short test summary")[0]
    if workers:  # the first run met another worker's test, and the second did not
        assert (state / "overlapped").exists()
