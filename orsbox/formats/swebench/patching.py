"""Applying a submission's patch in the grading container as the row's harness applies it.

Read from SWE-bench's own `run_instance` (`swebench/harness/run_evaluation.py`):

    swebench 4.1.0   `git apply --verbose`, `git apply --verbose --reject`,
                     `patch --batch --fuzz=5 -p1 -i`, in that order, the first that exits
                     0 wins; nothing is undone between attempts, so a failed `--reject`
                     leaves its half-applied hunks and `.rej` files to the next one.
    swebench 5.0.2   `git apply --verbose`, `git apply --verbose --3way`,
                     `git apply --verbose --reject`, `patch --batch --forward --fuzz=5
                     -p1 -i`; before every attempt but the first the tree is reset
                     (`git checkout -- . ; git clean -fd`, whatever that exits); when all
                     four fail, `git apply --check --reverse` on the tree the last attempt
                     left passing means "already applied", and the patch counts as applied.

Every command runs as the container's user in the repository, on the patch file
`/tmp/patch.diff`, as the harness does. v5 rows are applied as 5.0.2 does; every other
family as 4.1.0 does: v4 and SWE-Gym rows are the swebench 4 harness's own, and SWE-smith,
SWE-rebench and R2E-Gym rows keep the chain orsbox has always used for them (their
harnesses' own application code was not compared here). `Applied.metadata()` names the
strategy and the attempt that applied the patch, for the episode's metadata.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from orsbox.sandbox.base import Sandbox

PATCH_FILE = "/tmp/patch.diff"  # the harness's CONTAINER_PATCH_FILE
APPLY_TIMEOUT_S = 300.0
REVERSE_CHECK = "already applied (git apply --check --reverse)"


@dataclass(frozen=True)
class ApplyStrategy:
    """One harness version's way of applying a patch."""

    name: str
    attempts: tuple[str, ...]  # each run as `<attempt> PATCH_FILE`
    reset: str = ""  # run before every attempt but the first; its exit code is ignored
    reverse_check: str = ""  # when every attempt failed: applied if this exits 0


SWEBENCH_4 = ApplyStrategy(
    "swebench-4.1.0",
    ("git apply --verbose", "git apply --verbose --reject", "patch --batch --fuzz=5 -p1 -i"),
)
SWEBENCH_5 = ApplyStrategy(
    "swebench-5.0.2",
    (
        "git apply --verbose",
        "git apply --verbose --3way",
        "git apply --verbose --reject",
        "patch --batch --forward --fuzz=5 -p1 -i",
    ),
    reset="git checkout -- . ; git clean -fd",
    reverse_check="git apply --check --reverse",
)
STRATEGIES = {s.name: s for s in (SWEBENCH_4, SWEBENCH_5)}


def strategy_for(family: str) -> ApplyStrategy:
    """The strategy a family's harness applies patches with (see the module docstring)."""
    return SWEBENCH_5 if family == "v5" else SWEBENCH_4


@dataclass(frozen=True)
class Applied:
    """What applying a patch came to: whether, by which strategy and attempt, and the
    output of the attempts (the harness logs them the same way)."""

    applied: bool
    strategy: str
    command: str  # the attempt that applied it (or REVERSE_CHECK); "" when none did
    output: str

    def metadata(self) -> dict[str, Any]:
        return {"strategy": self.strategy, "applied": self.applied, "applied_by": self.command}


async def apply_patch(
    sandbox: Sandbox, patch: str, workdir: str, strategy: ApplyStrategy
) -> Applied:
    """Write `patch` to the harness's patch file and apply it in `workdir` by `strategy`."""
    await sandbox.write_file(PATCH_FILE, patch.encode("utf-8", errors="surrogateescape"))
    outputs = []
    for number, attempt in enumerate(strategy.attempts):
        if number and strategy.reset:
            await _run(sandbox, strategy.reset, workdir)
        command = f"{attempt} {PATCH_FILE}"
        code, output = await _run(sandbox, command, workdir)
        outputs.append(f"$ {command}\n{output.strip()}")
        if code == 0:
            return Applied(True, strategy.name, attempt, output)
    if strategy.reverse_check:
        code, output = await _run(sandbox, f"{strategy.reverse_check} {PATCH_FILE}", workdir)
        if code == 0:
            return Applied(True, strategy.name, REVERSE_CHECK, "\n".join(outputs))
    return Applied(False, strategy.name, "", "\n".join(outputs))


async def _run(sandbox: Sandbox, command: str, workdir: str) -> tuple[int | None, str]:
    result = await sandbox.exec(
        ["/bin/bash", "-c", command], cwd=workdir, timeout_s=APPLY_TIMEOUT_S
    )
    return result.exit_code, result.output
