"""A benchmark dataset as one ORS environment: what every format's class shares.

A format's loader reads its tasks (Harbor task folders, SWE-bench rows: one record per
task) and makes the class serving them with `dataset_class`, from its subclass of
`DatasetEnvironment`. What that class does for every format:

- names the environment and lists its splits and tasks (`task_spec_of` says what a
  task shows of itself; the rest of its record stays on the server);
- finds the task a spec names by `task_key`, and refuses one the dataset does not have
  with `BadRequest` (the client's mistake, whatever the format);
- offers the standard tools `--tools` names (`DEFAULT_TOOLS` by default), checked by
  name once (`orsbox.authoring.standard_tools.tool_mixins`), with `--call-timeout`;
- starts each task's sandbox from the class's spec with what the task changes
  (`task_sandbox`: its image, limits, user ...);
- grades once (`GradedOnce`): `grade` is the format's verifier, and the finished
  output its text after any note, its metadata and its reward.

A format adds its `submit` tool (its description is the format's to write), its setup
and its grading.
"""

from __future__ import annotations

import abc
from typing import Any, ClassVar, Generic, TypeVar, cast

from orsbox.authoring.environment import as_split
from orsbox.authoring.graded_once import GradedOnce
from orsbox.authoring.grader import Grade
from orsbox.authoring.standard_tools import tool_mixins
from orsbox.errors import BadRequest, ManifestError
from orsbox.formats.options import DEFAULT_TOOLS, FormatOptions
from orsbox.protocol.types import JSONObject, Split, TextBlock, ToolOutput
from orsbox.sandbox.base import SandboxSpec

T = TypeVar("T")  # a format's record of one task
D = TypeVar("D", bound="DatasetEnvironment[Any]")


class DatasetEnvironment(GradedOnce, Generic[T]):
    """What every dataset's class shares; `dataset_class` fills in the data."""

    dataset_name: ClassVar[str]
    task_key: ClassVar[str] = "name"  # the task spec's field that names its task
    tasks: dict[str, T]  # per class: every task's record, by name
    splits: dict[str, list[str]]  # per class: each split's task names, in order

    def __init__(
        self, task_spec: JSONObject | None = None, secrets: dict[str, str] | None = None
    ) -> None:
        super().__init__(task_spec, secrets)
        name = self.task_spec.get(self.task_key)
        if not isinstance(name, str) or name not in self.tasks:
            raise BadRequest(f"{self.dataset_name} has no task named {name!r}")
        self.task: T = self.tasks[name]

    @classmethod
    def name(cls) -> str:
        return cls.dataset_name

    @classmethod
    def list_splits(cls) -> list[Split]:
        return [as_split(name) for name in cls.splits]

    @classmethod
    def list_tasks(cls, split: str) -> list[JSONObject]:
        return [cls.task_spec_of(cls.tasks[name]) for name in cls.splits.get(split, [])]

    @classmethod
    @abc.abstractmethod
    def task_spec_of(cls, task: T) -> JSONObject:
        """What `/tasks` lists of a task: its `task_key` and nothing the agent must not
        see."""

    @abc.abstractmethod
    def task_sandbox(self) -> dict[str, Any]:
        """The fields of `SandboxSpec` this task's sandbox has of its own (its image ...)."""

    def sandbox_spec(self) -> SandboxSpec:
        return super().sandbox_spec().model_copy(update=self.task_sandbox())

    @abc.abstractmethod
    async def grade(self) -> Grade:
        """Grade the sandbox as it is; `GradingError` when the verifier could not run."""

    async def grade_episode(self, note: str) -> ToolOutput:
        grade = await self.grade()
        text = f"{note}\n{grade.text}" if note else grade.text
        return ToolOutput(
            blocks=[TextBlock(text=text)],
            metadata=grade.metadata,
            reward=grade.reward,
            finished=True,
        )


def dataset_class(base: type[D], name: str, options: FormatOptions, **data: Any) -> type[D]:
    """The class serving one dataset named `name`: `base` (a format's
    `DatasetEnvironment`) with `data` (its tasks, splits ...), the standard tools
    `options.tools` names and `options`' call and episode timeouts."""
    try:
        mixins = tool_mixins(options.tools or DEFAULT_TOOLS)
    except ValueError as e:
        raise ManifestError(f"--tools: {e}") from None
    namespace: dict[str, Any] = {"__module__": base.__module__, "dataset_name": name, **data}
    if options.call_timeout_s:
        namespace["exec_timeout_s"] = options.call_timeout_s
        namespace["max_exec_timeout_s"] = max(base.max_exec_timeout_s, options.call_timeout_s)
    if options.episode_timeout_s:
        namespace["episode_timeout_s"] = options.episode_timeout_s
    class_name = "".join(p.capitalize() for p in name.replace("-", "_").split("_") if p)
    return cast(type[D], type(class_name or base.__name__, (base, *mixins), namespace))
