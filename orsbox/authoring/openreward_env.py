"""Environments written with the `openreward` package, served as they are.

`adapt(cls)` wraps an `openreward.environments.Environment` subclass in an orsbox
`Environment` the server serves like any other: tasks, splits and the prompt come from
the wrapped class, each session holds one instance of it, and every tool call goes
through openreward's own dispatch (its locks, its episode latch, its toolsets). The
`toolset_name` of a `/create` picks one of openreward's built-in toolsets, as the
reference server does, and secrets reach the constructor unchanged.

Values cross between the two libraries as plain data (`model_dump` then validate), so
neither library's classes leak into the other.

When such an environment asks for a sandbox (`AsyncOpenReward().sandbox(...)`), the
`openreward` client sends it to OPENREWARD_SESSION_URL: `orsbox serve` points that at
its own sandbox API when `ORSBOX_SANDBOX_API=1` (`orsbox.cli.serve`).
"""

from __future__ import annotations

import inspect
import sys
from typing import Any, ClassVar, TypeGuard

from pydantic import TypeAdapter

from orsbox.authoring.environment import Environment
from orsbox.authoring.user_code import call_user
from orsbox.protocol.reasons import openreward_reason
from orsbox.protocol.types import (
    Block,
    GroupCandidate,
    GroupScore,
    JSONObject,
    ListToolsOutput,
    Message,
    RunToolError,
    RunToolSuccess,
    Split,
    TerminalToolSpec,
    ToolOutput,
    ToolSpec,
)

_BLOCKS = TypeAdapter(list[Block])


def is_openreward_environment(obj: Any) -> TypeGuard[type]:
    """A concrete `openreward.environments.Environment` subclass. Such a class's module
    imported `openreward.environments` already, so this never imports it (it is heavy)."""
    module = sys.modules.get("openreward.environments")
    if module is None or not inspect.isclass(obj):
        return False
    return issubclass(obj, module.Environment) and not inspect.isabstract(obj)


def adapt(cls: type) -> type[Environment]:
    """An orsbox `Environment` class serving the openreward environment `cls`."""
    namespace = {"wrapped": cls, "__module__": cls.__module__, "__doc__": cls.__doc__}
    return type(cls.__name__, (OpenRewardEnvironment,), namespace)


def _dump(value: Any) -> Any:
    return value.model_dump() if hasattr(value, "model_dump") else value


def _terminal(spec: Any) -> TerminalToolSpec | None:
    """openreward's `TerminalToolSpec` (a dataclass) as orsbox's wire type."""
    if spec is None:
        return None
    return TerminalToolSpec(
        name=spec.name, arg=spec.arg, description=getattr(spec, "description", "") or ""
    )


class OpenRewardEnvironment(Environment):
    """Base of `adapt`'s classes; `wrapped` is the openreward environment class."""

    wrapped: ClassVar[Any]

    def __init__(
        self, task_spec: JSONObject | None = None, secrets: dict[str, str] | None = None
    ) -> None:
        super().__init__(task_spec, secrets)
        self.inner = self.wrapped(task_spec=self.task_spec, secrets=dict(self.secrets))
        self.toolset: Any = None

    # -- identity and tasks ------------------------------------------------------------
    @classmethod
    def name(cls) -> str:
        return cls.wrapped.name()

    @classmethod
    def list_splits(cls) -> list[Split | str]:
        splits = cls.wrapped._list_splits_cached()
        return [s if isinstance(s, str) else Split.model_validate(_dump(s)) for s in splits]

    @classmethod
    def list_tasks(cls, split: str) -> Any:
        return cls.wrapped.list_tasks(split)

    @classmethod
    async def num_tasks(cls, split: str) -> int:
        return await cls.wrapped.num_tasks(split)

    @classmethod
    async def get_task(cls, split: str, index: int) -> JSONObject:
        return await cls.wrapped.get_task(split, index)

    @classmethod
    async def get_task_range(
        cls, split: str, start: int | None = None, stop: int | None = None
    ) -> list[JSONObject]:
        return await cls.wrapped.get_task_range(split, start, stop)

    # -- episode -----------------------------------------------------------------------
    async def setup(self) -> None:
        await call_user(self.inner.setup)

    async def teardown(self) -> None:
        await call_user(self.inner.teardown)

    async def get_prompt(self) -> list[Any]:
        blocks = await call_user(self.inner.get_prompt)
        return _BLOCKS.validate_python([_dump(b) for b in blocks])

    async def messages(self) -> list[Message]:
        found = await call_user(self.inner.get_messages)
        return [Message.model_validate(_dump(m)) for m in found]

    async def score_group(self, candidates: list[GroupCandidate]) -> list[GroupScore | float]:
        from openreward.environments import GroupCandidate as Candidate

        theirs = [Candidate.model_validate(c.model_dump()) for c in candidates]
        scores = await call_user(self.inner.score_group, theirs)
        return [s if isinstance(s, int | float) else GroupScore(**_dump(s)) for s in scores]

    @classmethod
    def supports_score_group(cls) -> bool:
        return bool(cls.wrapped._supports_score_group())

    # -- tools -------------------------------------------------------------------------
    @classmethod
    def list_tools(cls) -> ListToolsOutput:
        listed = cls.wrapped.list_tools()
        tools = [ToolSpec.model_validate(_dump(t)) for t in listed.tools]
        return ListToolsOutput(
            tools=tools,
            terminal_tool=_terminal(getattr(listed, "terminal_tool", None)),
            supports_score_group=cls.supports_score_group() or None,
        )

    async def list_task_tools(self) -> ListToolsOutput:
        """The task's own tools and the session's toolset (the shared ones are listed
        by `list_tools`), and the session's `@terminal` tool (a toolset may bring one)."""
        from openreward.environments.session import list_session_tools

        shared = {t.name for t in self.list_tools().tools}
        merged = await list_session_tools(self.inner, self.toolset)
        tools = [ToolSpec.model_validate(_dump(t)) for t in merged.tools if t.name not in shared]
        return ListToolsOutput(
            tools=tools, terminal_tool=_terminal(getattr(merged, "terminal_tool", None))
        )

    def callable_tools(self) -> dict[str, Any]:
        return {}  # every call goes through `dispatch`

    async def dispatch(self, name: str, tool_input: JSONObject) -> RunToolSuccess | RunToolError:
        from openreward.environments.session import call_session_tool

        result = (await call_session_tool(self.inner, self.toolset, name, tool_input)).root
        if not result.ok:  # its reason as it is (episode_finished included)
            return RunToolError(
                error=result.error, reason=openreward_reason(getattr(result, "reason", None))
            )
        return RunToolSuccess(output=ToolOutput.model_validate(_dump(result.output)))

    # -- toolsets ----------------------------------------------------------------------
    @classmethod
    def toolsets_offered(cls) -> list[str]:
        from openreward.toolsets import BUILTIN_TOOLSETS

        return sorted(BUILTIN_TOOLSETS)

    def select_toolset(self, name: str) -> None:
        from openreward.toolsets import BUILTIN_TOOLSETS

        self.toolset = BUILTIN_TOOLSETS[name](self.inner)
