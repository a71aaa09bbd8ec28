"""Terminal-Bench 1's verifier: `run-tests.sh` and pytest's short test summary.

`run-tests.sh` and `tests/` go to `/tests`, `bash /tests/run-tests.sh` runs with
`TEST_DIR=/tests` under `max_test_timeout_sec`, and the task is resolved (1.0) only when
its output has pytest's short test summary and every test in it passed (terminal-bench
0.2.18's `PytestParser`: PASSED, XFAIL and SKIPPED pass). No summary is a 0.0, as there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from orsbox.authoring.grader import Grade
from orsbox.formats.harbor.verifier import Verifier, tail
from orsbox.sandbox.base import ExecResult, Sandbox

_SUMMARY = re.compile(r"=+\s*short test summary info\s*=+", re.IGNORECASE)
_PASSING = {"PASSED", "XFAIL", "SKIPPED"}
_FAILING = {"FAILED", "XPASS", "ERROR"}


@dataclass(frozen=True)
class PytestVerifier(Verifier):
    output_cap_bytes: ClassVar[int] = 1024 * 1024  # the summary is at the end; the tail is kept

    def command(self) -> str:
        return f"bash {self.script}"

    async def grade(self, sandbox: Sandbox, result: ExecResult) -> Grade:
        parsed = parse_pytest_summary(result.output)
        note = "\n[run-tests.sh timed out and was killed]" if result.timed_out else ""
        if parsed is None:
            text = tail(result.output) + note + "\n[unresolved: no pytest short test summary]"
            return Grade(0.0, text, {"parser_results": None})
        resolved = all(status in _PASSING for status in parsed.values())
        verdict = "resolved" if resolved else "unresolved"
        counts = f"{sum(s in _PASSING for s in parsed.values())}/{len(parsed)} tests passed"
        return Grade(
            1.0 if resolved else 0.0,
            f"{tail(result.output)}{note}\n[{verdict}: {counts}]",
            {"parser_results": parsed},
        )


def parse_pytest_summary(output: str) -> dict[str, str] | None:
    """{test: status} from the short test summary; None when there is none."""
    parts = _SUMMARY.split(output, maxsplit=1)
    if len(parts) < 2:
        return None
    results = {}
    for line in parts[1].splitlines():
        if line.startswith("FAILED") and " - " in line:
            line = " - ".join(line.split(" - ")[:-1])
        words = line.split(maxsplit=1)
        if len(words) < 2:
            continue
        status = words[0].strip().strip(":")
        test = words[1].strip().split("::", maxsplit=1)[-1]
        if status in _PASSING | _FAILING and test:
            results[test] = status
    return results
