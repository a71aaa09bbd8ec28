"""R2E-Gym's verdict: its hidden tests' pytest summary must equal the row's
`expected_output_json` exactly (same tests, same statuses), as R2E-Gym's own reward
computes it. Its parser reads the "short test summary info" section and names a test
by what follows the file in its node id (`Class.test`), so it is R2E-Gym's, not one of
swebench's."""

from __future__ import annotations

import re

ANSI = re.compile(r"\x1b\[[0-9;]*m")
STATUSES = ("PASSED", "FAILED", "ERROR")


def parse_summary(log: str) -> dict[str, str]:
    """`{test: status}` from the last pytest short test summary in `log`."""
    if "short test summary info" not in log:
        return {}
    results: dict[str, str] = {}
    for line in log.split("short test summary info")[-1].splitlines():
        status = next((s for s in STATUSES if s in line), None)
        if status is None or "::" not in line:
            continue
        name = ".".join(ANSI.sub("", line).split("::")[1:]).split(" - ")[0].strip()
        results[name] = status
    return results


def _normal(results: dict[str, str]) -> dict[str, str]:
    return {ANSI.sub("", k).split(" - ")[0].strip(): v for k, v in results.items()}


def judge(expected: dict[str, str], log: str) -> tuple[bool, str, dict[str, list[str]]]:
    """(resolved, reason, {"success": tests as expected, "failure": the others})."""
    got, want = _normal(parse_summary(log)), _normal(expected)
    same = [t for t in want if got.get(t) == want[t]]
    differ = sorted(set(want) - set(same)) + sorted(set(got) - set(want))
    if not got:
        return (
            False,
            "the hidden tests printed no pytest summary",
            {"success": [], "failure": differ},
        )
    resolved = not differ
    reason = (
        "the tests' results equal expected_output_json"
        if resolved
        else ("the tests' results differ from expected_output_json")
    )
    return resolved, reason, {"success": same, "failure": differ}
