"""A dataset of task folders as one ORS environment.

One `DatasetEnvironment` subclass per dataset, one task per folder (sorted by name)
in one split (`test` unless `--dataset-split`). Each task has its own image, limits,
user, working directory and variables, so the class builds its `SandboxSpec` per task
(`sandbox_spec`), and lists every task's image and recipe (`image_recipes`) for
`orsbox serve`, `run` and `build` to build what is missing.

Each sandbox runs in Harbor's execution profile (`task.py`'s limits: Docker's default
capabilities, a writable root, the image's user, `storage_mb` as a bound on what it
writes) with `/logs/agent`, `/logs/verifier` and `/logs/artifacts` made at setup.

The agent gets the prompt `instruction.md`, the standard tools (bash, read_file,
write_file, edit_file, list_dir unless `--tools` says otherwise) and `submit`, which
runs the verifier and ends the episode. `[agent].timeout_sec` bounds the episode from
the end of setup: commands are cut to the time left, and the first call after it is
answered by grading the sandbox as it is (the call itself is not run) with a finished
output saying the time ran out, as Harbor verifies an agent that timed out.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, ClassVar

from orsbox.authoring.grader import Grade
from orsbox.authoring.tools import tool
from orsbox.errors import ImageNotFound, SandboxError, SandboxGone, SetupFailed
from orsbox.formats.dataset import DatasetEnvironment, dataset_class
from orsbox.formats.harbor import HarborOptions, guard
from orsbox.formats.harbor.phases import unmet_by, widest
from orsbox.formats.harbor.task import HarborTask, phase_set
from orsbox.formats.harbor.verifier import verify
from orsbox.protocol.types import JSONObject, TextBlock, ToolOutput
from orsbox.sandbox.base import SandboxLimits
from orsbox.sandbox.images import ImageRecipe

LOG_DIRS = ("/logs/agent", "/logs/verifier", "/logs/artifacts")
MAKE_LOG_DIRS = f"mkdir -p {' '.join(LOG_DIRS)} && chmod 777 {' '.join(LOG_DIRS)}"


class HarborEnvironment(DatasetEnvironment[HarborTask]):
    """What every Harbor dataset shares; `dataset_environment` fills in the data."""

    refused: ClassVar[dict[str, str]]  # task folder -> why it is not served
    broken_images: ClassVar[dict[str, str]]  # image tag -> why it did not build
    # (image tag, verifier user) -> the verifier's environment as the image has it
    baselines: ClassVar[dict[tuple[str, str | None], guard.Baseline]]
    baseline: guard.Baseline | None = None

    def __init__(
        self, task_spec: JSONObject | None = None, secrets: dict[str, str] | None = None
    ) -> None:
        super().__init__(task_spec, secrets)
        self.episode_timeout_s = self.task.agent_timeout_s  # per task, over the class's

    @classmethod
    def task_spec_of(cls, task: HarborTask) -> JSONObject:
        return task.spec()

    @classmethod
    def image_recipes(cls) -> list[ImageRecipe]:
        """The recipes of the images orsbox builds for these tasks."""
        return [t.image.recipe for t in cls.tasks.values() if t.image.recipe is not None]

    @classmethod
    def needed_images(cls) -> list[str]:
        return list(dict.fromkeys(t.image.tag for t in cls.tasks.values()))

    @classmethod
    def image_build_failed(cls, tag: str, error: str) -> None:
        """Called by `orsbox serve`/`run` for an image that did not build: its tasks'
        episodes fail at setup with `error`; the other tasks are served."""
        cls.broken_images[tag] = error

    async def setup(self) -> None:
        error = self.broken_images.get(self.task.image.tag)
        if error is not None:
            raise SetupFailed(f"task {self.task.name}: its image did not build: {error}")
        task = self.task
        backend = self._backend()
        # Asked what it is first, its capabilities answer for its engine too (Podman's
        # sandboxes have no network); one that does not answer fails the start below.
        with contextlib.suppress(SandboxError):
            await backend.describe()
        unmet = unmet_by(task.limits.network, task.verifier_network, backend.capabilities)
        if unmet is not None:
            raise SetupFailed(f"task {task.name}: {unmet}")
        try:
            await super().setup()
        except ImageNotFound as e:
            hint = self.task.image.missing_hint
            message = f"task {self.task.name}: {e}" + (f"; {hint}" if hint else "")
            raise ImageNotFound(message) from None
        self.baseline = await self._baseline()

    async def _baseline(self) -> guard.Baseline:
        """The verifier's environment as the image has it (`guard`): read once per image
        and verifier user, in the first episode's sandbox before its agent ran anything.
        A fork (or a start from a setup snapshot) on a server that has not read it yet
        reads it from the files it starts with."""
        key = (self.task.image.tag, self.task.verifier.user)
        found = self.baselines.get(key)
        if found is None:
            found = await guard.take_baseline(self.sandbox, self.task.verifier.user)
            self.baselines[key] = found
        return found

    async def prepare(self) -> None:
        """Harbor's folders for logs, made at start as Harbor's Docker environment makes
        its mount points (`mkdir -p` and `chmod 777`, as root): an agent or a test.sh
        that writes to `/logs/agent` or `/logs/verifier` finds a real folder."""
        made = await self.sandbox.exec(["bash", "-c", MAKE_LOG_DIRS], user="root", timeout_s=60)
        if made.exit_code != 0:
            raise SetupFailed(f"task {self.task.name}: could not make /logs: {made.output}")

    def get_prompt(self) -> list[TextBlock]:
        return [TextBlock(text=self.task.instruction)]

    def task_sandbox(self) -> dict[str, Any]:
        task = self.task
        return {
            "image": task.image.tag,
            "limits": task.limits,
            "user": task.agent_user,
            "workdir": task.workdir,
            "env": dict(task.env),
            "labels": {"orsbox.environment": self.name().lower(), "orsbox.task": task.name},
        }

    # -- grading ------------------------------------------------------------------------
    async def grade(self) -> Grade:
        if self.baseline is None:  # setup did not finish: nothing to grade
            raise SetupFailed(f"task {self.task.name}: the episode was not set up")
        try:
            return await verify(self.sandbox, self.task, self.baseline)
        except SandboxGone as e:
            await self.sandbox_lost(e)
            raise

    async def episode_timed_out(self, name: str) -> ToolOutput:
        return await self.final_output(
            f"[the agent's time limit of {self.episode_timeout_s:g}s has passed: {name!r} was "
            "not run; the sandbox was graded as it is]"
        )

    @tool
    async def submit(self) -> ToolOutput:
        """Submit your work: every process you started is stopped, the task's tests
        run in the sandbox, and their reward is returned. Ends the episode."""
        return await self.final_output()


def dataset_environment(
    path: Path, tasks: list[HarborTask], options: HarborOptions, refused: dict[str, str]
) -> type[HarborEnvironment]:
    """The environment class serving `tasks` (read from `path`)."""
    split = options.split or "test"
    return dataset_class(
        HarborEnvironment,
        options.name or path.resolve().name,
        options,
        __doc__=f"Harbor tasks from {path}.",
        tasks={t.name: t for t in tasks},
        splits={split: [t.name for t in tasks]},
        refused=dict(refused),
        broken_images={},
        baselines={},
        image=tasks[0].image.tag,
        # The class's limits are what the server's policy checks: the widest any task's
        # phases ask (each task's were checked against the same settings at load).
        limits=SandboxLimits(network=widest([n for t in tasks for n in phase_set(t)])),
    )
