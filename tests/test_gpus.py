"""One GPU per worker (:mod:`fuzz.gpus`), tested on a CPU with made-up device counts.

The pure parts (worker names, which device, the cap) take fake counts and environments. Three
runs in subprocesses then fake the count where the suite asks for it (a ``sitecustomize`` that
replaces :func:`fuzz.gpus.visible_device_count`) and check the wiring: pytest-xdist workers pinned
by ``conftest.py``, the cap refused before any worker starts, and ``python -m fuzz run --workers 2``
with each kernel process on its own (pretend) card and the two workers' results in one table.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fuzz import gpus, parallel

ROOT = Path(__file__).resolve().parents[1]


def test_xdist_worker_names():
    assert [gpus.xdist_worker_index(n) for n in ("gw0", "gw3", "gw15")] == [0, 3, 15]
    assert [gpus.xdist_worker_index(n) for n in (None, "", "master", "gw", "mine3", "gw3x")] == [None] * 6


def test_sixteen_workers_on_eight_gpus_are_two_per_card():
    chosen = [gpus.gpu_for_worker(i, 8) for i in range(16)]
    assert chosen == list(range(8)) * 2


@pytest.mark.parametrize("count", [0, 1])
def test_with_no_gpu_or_one_nothing_is_chosen(count):
    assert [gpus.gpu_for_worker(i, count) for i in range(4)] == [None] * 4
    assert gpus.worker_devices(4, env={}, device_count=lambda: count) == [None] * 4


def test_a_worker_past_the_cap_is_refused():
    assert gpus.gpu_for_worker(15, 8, per_gpu_cap=2) == 7
    with pytest.raises(ValueError, match="worker 16 is past 2 per GPU on 8 GPU"):
        gpus.gpu_for_worker(16, 8, per_gpu_cap=2)


def test_visible_devices_follow_the_parents_list():
    assert gpus.visible_devices({}, 3) == ["0", "1", "2"]
    assert gpus.visible_devices({"CUDA_VISIBLE_DEVICES": "4, 5,6,7"}, 4) == ["4", "5", "6", "7"]
    # NVML counted what CUDA would see: up to the first ordinal the machine lacks.
    assert gpus.visible_devices({"CUDA_VISIBLE_DEVICES": "2,0,9"}, 2) == ["2", "0"]
    # A count beyond the list (a pinned parent, a made-up count) chooses among those listed only.
    assert gpus.worker_devices(2, env={"CUDA_VISIBLE_DEVICES": "6"}, device_count=lambda: 2) == [None, None]
    pinned = {"PYTEST_XDIST_WORKER": "gw1", "CUDA_VISIBLE_DEVICES": "6"}
    assert gpus.pin_xdist_worker(pinned, device_count=lambda: 2) is None
    uuids = "GPU-aaaa,GPU-bbbb"
    assert gpus.visible_devices({"CUDA_VISIBLE_DEVICES": uuids}, 2) == uuids.split(",")
    two = {"CUDA_VISIBLE_DEVICES": "4,5"}
    assert gpus.worker_devices(3, env=two, device_count=lambda: 2) == ["4", "5", "4"]


def test_an_xdist_worker_is_pinned_to_its_card():
    env = {"PYTEST_XDIST_WORKER": "gw11"}
    assert gpus.pin_xdist_worker(env, device_count=lambda: 8) == "3"
    assert env["CUDA_VISIBLE_DEVICES"] == "3"
    env = {"PYTEST_XDIST_WORKER": "gw5", "CUDA_VISIBLE_DEVICES": "4,5,6,7"}
    assert gpus.pin_xdist_worker(env, device_count=lambda: 4) == "5"
    assert env["CUDA_VISIBLE_DEVICES"] == "5"


@pytest.mark.parametrize("count", [0, 1])
@pytest.mark.parametrize("worker", ["gw0", "gw7"])
def test_with_no_gpu_or_one_no_worker_is_pinned(count, worker):
    env = {"PYTEST_XDIST_WORKER": worker}
    assert gpus.pin_xdist_worker(env, device_count=lambda: count) is None
    assert env == {"PYTEST_XDIST_WORKER": worker}


def test_outside_xdist_nothing_is_counted_or_pinned():
    def no_counting() -> int:
        raise AssertionError("counted the GPUs outside a pytest-xdist worker")

    env = {"CUDA_VISIBLE_DEVICES": "0,1"}
    assert gpus.pin_xdist_worker(env, device_count=no_counting) is None
    assert env == {"CUDA_VISIBLE_DEVICES": "0,1"}


def test_the_cap_names_both_numbers():
    message = gpus.too_many_workers(17, 2, device_count=lambda: 8)
    assert "17 workers asked for" in message and "8 visible GPU(s) at 2 per GPU" in message
    assert "take 16" in message
    assert gpus.too_many_workers(21, 6, device_count=lambda: 1) is not None  # the H200 that ran out
    assert gpus.too_many_workers(16, 2, device_count=lambda: 8) is None


def test_no_cap_no_workers_or_no_gpu_is_no_complaint():
    def no_counting() -> int:
        raise AssertionError("counted the GPUs with nothing to check")

    assert gpus.too_many_workers(64, None, device_count=no_counting) is None
    assert gpus.too_many_workers(None, 2, device_count=no_counting) is None  # not under xdist
    assert gpus.too_many_workers(0, 2, device_count=no_counting) is None  # -n 0
    assert gpus.too_many_workers(64, 1, device_count=lambda: 0) is None  # a CPU run


def test_the_cap_must_be_a_positive_number():
    assert gpus.parse_cap(None) is None and gpus.parse_cap("") is None
    assert gpus.parse_cap("3") == 3
    for bad in ("0", "-1", "two"):
        with pytest.raises(argparse.ArgumentTypeError, match="at least 1"):
            gpus.parse_cap(bad)


def test_the_checks_are_dealt_round_robin_and_gathered_in_order():
    names = [f"check_{i}" for i in range(5)]
    plan = parallel.deal(names, 2, devices=["0", "1"])
    assert plan == [(["check_0", "check_2", "check_4"], "0"), (["check_1", "check_3"], "1")]
    assert parallel._dealt_order(plan) == names
    # More workers than checks: the extra ones would have nothing to fuzz.
    shares = [share for share, _ in parallel.deal(names[:2], 8, devices=[None] * 2)]
    assert shares == [["check_0"], ["check_1"]]


# -- in subprocesses, with a made-up GPU count ------------------------------------------------------


def _fake_gpus(tmp_path: Path, count: int) -> dict:
    """An environment in which :func:`fuzz.gpus.visible_device_count` says ``count``."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        f"import fuzz.gpus\nfuzz.gpus.visible_device_count = lambda: {count}\n")
    return {"PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}


def _run(*args: str, env: dict, timeout: float = 120) -> subprocess.CompletedProcess:
    # Not a worker of this run's pytest-xdist, if it has one: the child decides for itself.
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST_")}
    result = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True,
                            timeout=timeout, env={**inherited, **env})
    print(f"$ python {' '.join(args)}  (exit {result.returncode})\n{result.stdout}{result.stderr}")
    return result


