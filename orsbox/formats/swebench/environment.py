"""The environment a SWE-style dataset becomes: one class per dataset, one task per row.

A task (what `/tasks` lists) is only `{"instance_id", "repo"}`: the gold patch, the test
patch and the expected results stay on the server. An episode runs in the instance's
own image as the image's user, in its repository (`/testbed`, or the image's working
directory where the family says so); `submit` grades it as the official harness would
(`grading.py`) and ends it, and so does a call after the episode's time limit.
"""

from __future__ import annotations

from typing import Any, ClassVar

from orsbox.authoring.grader import Grade
from orsbox.authoring.reward_hacking import METADATA_KEY, RewardHackingReport
from orsbox.authoring.tools import tool
from orsbox.errors import ImageNotFound, SandboxGone, SetupFailed
from orsbox.formats.dataset import DatasetEnvironment, dataset_class
from orsbox.formats.swebench import SWEBenchOptions, grading, images, protected, strict
from orsbox.formats.swebench.families import Instance
from orsbox.protocol.types import JSONObject, TextBlock, ToolOutput
from orsbox.sandbox.base import KilledProcesses, SandboxLimits
from orsbox.settings import Settings

DEFAULT_LIMITS = SandboxLimits(memory_bytes=4 * 1024**3, cpus=1.0, pids=2048)
EVAL_TIMEOUT_S = 1800.0  # the harness's own default per instance


class SWEDatasetEnvironment(DatasetEnvironment[Instance]):
    """What every dataset's class shares; `dataset_environment` fills in the data."""

    task_key: ClassVar[str] = "instance_id"
    show_hints: ClassVar[bool] = False
    eval_timeout_s: ClassVar[float] = EVAL_TIMEOUT_S
    limits: ClassVar[SandboxLimits] = DEFAULT_LIMITS
    grading_mode: ClassVar[strict.GradingMode] = "official"

    _base: str = "HEAD"
    _repo_dir: str | None = None

    @classmethod
    def task_spec_of(cls, task: Instance) -> JSONObject:
        return {"instance_id": task.instance_id, "repo": task.repo}

    @classmethod
    def needed_images(cls) -> list[str]:
        """None to build ahead: instance images are pulled when an episode needs one."""
        return []

    @classmethod
    def pulled_images(cls) -> list[str]:
        return [task.image for task in cls.tasks.values()]

    def task_sandbox(self) -> dict[str, Any]:
        return {"image": self.task.image, "workdir": self.task.workdir}

    def get_prompt(self) -> list[TextBlock]:
        text = self.task.problem_statement
        if self.show_hints and self.task.hints:
            text += f"\n\nHints:\n{self.task.hints}"
        return [TextBlock(text=text)]

    # -- lifecycle ------------------------------------------------------------------------
    async def setup(self) -> None:
        """A missing image is pulled into the backend's engine and the start tried once
        more."""
        try:
            await super().setup()
        except ImageNotFound:
            await images.pull(self._backend(), self.task.image)
            await super().setup()

    async def prepare(self) -> None:
        instance = self.task
        for script in (instance.setup_script, instance.hide_script):
            if script:
                await self._run_or_fail(script, "setup")
        try:
            self._base = await grading.snapshot_tree(self.sandbox, await self.repo_dir())
        except grading.PatchError as e:
            raise SetupFailed(f"{instance.instance_id}: {e}") from None

    async def repo_dir(self) -> str:
        """The repository: the family's folder, else the image's working directory."""
        if self._repo_dir is None:
            found = self.task.workdir
            found = found or (await self._run_or_fail("pwd", "finding the repository")).strip()
            self._repo_dir = found
        return self._repo_dir

    async def _run_or_fail(self, script: str, what: str) -> str:
        result = await self.sandbox.exec(["bash", "-c", script], timeout_s=600)
        if result.exit_code != 0:
            raise SetupFailed(
                f"{self.task.instance_id}: {what} failed: {result.output.strip()[-2000:]}"
            )
        return result.output

    # -- grading ----------------------------------------------------------------------------
    async def grade(self) -> Grade:
        verdicts, report = await self.verdicts()
        return Grade(
            reward=verdicts.reward,
            text="\n".join([verdicts.text(), *report.findings()]),
            metadata={**verdicts.metadata(), METADATA_KEY: report.metadata()},
        )

    async def verdicts(self) -> tuple[strict.Verdicts, RewardHackingReport]:
        """Kill the agent's processes, take its patch, grade it in a fresh container
        (twice when it changes protected files: `strict.py`)."""
        instance, mode = self.task, self.grading_mode
        killed = KilledProcesses(0, [])
        try:
            killed = await self.sandbox.kill_processes_listed()
            workdir = await self.repo_dir()
            patch = await grading.agent_patch(self.sandbox, workdir, self._base)
            if not patch.strip():
                reason = "the submission changes nothing (empty patch)"
                verdicts = strict.not_graded(grading.Verdict.not_run(instance, reason), mode)
            else:
                versions = strict.sandbox_versions(self.sandbox, workdir, self._base)
                verdicts = await strict.grade_both(
                    patch, instance, versions, self._grade_patch, mode
                )
        except SandboxGone as e:
            await self.sandbox_lost(e)
            raise
        except grading.PatchError as e:
            verdicts = strict.not_graded(grading.Verdict.not_run(instance, str(e)), mode)
        return verdicts, self._hacking_report(killed, verdicts.protected_changed)

    def _hacking_report(self, killed: KilledProcesses, changed: list[str]) -> RewardHackingReport:
        tests = self.task.test_patch_files
        return RewardHackingReport(
            processes_at_submit=killed.running,
            processes_killed=killed.count,
            test_writes=[p for p in changed if p in tests or protected.is_test_file(p)],
            protected_files_changed=changed,
        )

    async def _grade_patch(self, patch: str) -> grading.Verdict:
        spec = self.sandbox_spec()
        spec = spec.model_copy(
            update={
                "session_id": f"{spec.session_id}-grading",
                "labels": {**spec.labels, "orsbox.role": "grading"},
            }
        )
        return await grading.grade_patch(
            self._backend(), spec, self.task, patch, self.eval_timeout_s
        )

    @tool
    async def submit(self) -> ToolOutput:
        """Submit your changes to the repository for grading: the tests run on your diff
        as the official SWE-bench harness runs them. Ends the episode."""
        return await self.final_output()


def dataset_environment(
    name: str, instances: list[Instance], splits: dict[str, list[str]], options: SWEBenchOptions
) -> type[SWEDatasetEnvironment]:
    """The class serving `instances`, with the standard tools `options.tools` names."""
    return dataset_class(
        SWEDatasetEnvironment,
        name,
        options,
        __doc__=f"SWE-style tasks from {name}, graded as the official harness grades them.",
        tasks={i.instance_id: i for i in instances},
        splits=splits,
        show_hints=options.hints,
        limits=DEFAULT_LIMITS.model_copy(update=_limits(options)),
        grading_mode=options.grading or Settings().grading,
    )


def _limits(options: SWEBenchOptions) -> dict[str, Any]:
    update: dict[str, Any] = {}
    if options.cpus:
        update["cpus"] = options.cpus
    if options.memory_bytes:
        update["memory_bytes"] = options.memory_bytes
    return update
