"""fuzz.isolation: a case whose worker is killed from outside (SIGKILL) runs once more in a fresh
worker, and that run gives the verdict; a worker that ends itself is the case's crash; a check that
ran the GPU out of memory runs once more alone on the card."""

from __future__ import annotations

import contextlib
import time

import pytest

from fuzz import isolation
from fuzz.isolation import CARD_HOLD_DIR, IsolatedChecker, memory_evidence, run_check
from fuzz.out_of_memory import CardHold
from properties import check_output_matches_oracle, load_kernel
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
    assert "host memory available" in verdict.message  # so the next such kill says whose it was
    assert restarts == 2


def test_the_rerun_of_a_killed_case_is_not_cut_by_the_budget(kill_state, monkeypatch):
    """A budget that ends between the kill and the rerun does not leave the kill as the verdict (a
    report's FAIL of 2026-12-06 had nothing else): the rerun gets its own case timeout."""
    asked = []
    once = IsolatedChecker._check_once

    def recording(self, check_name, case, give_up_at):
        asked.append(give_up_at)
        return once(self, check_name, case, give_up_at)

    monkeypatch.setattr(IsolatedChecker, "_check_once", recording)
    give_up_at = time.monotonic() + 120
    with IsolatedChecker("tests.broken.fuzz_killed_once", case_timeout=120) as checker:
        verdict = checker.check(CHECK, Case(5, 7, 16, (2,), "float32", False), give_up_at=give_up_at)
    assert verdict.status == "pass" and verdict.replayed, verdict
    assert asked == [give_up_at, None]


def test_memory_evidence_counts_kills_since_the_start(monkeypatch):
    assert "host memory available" in memory_evidence(None)
    monkeypatch.setattr(isolation, "oom_kill_count", lambda: 5)
    assert "OOM kills in this cgroup since the checker started: 2" in memory_evidence(3)


def test_a_worker_that_exits_is_the_case_crash():
    verdict, restarts = _verdict("tests.broken.fuzz_exit_on_one_key", Case(3, 1, 16, (1,), "float32", False))
    assert verdict.status == "crash" and not verdict.replayed
    assert "(exit code 3)" in verdict.message
    assert restarts == 1  # not run again


class _RecordedHold(CardHold):
    """A card hold (one process's: no lock files) that records which holds were taken, in order."""

    def __init__(self) -> None:
        super().__init__(None)
        self.taken: list[str] = []

    @contextlib.contextmanager
    def shared(self):
        self.taken.append("shared")
        yield

    @contextlib.contextmanager
    def exclusive(self):
        self.taken.append("exclusive")
        yield


@pytest.fixture
def oom_state(tmp_path, monkeypatch):
    monkeypatch.setenv("FLASH_TEST_OOM_STATE", str(tmp_path))
    return tmp_path


def test_out_of_memory_runs_again_alone_on_the_card(oom_state):
    card = _RecordedHold()
    kernel = load_kernel("tests.broken.fuzz_out_of_memory_once")
    verdict, _ = run_check(check_output_matches_oracle, kernel, Case(5, 7, 16, (2,), "float32", False), card)
    assert verdict.status == "pass", verdict
    assert "OutOfMemoryError" in verdict.replayed and "alone on the card" in verdict.replayed
    assert card.taken == ["shared", "exclusive"]


def test_out_of_memory_alone_too_is_the_verdict(oom_state, monkeypatch):
    """A kernel that needs more than the card has fails alone too."""
    monkeypatch.setenv("FLASH_TEST_OOM_ALWAYS", "1")
    kernel = load_kernel("tests.broken.fuzz_out_of_memory_once")
    case = Case(5, 7, 16, (2,), "float32", False)
    verdict, _ = run_check(check_output_matches_oracle, kernel, case, _RecordedHold())
    assert verdict.failed and "OutOfMemoryError" in verdict.message and verdict.replayed


def test_a_worker_passes_the_rerun_note_back(oom_state, monkeypatch, tmp_path):
    monkeypatch.setenv(CARD_HOLD_DIR, str(tmp_path / "hold"))  # the spawned worker holds the card here
    case = Case(5, 7, 16, (2,), "float32", False)
    verdict, restarts = _verdict("tests.broken.fuzz_out_of_memory_once", case)
    assert verdict.status == "pass" and "alone on the card" in verdict.replayed, verdict
    assert restarts == 0
    assert (tmp_path / "hold" / "card-room.lock").exists()
