"""The standard container tools, each opt-in: inherit the ones an environment offers.

    BashTool       a persistent shell: cwd, variables, functions, background jobs survive
    PythonTool     run a snippet with the container's python3
    ReadFileTool   read a file (line offset/limit; base64 for binary)
    WriteFileTool  write a file, creating parent folders
    EditFileTool   replace one exact, unique occurrence of a string
    ListDirTool    list a folder

`STANDARD_TOOLS` maps each tool name to its mixin, for environments assembled by name
(manifests, benchmark datasets: `tool_mixins`, which checks the names). Expected
failures (missing file, ambiguous edit) answer `{"ok": false}` via `ToolError`; a dead
sandbox is a terminal `error` event (see `ContainerEnvironment`).
"""

from __future__ import annotations

import shlex
from collections.abc import Awaitable, Callable, Sequence
from typing import Literal, TypeVar

from pydantic import BaseModel, Field

from orsbox.authoring.container import ContainerEnvironment
from orsbox.authoring.tools import ToolError, tool
from orsbox.errors import SandboxFileError, SandboxGone
from orsbox.protocol.types import TextBlock, ToolOutput
from orsbox.sandbox.base import ExecResult

T = TypeVar("T")

READ_MAX_BYTES = 64 * 1024 * 1024
# A command or snippet past this is an agent's mistake (a file pasted into a command):
# it gets a tool error naming the limit instead of a shell parsing megabytes. File
# contents are bounded by the request body limit (ORSBOX_MAX_BODY_BYTES) only.
SOURCE_MAX_CHARS = 1024 * 1024
DEFAULT_READ_LINES = 2000

Encoding = Literal["utf-8", "base64"]


class _Run(BaseModel):
    timeout: float | None = Field(
        default=None, gt=0, description="seconds before the command is killed (default 60)"
    )
    max_output_bytes: int | None = Field(
        default=None, gt=0, description="output cap; head and tail are kept (default 64 KiB)"
    )


class BashParams(_Run):
    command: str = Field(
        max_length=SOURCE_MAX_CHARS, description="bash command(s) to run in the persistent shell"
    )
    restart: bool = Field(
        default=False,
        description="first kill the shell and everything it started and start a fresh one",
    )


class PythonParams(_Run):
    code: str = Field(
        max_length=SOURCE_MAX_CHARS,
        description="Python source, run with python3 in the working directory",
    )


class ReadFileParams(BaseModel):
    path: str = Field(description="file to read")
    offset: int = Field(default=1, ge=1, description="first line to return (1-based)")
    limit: int = Field(default=DEFAULT_READ_LINES, ge=1, description="most lines to return")
    encoding: Encoding = Field(default="utf-8", description="base64 returns the raw bytes")


class WriteFileParams(BaseModel):
    path: str = Field(description="file to write; parent folders are created")
    content: str = Field(description="the new content (base64 text if encoding is base64)")
    encoding: Encoding = "utf-8"


class EditFileParams(BaseModel):
    path: str = Field(description="file to edit")
    old_string: str = Field(min_length=1, description="exact text to replace; must occur once")
    new_string: str = Field(description="replacement text")


class ListDirParams(BaseModel):
    path: str = Field(default=".", description="folder to list")


def render(result: ExecResult, timeout_s: float) -> ToolOutput:
    """An exec result as the agent reads it: the output, then one status line if the
    command did not simply succeed. The same facts go to `metadata` for programs."""
    notes = []
    if result.timed_out:
        notes.append(f"[timed out after {timeout_s:g}s: the command and its processes were killed]")
    elif result.oom_killed:
        notes.append("[killed: out of memory]")
    elif result.exit_code not in (0, None):
        notes.append(f"[exit code {result.exit_code}]")
    text = result.output
    if notes:
        text += ("" if not text or text.endswith("\n") else "\n") + "\n".join(notes)
    metadata = {
        "exit_code": result.exit_code,
        "timed_out": result.timed_out,
        "truncated": result.truncated,
        "oom_killed": result.oom_killed,
        "output_bytes": result.output_bytes,
    }
    return ToolOutput(blocks=[TextBlock(text=text or "(no output)")], metadata=metadata)


