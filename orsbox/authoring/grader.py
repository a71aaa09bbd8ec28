"""Grading a declarative environment: a command run inside the episode's sandbox.

One grading is one `exec` (as `grader.user`, root by default) of a short bash wrapper
that unpacks the hidden grader files into `grader.path` (mode 0700, so the agent's user
cannot read them or, from a leftover background process, change them while the grader
runs), runs the author's command, and removes the files again. Root in a sandbox has
no capabilities: it reads everything, but writes only where root owns the folder or
everyone may write.

The command learns what to grade from environment variables:

    ORSBOX_TASK          the task, as JSON
    ORSBOX_TASK_<FIELD>  each scalar task field (ORSBOX_TASK_ID, ...)
    ORSBOX_<PARAM>       each parameter the agent passed to submit (ORSBOX_ANSWER, ...)
    ORSBOX_EVENT         "submit", or "step" when grading after a tool call
    ORSBOX_GRADER_DIR    where the hidden files are

The reward is 1.0 for exit code 0 (else 0.0) or, with `reward = "json"`, read from the
last line of output: `{"reward": 0.5, "message": "..."}`. What the grader printed is
what the agent reads. A grader that fails (no JSON line, killed by its timeout) gives
reward 0.0 with a note, never a server error: the agent may be what broke it.
"""

from __future__ import annotations

import io
import json
import math
import re
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orsbox.authoring.manifest import GraderConfig
from orsbox.errors import SandboxError
from orsbox.sandbox.base import ExecResult, Sandbox

INSTALL_FAILED_EXIT = 125

WRAPPER = f"""d=$ORSBOX_GRADER_DIR
if [ -n "${{ORSBOX_GRADER_FILES-}}" ]; then
    trap 'cd /; rm -rf -- "$d"' EXIT
    rm -rf -- "$d" && mkdir -p -m 700 -- "$d" && tar -x --no-same-owner -C "$d" -f - || {{
        echo "orsbox: could not unpack the grader's files into $d" >&2
        exit {INSTALL_FAILED_EXIT}
    }}
fi
bash -c "$ORSBOX_GRADER_COMMAND" </dev/null
status=$?
exit $status
"""

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Grade:
    reward: float
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)


def task_env(task: dict[str, Any]) -> dict[str, str]:
    """ORSBOX_TASK and ORSBOX_TASK_<FIELD> for a task (scalar fields only)."""
    env = {"ORSBOX_TASK": json.dumps(task, ensure_ascii=False, default=str)}
    for key, value in task.items():
        if not ENV_NAME.match(str(key)) or isinstance(value, dict | list) or value is None:
            continue
        text = value if isinstance(value, str) else json.dumps(value)
        if "\0" not in text:
            env[f"ORSBOX_TASK_{str(key).upper()}"] = text
    return env


def tar_folder(folder: Path) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for child in sorted(folder.iterdir()):
            tar.add(child, arcname=child.name)
    return buffer.getvalue()


class Grader:
    """Runs one manifest's grader in a sandbox."""

    def __init__(
        self, config: GraderConfig, folder: Path, workdir: str | None, output_cap_bytes: int
    ) -> None:
        self.config = config
        self.files = folder / config.files if config.files else None
        self.workdir = workdir
        self.output_cap_bytes = output_cap_bytes
        self._archive: bytes | None = None

    def archive(self) -> bytes:
        """The hidden files as a tar, made once (they do not change while serving)."""
        if self._archive is None:
            self._archive = tar_folder(self.files) if self.files else b""
        return self._archive

    async def grade(
        self, sandbox: Sandbox, task: dict[str, Any], params: dict[str, str], event: str
    ) -> Grade:
        result = await sandbox.exec(
            ["bash", "-c", WRAPPER],
            env=self.env(task, params, event),
            stdin=self.archive(),
            user=self.config.user,
            cwd=self.workdir,
            timeout_s=self.config.timeout_s,
            output_cap_bytes=self.output_cap_bytes,
        )
        if result.exit_code == INSTALL_FAILED_EXIT and "orsbox: could not unpack" in result.output:
            raise SandboxError(f"the grader could not be installed: {result.output.strip()}")
        if result.timed_out and self.files:  # killed before its trap could clean up
            await sandbox.exec(["rm", "-rf", "--", self.config.path], user=self.config.user)
        if self.config.reward == "json":
            return json_grade(result)
        return exit_code_grade(result, self.config.timeout_s)

    def env(self, task: dict[str, Any], params: dict[str, str], event: str) -> dict[str, str]:
        env = task_env(task)
        env.update({f"ORSBOX_{name.upper()}": value for name, value in params.items()})
        env.update(
            ORSBOX_EVENT=event,
            ORSBOX_GRADER_DIR=self.config.path,
            ORSBOX_GRADER_COMMAND=self.config.command,
            ORSBOX_GRADER_FILES="1" if self.files else "",
        )
        return env


def _notes(result: ExecResult, timeout_s: float) -> list[str]:
    if result.timed_out:
        return [f"[grader timed out after {timeout_s:g}s]"]
    if result.oom_killed:
        return ["[grader ran out of memory]"]
    return []


def _metadata(result: ExecResult) -> dict[str, Any]:
    return {"grader_exit_code": result.exit_code, "grader_timed_out": result.timed_out}


def _join(*parts: str) -> str:
    return "\n".join(p.strip("\n") for p in parts if p.strip()) or "(the grader printed nothing)"


def exit_code_grade(result: ExecResult, timeout_s: float) -> Grade:
    reward = 1.0 if result.exit_code == 0 else 0.0
    return Grade(reward, _join(result.output, *_notes(result, timeout_s)), _metadata(result))


def json_grade(result: ExecResult) -> Grade:
    """Reward from the last non-empty line: `{"reward": float, "message": str}`."""
    lines = result.output.rstrip().splitlines()
    last = lines[-1] if lines else ""
    try:
        data = json.loads(last)
        reward = float(data["reward"])
        if not math.isfinite(reward):
            raise ValueError("reward is not finite")
        message = str(data.get("message") or "")
    except (ValueError, KeyError, TypeError, AttributeError):
        note = '[grader error: its last output line is not {"reward": <number>, ...}]'
        return Grade(0.0, _join(result.output, note), {**_metadata(result), "grader_error": True})
    return Grade(reward, _join("\n".join(lines[:-1]), message), _metadata(result))
