"""orsbox: a sandboxed, container-backed host for Open Reward Standard environments.

The authoring surface uses the same names as `ors-sdk`, so an environment written for
it runs here by changing only its import line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

from orsbox.authoring import Environment, EnvironmentContext, tool
from orsbox.errors import GradingError
from orsbox.protocol.types import (
    Blocks,
    CreateSession,
    ImageBlock,
    JSONObject,
    ListToolsOutput,
    RunToolError,
    RunToolOutput,
    RunToolSuccess,
    Split,
    TextBlock,
    ToolCall,
    ToolOutput,
    ToolSpec,
)

if TYPE_CHECKING:
    from orsbox.serving import Server

__all__ = [
    "Blocks",
    "CreateSession",
    "Environment",
    "EnvironmentContext",
    "GradingError",
    "ImageBlock",
    "JSONObject",
    "ListToolsOutput",
    "RunToolError",
    "RunToolOutput",
    "RunToolSuccess",
    "Server",
    "Split",
    "TextBlock",
    "ToolCall",
    "ToolOutput",
    "ToolSpec",
    "__version__",
    "tool",
]


def __getattr__(name: str) -> Any:
    # The server pulls in FastAPI and uvicorn; authoring an environment should not.
    if name == "Server":
        from orsbox.serving import Server

        return Server
    raise AttributeError(f"module 'orsbox' has no attribute {name!r}")
