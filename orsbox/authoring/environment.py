"""`Environment`: the class environment authors subclass, compatible with ors-sdk's.

An environment written for `ors-sdk` runs here by changing only its import line, so
the class surface (names, classmethods, async defaults) follows ors-sdk. What orsbox
adds is kept out of that surface: the server hands each instance an
`EnvironmentContext` (session id, sandbox backend) before `setup`, which container
environments use to start their sandbox.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from orsbox.authoring.tools import ToolDef, find_tools
from orsbox.authoring.user_code import MaybeAsync, call_user
from orsbox.clock import SYSTEM_CLOCK, Clock
from orsbox.protocol.types import (
    Block,
    Blocks,
    GroupCandidate,
    GroupScore,
    JSONObject,
    ListToolsOutput,
    Message,
    RunToolError,
    RunToolSuccess,
    Split,
    SplitType,
    TextBlock,
    ToolOutput,
)

SPLIT_TYPES: dict[str, SplitType] = {"train": "train", "validation": "validation", "test": "test"}


@dataclass
class EnvironmentContext:
    """What the host tells an environment instance about where it runs."""

    session_id: str
    sandbox_backend: Any = None  # orsbox.sandbox.SandboxBackend; Any keeps authoring light
    settings: Any = None
    extras: dict[str, Any] = field(default_factory=dict)
    start_from: Any = None  # orsbox.sandbox.snapshots.SharedSnapshot: a fork's files
    clock: Clock = SYSTEM_CLOCK  # the server's (`orsbox.clock`): episode time limits read it


def as_split(split: Split | str) -> Split:
    """Splits may be given as names; `train`/`validation`/`test` keep their type and any
    other name is a validation split, as in the reference servers."""
    if isinstance(split, Split):
        return split
    return Split(name=split, type=SPLIT_TYPES.get(split, "validation"))


class Environment(abc.ABC):
    """One episode's world. Subclass it, define splits, tasks, a prompt and `@tool`s."""

    orsbox_context: EnvironmentContext | None = None

    def __init__(
        self, task_spec: JSONObject | None = None, secrets: dict[str, str] | None = None
    ) -> None:
        self.task_spec: JSONObject = task_spec if task_spec is not None else {}
        self.secrets: dict[str, str] = dict(secrets or {})

    # -- identity -------------------------------------------------------------------
    @classmethod
    def name(cls) -> str:
        """The environment's name; the server matches it case-insensitively."""
        return cls.__name__

    # -- tasks ----------------------------------------------------------------------
    @classmethod
    @abc.abstractmethod
    def list_splits(cls) -> Sequence[Split | str]:
        """The task splits, as `Split` objects or bare names."""

    @classmethod
    def list_tasks(cls, split: str) -> Sequence[JSONObject]:
        """All tasks of a split. Environments with huge splits may instead override
        `num_tasks` and `get_task` and leave this unimplemented."""
        raise NotImplementedError(
            f"{cls.__name__} does not list tasks; use num_tasks and get_task instead"
        )

    @classmethod
    async def num_tasks(cls, split: str) -> int:
        return len(await call_user(cls.list_tasks, split))

    @classmethod
    async def get_task(cls, split: str, index: int) -> JSONObject:
        """Task `index` of `split` (Python indexing); raises IndexError when out of range."""
        return (await call_user(cls.list_tasks, split))[index]

    @classmethod
    async def get_task_range(
        cls, split: str, start: int | None = None, stop: int | None = None
    ) -> list[JSONObject]:
        """Tasks `start:stop` with Python slice rules (negative and omitted bounds)."""
        if _overrides(cls, "get_task") or not _overrides(cls, "list_tasks"):
            total = await call_user(cls.num_tasks, split)
            indices = range(*slice(start, stop).indices(total))
            return [await call_user(cls.get_task, split, i) for i in indices]
        return list((await call_user(cls.list_tasks, split))[start:stop])

    # -- episode --------------------------------------------------------------------
    def setup(self) -> Any:
        """Prepare the episode (may be async). Runs in the background after `/create`."""

    def teardown(self) -> Any:
        """Release the episode's resources (may be async). Runs on delete, timeout and
        shutdown, and after a failed setup."""

    @abc.abstractmethod
    def get_prompt(self) -> MaybeAsync[Sequence[Block]]:
        """The first observation: a list of text/image blocks (may be async)."""

    async def messages(self) -> list[Message]:
        """The prompt as role/blocks messages (`GET /{env}/messages`). By default the
        prompt as one user message; a conversation-shaped task overrides it."""
        return [Message(role="user", blocks=list(await call_user(self.get_prompt)))]

    async def score_group(self, candidates: list[GroupCandidate]) -> list[GroupScore | float]:
        """Score a group of candidate transcripts for this session's task together
        (`POST /{env}/score_group`: GRPO-style or pairwise judging): one score per
        candidate, in order. Override to offer it; without an override the endpoint
        answers 404, as the reference server does."""
        raise NotImplementedError(f"{type(self).__name__} does not score groups")

    @classmethod
    def supports_score_group(cls) -> bool:
        return cls.score_group is not Environment.score_group

    # -- tools ----------------------------------------------------------------------
    @classmethod
    def list_tools(cls) -> ListToolsOutput:
        """Shared tools: the ones every task has."""
        shared = [t.spec for t in find_tools(cls).values() if t.shared]
        return ListToolsOutput(
            tools=shared, supports_score_group=cls.supports_score_group() or None
        )

    def list_task_tools(self) -> MaybeAsync[ListToolsOutput]:
        """Tools only this task has; by default the `@tool(shared=False)` methods.
        `/{env}/task_tools` lists these after the shared ones."""
        tools = find_tools(type(self)).values()
        return ListToolsOutput(tools=[t.spec for t in tools if not t.shared])

    async def before_tool(self, name: str) -> ToolOutput | None:
        """Called before each tool call; an output returned here answers the call
        instead of the tool (how an environment ends an episode whose time is up)."""
        return None

    def callable_tools(self) -> dict[str, ToolDef]:
        """Tools an agent may call in this session (override to narrow per task)."""
        return find_tools(type(self))

    async def dispatch(
        self, name: str, tool_input: JSONObject
    ) -> RunToolSuccess | RunToolError | None:
        """Answer a tool call by other means than orsbox's `@tool` methods (an adapter
        for environments written with another library does); None: the `@tool` method."""
        return None

    # -- toolsets (openreward's `toolset_name` in /create) -----------------------------
    @classmethod
    def toolsets_offered(cls) -> list[str]:
        """Names a `/create` may give as `toolset_name`; orsbox environments offer none."""
        return []

    def select_toolset(self, name: str) -> None:
        """Use the toolset `name` (one of `toolsets_offered()`) in this session; called
        after the constructor, before `setup`."""
        raise NotImplementedError(f"{type(self).__name__} offers no toolsets")


class SingleTask(Environment):
    """One split ("test") of one empty task, and `prompt` as the first message: an
    open-ended sandbox where the tools are the point (a playground, a soak or benchmark
    target, a hostile-agent test bed). Put it first, before tool mixins:
    `class Playground(SingleTask, BashTool, FileTools): prompt = "Explore."`"""

    prompt: str = ""

    @classmethod
    def list_splits(cls) -> Sequence[Split | str]:
        return ["test"]

    @classmethod
    def list_tasks(cls, split: str) -> Sequence[JSONObject]:
        return [{}]

    def get_prompt(self) -> Blocks:
        return [TextBlock(text=self.prompt)]


def _overrides(cls: type, method: str) -> bool:
    """True when a subclass, not `Environment`, defines `method`."""
    for klass in cls.__mro__:
        if klass is Environment:
            return False
        if method in klass.__dict__:
            return True
    return False
