"""`GuestSandbox`: a sandbox driven through its in-sandbox guest, whatever runs it.

Every verb is one request on the guest channel (see `channel.py`), so a shell call costs
a socket round trip, not a backend API call. What only the deployment knows is left to
a subclass (the Docker backend's `DockerSandbox`): removing the sandbox, explaining a
death, and how a second, short-lived guest for `exec(user=...)` is started
(`open_guest`, for every backend so far `start.SubGuests.open`).

When the channel closes under us (the container was killed, ran out of memory at PID 1,
or the engine restarted) the sandbox is gone for good: `alive` turns false and every
later call raises `SandboxGone` saying what happened.
"""

from __future__ import annotations

import asyncio
import io
import logging
import tarfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from orsbox.errors import SandboxError, SandboxFileError, SandboxGone
from orsbox.sandbox.base import (
    EXEC_TIMEOUT_S,
    OUTPUT_CAP_BYTES,
    ExecResult,
    KeptService,
    KilledProcesses,
    Sandbox,
)
from orsbox.sandbox.guest.channel import ChannelClosed, GuestChannel, Header
from orsbox.sandbox.usage import tally

log = logging.getLogger("orsbox.sandbox.agent")  # the name operators filter on; kept

REPLY_GRACE_S = 30.0  # the guest enforces timeouts; past timeout + this, it is stuck
FILE_OP_TIMEOUT_S = 300.0

OpenGuest = Callable[[str], Awaitable[GuestChannel]]  # user -> a fresh sub-guest channel


