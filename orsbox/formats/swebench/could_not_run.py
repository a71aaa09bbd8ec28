"""When SWE-style grading could not run: the rules that turn an eval run into a
`GradingError` instead of a verdict (the table is in docs/grading-errors.md; each rule
is tested in tests/formats/swebench/test_grading_errors.py).

The official harness counts an instance whose evaluation raised (the eval script timed
out, the container failed) as an error, apart from the unresolved ones; orsbox does the
same, and adds that an eval log without both test-output markers holds no test run to
judge: the script died before or while the tests ran. A patch that does not apply
stays a real 0.0 (the agent's fault), as the harness counts it. R2E-Gym's scripts have
no markers, so only the timeout and the kill rules apply to them.
"""

from __future__ import annotations

from orsbox.errors import GradingError
from orsbox.formats.swebench.families import END, START
from orsbox.sandbox.base import ExecResult

KILLED_EXIT = 128  # an exit status past this: the shell was ended by a signal
LOG_LINES_SHOWN = 6


def eval_error(
    result: ExecResult, log: str, timeout_s: float, *, markers: bool
) -> GradingError | None:
    """The grading error an eval run amounts to; None when its log is a verdict.
    `markers`: whether the family's eval script prints SWE-bench's test-output markers."""
    if result.timed_out:
        return _error("eval-timeout", f"the eval script ran past its {timeout_s:g}s", log)
    killed = result.oom_killed or (result.exit_code or 0) > KILLED_EXIT
    complete = START in log and END in log
    if markers and not complete:
        cause, what = ("eval-killed", "was killed") if killed else ("eval-markers-missing", "ended")
        return _error(cause, f"the eval script {what} before its test output was complete", log)
    if not markers and killed:
        return _error("eval-killed", "the test script was killed", log)
    return None


def container_failed(error: Exception) -> GradingError:
    """The fresh grading container did not start (or its setup failed): no verdict."""
    return GradingError(f"the grading container failed: {error}", cause="grading-container")


def _error(cause: str, why: str, log: str) -> GradingError:
    lines = [line for line in log.strip().splitlines() if line.strip()][-LOG_LINES_SHOWN:]
    shown = "\n".join(lines)
    return GradingError(f"{why}; the log ends:\n{shown}" if shown else why, cause=cause)
