"""The verifier's environment is the image's, not the agent's (docs/grading-integrity.md).

Harbor runs a task's `tests/test.sh` in the container the agent had. Whatever the
verifier runs without naming it is then the agent's to plant: `$HOME/.local/bin/env`,
which TB2's `test.sh` sources after installing uv; a `uvx` or `python3` earlier on
PATH; `sitecustomize.py`; a shell start-up file that `BASH_ENV` names. So the grader:

  1. at setup, before the agent has run anything, takes a `Baseline` of that surface
     as the image has it (once per image and verifier user: every episode of a task
     starts from the same image);
  2. at grading, kills every process of the agent but its services (what holds a
     listening TCP socket: a task's state may be a running web server or sshd), then
     runs the tests through `guard_inside.py` as root, which moves what the agent
     planted on that surface to a quarantine (and gives back the image's files), guards
     the reward files while the services run, runs `test.sh` as the verifier's user
     and stops the services after;
  3. reports every plant it neutralised and every touch of a reward file by a service
     (`GuardReport`, into the reward-hacking report).

The in-sandbox half is one python file sent with `python3 -I -S -c`, the python the
baseline found (its real path, as resolved before the agent ran), so nothing the agent
put on PATH runs it.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orsbox.errors import SetupFailed
from orsbox.sandbox.base import ExecResult, KeptService, Sandbox

GUARD_SOURCE = Path(__file__).with_name("guard_inside.py").read_text()
REPORT_DIR = "/var/lib/orsbox-verifier"
BASELINE_TIMEOUT_S = 60
REPORT_TIMEOUT_S = 30
# Reads the guard's report and removes it (as root, with the baseline's python).
READ_REPORT = (
    "import os,sys\n"
    "p=sys.argv[1]\n"
    "try:\n    d=open(p).read(); os.unlink(p)\nexcept OSError:\n    d=''\n"
    "sys.stdout.write('\\n'+d)\n"
)


@dataclass(frozen=True)
class Baseline:
    """The verifier's environment as the image has it (`guard_inside.baseline`'s JSON)."""

    data: dict[str, Any]

    @property
    def python(self) -> str:
        return str(self.data["python"])

    @property
    def keeps_services(self) -> bool:
        """Whether services can run under the guard here (file leases work: not gVisor)."""
        return bool(self.data.get("leases"))


async def take_baseline(sandbox: Sandbox, user: str | None) -> Baseline:
    """The baseline, read in `sandbox` as `user` (the verifier's) before the agent ran."""
    result = await sandbox.exec(
        ["python3", "-I", "-S", "-c", GUARD_SOURCE, "baseline"],
        stdin=b"{}",
        user=user,
        timeout_s=BASELINE_TIMEOUT_S,
    )
    try:
        if result.exit_code != 0:
            raise ValueError(f"exit code {result.exit_code}")
        return Baseline(json.loads(result.output.strip().splitlines()[-1]))
    except (ValueError, IndexError) as e:
        raise SetupFailed(
            f"could not read the verifier's environment in the image ({e}): "
            f"{result.output.strip()[-1000:]}"
        ) from None


@dataclass
class GuardReport:
    """What `guard_inside.run` did and saw."""

    plants: list[str] = field(default_factory=list)  # each plant neutralised
    services_kept: list[str] = field(default_factory=list)  # their command lines
    services: str = "none"  # what became of them: kept, stopped when..., stopped before...
    reward_file_events: list[str] = field(default_factory=list)  # there before the tests
    reward_files_replaced: list[str] = field(default_factory=list)  # while services ran
    service_writes: list[str] = field(default_factory=list)  # a service opened a reward file
    tests_changed: list[str] = field(default_factory=list)  # while services ran
    missing: bool = False  # the guard wrote no report (the tests timed out)
    error: str | None = None  # the guard could not make the environment clean: no tests ran
    ran_tests: bool = True  # False: the guard could not become the verifier's user

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> GuardReport:
        return cls(
            plants=[str(p) for p in data.get("plants", [])],
            services_kept=[str(k) for k in data.get("kept", [])],
            services=str(data.get("services", "none")),
            reward_file_events=[str(e) for e in data.get("events", [])],
            reward_files_replaced=[str(r) for r in data.get("replaced", [])],
            service_writes=[str(a) for a in data.get("attempts", [])],
            tests_changed=[str(t) for t in data.get("tests_changed", [])],
            error=str(data["error"]) if data.get("error") else None,
            ran_tests=bool(data.get("ran_tests", True)),
        )


async def run_tests(
    sandbox: Sandbox,
    baseline: Baseline,
    *,
    argv: list[str],
    user: str | None,
    env: dict[str, str],
    cwd: str | None,
    timeout_s: float,
    output_cap_bytes: int,
    kept: list[KeptService],
    reward_files: list[str],
    tests: tuple[str, dict[str, str]],
) -> tuple[ExecResult, GuardReport]:
    """Run the tests (`argv`, as `user`) as `guard_inside.run` does; their result and the
    report. Where root in the sandbox cannot change user (no CAP_SETUID), the guard
    makes the environment clean and the tests run here, as `user`, after it.
    `tests`: the tests' folder and the sha256 of each file sent there (relative path)."""
    report_path = f"{REPORT_DIR}/{secrets.token_hex(16)}.json"
    config = {
        "baseline": baseline.data,
        "kept": [[k.pid, k.start_tick] for k in kept],
        "argv": argv,
        "env": env,
        "cwd": cwd,
        "reward_files": reward_files,
        "tests": tests[0],
        "tests_digest": tests[1],
        "report": report_path,
    }
    result = await sandbox.exec(
        [baseline.python, "-I", "-S", "-c", GUARD_SOURCE, "run"],
        stdin=json.dumps(config).encode(),
        user="root",
        timeout_s=timeout_s,
        output_cap_bytes=output_cap_bytes,
    )
    if kept or result.timed_out:  # what the guard could not stop (it timed out with the tests)
        await sandbox.kill_processes()
    report = await _read_report(sandbox, baseline, report_path, kept)
    if not report.ran_tests and report.error is None:  # root here cannot change user
        result = await sandbox.exec(
            argv,
            env={"HOME": str(baseline.data["home"]), **env},
            user=user,
            cwd=cwd,
            timeout_s=timeout_s,
            output_cap_bytes=output_cap_bytes,
        )
    return result, report


async def _read_report(
    sandbox: Sandbox, baseline: Baseline, path: str, kept: list[KeptService]
) -> GuardReport:
    read = await sandbox.exec(
        [baseline.python, "-I", "-S", "-c", READ_REPORT, path],
        user="root",
        timeout_s=REPORT_TIMEOUT_S,
    )
    try:
        return GuardReport.from_json(json.loads(read.output.strip().splitlines()[-1]))
    except (ValueError, IndexError, AttributeError):
        return GuardReport(services_kept=[k.command for k in kept], missing=True)
