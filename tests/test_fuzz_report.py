"""``python -m fuzz report``: the table built from fuzz results, the error-model margins it shows,
and one report end to end.

The table is built from hand-made :class:`~fuzz.runner.CheckResult` lists, so each kind of cell is
tested without fuzzing anything; the margins are tested where they are made
(:func:`properties.error_model.record_margins`) and where they cross into a :class:`Verdict`; the
end-to-end run fuzzes two fast kernel modules (the oracle, and a float32 module whose lse is in base
2) for a few seconds, as a person would run it, in a subprocess.
"""

import functools
import io
import re
from pathlib import Path

import pytest
import torch

from fuzz.__main__ import _command, main
from fuzz.isolation import Verdict, run_check
from fuzz.report import markdown
from fuzz.runner import CheckResult, Progress
from properties import check_output_matches_oracle, check_rows_normalized, load_kernel
from properties import error_model as em
from properties.case import Case
from tests.helpers import run_as_a_person

ROOT = Path(__file__).resolve().parents[1]
REPLAY = functools.partial(_command, "repro")
CASE = Case(1, 1, 16, ())
SOFTCAP_NA = "kernel module K does not declare feature(s) softcap (FEATURES), which this case uses"


def _result(name: str, *verdicts: Verdict) -> CheckResult:
    result = CheckResult(name)
    for verdict in verdicts:
        result.record(CASE, verdict)
    return result


def _passing(*fractions: float, quantity: str = "output o") -> list[Verdict]:
    return [Verdict("pass", "", (em.Margin(quantity, f * 1e-3, 1e-3),)) for f in fractions]


def _rows(page: str) -> dict[str, list[str]]:
    """The table's cells by check name."""
    rows = [line for line in page.splitlines() if line.startswith("| ")]
    return {cells[0]: cells[1:] for cells in ([c.strip() for c in r.strip("|").split("|")] for r in rows)}


def test_cells_pass_with_the_worst_margin_fail_with_a_replay_line_and_na_with_the_reason():
    failing = Verdict("fail", "output o: error 3e-2 exceeds bound 1e-3\nsecond line")
    columns = {
        "good": [
            _result("check_output_matches_oracle", *_passing(0.25, 0.5, 0.125)),
            _result("check_rows_normalized", Verdict("pass"), Verdict("n/a", SOFTCAP_NA)),
            _result("check_softcap", *_passing(0.1, quantity="gradient dk")),
            _result("check_single_key"),
        ],
        "bad": [
            _result("check_output_matches_oracle", *_passing(0.9), failing),
            _result("check_rows_normalized", Verdict("n/a", SOFTCAP_NA), Verdict("n/a", "another reason")),
            _result("check_softcap", Verdict("n/a", SOFTCAP_NA)),
            _result("check_single_key", Verdict("pass")),
        ],
    }
    page = markdown(columns, replay=REPLAY, header="# title")
    rows = _rows(page)
    assert rows["check"] == ["`good`", "`bad`"]
    # The worst margin over the passing examples; a failing column shows no margin.
    assert rows["check_output_matches_oracle"] == ["pass (3 cases; 0.5 of bound, output o)", "FAIL [1]"]
    assert rows["check_rows_normalized"] == ["pass (1 case)", "n/a [2]"]
    # One note per distinct reason: the first reason seen, shared by the cells that give it.
    assert rows["check_softcap"] == ["pass (1 case; 0.1 of bound, gradient dk)", "n/a [2]"]
    assert rows["check_single_key"] == ["not run", "pass (1 case)"]
    assert rows["**summary**"][0].startswith("3 pass, 0 FAIL, 0 n/a, 1 not run (")
    assert rows["**summary**"][1].startswith("1 pass, 1 FAIL, 2 n/a (")
    notes = page.split("\n\n")[-1].splitlines()
    assert notes == [
        "1. `check_output_matches_oracle` on `bad`: fail: output o: error 3e-2 exceeds bound 1e-3",
        f"   replay: `{_command('repro', CASE, 'check_output_matches_oracle', 'bad')}`",
        f"2. n/a: {SOFTCAP_NA}",
    ]
    assert page.startswith("# title\n\n")
    table = [line for line in page.splitlines() if line.startswith("|")]
    assert len({line.count("|") for line in table}) == 1 and len({len(line) for line in table}) == 1


