"""Environments made from an `orsbox.toml` manifest rather than written in Python.

`manifest_environment(path)` reads the manifest and its task files and returns an
`Environment` subclass like one an author would write: a `ContainerEnvironment` that
inherits the standard-tool mixins the manifest names, plus a `submit` tool that runs the
grader (`grader.py`). The server cannot tell it from a Python environment, so both kinds
are served side by side.

Everything that can be checked without a sandbox is checked here, at load: the manifest
itself, every task file, and that every task has the fields the prompt uses.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, Field, create_model

from orsbox.authoring.container import ContainerEnvironment
from orsbox.authoring.environment import as_split
from orsbox.authoring.grader import Grade, Grader, task_env
from orsbox.authoring.manifest import MANIFEST_NAME, Manifest, read_manifest
from orsbox.authoring.standard_tools import tool_mixins
from orsbox.authoring.task_files import read_tasks
from orsbox.authoring.tools import find_tools, tool
from orsbox.errors import ManifestError, SandboxGone, SetupFailed
from orsbox.protocol.types import JSONObject, Split, TextBlock, ToolOutput

SUBMIT_DOC = (
    "Submit your work for grading. The grader checks the sandbox (and the parameters "
    "you pass, if any); its output and the reward are returned. Ends the episode."
)


def fill_prompt(template: str, task: JSONObject) -> str:
    """`template.format_map(task)`; a missing field is a `ManifestError` naming it."""
    try:
        return template.format_map(task)
    except KeyError as e:
        fields = ", ".join(sorted(map(str, task))) or "none"
        raise ManifestError(
            f"the prompt uses task field {e.args[0]!r}, which the task does not have "
            f"(its fields: {fields})"
        ) from None
    except (IndexError, AttributeError, ValueError) as e:
        raise ManifestError(f"the prompt cannot be filled from the task: {e}") from None


class DeclarativeEnvironment(ContainerEnvironment):
    """The behaviour every manifest environment shares; subclasses carry the data."""

    manifest: ClassVar[Manifest]
    folder: ClassVar[Path]
    split_tasks: ClassVar[dict[str, list[JSONObject]]]
    grader: ClassVar[Grader]
    _submitted: ToolOutput | None = None  # the graded submit's output, once graded

    def __init__(
        self, task_spec: JSONObject | None = None, secrets: dict[str, str] | None = None
    ) -> None:
        super().__init__(task_spec, secrets)
        self.prompt_text = fill_prompt(self.manifest.prompt, self.task_spec)

    @classmethod
    def name(cls) -> str:
        return cls.manifest.name

    @classmethod
    def list_splits(cls) -> list[Split]:
        return [
            Split(name=s.name, type=s.type or as_split(s.name).type) for s in cls.manifest.splits
        ]

    @classmethod
    def list_tasks(cls, split: str) -> list[JSONObject]:
        return cls.split_tasks[split]

    def get_prompt(self) -> list[TextBlock]:
        return [TextBlock(text=self.prompt_text)]

    def task_files(self) -> dict[str, str]:
        return {str(self.folder / src): dst for src, dst in self.manifest.setup.copy_dirs.items()}

    def setup_inputs(self) -> Any:
        """The [setup] table counts too: a changed command is a new cache key."""
        return {**super().setup_inputs(), "setup": self.manifest.setup.model_dump(mode="json")}

    async def prepare(self) -> None:
        setup = self.manifest.setup
        if setup.run is None:
            return
        result = await self.sandbox.exec(
            ["bash", "-c", setup.run],
            env=task_env(self.task_spec),
            user=setup.user,
            cwd=self.workdir,
            timeout_s=setup.timeout_s,
        )
        if result.exit_code != 0:
            status = "timed out" if result.timed_out else f"exited with {result.exit_code}"
            raise SetupFailed(f"setup.run {status}: {result.output.strip()[-2000:]}")

    # -- grading ------------------------------------------------------------------------
    async def run_grader(self, params: dict[str, str], event: str) -> Grade:
        try:
            return await self.grader.grade(self.sandbox, self.task_spec, params, event)
        except SandboxGone as e:
            await self.sandbox_lost(e)
            raise

    async def grade_submission(self, params: dict[str, str]) -> ToolOutput:
        """The first `submit` is graded; every later one gets its finished output back,
        reward unchanged: a model that reads the grader's output (a failing case's
        expected value) cannot submit again to be scored on what it read. The calls of
        a session run one at a time, so no second grading can start meanwhile."""
        if self._submitted is None:
            grade = await self.run_grader(params, "submit")
            self._submitted = ToolOutput(
                blocks=[TextBlock(text=grade.text)],
                metadata=grade.metadata,
                reward=grade.reward,
                finished=True,
            )
        return self._submitted

    async def grade_step(self, output: ToolOutput) -> ToolOutput:
        if self._submitted is not None:  # graded: a step after it changes no reward
            return output.model_copy(update={"reward": self._submitted.reward})
        grade = await self.run_grader({}, "step")
        blocks = [*output.blocks, TextBlock(text=f"[grader] {grade.text}")]
        metadata = {**(output.metadata or {}), **grade.metadata}
        return output.model_copy(
            update={"blocks": blocks, "metadata": metadata, "reward": grade.reward}
        )


def _submit_params(manifest: Manifest) -> type[BaseModel] | None:
    fields: dict[str, Any] = {
        name: (str, Field(description=help or f"your {name}"))
        for name, help in manifest.grader.param_help.items()
    }
    return create_model("SubmitParams", **fields) if fields else None


def _submit_tool(params_model: type[BaseModel] | None) -> Any:
    submit: Callable[..., Awaitable[ToolOutput]]  # with params or without
    if params_model is None:

        async def submit(self: DeclarativeEnvironment) -> ToolOutput:
            return await self.grade_submission({})

    else:

        async def submit(self: DeclarativeEnvironment, params: Any) -> ToolOutput:
            return await self.grade_submission(params.model_dump())

        submit.__annotations__ = {"params": params_model, "return": ToolOutput}
    submit.__doc__ = SUBMIT_DOC
    return tool(submit)


def _graded_step(inner: Any) -> Any:
    """A standard tool that runs the grader after it succeeds (`every_step = true`)."""

    @functools.wraps(inner)
    async def step(self: DeclarativeEnvironment, *args: Any) -> ToolOutput:
        return await self.grade_step(await inner(self, *args))

    return step


def _load_tasks(manifest: Manifest, path: Path) -> dict[str, list[JSONObject]]:
    split_tasks = {}
    for split in manifest.splits:
        tasks_path = path.parent / split.tasks
        tasks = read_tasks(tasks_path)
        for index, task in enumerate(tasks):
            try:
                fill_prompt(manifest.prompt, task)
            except ManifestError as e:
                raise ManifestError(f"{path}: prompt: {tasks_path} task {index}: {e}") from None
        split_tasks[split.name] = tasks
    return split_tasks


def manifest_path(target: Path) -> Path:
    """The manifest of a folder, or `target` itself when it is the manifest file."""
    return target / MANIFEST_NAME if target.is_dir() else target


def manifest_environment(target: Path, *, image: str | None = None) -> type[DeclarativeEnvironment]:
    """The environment class a manifest declares. `image` overrides the manifest's
    (an environment read out of an image runs in that image)."""
    path = manifest_path(Path(target)).resolve()
    if not path.is_file():
        raise ManifestError(f"no {MANIFEST_NAME} in {target}")
    manifest = read_manifest(path)
    mixins = tool_mixins(manifest.tools)
    namespace = _class_attributes(manifest, path, image)
    if manifest.grader.every_step:
        for mixin in mixins:
            for name in find_tools(mixin):
                namespace[name] = _graded_step(getattr(mixin, name))
    class_name = "".join(p.capitalize() for p in manifest.name.replace("-", "_").split("_"))
    return type(class_name or "Manifest", (*mixins, DeclarativeEnvironment), namespace)


def _class_attributes(manifest: Manifest, path: Path, image: str | None) -> dict[str, Any]:
    """What a hand-written `ContainerEnvironment` would set, from the manifest."""
    limits = manifest.limits
    return {
        "__doc__": manifest.description or f"The {manifest.name} environment ({path}).",
        "__module__": __name__,
        "manifest": manifest,
        "folder": path.parent,
        "split_tasks": _load_tasks(manifest, path),
        "grader": Grader(manifest.grader, path.parent, manifest.workdir, limits.output_bytes),
        "image": image or manifest.image_tag,
        "limits": limits.sandbox_limits(path.parent),
        "workdir": manifest.workdir,
        "container_env": dict(manifest.env),
        "exec_timeout_s": limits.timeout_s,
        "max_exec_timeout_s": max(limits.max_timeout_s, limits.timeout_s),
        "output_cap_bytes": limits.output_bytes,
        "max_output_cap_bytes": max(limits.output_bytes, 1024 * 1024),
        "submit": _submit_tool(_submit_params(manifest)),
        "setup_cache": manifest.setup.cache,
    }
