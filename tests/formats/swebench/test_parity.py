"""Grading parity: recorded test logs (written here in each runner's format) judged by
orsbox's grading path and by the swebench package's own `get_eval_report`, called
directly: the verdicts must agree, and must be the ones the logs call for."""

from __future__ import annotations

from pathlib import Path

import pytest
from swebench.harness.grading import get_eval_report
from swebench.harness.utils import make_test_spec

from orsbox.formats.swebench.families import Instance
from orsbox.formats.swebench.grading import judge

START, END = ">>>>> Start Test Output", ">>>>> End Test Output"


def log(body: str, exit_code: int | None = 0) -> str:
    code = f">>>>> Test Exit Code: {exit_code}\n" if exit_code is not None else ""
    return f"+ cd /testbed\n+ : '{START}'\n{body}\n+ : '{END}'\n{code}+ git checkout x\n"


PYTEST_OK = """tests/test_a.py::test_new PASSED
PASSED tests/test_a.py::test_new
PASSED tests/test_a.py::test_old
XFAIL tests/test_a.py::test_flaky - reason"""
PYTEST_P2P_FAILS = """PASSED tests/test_a.py::test_new
FAILED tests/test_a.py::test_old - AssertionError: 2 != 3"""
DJANGO_OK = """test_new (utils_tests.test_text.TestText) ... ok
test_old (utils_tests.test_text.TestText) ... ok
test_skip (utils_tests.test_text.TestText) ... skipped 'no db'"""
DJANGO_FAIL = """test_new (utils_tests.test_text.TestText) ... FAIL
test_old (utils_tests.test_text.TestText) ... ok
======================================================================
FAIL: test_new (utils_tests.test_text.TestText)"""
SYMPY_OK = """test_new ok
test_old ok
tests finished: 2 passed, in 0.10 seconds"""
SYMPY_ERROR = """test_new E
test_old ok"""
GO_OK = """=== RUN   TestNew
--- PASS: TestNew (0.00s)
=== RUN   TestOld
--- PASS: TestOld (0.00s)
ok  	example.com/calc	0.002s"""

PY = ("tests/test_a.py::test_new", "tests/test_a.py::test_old")
DJ = ("test_new (utils_tests.test_text.TestText)", "test_old (utils_tests.test_text.TestText)")
SY = ("test_new", "test_old")
GO = ("TestNew", "TestOld")

CASES = [
    # (name, parser, (F2P test, P2P test), log, resolved)
    ("pytest resolved", "parse_log_pytest", PY, log(PYTEST_OK), True),
    ("pytest P2P broken", "parse_log_pytest", PY, log(PYTEST_P2P_FAILS, 1), False),
    ("pytest spoofed: exit 1, no failure", "parse_log_pytest", PY, log(PYTEST_OK, 1), False),
    ("pytest v2 resolved", "parse_log_pytest_v2", PY, log(PYTEST_OK), True),
    ("django resolved", "parse_log_django", DJ, log(DJANGO_OK), True),
    ("django F2P fails", "parse_log_django", DJ, log(DJANGO_FAIL, 1), False),
    ("sympy resolved", "parse_log_sympy", SY, log(SYMPY_OK), True),
    ("sympy F2P errors", "parse_log_sympy", SY, log(SYMPY_ERROR, 1), False),
    ("go resolved", "parse_log_gotest", GO, log(GO_OK), True),
    ("no markers: tests never ran", "parse_log_pytest", PY, PYTEST_OK, False),
    (
        "test patch failed",
        "parse_log_pytest",
        PY,
        ">>>>> Patch Apply Failed\n" + log(PYTEST_OK),
        False,
    ),
    (
        "F2P test missing from the log",
        "parse_log_pytest",
        ("tests/test_a.py::nope", PY[1]),
        log(PYTEST_OK),
        False,
    ),
]


def instance(parser: str, tests: tuple[str, str]) -> Instance:
    return Instance(
        instance_id="calc__calc-1",
        family="v5",
        repo="calc/calc",
        image="calc:1",
        workdir="/testbed",
        problem_statement="p",
        hints="",
        fail_to_pass=[tests[0]],
        pass_to_pass=[tests[1]],
        eval_script="#!/bin/bash\n: '>>>>> Start Test Output'\npytest\n: '>>>>> End Test Output'\n",
        log_parser=parser,
    )


@pytest.mark.parametrize(
    ("parser", "tests", "text", "resolved"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_orsbox_and_swebench_agree(
    tmp_path: Path, parser: str, tests: tuple[str, str], text: str, resolved: bool
) -> None:
    task = instance(parser, tests)
    ours = judge(task, text)
    path = tmp_path / "test_output.txt"
    path.write_text(text)
    prediction = {"instance_id": task.instance_id, "model_patch": "diff", "model_name_or_path": "m"}
    official = get_eval_report(make_test_spec(task.harness_instance()), prediction, str(path), True)
    assert ours.resolved == official[task.instance_id]["resolved"] == resolved
    assert ours.reward == (1.0 if resolved else 0.0)