def test_importing_the_suite_touches_no_cuda():
    # Pinning in a worker works only while nothing has asked CUDA anything yet.
    spy = (
        "import torch\n"
        "asked = []\n"
        "for name in ('is_available', 'device_count', 'init', 'current_device', 'get_device_name'):\n"
        "    setattr(torch.cuda, name, lambda *a, _n=name, **k: asked.append(_n))\n"
        "import conftest, fuzz.__main__, fuzz.parallel, fuzz.runner\n"
        "print('asked:', asked)\n"
    )
    done = _run("-c", spy, env={"PYTHONPATH": str(ROOT)})
    assert done.returncode == 0 and "asked: []" in done.stdout


PROBE = """\
import os


def test_probe(tmp_path_factory):
    seen = os.environ["PYTEST_XDIST_WORKER"], os.environ.get("CUDA_VISIBLE_DEVICES")
    (tmp_path_factory.getbasetemp().parents[1] / "-".join(seen)).touch()
"""


def test_xdist_workers_pin_themselves_before_the_tests_run(tmp_path):
    (tmp_path / "test_probe.py").write_text(PROBE)
    # The suite's conftest as a plugin, so that it runs for a test file outside the repository;
    # --dist each runs the probe on every worker.
    env = {**_fake_gpus(tmp_path, 2), "CUDA_VISIBLE_DEVICES": "6,7"}
    done = _run("-m", "pytest", "-n", "2", "--dist", "each", "-p", "no:cacheprovider", "-p", "conftest",
                "--rootdir", str(ROOT), "-c", str(ROOT / "pyproject.toml"), "--basetemp", str(tmp_path / "t"),
                str(tmp_path / "test_probe.py"), env=env)
    assert done.returncode == 0
    assert sorted(p.name for p in tmp_path.glob("gw*")) == ["gw0-6", "gw1-7"]


def test_pytest_refuses_more_workers_than_the_cap(tmp_path):
    done = _run("-m", "pytest", "-n", "3", "--max-workers-per-gpu", "1", "-p", "no:cacheprovider",
                "tests/test_gpus.py", env=_fake_gpus(tmp_path, 2))
    assert done.returncode == pytest.ExitCode.USAGE_ERROR
    assert "3 workers asked for, but 2 visible GPU(s) at 1 per GPU" in done.stderr


