"""Each format's rules for a grader that could not run (issue 28, the table in
docs/grading-errors.md), on the evidence they read: what Harbor's test.sh left behind,
and a SWE-bench eval run. The same rules on real sandboxes: tests/formats/harbor and
tests/formats/swebench `test_grading_errors.py`."""

from __future__ import annotations

import pytest

from orsbox.formats.harbor.could_not_run import VerifierRun, grading_error, reports_named
from orsbox.formats.swebench.could_not_run import eval_error
from orsbox.formats.swebench.families import END, START
from orsbox.sandbox.base import ExecResult

# Terminal-Bench 2's verifier shape: bootstrap the runner, run it, 1 or 0 from its status
TB2_TEST_SH = """#!/bin/bash
apt-get update
apt-get install -y curl
curl -LsSf https://astral.sh/uv/0.9.5/install.sh | sh
source $HOME/.local/bin/env
uvx -p 3.13 -w pytest==8.4.1 -w pytest-json-ctrf==0.3.5 \\
  pytest --ctrf /logs/verifier/ctrf.json /tests/test_outputs.py -rA
if [ $? -eq 0 ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
"""
CTRF = "/logs/verifier/ctrf.json"
OFFLINE = (
    "W: Failed to fetch http://deb.debian.org/debian/dists/bookworm/InRelease  "
    "Temporary failure resolving 'deb.debian.org'\n"
    "E: Unable to locate package curl\n"
    "/tests/test.sh: line 4: curl: command not found\n"
    "/tests/test.sh: line 5: /root/.local/bin/env: No such file or directory\n"
    "/tests/test.sh: line 6: uvx: command not found\n"
)
PYTEST_FAILED = "tests/test_outputs.py::test_a FAILED\n==== 1 failed, 2 passed in 0.31s ====\n"


def run(
    stdout: str = "",
    *,
    reward: float | None = 0.0,
    test_sh: str = TB2_TEST_SH,
    reports: frozenset[str] = frozenset(),
    timed_out: bool = False,
    problem: str | None = None,
) -> VerifierRun:
    return VerifierRun(test_sh, stdout, timed_out, 900.0, reward, reports, problem)


# -- Harbor / Terminal-Bench 2 ------------------------------------------------------------
def test_the_report_a_tb2_test_sh_names_is_found() -> None:
    assert reports_named(TB2_TEST_SH) == [CTRF]
    assert (
        reports_named("echo 1 > /logs/verifier/reward.txt\ncat /logs/verifier/test-stdout.txt")
        == []
    )


@pytest.mark.parametrize(
    ("verifier", "cause", "named"),
    [
        (run(timed_out=True, reward=1.0), "verifier-timeout", "900s"),
        (run("the tests crashed: boom", reward=None), "no-reward-file", "the tests crashed: boom"),
        (run("ok", reward=None, problem="reward.txt is empty"), "bad-reward-file", "is empty"),
        (
            run(reward=None, problem="reward.txt is empty", timed_out=True),
            "verifier-timeout",
            "900s",
        ),
        (run(OFFLINE), "verifier-offline", "Temporary failure resolving 'deb.debian.org'"),
        (
            run("E: Unable to locate package curl\nuvx: command not found\n"),
            "runner-missing",
            "uvx",
        ),
        (run("/usr/bin/python3: No module named pytest\n"), "tests-did-not-run", CTRF),
        (run("sh: 1: pytest: not found\n", test_sh="pytest /tests\n"), "runner-missing", "pytest"),
    ],
)
def test_harbor_verifier_that_could_not_run(verifier: VerifierRun, cause: str, named: str) -> None:
    error = grading_error(verifier)
    assert error is not None and error.cause == cause
    assert named in error.message


@pytest.mark.parametrize(
    "verifier",
    [
        run(PYTEST_FAILED),  # pytest's summary: the tests ran, some failed
        run("", reports=frozenset({CTRF})),  # the report exists: the tests ran
        run(OFFLINE, reward=1.0),  # a reward above 0 stands
        run("out.txt does not say hello\n", test_sh="cat /app/out.txt\n"),  # a plain check
        run("jq: command not found\n", test_sh="jq . /app/out.json\n"),  # not a test runner
    ],
)
def test_harbor_zero_that_stands(verifier: VerifierRun) -> None:
    assert grading_error(verifier) is None


# -- SWE-bench family ---------------------------------------------------------------------
COMPLETE = f"+ : '{START}'\ntests/test_ops.py::test_add PASSED\n+ : '{END}'\n"


@pytest.mark.parametrize(
    ("result", "log", "markers", "cause"),
    [
        (ExecResult("", None, timed_out=True), COMPLETE[:40], True, "eval-timeout"),
        (ExecResult("", 137), "+ conda activate testbed\n", True, "eval-killed"),
        (ExecResult("", 0, oom_killed=True), f"+ : '{START}'\n", True, "eval-killed"),
        (ExecResult("", 3), "+ conda activate testbed\n", True, "eval-markers-missing"),
        (ExecResult("", 137), "test_div PASSED\n", False, "eval-killed"),
    ],
)
def test_swe_eval_that_could_not_run(
    result: ExecResult, log: str, markers: bool, cause: str
) -> None:
    error = eval_error(result, log, 1800, markers=markers)
    assert error is not None and error.cause == cause


@pytest.mark.parametrize(
    ("result", "log", "markers"),
    [(ExecResult("", 1), COMPLETE, True), (ExecResult("", 1), "test_div FAILED\n", False)],
)
def test_swe_eval_log_that_is_a_verdict(result: ExecResult, log: str, markers: bool) -> None:
    assert eval_error(result, log, 1800, markers=markers) is None
