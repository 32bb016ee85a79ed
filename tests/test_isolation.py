"""fuzz.isolation: a case whose worker is killed from outside (SIGKILL) runs once more in a fresh
worker, and that run gives the verdict; a worker that ends itself is the case's crash."""

from __future__ import annotations

import pytest

from fuzz.isolation import IsolatedChecker
from properties.case import Case

CHECK = "check_output_matches_oracle"


@pytest.fixture
def kill_state(tmp_path, monkeypatch):
    monkeypatch.setenv("FLASH_TEST_KILL_STATE", str(tmp_path))  # the spawned workers inherit it
    return tmp_path


def _verdict(kernel: str, case: Case):
    with IsolatedChecker(kernel, case_timeout=120) as checker:
        return checker.check(CHECK, case), checker.restarts


def test_a_killed_worker_is_not_the_verdict(kill_state):
    verdict, restarts = _verdict("tests.broken.fuzz_killed_once", Case(5, 7, 16, (2,), "float32", False))
    assert verdict.status == "pass", verdict
    assert "killed by SIGKILL (exit code -9)" in verdict.replayed
    assert (kill_state / "killed").exists() and restarts == 1


def test_killed_again_stays_a_crash(kill_state, monkeypatch):
    monkeypatch.setenv("FLASH_TEST_KILL_ALWAYS", "1")
    verdict, restarts = _verdict("tests.broken.fuzz_killed_once", Case(5, 7, 16, (2,), "float32", False))
    assert verdict.status == "crash" and verdict.failed
    assert verdict.message.startswith("the worker process died (killed by SIGKILL (exit code -9))")
    assert restarts == 2


def test_a_worker_that_exits_is_the_case_crash():
    verdict, restarts = _verdict("tests.broken.fuzz_exit_on_one_key", Case(3, 1, 16, (1,), "float32", False))
    assert verdict.status == "crash" and not verdict.replayed
    assert "(exit code 3)" in verdict.message
    assert restarts == 1  # not run again