def test_a_pass_that_needed_a_second_run_says_so():
    note = "the worker process died (killed by SIGKILL (exit code -9)) after 0.9 s; run again"
    result = _result("check_single_key", Verdict("pass"), Verdict("pass", "", replayed=note))
    page = markdown({"k": [result]}, replay=REPLAY)
    assert _rows(page)["check_single_key"] == ["pass (2 cases) [1]"]
    notes = page.split("\n\n")[-1].strip()
    assert notes == f"1. `check_single_key` on `k`: 1 case(s) run twice, the first: {note}"


def test_a_failure_shrunk_into_another_kind_keeps_the_first():
    """Hypothesis shrinks every failure of a check as one bug: where it ends on a crash after an
    assertion, the note still names the assertion and how to replay it."""
    result = CheckResult("check_output_matches_oracle")
    big = Case(9, 9, 16, ())
    result.record(big, Verdict("fail", "output o: error 3e-2 exceeds bound 1e-3"))
    result.record(CASE, Verdict("crash", "the worker process died (killed by SIGKILL (exit code -9))"))
    assert result.failing_tally == "crash 1, fail 1"
    notes = markdown({"k": [result]}, replay=REPLAY).split("\n\n")[-1].splitlines()
    assert notes[2:] == [
        "   failing examples: crash 1, fail 1; the first found was a fail: "
        "output o: error 3e-2 exceeds bound 1e-3",
        f"   its replay: `{_command('repro', big, 'check_output_matches_oracle', 'k')}`",
    ]
    progress = io.StringIO()  # not a terminal: one line per check, with the tally
    Progress(budget=1.0, stream=progress).finish(result)
    assert "2 failing (crash 1, fail 1)" in progress.getvalue()
    one_kind = _result("check_rows_normalized", Verdict("fail", "a"), Verdict("fail", "b"))
    assert len(markdown({"k": [one_kind]}, replay=REPLAY).split("\n\n")[-1].splitlines()) == 2


def test_columns_must_list_the_same_checks():
    with pytest.raises(ValueError, match="checks differ"):
        markdown({"a": [CheckResult("x")], "b": [CheckResult("y")]}, replay=REPLAY)


def _assert_output(shift: float) -> None:
    """The error model on 3 x 4 ones, off by ``shift`` (float64, so the error is ``shift`` exactly)."""
    ones = torch.ones(3, 4, dtype=torch.float64)
    em.assert_within_error_model(em.OUTPUT, ones + shift, ones, ones, dtype=torch.float32, magnitude=1.0,
                                 scores=1.0, context="test")


def test_record_margins_records_every_comparison_inside_the_block_only():
    bound = em.floor(torch.float32, 1.0, 1.0)  # the reference is exact here: the bound is the floor
    _assert_output(0.0)  # outside: nothing to record into
    with em.record_margins() as margins:
        _assert_output(bound / 2)
        with pytest.raises(AssertionError, match="exceeds bound"):
            _assert_output(3 * bound)  # a failing comparison is recorded before it raises
    _assert_output(0.0)
    assert [m.quantity for m in margins] == ["output o", "output o"]
    assert [round(m.fraction, 6) for m in margins] == [0.5, 3.0]
    assert margins[0].bound == bound
    assert em.Margin("x", 0.0, 0.0).fraction == 0.0


