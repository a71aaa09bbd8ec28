"""`sandbox="orsbox"` for Inspect: each sample's sandbox is an orsbox sandbox.

Inspect's contract (`inspect_ai.util.SandboxEnvironment`) is exec, read_file, write_file
and lifecycle hooks. orsbox's sandboxes already do all of it, with two gaps the provider
closes: Inspect wants stdout and stderr apart (orsbox keeps them interleaved, in the
order written, for agents: `orsbox.integrations.streams` splits them), and relative
paths resolved against the sample's working folder.

Where sandboxes live: with a URL (`OrsboxSandboxConfig.url` or `$ORSBOX_URL`) they are
API sandboxes of that orsbox server or cluster router, under its policy; without one, a
backend in this process starts them on the local engine (hardened, runc or runsc).
"""

from __future__ import annotations

import posixpath
from typing import Any, Literal, overload

from inspect_ai.util import (
    ExecResult,
    OutputLimitExceededError,
    SandboxConnection,
    SandboxEnvironment,
    SandboxEnvironmentConfigType,
    SandboxEnvironmentLimits,
    sandboxenv,
)
from pydantic import BaseModel

from orsbox.integrations.handles import FileTooLarge, SandboxHandle
from orsbox.integrations.inspect.config import (
    COMPOSE_FILES,
    OrsboxSandboxConfig,
    resolve,
)
from orsbox.integrations.inspect.hosts import Host, host_for, release_hosts
from orsbox.integrations.streams import run_split


@sandboxenv(name="orsbox")
class OrsboxSandboxEnvironment(SandboxEnvironment):
    """One sample's orsbox sandbox."""

    def __init__(self, handle: SandboxHandle, working_dir: str, user: str | None) -> None:
        super().__init__()
        self._handle = handle
        self._working_dir = working_dir
        self._user = user

    # -- lifecycle -------------------------------------------------------------------

    @classmethod
    def config_files(cls) -> list[str]:
        return [*COMPOSE_FILES, "Dockerfile"]

    @classmethod
    def is_docker_compatible(cls) -> bool:
        return True

    @classmethod
    def config_deserialize(cls, config: dict[str, Any]) -> BaseModel:
        return OrsboxSandboxConfig(**config)

    @classmethod
    async def task_init(cls, task_name: str, config: SandboxEnvironmentConfigType | None) -> None:
        """Check the config and have the image ready before the first sample starts."""
        await host_for(resolve(config)).prepare()

    @classmethod
    async def sample_init(
        cls, task_name: str, config: SandboxEnvironmentConfigType | None, metadata: dict[str, str]
    ) -> dict[str, SandboxEnvironment]:
        settings = resolve(config)
        host = host_for(settings)
        handle = await host.start(settings, task_name)
        environment = cls(handle, "/", settings.user)
        environment._working_dir = settings.working_dir or await environment._pwd()
        return {"default": environment}

    @classmethod
    async def sample_cleanup(
        cls,
        task_name: str,
        config: SandboxEnvironmentConfigType | None,
        environments: dict[str, SandboxEnvironment],
        interrupted: bool,
    ) -> None:
        for environment in environments.values():
            if isinstance(environment, OrsboxSandboxEnvironment):
                await environment._handle.close()

    @classmethod
    async def task_cleanup(
        cls, task_name: str, config: SandboxEnvironmentConfigType | None, cleanup: bool
    ) -> None:
        await release_hosts()

    # -- the contract ----------------------------------------------------------------

    async def exec(
        self,
        cmd: list[str],
        input: str | bytes | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        user: str | None = None,
        timeout: int | None = None,
        timeout_retry: bool = True,
        concurrency: bool = True,
    ) -> ExecResult[str]:
        limit = SandboxEnvironmentLimits.MAX_EXEC_OUTPUT_SIZE
        outcome = await run_split(
            self._handle,
            cmd,
            stdin=input.encode() if isinstance(input, str) else input,
            cwd=self._path(cwd or "."),
            env=env,
            user=user or self._user,
            timeout_s=timeout,
            cap_bytes=2 * limit,
        )
        if outcome.timed_out:
            raise TimeoutError(f"Command timed out after {timeout} seconds")
        result = ExecResult(
            success=outcome.exit_code == 0,
            returncode=-1 if outcome.exit_code is None else outcome.exit_code,
            stdout=outcome.stdout,
            stderr=outcome.stderr,
        )
        if outcome.truncated:
            raise OutputLimitExceededError(
                SandboxEnvironmentLimits.MAX_EXEC_OUTPUT_SIZE_STR,
                truncated_output=result.stdout[-limit:],
            )
        if result.returncode == 126 and "permission denied" in result.stderr.lower():
            raise PermissionError(result.stderr.strip())
        return result

    async def write_file(self, file: str, contents: str | bytes) -> None:
        data = contents.encode() if isinstance(contents, str) else contents
        await self._handle.write(self._path(file), data)

    @overload
    async def read_file(self, file: str, text: Literal[True] = True) -> str: ...

    @overload
    async def read_file(self, file: str, text: Literal[False]) -> bytes: ...

    async def read_file(self, file: str, text: bool = True) -> str | bytes:
        limit = SandboxEnvironmentLimits.MAX_READ_FILE_SIZE
        try:
            data = await self._handle.read(self._path(file), max_bytes=limit)
        except FileTooLarge:
            raise OutputLimitExceededError(
                SandboxEnvironmentLimits.MAX_READ_FILE_SIZE_STR, truncated_output=None
            ) from None
        except OSError as e:
            e.filename = file  # the name as the caller gave it
            raise
        return data.decode("utf-8") if text else data

    async def connection(self, *, user: str | None = None) -> SandboxConnection:
        host: Host | None = getattr(self._handle, "host", None)
        command = host.shell_command(self._handle, user) if host else None
        if command is None:
            raise NotImplementedError("an orsbox API sandbox has no direct connection")
        return SandboxConnection(type="orsbox", command=command)

    # -- helpers ---------------------------------------------------------------------

    def _path(self, path: str) -> str:
        return posixpath.normpath(posixpath.join(self._working_dir, path))

    async def _pwd(self) -> str:
        result = await self._handle.run(
            ["/bin/sh", "-c", "pwd"],
            stdin=None,
            cwd="",
            env={},
            user=self._user,
            timeout_s=30,
            cap_bytes=4096,
        )
        return result.data.decode().strip() or "/"
