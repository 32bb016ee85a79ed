"""``python -m fuzz`` end to end, on kernels that are wrong or crash on a few shapes only.

A kernel wrong only when ``n_k % 64 == 1`` (``tests/broken/fuzz_tail_key.py``) is found by
``fuzz run``, shrunk to ``n_k = 65``, saved, replayed by ``fuzz replay``, reproduced by
``fuzz repro`` and pinned by ``fuzz pin``, after which the plain regression test fails on it. A
kernel that kills its process (``tests/broken/fuzz_exit_on_one_key.py``) is reported as a crash of
one case while the run goes on. Each command runs as a person would run it, in a subprocess.
"""

import re
import subprocess
from pathlib import Path

from properties.case import Case
from tests.helpers import run_as_a_person

ROOT = Path(__file__).resolve().parents[1]
WRONG = "tests.broken.fuzz_tail_key"
CRASHES = "tests.broken.fuzz_exit_on_one_key"
OUTPUT = "check_output_matches_oracle"


def _run(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return run_as_a_person(*args, timeout=timeout, **(env or {}))


def _minimal_case(stdout: str) -> Case:
    match = re.search(r"minimal case: (Case\(.*\))", stdout)
    assert match, stdout
    return Case.parse(match.group(1))


def test_fuzzer_finds_shrinks_saves_replays_reproduces_and_pins(tmp_path):
    db = str(tmp_path / "db")
    # A fixed seed whose 7th case has n_k % 64 == 1, so the test does not depend on luck.
    found = _run("-m", "fuzz", "run", "--kernel", WRONG, "--budget", "30", "--check", OUTPUT,
                 "--db", db, "--seed", "3", "--size", "cpu-quick", "--profile", "nightly")
    assert found.returncode == 1
    case = _minimal_case(found.stdout)
    assert case.n_k == 65 and case.n_q in (1, 65) and case.head_dim == 16 and case.leading == (), case
    assert f'python -m fuzz repro "{case}" --check {OUTPUT} --kernel {WRONG}' in found.stdout
    assert re.search(rf"{OUTPUT}\s+\d+\s+[1-9]\d*\s+0\s+FAIL", found.stdout), found.stdout

    replayed = _run("-m", "fuzz", "replay", "--db", db, "--kernel", WRONG, "--check", OUTPUT)
    assert replayed.returncode == 1
    assert f"FAIL    {OUTPUT}\t{case}" in replayed.stdout
    fixed = _run("-m", "fuzz", "replay", "--db", db, "--kernel", "flash", "--check", OUTPUT)
    assert fixed.returncode == 0 and f"PASS    {OUTPUT}\t{case}" in fixed.stdout

    reproduced = _run("-m", "fuzz", "repro", str(case), "--kernel", WRONG, "--check", OUTPUT)
    assert reproduced.returncode == 1
    assert "exceeds bound" in reproduced.stdout and str(case) in reproduced.stdout

    corpus = tmp_path / "corpus.txt"
    pinned = _run("-m", "fuzz", "pin", str(case), "--check", OUTPUT, "--corpus", str(corpus))
    assert pinned.returncode == 0 and f"{OUTPUT}\t{case}" in corpus.read_text()

    env = {"FLASH_FUZZ_CORPUS": str(corpus)}
    suite = ["-m", "pytest", "tests/test_regressions.py", "-q", "-p", "no:cacheprovider"]
    broken = _run(*suite, "--kernel", WRONG, env=env)
    assert broken.returncode == 1 and "1 failed" in broken.stdout


def test_a_crashing_kernel_fails_one_case_and_the_run_goes_on(tmp_path):
    db = str(tmp_path / "db")
    checks = ("--check", OUTPUT, "--check", "check_lse_matches_oracle")
    crashed = _run("-m", "fuzz", "run", "--kernel", CRASHES, "--budget", "10", *checks,
                   "--db", db, "--seed", "0")
    assert crashed.returncode == 1
    assert f"FAILED {OUTPUT}: crash" in crashed.stdout
    assert "the worker process died (exit code 3)" in crashed.stdout
    assert _minimal_case(crashed.stdout).n_k == 1
    # The next check ran on, in a fresh worker, and passed: attention_with_lse does not crash.
    assert re.search(r"check_lse_matches_oracle\s+[1-9]\d*\s+0\s+0\s+pass", crashed.stdout)

    replayed = _run("-m", "fuzz", "replay", "--db", db, "--kernel", CRASHES, *checks)
    assert replayed.returncode == 1 and f"CRASH   {OUTPUT}" in replayed.stdout


def test_a_line_that_is_not_a_case_is_refused_with_the_reason():
    """The docs write ``Case(...)`` for "the line a failure prints"; pasted as it is, ``repro`` and
    ``pin`` say what they expected (exit status 2), not a traceback."""
    for command in ("repro", "pin"):
        result = _run("-m", "fuzz", command, "Case(...)", "--check", OUTPUT, timeout=120)
        assert result.returncode == 2
        assert "expected a line like 'Case(n_q=1, n_k=1, ...)'" in result.stderr
        assert "Traceback" not in result.stderr
