"""Grading a task as Harbor's verifier grades it (harbor 0.26.0, `verifier/verifier.py`),
with one step before it that Harbor leaves to its container teardown:

  0. every process the agent started is killed (`Sandbox.kill_processes`), so nothing
     left running can change files or write a reward while the tests run; then the
     sandbox gets the verifier phase's network when it differs from the agent's
     (`phases.py`: no-network, the guarded internet, or an allow-list through a proxy);
  1. stale `/logs/verifier/reward.txt` and `reward.json` are removed (as root);
  2. `tests/` is copied to `/tests` only now (before, the agent could read the tests);
  3. `/tests/test.sh` is made executable (as root, as Harbor does) and run as
     `(/tests/test.sh) > /logs/verifier/test-stdout.txt 2>&1`, as the verifier's user
     with `[verifier].env`, under `[verifier].timeout_sec`; its exit code is not used;
  4. the reward comes from `reward.json` when it exists (a JSON object of finite numbers:
     its `reward` key, else their mean; the whole object goes to metadata), else from
     `reward.txt` (one finite number, `float()` of the text);
  5. where the verifier could not run (Harbor raises: a timeout, no reward file, an
     empty or malformed one; or a 0 with no sign the tests ran), `GradingError` is
     raised instead of a reward: the rules are in `could_not_run`.

Terminal-Bench 1: `run-tests.sh` and `tests/` go to `/tests`, `bash /tests/run-tests.sh`
runs with `TEST_DIR=/tests` under `max_test_timeout_sec`, and the task is resolved (1.0)
only when its output has pytest's short test summary and every test in it passed
(terminal-bench 0.2.18's `PytestParser`: PASSED, XFAIL and SKIPPED pass).
"""

from __future__ import annotations

import base64
import io
import json
import math
import re
import tarfile
from typing import Any

from orsbox.authoring.grader import Grade
from orsbox.authoring.reward_hacking import METADATA_KEY
from orsbox.errors import GradingError
from orsbox.formats.harbor import could_not_run, reward_hacking
from orsbox.formats.harbor.task import HarborTask, Verifier
from orsbox.sandbox.base import ExecResult, Sandbox

VERIFIER_DIR = "/logs/verifier"
REWARD_TXT = f"{VERIFIER_DIR}/reward.txt"
REWARD_JSON = f"{VERIFIER_DIR}/reward.json"
TEST_STDOUT = f"{VERIFIER_DIR}/test-stdout.txt"
SHOWN_OUTPUT_BYTES = 16 * 1024
ROOT = "root"

# As root, as Harbor uploads them. The tests arrive on standard input as a tar; $1 is
# the script to make executable.
INSTALL = f"""set -e
rm -rf /tests {REWARD_TXT} {REWARD_JSON} 2>/dev/null || find /tests/ -mindepth 1 -delete
mkdir -p /tests {VERIFIER_DIR}
chmod 777 /logs {VERIFIER_DIR}
tar -x --no-same-owner -C /tests -f -
chmod -R a+rX /tests
chmod +x "$1"
"""
# One line per file: its name, then its bytes in base64, or "-" when it does not exist.
# Then one line per test report named in "$@" that exists: its name and "+".
COLLECT = f"""for f in {TEST_STDOUT} {REWARD_JSON} {REWARD_TXT}; do
    if [ -f "$f" ]; then printf '%s ' "$f"; base64 -w0 "$f"; echo; else echo "$f -"; fi
done
for f in "$@"; do if [ -f "$f" ]; then echo "$f +"; fi; done
"""
PRESENT = "+"


async def verify(sandbox: Sandbox, task: HarborTask) -> Grade:
    """Grade the sandbox as it is now (see the module docstring)."""
    verifier = task.verifier
    report = await reward_hacking.inspect(sandbox)  # kills the agent's processes first
    if task.verifier_network is not None:  # Harbor's per-phase network (`phases.py`)
        network = task.verifier_network
        await sandbox.set_network(network.network, network.allowed_hosts)
    installed = await sandbox.exec(
        ["bash", "-c", INSTALL, "install", verifier.script],
        stdin=tests_archive(verifier),
        user=ROOT,
        timeout_s=120,
    )
    if installed.exit_code != 0:
        why = f"the tests could not be copied to /tests: {installed.output.strip()[-2000:]}"
        raise GradingError(why, cause="tests-not-installed")
    result = await _run(sandbox, task)
    if verifier.kind == "harbor":
        test_sh = _test_sh(verifier)
        files = await _collect(sandbox, could_not_run.reports_named(test_sh))
        grade = _harbor_grade(files, result, verifier, test_sh)
    else:
        grade = _tb1_grade(result)
    metadata = {
        **grade.metadata,
        "processes_killed": report.processes_killed,
        "verifier_timed_out": result.timed_out,
        METADATA_KEY: report.metadata(),
    }
    return Grade(grade.reward, "\n".join([grade.text, *report.findings()]), metadata)


def tests_archive(verifier: Verifier) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        if verifier.tests_dir is not None:
            for child in sorted(verifier.tests_dir.iterdir()):
                tar.add(child, arcname=child.name)
        for extra in verifier.extra_files:
            tar.add(extra, arcname=extra.name)
    return buffer.getvalue()


async def _run(sandbox: Sandbox, task: HarborTask) -> ExecResult:
    verifier = task.verifier
    if verifier.kind == "harbor":
        command = f"({verifier.script}) > {TEST_STDOUT} 2>&1"
        cap = 4096
    else:
        command = f"bash {verifier.script}"
        cap = 1024 * 1024  # the pytest summary is at the end; the tail is kept
    return await sandbox.exec(
        ["bash", "-c", command],
        env=verifier.env,
        user=verifier.user,
        cwd=task.workdir,
        timeout_s=verifier.timeout_s,
        output_cap_bytes=cap,
    )


