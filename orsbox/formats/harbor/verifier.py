"""Grading a task as Harbor's verifier grades it (harbor 0.26.0, `verifier/verifier.py`),
with one step before it that Harbor leaves to its container teardown:

  0. every process the agent started is killed but its services (what holds a listening
     TCP socket: the task's state may be a running server), so nothing left running
     can change files or write a reward while the tests run (the services run under
     `guard.py`'s watch); then the sandbox gets the verifier phase's network when it
     differs from the agent's (`phases.py`: no-network, the guarded internet, or an
     allow-list through a proxy);
  1. stale `/logs/verifier/reward.txt` and `reward.json` are removed (as root);
  2. `tests/` is copied to `/tests` only now (before, the agent could read the tests);
  3. the task's script is made executable (as root, as Harbor does) and run as the
     verifier's user with `[verifier].env`, under `[verifier].timeout_sec`, in the
     image's environment, not the agent's: `guard.py` neutralises what the agent
     planted for the verifier to run (docs/grading-integrity.md);
  4. what the run amounts to is the format's own (`Verifier.grade`): Harbor's reward
     files (`reward_files.HarborVerifier`) or Terminal-Bench 1's pytest summary
     (`pytest_summary.PytestVerifier`);
  5. where the verifier could not run (Harbor raises: a timeout, no reward file, an
     empty or malformed one; or a 0 with no sign the tests ran), `GradingError` is
     raised instead of a reward: the rules are in `could_not_run`.

Each task's `Verifier` is the subclass for its format, chosen once when the task folder
is read (`task.py`); grading never asks which format it is.
"""

from __future__ import annotations

import abc
import hashlib
import io
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from orsbox.authoring.grader import Grade
from orsbox.authoring.reward_hacking import METADATA_KEY
from orsbox.errors import GradingError
from orsbox.formats.harbor import guard, reward_hacking
from orsbox.sandbox.base import ExecResult, Sandbox

if TYPE_CHECKING:
    from orsbox.formats.harbor.task import HarborTask

VERIFIER_DIR = "/logs/verifier"
TESTS_DIR = "/tests"
REWARD_TXT = f"{VERIFIER_DIR}/reward.txt"
REWARD_JSON = f"{VERIFIER_DIR}/reward.json"
TEST_STDOUT = f"{VERIFIER_DIR}/test-stdout.txt"
SHOWN_OUTPUT_BYTES = 16 * 1024
ROOT = "root"
INSTALL_TIMEOUT_S = 120

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


@dataclass(frozen=True)
class Verifier(abc.ABC):
    """How to grade: `script` under /tests, run as `user` with `env` for `timeout_s`;
    one subclass per format says how it runs and what its run amounts to."""

    tests_dir: Path | None
    script: str
    extra_files: tuple[Path, ...]  # copied beside the tests (Terminal-Bench 1's run-tests.sh)
    user: str | None
    env: dict[str, str]
    timeout_s: float

    output_cap_bytes: ClassVar[int]  # what of the run's output the grade reads

    @abc.abstractmethod
    def command(self) -> str:
        """The shell command that runs the tests."""

    @abc.abstractmethod
    async def grade(self, sandbox: Sandbox, result: ExecResult) -> Grade:
        """What the run amounts to; raises `GradingError` where the verifier could not
        run (the rules in `could_not_run`)."""


async def verify(sandbox: Sandbox, task: HarborTask, baseline: guard.Baseline) -> Grade:
    """Grade the sandbox as it is now (see the module docstring); `baseline`: the
    verifier's environment as the image has it (`guard.take_baseline`)."""
    verifier = task.verifier
    # every process of the agent's is killed first, but its services where they can be guarded
    report, kept = await reward_hacking.inspect(sandbox, baseline.keeps_services)
    if not baseline.keeps_services:
        report.services = "none kept: this runtime refuses file leases (gVisor)"
    if task.verifier_network is not None:  # Harbor's per-phase network (`phases.py`)
        network = task.verifier_network
        await sandbox.set_network(network.network, network.allowed_hosts)
    archive = tests_archive(verifier)
    await _install(sandbox, verifier, archive)
    result, guarded = await guard.run_tests(
        sandbox,
        baseline,
        argv=["bash", "-c", verifier.command()],
        user=verifier.user,
        env=verifier.env,
        cwd=task.workdir,
        timeout_s=verifier.timeout_s,
        output_cap_bytes=verifier.output_cap_bytes,
        kept=kept,
        reward_files=[REWARD_TXT, REWARD_JSON],
        tests=(TESTS_DIR, tests_digest(archive)),
    )
    report.verifier_plants = guarded.plants
    report.services = guarded.services if kept else report.services
    report.reward_file_writes += (
        guarded.service_writes + guarded.reward_file_events + guarded.reward_files_replaced
    )
    report.test_writes += guarded.tests_changed
    if guarded.error is not None:
        raise GradingError(
            f"the verifier's environment could not be made the image's: {guarded.error}",
            cause="verifier-environment",
        )
    grade = await verifier.grade(sandbox, result)
    reward, notes = grade.reward, [grade.text, *report.findings()]
    if guarded.reward_files_replaced or guarded.tests_changed:  # not the tests' own verdict
        reward = 0.0
        notes.append(
            "[reward 0: a reward file was made, renamed or removed, or the tests were "
            "changed, while the task's services ran]"
        )
    metadata = {
        **grade.metadata,
        "processes_killed": report.processes_killed,
        "verifier_timed_out": result.timed_out,
        METADATA_KEY: report.metadata(),
    }
    return Grade(reward, "\n".join(notes), metadata)


async def _install(sandbox: Sandbox, verifier: Verifier, archive: bytes) -> None:
    """Copy the tests (`archive`, `tests_archive`'s) to /tests as root."""
    installed = await sandbox.exec(
        ["bash", "-c", INSTALL, "install", verifier.script],
        stdin=archive,
        user=ROOT,
        timeout_s=INSTALL_TIMEOUT_S,
    )
    if installed.exit_code != 0:
        why = f"the tests could not be copied to /tests: {installed.output.strip()[-2000:]}"
        raise GradingError(why, cause="tests-not-installed")


def tests_archive(verifier: Verifier) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        if verifier.tests_dir is not None:
            for child in sorted(verifier.tests_dir.iterdir()):
                tar.add(child, arcname=child.name)
        for extra in verifier.extra_files:
            tar.add(extra, arcname=extra.name)
    return buffer.getvalue()


def tests_digest(archive: bytes) -> dict[str, str]:
    """The sha256 of each file in `archive` (`tests_archive`'s), by its path under /tests."""
    digests = {}
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        for member in tar.getmembers():
            extracted = tar.extractfile(member) if member.isfile() else None
            if extracted is not None:
                digests[member.name] = hashlib.sha256(extracted.read()).hexdigest()
    return digests


def tail(text: str) -> str:
    """The last `SHOWN_OUTPUT_BYTES` of the tests' output, with a line saying what was cut."""
    data = text.encode()
    if len(data) <= SHOWN_OUTPUT_BYTES:
        return text
    cut = data[-SHOWN_OUTPUT_BYTES:].decode("utf-8", "ignore")
    return f"[... {len(data) - SHOWN_OUTPUT_BYTES} bytes of test output cut ...]\n{cut}"