def text_output(text: str, **metadata: object) -> ToolOutput:
    return ToolOutput(blocks=[TextBlock(text=text)], metadata=metadata or None)


async def _guarded(env: ContainerEnvironment, op: Callable[[], Awaitable[T]]) -> T:
    """Run a sandbox operation; a dead sandbox frees its resources and stays an error,
    a file problem becomes an answer the agent can read."""
    try:
        return await op()
    except SandboxGone as e:
        await env.sandbox_lost(e)
        raise
    except SandboxFileError as e:
        raise ToolError(str(e)) from None


def _decode_text(path: str, data: bytes) -> str:
    if b"\0" in data[:8192]:
        raise ToolError(
            f"{path} is a binary file ({len(data)} bytes); read it with encoding=base64"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(
            f"{path} is not UTF-8 text ({len(data)} bytes); read it with encoding=base64"
        ) from None


class BashTool(ContainerEnvironment):
    @tool
    async def bash(self, params: BashParams) -> ToolOutput:
        """Run a command in a persistent bash shell inside the sandbox. The working
        directory, exported variables, functions and background jobs persist between
        calls. stdout and stderr are interleaved; a non-zero exit code is reported.
        Commands are killed after the timeout (with every process they started); output
        beyond the cap keeps its head and tail. Set restart to get a fresh shell."""
        if params.restart:
            await _guarded(self, self.sandbox.restart_shell)
            if not params.command.strip():
                return text_output("[shell restarted]")
        timeout = self.call_timeout(params.timeout)
        cap = self.call_output_cap(params.max_output_bytes)
        result = await _guarded(
            self,
            lambda: self.sandbox.shell(params.command, timeout_s=timeout, output_cap_bytes=cap),
        )
        return render(result, timeout)


class PythonTool(ContainerEnvironment):
    @tool
    async def python(self, params: PythonParams) -> ToolOutput:
        """Run a Python snippet with the sandbox's python3 (a fresh interpreter per call;
        print what you want to see). Same timeout and output cap rules as bash."""
        timeout = self.call_timeout(params.timeout)
        cap = self.call_output_cap(params.max_output_bytes)
        result = await _guarded(
            self,
            lambda: self.sandbox.exec(
                ["python3", "-"],
                stdin=params.code.encode(),
                env={"PYTHONUNBUFFERED": "1"},  # stdout and stderr in the order written
                timeout_s=timeout,
                output_cap_bytes=cap,
                cwd=self.workdir,
            ),
        )
        return render(result, timeout)


class ReadFileTool(ContainerEnvironment):
    @tool
    async def read_file(self, params: ReadFileParams) -> ToolOutput:
        """Read a file from the sandbox. Text is returned from line `offset` for at most
        `limit` lines; binary files need encoding=base64."""
        data = await _guarded(
            self, lambda: self.sandbox.read_file(params.path, max_bytes=READ_MAX_BYTES)
        )
        if params.encoding == "base64":
            return _read_base64(params.path, data, self.output_cap_bytes)
        lines = _decode_text(params.path, data).splitlines(keepends=True)
        start = params.offset - 1
        shown = lines[start : start + params.limit]
        text = "".join(shown)
        end = start + len(shown)
        meta = {"total_lines": len(lines), "first_line": params.offset, "last_line": end}
        if len(text.encode()) > self.output_cap_bytes:
            raise ToolError(
                f"lines {params.offset}-{end} of {params.path} exceed {self.output_cap_bytes} "
                "bytes; read fewer lines with offset and limit"
            )
        if end < len(lines) or start > 0:
            text += "" if text.endswith("\n") else "\n"
            text += f"[lines {params.offset}-{end} of {len(lines)}; use offset and limit for more]"
        return text_output(text or "(empty file)", **meta)


def _read_base64(path: str, data: bytes, cap: int) -> ToolOutput:
    import base64

    encoded = base64.b64encode(data).decode()
    if len(encoded) > cap:
        raise ToolError(f"{path} is {len(data)} bytes; base64 reads are limited to {cap * 3 // 4}")
    return text_output(encoded, bytes=len(data), encoding="base64")


class WriteFileTool(ContainerEnvironment):
    @tool
    async def write_file(self, params: WriteFileParams) -> ToolOutput:
        """Write a file in the sandbox, replacing it if it exists and creating parent
        folders. Use encoding=base64 to write binary content."""
        if params.encoding == "base64":
            import base64
            import binascii

            try:
                data = base64.b64decode(params.content, validate=True)
            except binascii.Error as e:
                raise ToolError(f"content is not valid base64: {e}") from None
        else:
            data = params.content.encode()
        await _guarded(self, lambda: self.sandbox.write_file(params.path, data))
        return text_output(f"wrote {len(data)} bytes to {params.path}", bytes=len(data))


class EditFileTool(ContainerEnvironment):
    @tool
    async def edit_file(self, params: EditFileParams) -> ToolOutput:
        """Replace one exact occurrence of old_string with new_string in a file. Fails,
        changing nothing, when old_string occurs zero or several times: include more
        surrounding text to make it unique."""
        data = await _guarded(
            self, lambda: self.sandbox.read_file(params.path, max_bytes=READ_MAX_BYTES)
        )
        text = _decode_text(params.path, data)
        count = text.count(params.old_string)
        if count == 0:
            raise ToolError(f"old_string was not found in {params.path}; nothing changed")
        if count > 1:
            raise ToolError(
                f"old_string occurs {count} times in {params.path}; include more context "
                "to make it unique; nothing changed"
            )
        updated = text.replace(params.old_string, params.new_string, 1)
        await _guarded(
            self, lambda: self.sandbox.write_file(params.path, updated.encode(), mode=None)
        )
        line = text[: text.index(params.old_string)].count("\n") + 1
        return text_output(f"edited {params.path} at line {line}", line=line)


class ListDirTool(ContainerEnvironment):
    @tool
    async def list_dir(self, params: ListDirParams) -> ToolOutput:
        """List a folder in the sandbox (like ls -lA: type, permissions, size, name)."""
        command = f"ls -lAh --group-directories-first -- {shlex.quote(params.path)}"
        result = await _guarded(
            self,
            lambda: self.sandbox.exec(
                command, timeout_s=30, output_cap_bytes=self.output_cap_bytes, cwd=self.workdir
            ),
        )
        if result.exit_code != 0:
            raise ToolError(
                result.output.strip().removeprefix("ls: ") or f"cannot list {params.path}"
            )
        return text_output(result.output, truncated=result.truncated)


class FileTools(ReadFileTool, WriteFileTool, EditFileTool, ListDirTool):
    """All four file tools."""


STANDARD_TOOLS: dict[str, type[ContainerEnvironment]] = {
    "bash": BashTool,
    "python": PythonTool,
    "read_file": ReadFileTool,
    "write_file": WriteFileTool,
    "edit_file": EditFileTool,
    "list_dir": ListDirTool,
}


def tool_mixins(names: Sequence[str]) -> tuple[type[ContainerEnvironment], ...]:
    """The mixins of the standard tools `names`, each once, in order: how an environment
    assembled by name (a manifest, a benchmark dataset) gets its tools. A name that is
    no standard tool is a `ValueError` naming it and the known ones."""
    unknown = [name for name in names if name not in STANDARD_TOOLS]
    if unknown:
        known = ", ".join(sorted(STANDARD_TOOLS))
        raise ValueError(f"unknown tool {unknown[0]!r}; the standard tools are: {known}")
    return tuple(STANDARD_TOOLS[name] for name in dict.fromkeys(names))
