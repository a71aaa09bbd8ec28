"""Writing environments: the `Environment` base class and the `@tool` decorator."""

from orsbox.authoring.environment import Environment, EnvironmentContext, SingleTask, as_split
from orsbox.authoring.tools import (
    ToolDef,
    ToolError,
    ToolRaised,
    as_zero_reward,
    call_tool,
    find_tools,
    tool,
)

__all__ = [
    "Environment",
    "EnvironmentContext",
    "SingleTask",
    "ToolDef",
    "ToolError",
    "ToolRaised",
    "as_split",
    "as_zero_reward",
    "call_tool",
    "find_tools",
    "tool",
]
