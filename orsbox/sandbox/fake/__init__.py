"""`FakeBackend`: sandboxes as plain host processes, for fast unit tests. No isolation.

Each sandbox is a private temporary folder (its home, working directory and TMPDIR) and
a persistent `bash` on the host, so the contract's behaviour (shell state, timeouts that
kill a tree, output caps, exact bytes in files) is real, at a fraction of a container's
start. Every process a sandbox starts carries a marker in its environment
(`ORSBOX_FAKE_SANDBOX=<id>`, plus one for the shell or for each exec); killing "what the
sandbox started" means killing what carries its marker, which survives `setsid` and
double forks. File verbs act on host paths as given (absolute paths are the host's), with
the guest's own functions and messages (`orsbox.sandbox.guest.inside`).

Differences from a container, named in tests/runtimes.py (`FAKE_DIFFERENCES`): no
limits (memory, pids, cpus, disk, network are not enforced), no other users
(`exec(user=...)` raises), and a timeout restarts the persistent shell, losing its state.
Never serve untrusted agents with it: `orsbox serve` accepts it only through an explicit
`{"type": "fake"}` config.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

import anyio

from orsbox.errors import SandboxError, SandboxFileError, SandboxGone
from orsbox.sandbox.backend_config import BackendConfig
from orsbox.sandbox.base import (
    EXEC_TIMEOUT_S,
    OUTPUT_CAP_BYTES,
    ExecResult,
    Sandbox,
    SandboxBackend,
    SandboxInfo,
    SandboxSpec,
)
from orsbox.sandbox.capabilities import BackendCapabilities
from orsbox.sandbox.fake.images import FakeImages
from orsbox.sandbox.guest.inside import files as guest_files
from orsbox.sandbox.guest.inside.capture import Capture

MARKER = "ORSBOX_FAKE_SANDBOX"
SHELL_MARKER = "ORSBOX_FAKE_SHELL"
EXEC_MARKER = "ORSBOX_FAKE_EXEC"
READ_CHUNK = 65536
EXIT_POLL_S = 0.005
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def marked(name: str, value: str) -> list[int]:
    """Pids of the host processes whose environment holds `name=value`."""
    needle = f"{name}={value}".encode() + b"\0"
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):
            environ = Path(f"/proc/{entry}/environ").read_bytes() + b"\0"
            if b"\0" + needle in b"\0" + environ:
                found.append(int(entry))
    return found


def kill_marked(name: str, value: str) -> int:
    """SIGKILL every process carrying the marker, repeated until none is left (a dying
    parent may fork once more); return how many were killed."""
    killed: set[int] = set()
    deadline = time.monotonic() + 5.0
    while (pids := [p for p in marked(name, value) if p != os.getpid()]) and (
        time.monotonic() < deadline
    ):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
        time.sleep(0.01)
    return len(killed)


async def read_capped(
    stream: asyncio.StreamReader, capture: Capture, sentinel: bytes | None
) -> int | None:
    """Read into `capture` until EOF, or until `sentinel` + status + newline arrives
    (then return the status). The sentinel may arrive cut over two reads."""
    pending = b""
    while chunk := await stream.read(READ_CHUNK):
        if sentinel is None:
            capture.add(chunk)
            continue
        data = pending + chunk
        at = data.find(sentinel)
        if at >= 0 and data.find(b"\n", at) >= 0:
            capture.add(data[:at])
            end = data.find(b"\n", at)
            return int(data[at + len(sentinel) : end])
        keep = len(sentinel) + 8  # a sentinel begun at the end of this read
        capture.add(data[:-keep] if len(data) > keep else b"")
        pending = data[-keep:] if len(data) > keep else data
    capture.add(pending)
    return None


async def exited(process: asyncio.subprocess.Process) -> int:
    """The exit status as soon as the process ends. (Python 3.11's `wait()` also waits
    for the process's pipes to close, which a background child it left keeps open.)"""
    while process.returncode is None:
        await asyncio.sleep(EXIT_POLL_S)
    return process.returncode


class FakeSandbox(Sandbox):
    def __init__(
        self,
        spec: SandboxSpec,
        root: Path,
        on_closed: Callable[[FakeSandbox], object] | None = None,
    ) -> None:
        self.id = secrets.token_hex(8)
        self.spec = spec
        self.root = root
        self.control = Path(tempfile.mkdtemp(prefix="orsbox-fake-control-"))
        self.workdir = spec.workdir or str(root)
        self._shell: asyncio.subprocess.Process | None = None
        self._shell_lock = asyncio.Lock()
        self._closed = False
        self._gone: str | None = None
        self._on_closed = on_closed
        self.network: tuple[bool | str, tuple[str, ...]] = (
            spec.limits.network,
            spec.limits.allowed_hosts,
        )  # recorded, not enforced: what a test can check the caller asked for

    async def set_network(
        self, network: bool | Literal["allowlist"], allowed_hosts: Sequence[str] = ()
    ) -> None:
        self._check()
        self.network = (network, tuple(allowed_hosts))

    def __repr__(self) -> str:
        return f"<FakeSandbox {self.id} {'alive' if self.alive else 'gone'}>"

    @property
    def alive(self) -> bool:
        return not self._closed and self._gone is None

    def environment(self, **markers: str) -> dict[str, str]:
        home = str(self.root)
        base = {"PATH": PATH, "HOME": home, "TMPDIR": str(self.root / "tmp"), "LANG": "C.UTF-8"}
        return {**base, **self.spec.env, MARKER: self.id, **markers}

    def _check(self) -> None:
        if self._closed:
            raise SandboxGone(f"sandbox {self.id} was closed")
        if self._gone is not None:
            raise SandboxGone(f"sandbox {self.id} is gone: {self._gone}")

    # -- the persistent shell

    async def _start_shell(self) -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(
            "bash", "--noprofile", "--norc",
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT, cwd=self.workdir,
            env=self.environment(**{SHELL_MARKER: self.id}), start_new_session=True,
        )  # fmt: skip

    async def shell(
        self,
        command: str,
        *,
        timeout_s: float = EXEC_TIMEOUT_S,
        output_cap_bytes: int = OUTPUT_CAP_BYTES,
    ) -> ExecResult:
        self._check()
        async with self._shell_lock:
            if self._shell is None or self._shell.returncode is not None:
                self._shell = await self._start_shell()
            shell = self._shell
            assert shell.stdin is not None and shell.stdout is not None
            token = secrets.token_hex(8)
            script = self.control / f"{token}.sh"
            script.write_text(command + "\n")
            sentinel = f"\x01{token}:".encode()  # printf's format cannot hold a NUL
            shell.stdin.write(f". {script}\nprintf '\\001{token}:%d\\n' $?\n".encode())
            capture = Capture(output_cap_bytes)
            started = time.monotonic()
            try:
                with anyio.fail_after(timeout_s):
                    status = await read_capped(shell.stdout, capture, sentinel)
            except TimeoutError:
                killed = await self._kill_shell()
                capture.add(f"\n[orsbox: timed out after {timeout_s:g}s; killed "
                            f"{killed} process(es); a fresh shell was started]\n".encode())  # fmt: skip
                return self._result(capture, None, started, timed_out=True)
            finally:
                script.unlink(missing_ok=True)
            if status is None:  # the shell exited (`exit 3`)
                code = await shell.wait()
                note = f"[orsbox: the shell exited (code {code}); a fresh shell was started]\n"
                capture.add(note.encode())
                self._shell = None
                return self._result(capture, code, started)
            return self._result(capture, status, started)

    async def _kill_shell(self) -> int:
        killed = await anyio.to_thread.run_sync(kill_marked, SHELL_MARKER, self.id)
        if self._shell is not None:
            await self._shell.wait()
        self._shell = None
        return killed

    @staticmethod
    def _result(
        capture: Capture, code: int | None, started: float, *, timed_out: bool = False
    ) -> ExecResult:
        data, truncated = capture.result()
        return ExecResult(
            output=data.decode("utf-8", errors="replace"),
            exit_code=code,
            timed_out=timed_out,
            truncated=truncated,
            output_bytes=capture.total,
            duration_s=time.monotonic() - started,
            data=data,
        )

    async def restart_shell(self) -> None:
        self._check()
        await self._kill_shell()

    async def kill_processes(self) -> int:
        self._check()
        killed = await anyio.to_thread.run_sync(kill_marked, MARKER, self.id)
        if self._shell is not None:
            await self._shell.wait()
        self._shell = None
        return killed

    # -- one-off commands

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
        self._check()
        if user is not None:
            raise SandboxError("the fake backend has no other users")
        argv = command if isinstance(command, list) else ["bash", "-c", command]
        rid = secrets.token_hex(8)
        started = time.monotonic()
        try:
            process = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT, cwd=cwd or self.workdir,
                env={**self.environment(**{EXEC_MARKER: rid}), **(env or {})},
                start_new_session=True,
            )  # fmt: skip
        except FileNotFoundError:
            return ExecResult(output=f"{argv[0]}: command not found\n", exit_code=127)
        assert process.stdin is not None and process.stdout is not None
        capture = Capture(output_cap_bytes)
        reader = asyncio.ensure_future(read_capped(process.stdout, capture, None))
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            process.stdin.write(stdin or b"")
            await process.stdin.drain()
            process.stdin.close()
        try:
            with anyio.fail_after(timeout_s):
                code: int | None = await exited(process)
        except TimeoutError:
            await anyio.to_thread.run_sync(kill_marked, EXEC_MARKER, rid)
            code = None
        # the process is done; children it left in the background may hold the pipe
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(reader), 0.2)
        reader.cancel()
        if code is None:
            capture.add(f"\n[orsbox: timed out after {timeout_s:g}s]\n".encode())
        return self._result(capture, code, started, timed_out=code is None)

    # -- files (the guest's own functions: the same errors and messages)

    async def read_file(self, path: str, *, max_bytes: int | None = None) -> bytes:
        self._check()
        return await anyio.to_thread.run_sync(self._file_op, guest_files.read_file, path, max_bytes)

    async def write_file(self, path: str, data: bytes, *, mode: int | None = 0o644) -> None:
        self._check()
        await anyio.to_thread.run_sync(self._file_op, guest_files.write_file, path, data, mode)

    async def copy_in(self, local_dir: Path, sandbox_dir: str) -> None:
        self._check()
        if not Path(local_dir).is_dir():
            raise SandboxFileError(f"not a folder on the host: {local_dir}")
        await anyio.to_thread.run_sync(
            lambda: shutil.copytree(local_dir, sandbox_dir, dirs_exist_ok=True)
        )

    @staticmethod
    def _file_op(fn: Callable[..., Any], *args: object) -> Any:
        try:
            return fn(*args)
        except guest_files.FileError as e:
            raise SandboxFileError(str(e)) from None

    # -- the end

    def crash(self, reason: str = "its processes were killed") -> None:
        """End the sandbox from outside, as a killed container would: what the
        dead-sandbox tests use."""
        kill_marked(MARKER, self.id)
        self._gone = reason

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await anyio.to_thread.run_sync(kill_marked, MARKER, self.id)
        shutil.rmtree(self.root, ignore_errors=True)
        shutil.rmtree(self.control, ignore_errors=True)
        if self._on_closed is not None:
            self._on_closed(self)