def test_a_verdict_carries_the_margins_of_its_check():
    kernel, case = load_kernel("oracle.adapters.dense"), Case(5, 7, 16, (2,), "float16")
    verdict, _ = run_check(check_output_matches_oracle, kernel, case)
    assert verdict.status == "pass" and [m.quantity for m in verdict.margins] == ["output o"]
    assert 0 <= verdict.margins[0].fraction <= 1
    verdict, _ = run_check(check_rows_normalized, kernel, case)  # its bound is not the error model's
    assert verdict.status == "pass" and verdict.margins == ()


def test_an_unknown_kernel_is_a_bad_argument(capsys):
    assert main(["report", "--kernel", "tests.broken.no_such_module"]) == 2
    assert "no kernel module named ['tests.broken.no_such_module']" in capsys.readouterr().err


def test_report_end_to_end(tmp_path):
    broken, output = "tests.broken.lse_base2", tmp_path / "docs" / "conformance.md"
    args = ["-m", "fuzz", "report", "--kernel", "oracle.adapters.dense", "--kernel", broken,
            "--budget", "20", "--shrink-budget", "5", "--seed", "0", "--size", "cpu-quick",
            "--check", "check_output_matches_oracle", "--check", "check_lse_matches_oracle",
            "--check", "check_softcap", "--db", str(tmp_path / "db"), "--output", str(output)]
    run = run_as_a_person(*args, timeout=120, HYPOTHESIS_PROFILE="dev")
    assert run.returncode == 1  # a FAIL
    assert output.read_text() == run.stdout
    rows = _rows(run.stdout)
    for cell in rows["check_output_matches_oracle"]:  # the base-2 lse leaves the output right
        assert re.fullmatch(r"pass \(\d+ cases?; [0-9.e-]+ of bound, output o\)", cell)
    assert rows["check_lse_matches_oracle"][0].startswith("pass (")
    assert rows["check_lse_matches_oracle"][1] == "FAIL [1]"
    assert rows["check_softcap"][0].startswith("pass (") and rows["check_softcap"][1] == "n/a [2]"
    assert re.search(rf'^   replay: `python -m fuzz repro "Case\(.*\)" --check check_lse_matches_oracle '
                     rf"--kernel {broken}`$", run.stdout, re.M)
    assert f"2. n/a: kernel module {broken} does not declare feature(s) softcap (FEATURES)" in run.stdout
    assert "torch " in run.stdout and "triton " in run.stdout
    assert (f"Regenerate with `python -m fuzz report --kernel oracle.adapters.dense --kernel {broken} "
            "--budget 20 --profile dev --size cpu-quick --check check_output_matches_oracle") in run.stdout


def test_report_with_workers(tmp_path):
    # --workers shares each kernel's checks among processes, as `run --workers`: every row is still
    # judged, and the regenerate line keeps the option.
    args = ["-m", "fuzz", "report", "--kernel", "oracle.adapters.dense", "--budget", "12", "--seed", "0",
            "--size", "cpu-quick", "--check", "check_output_matches_oracle", "--check",
            "check_lse_matches_oracle", "--workers", "2", "--db", str(tmp_path / "db")]
    run = run_as_a_person(*args, timeout=180, HYPOTHESIS_PROFILE="dev")
    assert run.returncode == 0
    rows = _rows(run.stdout)
    for name in ("check_output_matches_oracle", "check_lse_matches_oracle"):
        assert rows[name][0].startswith("pass (")
    assert "--workers 2" in run.stdout
    assert main(["report", "--workers", "0"]) == 2


def test_a_check_that_ran_no_example_is_not_run_not_passed():
    """``fuzz run`` printed ``pass`` for a check whose share of the budget ended before its first
    example did (``check_window_extremes_exact``, ``tox -e fuzz``, 2026-12-01): nothing was checked."""
    empty = CheckResult("check_single_key")
    assert empty.verdict == "not run"
    inapplicable = CheckResult("check_single_key", examples=2, not_applicable=2)
    assert inapplicable.verdict == "n/a"
    ran = CheckResult("check_single_key", examples=1, passed=1)
    assert ran.verdict == "pass"
