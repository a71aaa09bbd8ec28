"""The environments the benchmarks serve.

`Echo` has one trivial tool, so a call measures the host and nothing else. It is
written once against a module's `Environment`/`tool`/`ToolOutput`/`TextBlock`, so the
same class runs on orsbox and on the ors-sdk reference server (`echo_env(ors)`).
`Shell` is a container environment with the bash tool.
"""

# No `from __future__ import annotations`: ors-sdk finds a tool by its evaluated return
# annotation (exactly its own ToolOutput), which a closure's string cannot resolve to.
from types import ModuleType
from typing import Any

from pydantic import BaseModel

import orsbox
from orsbox.authoring import SingleTask
from orsbox.authoring.standard_tools import BashTool


class EchoParams(BaseModel):
    text: str


def echo_env(sdk: ModuleType) -> type[Any]:
    """The Echo environment built on `sdk` (`orsbox` or `ors`)."""

    class Echo(sdk.Environment):  # type: ignore[name-defined,misc]
        @classmethod
        def list_splits(cls) -> list[str]:
            return ["test"]

        @classmethod
        def list_tasks(cls, split: str) -> list[dict[str, Any]]:
            return [{}]

        def get_prompt(self) -> list[Any]:
            return [sdk.TextBlock(text="echo")]

        @sdk.tool
        async def echo(self, params: EchoParams) -> sdk.ToolOutput:  # type: ignore[name-defined]
            """Answer the text back."""
            return sdk.ToolOutput(blocks=[sdk.TextBlock(text=params.text)])

    return Echo


Echo = echo_env(orsbox)


class Shell(SingleTask, BashTool):
    """The base image with the persistent bash tool."""

    prompt = "shell"


class CalcShell(SingleTask, BashTool):
    """The SWE-bench test instance image (tests/formats/swebench) with only bash: the
    same image as the swebench part's dataset, without the format's setup."""

    prompt = "shell"
    image = "orsbox-test/swebench-calc:base"
