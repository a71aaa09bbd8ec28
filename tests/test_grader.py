"""How a grader's output becomes a reward (no sandbox needed: `ExecResult` is data)."""

from __future__ import annotations

from orsbox.authoring.grader import exit_code_grade, json_grade
from orsbox.sandbox.base import ExecResult


def test_exit_code_rewards() -> None:
    passed = exit_code_grade(ExecResult("12 passed\n", 0), 60)
    assert (passed.reward, passed.text) == (1.0, "12 passed")
    failed = exit_code_grade(ExecResult("", 1), 60)
    assert (failed.reward, failed.text) == (0.0, "(the grader printed nothing)")
    timed_out = exit_code_grade(ExecResult("working\n", None, timed_out=True), 60)
    assert timed_out.reward == 0.0 and timed_out.text == "working\n[grader timed out after 60s]"
    assert timed_out.metadata == {"grader_exit_code": None, "grader_timed_out": True}


def test_json_rewards_come_from_the_last_line() -> None:
    grade = json_grade(ExecResult('checking\n{"reward": 0.25, "message": "1 of 4"}\n', 0))
    assert (grade.reward, grade.text) == (0.25, "checking\n1 of 4")
    bare = json_grade(ExecResult('{"reward": 1}', 1))
    assert (bare.reward, bare.text) == (1.0, "(the grader printed nothing)")


def test_json_without_a_reward_line_is_zero_with_a_note() -> None:
    for output in ("Traceback ...\n", '{"score": 1}\n', '{"reward": "NaN"}\n', ""):
        grade = json_grade(ExecResult(output, 1))
        assert grade.reward == 0.0 and grade.metadata["grader_error"] is True
        assert 'its last output line is not {"reward": <number>, ...}' in grade.text
