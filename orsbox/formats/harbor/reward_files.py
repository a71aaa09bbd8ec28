"""Harbor's verifier: `test.sh` writes its reward to a file (harbor 0.26.0).

`test.sh` runs as `(/tests/test.sh) > /logs/verifier/test-stdout.txt 2>&1`; its exit
code is not used. The reward comes from `reward.json` when it exists (a JSON object of
finite numbers: its `reward` key, else their mean; the whole object goes to metadata),
else from `reward.txt` (one finite number, `float()` of the text). A reward file that
is empty or malformed is Harbor's parse error: no reward, a `GradingError` like every
other way the verifier could not run (`could_not_run` holds the rules, in order).
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar

from orsbox.authoring.grader import Grade
from orsbox.formats.harbor import could_not_run
from orsbox.formats.harbor.verifier import (
    REWARD_JSON,
    REWARD_TXT,
    ROOT,
    TEST_STDOUT,
    Verifier,
    tail,
)
from orsbox.sandbox.base import ExecResult, Sandbox

COLLECTED_BYTES = 8 << 20
# One line per file: its name, then its bytes in base64, or "-" when it does not exist.
# Then one line per test report named in "$@" that exists: its name and "+".
COLLECT = f"""for f in {TEST_STDOUT} {REWARD_JSON} {REWARD_TXT}; do
    if [ -f "$f" ]; then printf '%s ' "$f"; base64 -w0 "$f"; echo; else echo "$f -"; fi
done
for f in "$@"; do if [ -f "$f" ]; then echo "$f +"; fi; done
"""
PRESENT = b"+"


class RewardFileError(ValueError):
    """A reward file Harbor could not parse (empty, not a number, not finite, not a
    JSON object of numbers); the message says which and why."""


@dataclass(frozen=True)
class HarborVerifier(Verifier):
    output_cap_bytes: ClassVar[int] = 4096  # the output that counts is in test-stdout.txt

    def command(self) -> str:
        return f"({self.script}) > {TEST_STDOUT} 2>&1"

    async def grade(self, sandbox: Sandbox, result: ExecResult) -> Grade:
        """The reward test.sh wrote, or `GradingError` where the verifier could not run."""
        test_sh = self.test_sh()
        files = await _collect(sandbox, could_not_run.reports_named(test_sh))
        stdout = (files.get(TEST_STDOUT) or b"").decode("utf-8", "replace")
        grade, problem = None, None
        try:
            grade = read_reward(files)
        except RewardFileError as e:
            problem = str(e)
        run = could_not_run.VerifierRun(
            test_sh=test_sh,
            stdout=stdout,
            timed_out=result.timed_out,
            timeout_s=self.timeout_s,
            reward=None if grade is None else grade.reward,
            reports_present=frozenset(r for r, data in files.items() if data == PRESENT),
            reward_problem=problem,
        )
        error = could_not_run.grading_error(run)
        if error is not None:
            raise error
        assert grade is not None  # no reward file is a grading error
        text = "\n".join(part for part in (tail(stdout).rstrip(), grade.text) if part)
        return Grade(grade.reward, text, grade.metadata)

    def test_sh(self) -> str:
        """The text of the task's test.sh, as the task folder has it."""
        if self.tests_dir is None:
            return ""
        path = self.tests_dir / self.script.removeprefix("/tests/")
        return path.read_text(errors="replace") if path.is_file() else ""


async def _collect(sandbox: Sandbox, reports: list[str]) -> dict[str, bytes | None]:
    """test.sh's output and the reward files (read as root), None for a missing one;
    each of `reports` that exists as `PRESENT` (only whether it is there counts)."""
    result = await sandbox.exec(
        ["bash", "-c", COLLECT, "collect", *reports], user=ROOT, output_cap_bytes=COLLECTED_BYTES
    )
    files: dict[str, bytes | None] = {}
    for line in result.output.splitlines():
        name, _, data = line.partition(" ")
        files[name] = None if data == "-" else PRESENT if data == "+" else base64.b64decode(data)
    return files


def read_reward(files: dict[str, bytes | None]) -> Grade | None:
    """The reward test.sh wrote, reward.json first as Harbor reads them; None when it
    wrote neither. Raises `RewardFileError` for one Harbor could not parse."""
    reward_json, reward_txt = files.get(REWARD_JSON), files.get(REWARD_TXT)
    if reward_json is not None:
        return parse_reward_json(reward_json)
    if reward_txt is not None:
        return parse_reward_txt(reward_txt)
    return None


def parse_reward_json(data: bytes) -> Grade:
    if not data:
        raise RewardFileError("reward.json is empty")
    try:
        rewards = json.loads(data)
    except ValueError:
        raise RewardFileError("reward.json is not valid JSON") from None
    if not isinstance(rewards, dict) or not rewards:
        raise RewardFileError("reward.json is not a JSON object of numbers")
    for key, value in rewards.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise RewardFileError(f"reward.json: {key!r} is not a number")
        if not math.isfinite(value):
            raise RewardFileError(f"reward.json: {key!r} is not finite")
    reward = float(rewards["reward"]) if "reward" in rewards else _mean(rewards.values())
    return Grade(reward, f"[reward {reward:g} from reward.json]", {"rewards": rewards})


def parse_reward_txt(data: bytes) -> Grade:
    if not data:
        raise RewardFileError("reward.txt is empty")
    try:
        reward = float(data.decode("utf-8", "replace"))
    except ValueError:
        raise RewardFileError("reward.txt is not one number") from None
    if not math.isfinite(reward):
        raise RewardFileError("reward.txt is not finite")
    return Grade(reward, f"[reward {reward:g} from reward.txt]", {"rewards": {"reward": reward}})


def _mean(values: Iterable[float]) -> float:
    numbers = [float(v) for v in values]
    return sum(numbers) / len(numbers)