# -- Harbor's reward files --------------------------------------------------------------
async def _collect(sandbox: Sandbox, reports: list[str]) -> dict[str, bytes | None]:
    """test.sh's output and the reward files (read as root), None for a missing one;
    each of `reports` that exists as `PRESENT` (only whether it is there counts)."""
    result = await sandbox.exec(
        ["bash", "-c", COLLECT, "collect", *reports], user=ROOT, output_cap_bytes=8 << 20
    )
    files: dict[str, bytes | None] = {}
    for line in result.output.splitlines():
        name, _, data = line.partition(" ")
        files[name] = _decoded(data)
    return files


def _decoded(data: str) -> bytes | None:
    if data == "-":
        return None
    return PRESENT.encode() if data == PRESENT else base64.b64decode(data)


def _test_sh(verifier: Verifier) -> str:
    """The text of the task's test.sh, as the task folder has it."""
    if verifier.tests_dir is None:
        return ""
    path = verifier.tests_dir / verifier.script.removeprefix("/tests/")
    return path.read_text(errors="replace") if path.is_file() else ""


def _harbor_grade(
    files: dict[str, bytes | None], result: ExecResult, verifier: Verifier, test_sh: str
) -> Grade:
    """The reward test.sh wrote, or `GradingError` where the verifier could not run."""
    stdout = (files.get(TEST_STDOUT) or b"").decode("utf-8", "replace")
    reward_json, reward_txt = files.get(REWARD_JSON), files.get(REWARD_TXT)
    grade = None
    if reward_json is not None:
        grade = parse_reward_json(reward_json)
    elif reward_txt is not None:
        grade = parse_reward_txt(reward_txt)
    run = could_not_run.VerifierRun(
        test_sh=test_sh,
        stdout=stdout,
        timed_out=result.timed_out,
        timeout_s=verifier.timeout_s,
        reward=None if grade is None else grade.reward,
        reports_present=frozenset(r for r in files if files[r] == PRESENT.encode()),
    )
    if grade is not None and "reward_error" in grade.metadata and not result.timed_out:
        raise could_not_run.bad_reward_file(grade.metadata["reward_error"], run)
    error = could_not_run.grading_error(run)
    if error is not None:
        raise error
    assert grade is not None  # no reward file is a grading error
    return _with_output(grade, _tail(stdout))


def parse_reward_json(data: bytes) -> Grade:
    if not data:
        return _failed("reward.json is empty")
    try:
        rewards = json.loads(data)
    except ValueError:
        return _failed("reward.json is not valid JSON")
    if not isinstance(rewards, dict) or not rewards:
        return _failed("reward.json is not a JSON object of numbers")
    for key, value in rewards.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            return _failed(f"reward.json: {key!r} is not a number")
        if not math.isfinite(value):
            return _failed(f"reward.json: {key!r} is not finite")
    reward = float(rewards["reward"]) if "reward" in rewards else _mean(rewards.values())
    return Grade(reward, f"[reward {reward:g} from reward.json]", {"rewards": rewards})


def parse_reward_txt(data: bytes) -> Grade:
    if not data:
        return _failed("reward.txt is empty")
    try:
        reward = float(data.decode("utf-8", "replace"))
    except ValueError:
        return _failed("reward.txt is not one number")
    if not math.isfinite(reward):
        return _failed("reward.txt is not finite")
    return Grade(reward, f"[reward {reward:g} from reward.txt]", {"rewards": {"reward": reward}})


def _mean(values: Any) -> float:
    numbers = [float(v) for v in values]
    return sum(numbers) / len(numbers)


def _failed(why: str) -> Grade:
    return Grade(0.0, f"[reward 0: {why}]", {"reward_error": why})


def _with_output(grade: Grade, output: str) -> Grade:
    text = "\n".join(part for part in (output.rstrip(), grade.text) if part)
    return Grade(grade.reward, text, grade.metadata)


def _tail(text: str) -> str:
    data = text.encode()
    if len(data) <= SHOWN_OUTPUT_BYTES:
        return text
    cut = data[-SHOWN_OUTPUT_BYTES:].decode("utf-8", "ignore")
    return f"[... {len(data) - SHOWN_OUTPUT_BYTES} bytes of test output cut ...]\n{cut}"


# -- Terminal-Bench 1's pytest summary ------------------------------------------------------
_SUMMARY = re.compile(r"=+\s*short test summary info\s*=+", re.IGNORECASE)
_PASSING = {"PASSED", "XFAIL", "SKIPPED"}
_FAILING = {"FAILED", "XPASS", "ERROR"}


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


def _tb1_grade(result: ExecResult) -> Grade:
    parsed = parse_pytest_summary(result.output)
    note = "\n[run-tests.sh timed out and was killed]" if result.timed_out else ""
    if parsed is None:
        return Grade(
            0.0,
            _tail(result.output) + note + "\n[unresolved: no pytest short test summary]",
            {"parser_results": None},
        )
    resolved = all(status in _PASSING for status in parsed.values())
    verdict = "resolved" if resolved else "unresolved"
    counts = f"{sum(s in _PASSING for s in parsed.values())}/{len(parsed)} tests passed"
    return Grade(
        1.0 if resolved else 0.0,
        f"{_tail(result.output)}{note}\n[{verdict}: {counts}]",
        {"parser_results": parsed},
    )
