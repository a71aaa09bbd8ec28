"""The two places a harness's sandbox can live, behind one small interface.

`LocalSandbox` holds an orsbox `Sandbox` started in-process by a backend on the local
engine; `RemoteSandbox` holds the id of an API sandbox on an orsbox server or router.
Both answer the same four verbs with the same errors, so each integration (Inspect's
provider, Harbor's environment) is written once: `run` (argv, stdin, cwd, env, user,
timeout, an output cap), `read` and `write` raising the built-in `OSError`s harnesses
expect, and `close`.
"""

from __future__ import annotations

import errno
import shlex
import uuid
from dataclasses import dataclass
from typing import Protocol

from orsbox.errors import SandboxError, SandboxFileError, SandboxGone
from orsbox.integrations.sandbox_client import CommandFailed, FileRefused, SandboxApiClient
from orsbox.sandbox.base import Sandbox

NO_TIMEOUT_S = 24 * 3600.0  # Inspect's "no timeout": orsbox's exec always has one
USER_MISSING_EXIT = 126


@dataclass(frozen=True)
class Outcome:
    """A command's output bytes (stdout and stderr as the command wrote them), its exit
    code (None: timed out) and whether the output was cut at the cap."""

    data: bytes
    exit_code: int | None
    timed_out: bool = False
    truncated: bool = False


class SandboxHandle(Protocol):
    async def run(
        self,
        argv: list[str],
        *,
        stdin: bytes | None,
        cwd: str,
        env: dict[str, str],
        user: str | None,
        timeout_s: float | None,
        cap_bytes: int,
    ) -> Outcome: ...

    async def read(self, path: str, *, max_bytes: int) -> bytes: ...

    async def write(self, path: str, data: bytes) -> None: ...

    async def close(self) -> None: ...


def file_error(message: str, path: str) -> OSError:
    """The built-in error Inspect's contract names for a refused file operation: the
    path as the caller gave it, and the reason."""
    text = message.lower()
    if "no such file" in text or "not found" in text:
        return FileNotFoundError(errno.ENOENT, "No such file or directory.", path)
    if "permission denied" in text:
        return PermissionError(errno.EACCES, "Permission denied.", path)
    if "is a directory" in text:
        return IsADirectoryError(errno.EISDIR, "Is a directory.", path)
    if "too large" in text:
        return FileTooLarge(errno.EFBIG, message, path)
    return OSError(errno.EIO, message, path)


class FileTooLarge(OSError):
    """Over the read limit; the provider turns it into Inspect's own limit error."""


class LocalSandbox:
    """An orsbox sandbox in this process (the local engine, orsbox's hardening)."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox

    async def run(
        self,
        argv: list[str],
        *,
        stdin: bytes | None,
        cwd: str,
        env: dict[str, str],
        user: str | None,
        timeout_s: float | None,
        cap_bytes: int,
    ) -> Outcome:
        try:
            result = await self.sandbox.exec(
                argv,
                stdin=stdin,
                cwd=cwd,
                env=env,
                user=user,
                timeout_s=timeout_s or NO_TIMEOUT_S,
                output_cap_bytes=cap_bytes,
            )
        except SandboxGone:
            raise
        except SandboxError as e:
            if user is None:
                raise
            return Outcome(f"{e}\n".encode(), USER_MISSING_EXIT)  # no such user
        return Outcome(result.data, result.exit_code, result.timed_out, result.truncated)

    async def read(self, path: str, *, max_bytes: int) -> bytes:
        try:
            return await self.sandbox.read_file(path, max_bytes=max_bytes)
        except SandboxFileError as e:
            raise file_error(str(e), path) from None

    async def write(self, path: str, data: bytes) -> None:
        try:
            await self.sandbox.write_file(path, data, mode=None)
        except SandboxFileError as e:
            raise file_error(str(e), path) from None

    async def close(self) -> None:
        await self.sandbox.close()


class RemoteSandbox:
    """An API sandbox on an orsbox server or cluster router, by its id."""

    def __init__(self, client: SandboxApiClient, sid: str) -> None:
        self.client, self.sid = client, sid

    async def run(
        self,
        argv: list[str],
        *,
        stdin: bytes | None,
        cwd: str,
        env: dict[str, str],
        user: str | None,
        timeout_s: float | None,
        cap_bytes: int,
    ) -> Outcome:
        command = shlex.join(argv)
        if stdin is not None:  # bodies are bounded; the input travels as a file
            spool = f"/tmp/.orsbox-stdin-{uuid.uuid4().hex}"
            await self.client.write_file(self.sid, spool, stdin)
            command = f"{command} <{spool}; rc=$?; /bin/rm -f -- {spool}; exit $rc"
        try:
            result = await self.client.run(
                self.sid,
                command,
                timeout_s=timeout_s or NO_TIMEOUT_S,
                max_bytes=cap_bytes,
                cwd=cwd,
                env=env,
                user=user,
            )
        except CommandFailed as e:  # the user does not exist in the image
            return Outcome(f"{e}\n".encode(), USER_MISSING_EXIT)
        truncated = len(result.output) >= cap_bytes
        return Outcome(result.output, result.exit_code, result.timed_out, truncated)

    async def read(self, path: str, *, max_bytes: int) -> bytes:
        try:
            return await self.client.read_file(self.sid, path, max_bytes=max_bytes)
        except FileRefused as e:
            raise file_error(await self._why(path, str(e), e.status), path) from None

    async def write(self, path: str, data: bytes) -> None:
        why = await self._unwritable(path)
        if why:
            raise file_error(why, path)
        try:
            await self.client.write_file(self.sid, path, data)
        except FileRefused as e:
            raise file_error(str(e), path) from None

    async def close(self) -> None:
        await self.client.delete(self.sid)

    async def _why(self, path: str, message: str, status: int) -> str:
        """The API says 400 for any path that is not a readable regular file; one look
        inside tells a directory from an unreadable file, as Inspect's errors must."""
        if status == 404:
            return f"no such file: {path}"
        if status == 413:
            return f"too large: {message}"
        probe = await self._probe(path)
        return probe or message

    async def _unwritable(self, path: str) -> str | None:
        """The API replaces a file by renaming a new one over it, which a read-only file
        or a folder would not stop; Inspect's contract says both refuse a write."""
        return await self._probe(path, write=True)

    async def _probe(self, path: str, *, write: bool = False) -> str | None:
        test = "-w" if write else "-r"
        script = (
            f'if [ -d "$1" ]; then echo "is a directory"; '
            f'elif [ -e "$1" ] && [ ! {test} "$1" ]; then echo "permission denied"; fi'
        )
        result = await self.client.run(
            self.sid, f"/bin/sh -c '{script}' sh {shlex.quote(path)}", timeout_s=30, max_bytes=256
        )
        return result.output.decode(errors="replace").strip() or None
