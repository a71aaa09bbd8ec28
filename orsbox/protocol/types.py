"""ORS wire types, serialised exactly as the spec shows.

Field order and presence match the reference stacks byte for byte: a text block is
`{"text": ..., "detail": null, "type": "text"}`, a tool output always carries
`blocks`, `metadata`, `reward` and `finished`, a tool spec always carries
`input_schema` (null for a tool without parameters). Requests forbid unknown fields so
a typo is a clear 400 instead of a silently ignored option.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeAlias

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    RootModel,
    SerializerFunctionWrapHandler,
    StrictBool,
    model_serializer,
    model_validator,
)

JSONObject: TypeAlias = dict[str, Any]
SplitType: TypeAlias = Literal["train", "validation", "test"]


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TextBlock(_Wire):
    text: str
    detail: JSONObject | None = None
    type: Literal["text"] = "text"


class ImageBlock(_Wire):
    data: str = Field(description="base64-encoded image bytes")
    mimeType: str
    detail: JSONObject | None = None
    type: Literal["image"] = "image"


Block: TypeAlias = Annotated[TextBlock | ImageBlock, Field(discriminator="type")]
Blocks: TypeAlias = list[Block]


class ToolSpec(_Wire):
    name: str
    description: str
    input_schema: JSONObject | None


class TerminalToolSpec(_Wire):
    """An openreward environment's `@terminal` tool, as openreward's server lists it:
    left out of `tools` (the model does not call it by name), named here so a client
    can pass the assistant's final message to it (`arg`, or no argument when None)."""

    name: str
    arg: str | None = None
    description: str = ""


class ListToolsOutput(_Wire):
    tools: list[ToolSpec]
    terminal_tool: TerminalToolSpec | None = Field(
        default=None, description="set only by openreward environments with a @terminal tool"
    )
    supports_score_group: bool | None = Field(
        default=None, description="set (true) only by environments that score groups"
    )

    @model_serializer(mode="wrap")
    def _omit_unset(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """`{"tools": [...]}` exactly, as the reference stacks send, unless the
        environment has a `@terminal` tool or scores groups (the openreward client reads
        both; platoon compares `terminal_tool` with the class it was given)."""
        data = handler(self)
        for key in ("terminal_tool", "supports_score_group"):
            if data.get(key) is None:
                data.pop(key, None)
        return data


Role: TypeAlias = Literal["system", "user", "assistant"]


class ReasoningBlock(_Wire):
    text: str
    signature: str | None = None
    detail: JSONObject | None = None
    type: Literal["reasoning"] = "reasoning"


class ToolCallBlock(_Wire):
    id: str
    name: str
    input: JSONObject
    detail: JSONObject | None = None
    type: Literal["tool_call"] = "tool_call"


class ToolResultBlock(_Wire):
    tool_call_id: str
    blocks: Blocks
    is_error: StrictBool = False  # strict: a request body's 0 is not a boolean
    detail: JSONObject | None = None
    type: Literal["tool_result"] = "tool_result"


MessageBlock: TypeAlias = Annotated[
    TextBlock | ImageBlock | ReasoningBlock | ToolCallBlock | ToolResultBlock,
    Field(discriminator="type"),
]
_ROLE_BLOCKS = {
    "system": {"text", "image"},
    "user": {"text", "image", "tool_result"},
    "assistant": {"text", "image", "reasoning", "tool_call"},
}


class Message(_Wire):
    """One turn of a conversation (`GET /{env}/messages`, `score_group` candidates).
    Blocks sit where Anthropic's API puts them: reasoning and tool calls in assistant
    turns, tool results in user turns."""

    role: Role
    blocks: list[MessageBlock]
    detail: JSONObject | None = None

    @model_validator(mode="after")
    def _placement(self) -> Message:
        for block in self.blocks:
            if block.type not in _ROLE_BLOCKS[self.role]:
                raise ValueError(f"a {block.type!r} block cannot be in a {self.role!r} message")
        return self


class GroupCandidate(_Wire):
    messages: list[Message]
    metadata: JSONObject | None = None


class GroupScore(_Wire):
    reward: float
    metadata: JSONObject | None = None


class ScoreGroup(_Wire):
    candidates: list[GroupCandidate]
    task_id: str | None = Field(default=None, description="set only to reconnect")


class ScoreGroupOutput(_Wire):
    scores: list[GroupScore]


class ToolOutput(_Wire):
    blocks: Blocks
    metadata: JSONObject | None = None
    reward: float | None = None
    finished: bool = False


class RunToolSuccess(_Wire):
    ok: Literal[True] = True
    output: ToolOutput


class RunToolError(_Wire):
    ok: Literal[False] = False
    error: str
    # Why, as openreward's client reads it (orsbox.protocol.reasons); None from servers
    # that predate the field.
    reason: str | None = None


class RunToolOutput(RootModel[RunToolSuccess | RunToolError]):
    root: RunToolSuccess | RunToolError = Field(discriminator="ok")


class ToolCall(_Wire):
    name: str
    input: JSONObject = Field(default_factory=dict)
    task_id: str | None = Field(default=None, description="set only to reconnect to a call")


class Split(_Wire):
    name: str
    type: SplitType


class CreateSession(_Wire):
    env_name: str | None = None
    task_spec: JSONObject | None = None
    split: str | None = None
    index: int | None = None
    secrets: dict[str, str] | None = None
    toolset_name: str | None = Field(
        default=None, description="a toolset the environment offers (openreward environments)"
    )

    @model_validator(mode="after")
    def _one_task_source(self) -> CreateSession:
        has_spec = self.task_spec is not None
        has_index = self.split is not None and self.index is not None
        if (self.split is None) != (self.index is None):
            raise ValueError("split and index must be given together")
        if has_spec == has_index:
            raise ValueError("give either task_spec or split and index, not both or neither")
        return self


class ListTasks(_Wire):
    split: str


class NumTasks(_Wire):
    split: str


class GetTask(_Wire):
    split: str
    index: int


class GetTaskRange(_Wire):
    split: str
    start: int | None = None
    stop: int | None = None


class SessionId(_Wire):
    sid: str


class TasksAnswer(_Wire):
    tasks: list[JSONObject]
    env_name: str


class TaskAnswer(_Wire):
    task: JSONObject
    env_name: str


class NumTasksAnswer(_Wire):
    num_tasks: int


class Status(_Wire):
    status: str


class ErrorAnswer(_Wire):
    detail: str
