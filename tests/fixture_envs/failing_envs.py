"""An environment whose tools fail in every way a tool call can, for the tests of the
`reason` each failure carries (tests/test_error_reasons.py)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from orsbox import Environment, TextBlock, ToolOutput, tool
from orsbox.authoring import ToolError
from orsbox.errors import Forbidden, GradingError, SandboxError, SandboxFileError, SandboxGone


class Answer(BaseModel):
    answer: str


def _raising(error: Exception, doc: str) -> Any:
    """A tool without parameters that raises `error`."""

    def raises(self: Environment) -> ToolOutput:
        raise error

    raises.__doc__ = doc
    return tool(raises)


class Failing(Environment):
    """Submit the answer 4; every other tool fails."""

    @classmethod
    def list_splits(cls):
        return ["train"]

    @classmethod
    def list_tasks(cls, split: str):
        return [{"question": "what is 2+2?", "answer": "4"}]

    def get_prompt(self):
        return [TextBlock(text=self.task_spec["question"])]

    @tool
    def submit(self, params: Answer) -> ToolOutput:
        """Submit the final answer."""
        right = params.answer.strip() == self.task_spec["answer"]
        return ToolOutput(blocks=[TextBlock(text="ok")], reward=float(right), finished=True)

    @tool
    def refuse(self) -> ToolOutput:
        """Refuses its input, as a file tool refuses a missing path."""
        raise ToolError("no such file: /nowhere")

    @tool
    def gone(self) -> ToolOutput:
        """Finds its sandbox dead."""
        raise SandboxGone("the sandbox was killed (out of memory)")

    # the sandbox layer's failures, and text that only looks like the `[infra]` marker
    unreachable = _raising(
        SandboxError("exec: docker engine unreachable: connection refused"),
        "Finds its sandbox's engine not answering.",
    )
    missing_file = _raising(
        SandboxFileError("no such file: /workspace/nowhere"),
        "Reads a file the agent named that is not there, and does not catch it.",
    )
    quoting = _raising(
        KeyError("[infra] sandbox_gone: not really"),
        "Raises with text the model chose, which looks like the marker.",
    )

    @tool
    def slow(self) -> ToolOutput:
        """Times out."""
        raise TimeoutError("the command took too long")

    @tool
    def forbidden(self) -> ToolOutput:
        """Asks for what the operator does not allow."""
        raise Forbidden("network access is not allowed; allow with ORSBOX_ALLOW_NETWORK=1")

    @tool
    def ungradable(self) -> ToolOutput:
        """Its grader cannot run."""
        raise GradingError("the verifier wrote no reward", cause="no-reward-file")

    @tool
    def crash(self) -> ToolOutput:
        """Raises."""
        raise ValueError("kaboom")
