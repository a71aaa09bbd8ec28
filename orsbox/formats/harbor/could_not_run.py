"""When a Harbor / Terminal-Bench verifier could not run: the rules that turn what
`test.sh` left behind into a `GradingError` instead of a reward (the table is in
docs/grading-errors.md; each rule is tested in tests/formats/harbor).

Harbor 0.26 itself gives no reward (`has_valid_reward=False` in its error policy) when
`test.sh` times out (VerifierTimeoutError), writes no reward file
(RewardFileNotFoundError) or an empty or malformed one (RewardFileEmptyError,
VerifierOutputParseError): the same here. Harbor's mean then counts such a trial as 0,
which `--grading-errors as-zero` reproduces.

One rule is orsbox's own. Real Terminal-Bench 2 verifiers install their test runner
at grading time (apt, curl, the uv installer, `uvx pytest`) and write `reward.txt = 0`
whatever failed on the way; a reward of 0 is only a verdict when something shows the
tests ran: the test report `test.sh` names (`/logs/verifier/ctrf.json`) exists, or
pytest's summary is in its output. Without such a sign, a 0 is a grading error when
the runner is missing (`command not found` for a test runner or bootstrap tool that
`test.sh` calls) or the report it names is absent; its cause is `verifier-offline`
when the output shows the network was not there. A report with failures stays a real
0.0, as in Harbor.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from orsbox.errors import GradingError

VERIFIER_DIR = "/logs/verifier"
NOT_REPORTS = {f"{VERIFIER_DIR}/{n}" for n in ("reward.txt", "reward.json", "test-stdout.txt")}
EVIDENCE_LINES = 6

# Test runners and the tools that bootstrap them: a task whose agent must install one
# of these itself is not told apart (docs/grading-errors.md says so).
RUNNERS = frozenset(
    [
        "uv",
        "uvx",
        "pytest",
        "py.test",
        "python",
        "python3",
        "pip",
        "pip3",
        "curl",
        "wget",
        "bats",
        "node",
        "npm",
        "npx",
        "go",
        "cargo",
        "tox",
        "nox",
        "ruby",
        "bundle",
        "rspec",
        "java",
        "mvn",
        "gradle",
    ]
)
_NOT_FOUND = re.compile(r"(?:^|: )([\w.+-]+): (?:command )?not found\s*$", re.M)
_NETWORK = re.compile(
    r"Could not resolve host|Temporary failure (?:in name resolution|resolving)|"
    r"Network is unreachable|Name or service not known|No address associated with hostname|"
    r"Failed to establish a new connection|Could not connect to",
    re.I,
)
_FAILED_STEP = re.compile(r"^(?:E: |ERROR: |error: )|No module named |Failed to ", re.M)
_PYTEST_SUMMARY = re.compile(
    r"^=+ (?:short test summary info|.*\b(?:passed|failed|errors?|skipped|no tests ran)\b"
    r".* in [\d.]+s.*) =+$",
    re.M,
)
_REPORT = re.compile(rf"{re.escape(VERIFIER_DIR)}/[\w.-]+")


@dataclass(frozen=True)
class VerifierRun:
    """What one run of `test.sh` left behind, read as root after it ended."""

    test_sh: str  # the script's text: what it calls, which report it writes
    stdout: str  # /logs/verifier/test-stdout.txt
    timed_out: bool
    timeout_s: float
    reward: float | None  # None: no reward file, or one that could not be parsed
    reports_present: frozenset[str]  # the reports test.sh names that exist
    reward_problem: str | None = None  # why the reward file could not be parsed


def reports_named(test_sh: str) -> list[str]:
    """The files under /logs/verifier that `test.sh` names besides its reward and
    output (Terminal-Bench 2: `ctrf.json`): its test reports."""
    return sorted(set(_REPORT.findall(test_sh)) - NOT_REPORTS)


def grading_error(run: VerifierRun) -> GradingError | None:
    """The grading error `run` amounts to; None when its reward stands."""
    if run.timed_out:
        return _error(
            "verifier-timeout",
            f"test.sh did not finish within its {run.timeout_s:g}s ([verifier].timeout_sec)",
            run,
        )
    if run.reward_problem is not None:  # Harbor's parse errors: no reward
        return _error("bad-reward-file", run.reward_problem, run)
    if run.reward is None:
        return _error("no-reward-file", "test.sh wrote neither reward.txt nor reward.json", run)
    if run.reward != 0 or _tests_ran(run):
        return None
    missing = _missing_runners(run)
    absent = [r for r in reports_named(run.test_sh) if r not in run.reports_present]
    if not missing and not absent:
        return None
    why = f"{', '.join(missing)}: command not found" if missing else f"no {', '.join(absent)}"
    if _NETWORK.search(run.stdout):
        return _error("verifier-offline", f"the tests' runner needed the network ({why})", run)
    if missing:
        return _error("runner-missing", f"the tests' runner is missing ({why})", run)
    return _error("tests-did-not-run", f"reward 0 but the tests did not run ({why})", run)


def _tests_ran(run: VerifierRun) -> bool:
    return bool(run.reports_present) or _PYTEST_SUMMARY.search(run.stdout) is not None


def _missing_runners(run: VerifierRun) -> list[str]:
    called = set(re.findall(r"[\w.+-]+", run.test_sh))
    found = dict.fromkeys(_NOT_FOUND.findall(run.stdout))
    return [name for name in found if name in RUNNERS and name in called]


def _error(cause: str, why: str, run: VerifierRun) -> GradingError:
    """The error, with the lines of test.sh's output that say what failed (its last
    lines when none does)."""
    lines = [line.strip() for line in run.stdout.splitlines() if line.strip()]
    lines = [line for line in lines if _evidence(line)] or lines
    shown = "\n".join(lines[-EVIDENCE_LINES:])
    return GradingError(f"{why}{f'; test.sh said:{chr(10)}{shown}' if shown else ''}", cause=cause)


def _evidence(line: str) -> bool:
    return bool(
        _NOT_FOUND.search(line) or _NETWORK.search(line) or _FAILED_STEP.search(line.strip())
    )
