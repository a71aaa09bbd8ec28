"""`ContainerEnvironment`: an environment whose episode lives in its own sandbox.

An author declares the image, limits and timeouts as class attributes and picks the
standard tools the agent gets by inheriting them (`orsbox.authoring.standard_tools`):

    class Repo(BashTool, EditFileTool):
        image = "orsbox/swe:latest"
        limits = SandboxLimits(memory_bytes=2 * 1024**3)

`setup` starts the sandbox (through whatever backend the server runs: Docker today) and
copies `task_files()` in; `teardown` removes it. Graders use `self.sandbox` directly,
e.g. a `submit` tool that runs hidden tests in the container.

`episode_timeout_s` bounds an episode's wall clock from the end of setup: a command
never runs past it (its timeout is cut to what is left), and a call after it is
answered by `episode_timed_out` instead of the tool: a terminal error by default, the
episode graded and finished where an environment overrides it (benchmark formats do).

`setup_cache = True` saves each task's sandbox after a setup that succeeded and starts
the task's later episodes from it, skipping `task_files` and `prepare`
(`orsbox.sandbox.setup_snapshots`; `setup_inputs` says what the key covers). Only files are
saved: a `prepare` that sets attributes on `self`, starts processes or writes to host
mounts must not be cached. A fork's session (`EnvironmentContext.start_from`) starts
from another session's files the same way.

When the sandbox dies under the session (out of memory, `docker kill`), the next tool
call fails with an SSE `error` naming what happened, the sandbox's resources are freed,
and every later call fails the same way: the episode cannot go on.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, ClassVar

from orsbox.authoring.environment import Environment
from orsbox.authoring.setup_inputs import CONTEXT_SETUP_SNAPSHOTS, folder_fingerprint
from orsbox.authoring.tools import ToolRaised
from orsbox.authoring.user_code import MaybeAsync, call_user
from orsbox.clock import SYSTEM_CLOCK, Clock
from orsbox.errors import BadRequest, ImageNotFound, SandboxError, SandboxGone
from orsbox.protocol.reasons import Reason
from orsbox.protocol.types import ToolOutput
from orsbox.sandbox.base import (
    EXEC_TIMEOUT_S,
    OUTPUT_CAP_BYTES,
    Sandbox,
    SandboxBackend,
    SandboxLimits,
    SandboxSpec,
)
from orsbox.sandbox.setup_snapshots import SetupSnapshots
from orsbox.sandbox.snapshots import SharedSnapshot
from orsbox.sandbox.usage import ResourceUsage

BASE_IMAGE = "orsbox/base:latest"

log = logging.getLogger("orsbox.sandbox")


class ContainerEnvironment(Environment):
    """Subclass, set `image` (and optionally limits), inherit the standard tools you want."""

    image: ClassVar[str] = BASE_IMAGE
    limits: ClassVar[SandboxLimits] = SandboxLimits()
    user: ClassVar[str | None] = None
    workdir: ClassVar[str | None] = None
    container_env: ClassVar[dict[str, str]] = {}
    exec_timeout_s: ClassVar[float] = EXEC_TIMEOUT_S
    max_exec_timeout_s: ClassVar[float] = 600.0
    output_cap_bytes: ClassVar[int] = OUTPUT_CAP_BYTES
    max_output_cap_bytes: ClassVar[int] = 1024 * 1024
    episode_timeout_s: float | None = None  # per class, or per task (a Harbor task's)
    setup_cache: ClassVar[bool] = False  # save the state after setup per task; reuse it

    started_from_snapshot: bool = False  # this episode started from a setup snapshot

    _sandbox: Sandbox | None = None
    _sandbox_lost: str | None = None
    _episode_deadline: float | None = None

    # -- the sandbox ------------------------------------------------------------------
    @property
    def why_sandbox_lost(self) -> str | None:
        """Why the sandbox died under the episode (`SandboxGone`'s message, which names
        an OOM), None while it lives: the episode's record keeps it."""
        return self._sandbox_lost

    @property
    def sandbox(self) -> Sandbox:
        """The running sandbox; raises `SandboxGone` when there is none (any more)."""
        if self._sandbox is None:
            raise SandboxGone(self._sandbox_lost or "the sandbox is not running")
        return self._sandbox

    async def resource_usage(self) -> ResourceUsage | None:
        """What the episode's sandbox has used so far; None without a running one."""
        sandbox = self._sandbox
        if sandbox is None:
            return None
        try:
            return await sandbox.usage()
        except SandboxError as e:  # accounting must never fail an episode
            log.warning("could not read the sandbox's usage: %s", e)
            return None

    def sandbox_name(self) -> str | None:
        """The running sandbox's name (a container name under Docker), for operators."""
        sandbox = self._sandbox
        return None if sandbox is None else getattr(sandbox, "name", sandbox.id)

    def sandbox_spec(self) -> SandboxSpec:
        context = self.orsbox_context
        session_id = context.session_id if context else "none"
        return type(self).class_sandbox_spec().model_copy(update={"session_id": session_id})

    @classmethod
    def class_sandbox_spec(cls) -> SandboxSpec:
        """The spec from the class attributes alone, with no session: what a warm pool
        keeps ready for this environment before any session asks."""
        return SandboxSpec(
            image=cls.image,
            limits=cls.limits,
            user=cls.user,
            workdir=cls.workdir,
            env=dict(cls.container_env),
            labels={"orsbox.environment": cls.name().lower()},
        )

    @classmethod
    def prewarm_spec(cls) -> SandboxSpec | None:
        """The spec to pre-warm at startup; None when a subclass builds its spec per
        task (overrides `sandbox_spec`), as the pool cannot guess it."""
        if cls.sandbox_spec is not ContainerEnvironment.sandbox_spec:
            return None
        return cls.class_sandbox_spec()

    @classmethod
    def needed_images(cls) -> list[str]:
        """Images to build (or check) before serving; a dataset environment whose
        images are per task and pulled on demand returns none."""
        return [cls.image]

    @classmethod
    def pulled_images(cls) -> list[str]:
        """Images its episodes pull when they need one, never built ahead (a SWE-bench
        dataset's instance images): what `orsbox images list` shows and `orsbox images
        push` sends to a cluster's registry besides `needed_images`."""
        return []

    def task_files(self) -> dict[str, str]:
        """Host folders to copy into the sandbox at setup: `{host_dir: sandbox_dir}`."""
        return {}

    def _backend(self) -> SandboxBackend:
        backend = self.orsbox_context.sandbox_backend if self.orsbox_context else None
        if backend is None:
            raise SandboxError(
                f"{type(self).__name__} needs a sandbox backend; this server has none"
            )
        return backend

    # -- lifecycle --------------------------------------------------------------------
    async def setup(self) -> None:
        spec = self.sandbox_spec()
        start_from = self.orsbox_context.start_from if self.orsbox_context else None
        cache = self._setup_snapshots(spec)
        if start_from is not None:  # a fork: the files are there, the setup ran
            self._sandbox = await self._backend().start(_from_image(spec, start_from.ref))
        elif cache is not None:
            await self._setup_from_snapshot(spec, cache)
        else:
            await self._setup_fresh(spec)
        if self.episode_timeout_s is not None:
            self._episode_deadline = self._clock().monotonic() + self.episode_timeout_s

    async def _setup_fresh(self, spec: SandboxSpec) -> None:
        self._sandbox = await self._backend().start(spec)
        for host_dir, sandbox_dir in self.task_files().items():
            await self._sandbox.copy_in(Path(host_dir), sandbox_dir)
        if type(self).prepare is not ContainerEnvironment.prepare:  # no thread hop for a no-op
            await call_user(self.prepare)

    # -- setup snapshots (`orsbox.sandbox.setup_snapshots`) ---------------------------
    def setup_inputs(self) -> Any:
        """What the setup's outcome depends on, for the cache key (with the
        environment's name and the image's id): the sandbox spec, the task, and the
        task files' folders. Override to add what `prepare` reads from elsewhere (a
        version, a file on the host), calling `super().setup_inputs()`."""
        return {
            "spec": self.sandbox_spec().model_dump(mode="json", exclude={"session_id", "image"}),
            "task": self.task_spec,
            "files": {dst: folder_fingerprint(Path(src)) for src, dst in self.task_files().items()},
        }

    def _setup_snapshots(self, spec: SandboxSpec) -> SetupSnapshots | None:
        if not self.setup_cache or self.orsbox_context is None:
            return None
        if spec.limits.disk_bytes is not None:  # its writable folders are not saved
            log.warning("%s: setup_cache is off with a disk limit", type(self).__name__)
            return None
        return self.orsbox_context.extras.get(CONTEXT_SETUP_SNAPSHOTS)

    async def _setup_from_snapshot(self, spec: SandboxSpec, cache: SetupSnapshots) -> None:
        """Start from the task's setup snapshot, or set up and save it (module
        docstring of `orsbox.sandbox.setup_snapshots`)."""
        try:
            key = await cache.key(self.name().lower(), spec.image, self.setup_inputs())
        except ImageNotFound:  # the fresh start says how to build it
            return await self._setup_fresh(spec)
        async with cache.preparing(key):  # the look-up, and the setup when it misses
            entry = await cache.lookup(key)
            if entry is None:
                return await self._set_up_and_save(spec, cache, key)
        try:  # outside the lock: a GRPO group's sessions start from the snapshot at once
            self._sandbox = await self._backend().start(_from_image(spec, entry.ref))
        except ImageNotFound:  # evicted between the look-up and the start
            async with cache.preparing(key):
                return await self._set_up_and_save(spec, cache, key)
        self.started_from_snapshot = True
        log.info("%s: started from the saved setup %s", spec.session_id, entry.name)

    async def _set_up_and_save(self, spec: SandboxSpec, cache: SetupSnapshots, key: str) -> None:
        """The setup, then its snapshot saved as `key`'s (held under `key`'s lock)."""
        await self._setup_fresh(spec)
        try:
            await cache.save(self.sandbox, key, self.name().lower(), self.name())
        except SandboxError as e:  # the episode goes on; the next one sets up again
            log.warning("%s: could not save the setup snapshot: %s", type(self).__name__, e)

    async def start_spec(self) -> SandboxSpec:
        """The spec this task's next episode would start from: its setup snapshot's
        when one is saved (what a warm pool fills ahead of a burst)."""
        spec = self.sandbox_spec()
        cache = self._setup_snapshots(spec)
        if cache is None:
            return spec
        key = await cache.key(self.name().lower(), spec.image, self.setup_inputs())
        entry = await cache.lookup(key)
        return spec if entry is None else _from_image(spec, entry.ref)

    async def snapshot(self, users: int) -> SharedSnapshot:
        """The sandbox's files now, for `users` new sessions to start from (a fork).
        Processes, the shell's state and in-memory environment state are not in it."""
        store = self._backend().snapshots
        if store is None:
            raise BadRequest("this server's sandbox backend cannot fork sessions")
        spec = self.sandbox_spec()
        if spec.limits.disk_bytes is not None:
            raise BadRequest(
                "a session with a disk limit cannot be forked (its files are in memory)"
            )
        labels = {"orsbox.environment": self.name().lower(), "orsbox.fork.source": spec.session_id}
        name = f"{self.name()}-{spec.session_id}"
        snapshot = await store.commit(self.sandbox, kind="fork", name=name, labels=labels)
        return SharedSnapshot(store, snapshot, users)

    def prepare(self) -> MaybeAsync[None]:
        """Hook run after the sandbox started and task files were copied (may be async)."""

    async def teardown(self) -> None:
        sandbox, self._sandbox = self._sandbox, None
        if sandbox is not None:
            await sandbox.close()

    async def sandbox_lost(self, error: SandboxGone) -> None:
        """Free what is left of a dead sandbox and remember why, for later calls. A
        failure to free it (the engine may be down too) must not hide why it died."""
        self._sandbox_lost = str(error)
        try:
            await self.teardown()
        except SandboxError as e:
            log.warning("could not remove a lost sandbox: %s", e)

    # -- limits -----------------------------------------------------------------------
    def episode_time_left(self) -> float | None:
        """Seconds until the episode's time limit; None without one."""
        if self._episode_deadline is None:
            return None
        return self._episode_deadline - self._clock().monotonic()

    def _clock(self) -> Clock:
        """The host's clock (a test's may be moved by hand), the real one without a host."""
        return self.orsbox_context.clock if self.orsbox_context else SYSTEM_CLOCK

    async def before_tool(self, name: str) -> ToolOutput | None:
        left = self.episode_time_left()
        if left is not None and left <= 0:
            return await self.episode_timed_out(name)
        return None

    async def episode_timed_out(self, name: str) -> ToolOutput:
        """The answer to a call made after the episode's time limit. This default ends
        the call with an error (and so every later one); override it to grade."""
        raise ToolRaised(
            f"the episode's time limit of {self.episode_timeout_s:g}s has passed; "
            f"{name!r} was not run",
            Reason.TIMEOUT,
        )

    def call_timeout(self, requested: float | None) -> float:
        timeout = min(requested or self.exec_timeout_s, self.max_exec_timeout_s)
        left = self.episode_time_left()
        return timeout if left is None else max(0.001, min(timeout, left))

    def call_output_cap(self, requested: int | None) -> int:
        return min(requested or self.output_cap_bytes, self.max_output_cap_bytes)


def _from_image(spec: SandboxSpec, image: str) -> SandboxSpec:
    return spec.model_copy(update={"image": image})