# host processes: no isolation, no network of their own to switch (theirs is the host's),
# no runtime to choose, nothing to save
FAKE_CAPABILITIES = BackendCapabilities(
    isolated=False,
    network_modes=frozenset({"host"}),
    switch_network=False,
    runtime_choice=False,
    snapshots=False,
)


class FakeConfig(BackendConfig):
    """The in-process fake: host processes, no isolation; for fast unit tests only."""

    type: Literal["fake"] = "fake"
    title: ClassVar[str] = "fake backend"

    def create(
        self, *, server_id: str | None = None, start_concurrency: int | None = None
    ) -> FakeBackend:
        return FakeBackend(server_id=server_id)


class FakeBackend(SandboxBackend):
    capabilities = FAKE_CAPABILITIES

    def __init__(self, server_id: str | None = None) -> None:
        self.server_id = server_id or f"fake-{os.getpid()}"
        self._sandboxes: dict[str, FakeSandbox] = {}
        self._images = FakeImages()

    @property
    def images(self) -> FakeImages:
        return self._images

    async def describe(self) -> str:
        return "the fake backend (host processes, no isolation)"

    async def start(self, spec: SandboxSpec) -> FakeSandbox:
        root = Path(tempfile.mkdtemp(prefix="orsbox-fake-"))
        (root / "tmp").mkdir()
        sandbox = FakeSandbox(spec, root, lambda s: self._sandboxes.pop(s.id, None))
        self._sandboxes[sandbox.id] = sandbox
        return sandbox

    async def list(self, *, all_servers: bool = False) -> list[SandboxInfo]:
        return [self._info(s) for s in self._sandboxes.values()]

    def _info(self, s: FakeSandbox) -> SandboxInfo:
        """Its owner is this very process: the fake's sandboxes end with it."""
        info = (s.id, s.id, s.spec.image, s.spec.session_id, self.server_id, "running")
        return SandboxInfo(*info, owner="alive", owner_pid=str(os.getpid()))

    async def sweep(self) -> int:
        return 0  # nothing outlives its process: close() kills what it started

    async def remove(self, sandbox_id: str) -> None:
        sandbox = self._sandboxes.get(sandbox_id)
        if sandbox is not None:
            await sandbox.close()

    async def close(self) -> None:
        for sandbox in list(self._sandboxes.values()):
            await sandbox.close()