class GuestSandbox(Sandbox):
    def __init__(
        self,
        *,
        sandbox_id: str,
        name: str,
        channel: GuestChannel,
        open_guest: OpenGuest,
        on_closed: Callable[[GuestSandbox], None] = lambda sandbox: None,
    ) -> None:
        self.id = sandbox_id
        self.name = name
        self._channel = channel
        self._open_guest = open_guest
        self._on_closed = on_closed
        self._shell_lock = asyncio.Lock()
        self._close_lock = asyncio.Lock()
        self._closed = False
        self._gone: asyncio.Future[str] | None = None  # why the sandbox is gone

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} {'alive' if self.alive else 'gone'}>"

    @property
    def alive(self) -> bool:
        return not self._closed and self._channel.open

    def channel_lost(self) -> None:
        """The guest's socket closed. Look at the sandbox now, before its deployment
        removes the evidence (Docker: auto_remove)."""
        if not self._closed and self._gone is None:
            log.warning("sandbox %s: the guest connection closed", self.name)
            self._gone = asyncio.get_running_loop().create_task(self._why_gone())

    # -- verbs

    async def shell(
        self,
        command: str,
        *,
        timeout_s: float = EXEC_TIMEOUT_S,
        output_cap_bytes: int = OUTPUT_CAP_BYTES,
    ) -> ExecResult:
        request = {"op": "shell", "timeout": timeout_s, "cap": output_cap_bytes}
        async with self._shell_lock:
            header, payload = await self._call(request, command.encode(), timeout_s)
        return tally(to_result(header, payload))

    async def restart_shell(self) -> None:
        # Not behind the shell lock: restarting is how a caller ends a stuck command
        # (the guest answers that command with a note, then restarts).
        await self._call({"op": "restart"}, b"", 30.0)

    async def kill_processes(self) -> int:
        return (await self.kill_processes_listed()).count

    async def kill_processes_listed(self, keep_services: bool = False) -> KilledProcesses:
        request: Header = (
            {"op": "killall", "keep": "services"} if keep_services else {"op": "killall"}
        )
        header, _ = await self._call(request, b"", 30.0)
        running = [str(c) for c in header.get("running", [])]
        kept = [KeptService(int(p), int(t), str(c or "")) for p, t, c in header.get("kept", [])]
        return KilledProcesses(int(header.get("killed", 0)), running, kept)

    async def exec(
        self,
        command: str | list[str],
        *,
        timeout_s: float = EXEC_TIMEOUT_S,
        output_cap_bytes: int = OUTPUT_CAP_BYTES,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        stdin: bytes | None = None,
        user: str | None = None,
    ) -> ExecResult:
        request: dict[str, Any] = {"op": "exec", "timeout": timeout_s, "cap": output_cap_bytes}
        request["argv" if isinstance(command, list) else "cmd"] = command
        request.update({"env": env or {}, "cwd": cwd})
        if user is None:
            header, payload = await self._call(request, stdin or b"", timeout_s)
        else:
            header, payload = await self._call_as(user, request, stdin or b"", timeout_s)
        return tally(to_result(header, payload))

    async def read_file(self, path: str, *, max_bytes: int | None = None) -> bytes:
        request = {"op": "read", "path": path, "max": max_bytes}
        _, payload = await self._call(request, b"", FILE_OP_TIMEOUT_S)
        return payload

    async def write_file(self, path: str, data: bytes, *, mode: int | None = 0o644) -> None:
        await self._call(
            {"op": "write", "path": path, "mode": mode}, bytes(data), FILE_OP_TIMEOUT_S
        )

    async def copy_in(self, local_dir: Path, sandbox_dir: str) -> None:
        archive = await anyio.to_thread.run_sync(tar_folder, Path(local_dir))
        await self.unpack(archive, sandbox_dir)

    async def unpack(self, archive: bytes, sandbox_dir: str, *, user: str | None = None) -> None:
        """Unpack a tar into `sandbox_dir`, as `user` (default: the sandbox's own)."""
        request = {"op": "untar", "path": sandbox_dir}
        if user is None:
            await self._call(request, archive, FILE_OP_TIMEOUT_S)
        else:
            await self._call_as(user, request, archive, FILE_OP_TIMEOUT_S)

    async def close(self) -> None:
        async with self._close_lock:
            if self._closed:
                return
            self._closed = True
            try:
                with anyio.CancelScope(shield=True):
                    await self._remove()
            except SandboxGone:
                pass  # already removed
            finally:
                self._channel.close()
                self._on_closed(self)

    # -- what the deployment knows

    async def _remove(self) -> None:
        """Stop and remove the sandbox; `SandboxGone` when it is already gone."""
        raise NotImplementedError

    async def _why_gone(self) -> str:
        """Why the sandbox is gone, as a message for the session."""
        return f"sandbox {self.name} is gone: its guest's connection closed"

    # -- plumbing

    async def _call(
        self, request: Header, payload: bytes, timeout_s: float
    ) -> tuple[Header, bytes]:
        return await self._request(self._channel, request, payload, timeout_s)

    async def _request(
        self, channel: GuestChannel, request: Header, payload: bytes, timeout_s: float
    ) -> tuple[Header, bytes]:
        if self._closed:
            raise SandboxGone(f"sandbox {self.name} was closed")
        try:
            header, reply = await channel.request(request, payload, timeout_s + REPLY_GRACE_S)
        except ChannelClosed:
            raise SandboxGone(await self._gone_message()) from None
        except TimeoutError:
            raise SandboxGone(self._give_up(channel, timeout_s + REPLY_GRACE_S)) from None
        check(header)
        return header, reply

    def _give_up(self, channel: GuestChannel, waited_s: float) -> str:
        """The guest enforces every timeout itself, so no answer long past one means the
        guest or the engine is stuck: the sandbox is given up (terminal for the session)
        rather than letting each later call wait as long again."""
        message = (
            f"sandbox {self.name} is gone: its guest did not answer within {waited_s:g}s "
            "(the sandbox or its engine is stuck)"
        )
        if channel is self._channel and self._gone is None:
            self._gone = asyncio.get_running_loop().create_future()
            self._gone.set_result(message)
        channel.abort()
        return message

    async def _call_as(
        self, user: str, request: Header, payload: bytes, timeout_s: float
    ) -> tuple[Header, bytes]:
        """Run one exec through a second guest started as `user` (the main guest cannot
        change its user); costs a process start in the sandbox (Docker: a `docker exec`
        and a python start, ~tens of ms) instead of a round trip."""
        if not self.alive:
            raise SandboxGone(await self._gone_message())
        channel = await self._open_guest(user)
        try:
            return await self._request(channel, request, payload, timeout_s)
        finally:
            channel.close()

    async def _gone_message(self) -> str:
        if self._closed:
            return f"sandbox {self.name} was closed"
        if self._gone is None:
            self._gone = asyncio.get_running_loop().create_task(self._why_gone())
        return await asyncio.shield(self._gone)


def check(header: Header) -> None:
    if header.get("ok"):
        return
    message = str(header.get("error", "unknown guest error"))
    if header.get("kind") == "file":
        raise SandboxFileError(message)
    raise SandboxError(f"sandbox guest: {message}")


def to_result(header: Header, payload: bytes) -> ExecResult:
    return ExecResult(
        output=payload.decode("utf-8", errors="replace"),
        exit_code=header.get("exit"),
        timed_out=bool(header.get("timed_out")),
        truncated=bool(header.get("truncated")),
        output_bytes=int(header.get("bytes", len(payload))),
        oom_killed=bool(header.get("oom")),
        duration_s=float(header.get("duration", 0.0)),
        data=bytes(payload),
    )


def tar_folder(folder: Path) -> bytes:
    if not folder.is_dir():
        raise SandboxFileError(f"not a folder on the host: {folder}")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for child in sorted(folder.iterdir()):
            tar.add(child, arcname=child.name)
    return buffer.getvalue()
