"""ORS wire types, serialised exactly as the spec shows.

Field order and presence match the reference stacks byte for byte: a text block is
`{"text": ..., "detail": null, "type": "text"}`, a tool output always carries
`blocks`, `metadata`, `reward` and `finished`, a tool spec always carries
`input_schema` (null for a tool without parameters). Requests forbid unknown fields so
a typo is a clear 400 instead of a silently ignored option.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, RootModel, model_validator

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


class ListToolsOutput(_Wire):
    tools: list[ToolSpec]


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
    toolset_name: str | None = Field(default=None, description="openreward clients; unsupported")

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