KERNEL = """\
# The dense oracle, noting which CUDA_VISIBLE_DEVICES its process saw; attention() dies on n_k = 1.
import os
from pathlib import Path

from oracle.adapters import dense


def _note():
    Path(os.environ["PROBE_DIR"], "seen-" + os.environ.get("CUDA_VISIBLE_DEVICES", "none")).touch()


def attention(q, k, v, is_causal=False):
    _note()
    if k.shape[-2] == 1:
        os._exit(3)
    return dense.attention(q, k, v, is_causal)


def attention_with_lse(q, k, v, is_causal=False):
    _note()
    return dense.attention_with_lse(q, k, v, is_causal)
"""


def test_fuzz_run_spreads_its_workers_and_merges_their_results(tmp_path):
    env = _fake_gpus(tmp_path, 2)
    (tmp_path / "site" / "probe_kernel.py").write_text(KERNEL)
    output, lse = "check_output_matches_oracle", "check_lse_matches_oracle"
    done = _run("-m", "fuzz", "run", "--workers", "2", "--kernel", "probe_kernel", "--budget", "6",
                "--profile", "dev", "--check", output, "--check", lse, "--size", "cpu-quick", "--seed", "0",
                "--db", str(tmp_path / "db"),
                env={**env, "CUDA_VISIBLE_DEVICES": "6,7", "PROBE_DIR": str(tmp_path)})
    assert done.returncode == 1
    assert "2 checks, 6 s" in done.stdout and "2 workers on GPUs 6,7" in done.stdout
    assert f"[worker 0, GPU 6] fuzzed {output}" in done.stderr
    assert f"[worker 1, GPU 7] fuzzed {lse}" in done.stderr
    assert sorted(p.name for p in tmp_path.glob("seen-*")) == ["seen-6", "seen-7"]
    # One table, in the order the checks were named: the crash found by one worker, the pass of the other.
    table = done.stdout[done.stdout.index("property"):]
    assert table.index(output) < table.index(lse)
    assert f"FAILED {output}: crash" in done.stdout and "n_k=1," in done.stdout
    assert re.search(rf"{lse}\s+[1-9]\d*\s+0\s+0\s+pass", done.stdout)
    assert "FAIL: 1 of 2 checks failed" in done.stdout
    assert any((tmp_path / "db").iterdir())  # the crash was saved in the one database


def test_fuzz_run_refuses_more_workers_than_the_cap(tmp_path):
    done = _run("-m", "fuzz", "run", "--workers", "5", "--budget", "1", env={
        **_fake_gpus(tmp_path, 2), gpus.CAP_ENV: "2"})
    assert done.returncode == 2
    assert "5 workers asked for, but 2 visible GPU(s) at 2 per GPU" in done.stderr


class _FakeCuda:
    """torch.cuda's four calls that release_cached_memory makes, with made-up byte counts."""

    def __init__(self, initialized: bool, reserved: int, allocated: int):
        self.initialized, self.reserved, self.allocated, self.emptied = initialized, reserved, allocated, 0

    def is_initialized(self) -> bool:
        return self.initialized

    def memory_reserved(self) -> int:
        return self.reserved

    def memory_allocated(self) -> int:
        return self.allocated

    def empty_cache(self) -> None:
        self.emptied += 1
        self.reserved = self.allocated


@pytest.mark.parametrize("initialized, reserved, allocated, released", [
    (False, 0, 0, False),  # CUDA never used: nothing to release, and nothing may start it
    (True, 5 << 30, 4 << 30, False),  # 1 GiB cached: at the limit, kept
    (True, 5 << 30, 1 << 30, True),  # 4 GiB cached: released
    (True, 20 << 30, 20 << 30, False),  # 20 GiB in use (a live tensor), nothing cached
])
def test_cached_memory_past_the_limit_goes_back_to_the_driver(initialized, reserved, allocated, released):
    cuda = _FakeCuda(initialized, reserved, allocated)
    assert gpus.release_cached_memory(1 << 30, cuda) is released
    assert cuda.emptied == int(released)
    assert cuda.reserved == (allocated if released else reserved)


def test_releasing_cached_memory_does_not_start_cuda():
    # In a CPU run (and in a worker that has not touched the GPU yet) the teardown hook runs after
    # every test: it must neither start CUDA nor fail.
    code = ("import torch; from fuzz import gpus; "
            "assert not gpus.release_cached_memory(); assert not torch.cuda.is_initialized()")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
