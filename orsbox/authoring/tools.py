"""The `@tool` decorator and how an environment's tools are found, described and called.

A tool is a method marked with `@tool` that takes `self` and at most one pydantic model
(its parameters) and returns a `ToolOutput`. Its docstring is the description the agent
reads and the model's JSON schema is its `input_schema` (null without parameters).
Tools are found once per class and listed sorted by name, as the reference servers do.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, get_type_hints, overload

from pydantic import BaseModel, ValidationError

from orsbox.authoring.user_code import call_user
from orsbox.errors import (
    Forbidden,
    GradingError,
    PolicyViolation,
    SandboxError,
    SandboxFileError,
    SandboxGone,
)
from orsbox.protocol.reasons import Reason
from orsbox.protocol.types import RunToolError, RunToolSuccess, TextBlock, ToolOutput, ToolSpec

if TYPE_CHECKING:
    from orsbox.authoring.environment import Environment

F = TypeVar("F", bound=Callable[..., Any])

_MARK = "__orsbox_tool__"


@overload
def tool(fn: F) -> F: ...
@overload
def tool(*, shared: bool = True) -> Callable[[F], F]: ...
def tool(fn: Any = None, *, shared: bool = True) -> Any:
    """Mark a method as a tool. `@tool(shared=False)` makes it task-specific: it is
    listed only by `/{env}/task_tools` inside a session, not by `/{env}/tools`."""

    def mark(f: F) -> F:
        setattr(f, _MARK, {"shared": shared})
        return f

    return mark if fn is None else mark(fn)


class ToolError(Exception):
    """Raise from a tool for an expected failure the agent should read and recover from
    (a missing file, an ambiguous edit): the call answers `{"ok": false, "error": msg}`."""


class ToolRaised(Exception):
    """A tool raised: the call ends with an SSE `error` event carrying this message,
    labelled with `reason` (`orsbox.protocol.reasons`), and marked `[infra]` when
    `infra`: the failure is the host's, not the model's."""

    def __init__(
        self, message: str, reason: Reason = Reason.TOOL_FAILED, *, infra: bool = False
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.infra = infra


def reason_of(error: BaseException) -> Reason:
    """The reason a tool's exception ends its call with, by the exception's type."""
    if isinstance(error, SandboxGone):
        return Reason.SANDBOX_GONE
    if isinstance(error, SandboxError) and not isinstance(error, SandboxFileError):
        return Reason.SANDBOX_ERROR
    if isinstance(error, TimeoutError):
        return Reason.TIMEOUT
    if isinstance(error, Forbidden | PolicyViolation):
        return Reason.REFUSED_BY_POLICY
    return Reason.TOOL_FAILED


def is_infra_error(error: BaseException) -> bool:
    """Whether a tool's exception is the host's failure, not the model's: the sandbox
    died or its layer failed (an engine that does not answer, a container that did not
    start; a file the agent named that is not there is the agent's), or a timeout
    escaped the tool (the episode's time limit is `ToolRaised`, never this)."""
    if isinstance(error, SandboxFileError):
        return False
    return isinstance(error, SandboxError | TimeoutError)


def _failed(name: str, error: Exception) -> ToolRaised:
    return ToolRaised(
        f"tool {name!r} failed: {type(error).__name__}: {error}",
        reason_of(error),
        infra=is_infra_error(error),
    )


def as_zero_reward(error: GradingError) -> ToolOutput:
    """The finished output a grading error becomes under `--grading-errors as-zero`
    (Harbor's own mean counts a trial without a reward as 0): reward 0.0, the cause kept
    in the text and in `metadata["grading_error"]`."""
    return ToolOutput(
        blocks=[TextBlock(text=f"[reward 0: {error.wire()}]")],
        metadata={"grading_error": {"cause": error.cause, "message": error.message}},
        reward=0.0,
        finished=True,
    )


@dataclass(frozen=True)
class ToolDef:
    name: str
    description: str
    params: type[BaseModel] | None
    shared: bool

    @functools.cached_property
    def spec(self) -> ToolSpec:
        """Made once per tool: a JSON schema takes pydantic milliseconds, and every
        session's start lists its environment's tools on the server's event loop."""
        schema = self.params.model_json_schema() if self.params else None
        return ToolSpec(name=self.name, description=self.description, input_schema=schema)


def _params_model(owner: type, name: str, fn: Callable[..., Any]) -> type[BaseModel] | None:
    real = inspect.unwrap(fn)
    params = [p for p in inspect.signature(real).parameters.values() if p.name != "self"]
    if not params:
        return None
    hints = get_type_hints(real)
    model = hints.get(params[0].name)
    if len(params) > 1 or not (inspect.isclass(model) and issubclass(model, BaseModel)):
        raise TypeError(
            f"tool {owner.__name__}.{name} must take self and at most one pydantic model "
            f"parameter, got ({', '.join(p.name for p in params)})"
        )
    return model


def find_tools(cls: type) -> dict[str, ToolDef]:
    """Every `@tool` method of `cls` (and its bases), by name, sorted by name."""
    cached = cls.__dict__.get("_orsbox_tools")
    if cached is not None:
        return cached
    found: dict[str, ToolDef] = {}
    for name in sorted(dir(cls)):
        fn = getattr(cls, name, None)
        mark = getattr(fn, _MARK, None)
        if mark is None or not callable(fn):
            continue
        description = inspect.cleandoc(fn.__doc__ or "")
        found[name] = ToolDef(name, description, _params_model(cls, name, fn), mark["shared"])
    cls._orsbox_tools = found  # type: ignore[attr-defined]  # a cache on the author's class, which declares no such attribute
    return found


def _validation_message(tool_name: str, error: ValidationError) -> str:
    problems = "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'input'}: {e['msg']}" for e in error.errors()
    )
    return f"invalid input for tool {tool_name!r}: {problems}"


def _as_output(tool_name: str, result: Any) -> ToolOutput:
    if isinstance(result, ToolOutput):
        return result
    if isinstance(result, dict):
        try:
            return ToolOutput.model_validate(result)
        except ValidationError as e:  # named by place and problem, never by value
            problems = _validation_message(tool_name, e).split(": ", 1)[1]
            raise ToolRaised(f"tool {tool_name!r} returned an invalid result: {problems}") from None
    raise ToolRaised(f"tool {tool_name!r} returned {type(result).__name__}; expected ToolOutput")


async def call_tool(
    env: Environment, name: str, tool_input: dict[str, Any]
) -> RunToolSuccess | RunToolError:
    """Run one tool. Unknown tools and invalid input are answered as `RunToolError`
    naming what exists, so an agent can recover; a tool that raises raises
    `ToolRaised` (the server turns it into an SSE `error` event). A grader that could
    not run raises its `GradingError` unchanged: the server reports that one object as
    the call's event, the episode's record and the metric (docs/grading-errors.md)."""
    gate = await env.before_tool(name)
    if gate is not None:
        return RunToolSuccess(output=gate)
    try:
        dispatched = await env.dispatch(name, tool_input)
    except (ToolRaised, GradingError):
        raise
    except Exception as e:
        raise _failed(name, e) from e
    if dispatched is not None:
        return dispatched
    tools = env.callable_tools()
    found = tools.get(name)
    if found is None:
        available = ", ".join(sorted(tools)) or "none"
        return RunToolError(
            error=f"unknown tool {name!r}; available tools: {available}", reason=Reason.NOT_FOUND
        )
    method = getattr(env, name)
    try:
        args = () if found.params is None else (found.params.model_validate(tool_input),)
    except ValidationError as e:
        return RunToolError(error=_validation_message(name, e), reason=Reason.INPUT_VALIDATION)
    try:
        result = await call_user(method, *args)
    except ToolError as e:  # the tool refused this input (no such file, an ambiguous edit)
        return RunToolError(error=str(e), reason=Reason.INPUT_VALIDATION)
    except GradingError:
        raise
    except Exception as e:
        raise _failed(name, e) from e
    return RunToolSuccess(output=_as_output(name, result))
