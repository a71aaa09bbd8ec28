"""Snapshots: a sandbox's filesystem saved so that new sandboxes can start from it.

Two features stand on this: setup snapshots (`setup_snapshots.py`: a task's state
after its setup, reused by later episodes of the task) and forks (new sessions from a
live session's current files). A snapshot is a filesystem only: processes, the
persistent shell's state (cwd, variables, jobs), memory and network settings are not in
it, and what lives outside the sandbox's own filesystem (host mounts, bounded in-memory
folders of a `disk_bytes` sandbox) is not either.

A `SnapshotStore` is the backend's part (Docker: `docker commit` to a local image, in
its package's `snapshots` module); a `Snapshot.ref` is what a `SandboxSpec.image` may
name to start from it. Every snapshot carries its `kind` ("prepared", "fork") and the
caller's labels, which are how it is found again, also by a later server.

`SharedSnapshot` is a snapshot several sandboxes start from (a fork's N sessions): the
image is removed when the last of them has let it go.
"""

from __future__ import annotations

import abc
import asyncio
import logging
from dataclasses import dataclass, field

from orsbox.errors import SandboxError
from orsbox.sandbox.base import Sandbox

log = logging.getLogger("orsbox.sandbox.snapshots")

REMOVE_RETRIES = 20  # a container being removed still holds its image for a moment
REMOVE_RETRY_S = 0.25


@dataclass(frozen=True)
class Snapshot:
    """One saved filesystem."""

    ref: str  # what a SandboxSpec's image names to start from it
    name: str  # for people: repository and tag
    kind: str
    labels: dict[str, str] = field(default_factory=dict)
    size_bytes: int = 0  # what it adds to the image it was made from (0: not measured)
    created: float = 0.0  # unix time
    last_used: float = 0.0  # unix time


class SnapshotStore(abc.ABC):
    """Saves sandboxes' filesystems and finds, marks and removes the snapshots."""

    @abc.abstractmethod
    async def commit(
        self, sandbox: Sandbox, *, kind: str, name: str, labels: dict[str, str]
    ) -> Snapshot:
        """Save `sandbox`'s filesystem now. The sandbox goes on unchanged (it may be
        paused for the moment the copy takes). `name` is a readable hint."""

    @abc.abstractmethod
    async def find(
        self, kind: str, labels: dict[str, str] | None = None, *, sizes: bool = False
    ) -> list[Snapshot]:
        """Snapshots of `kind` carrying all `labels`; with `sizes`, `size_bytes` is
        measured (costs another engine call)."""

    @abc.abstractmethod
    async def touch(self, snapshot: Snapshot) -> None:
        """Record that `snapshot` was used now (its `last_used`, kept across restarts)."""

    @abc.abstractmethod
    async def remove(self, ref: str) -> bool:
        """Remove a snapshot; False when a sandbox still runs from it (kept)."""

    @abc.abstractmethod
    async def image_id(self, image: str) -> str:
        """The immutable id of `image` (a tag can be moved to a rebuilt image)."""

    async def sweep(self) -> int:
        """Remove snapshots that belonged to servers now dead; return how many."""
        return 0


async def remove_when_free(store: SnapshotStore, ref: str) -> bool:
    """Remove `ref`, waiting a little for the sandboxes that used it to be gone."""
    for _ in range(REMOVE_RETRIES):
        try:
            if await store.remove(ref):
                return True
        except SandboxError as e:
            log.warning("could not remove snapshot %s: %s", ref[:19], e)
            return False
        await asyncio.sleep(REMOVE_RETRY_S)
    log.warning("snapshot %s is still in use; left for `orsbox gc`", ref[:19])
    return False


class SharedSnapshot:
    """A snapshot `users` sandboxes start from; removed after the last `release`."""

    def __init__(self, store: SnapshotStore, snapshot: Snapshot, users: int) -> None:
        self.store = store
        self.snapshot = snapshot
        self.users = users

    @property
    def ref(self) -> str:
        return self.snapshot.ref

    async def release(self, count: int = 1) -> None:
        """`count` users are done with it (their sandboxes are gone or never started)."""
        self.users -= count
        if self.users == 0:  # by name: a fork of a fork's image only untags its parent,
            # which goes with the child (docker removes untagged parents with it)
            await remove_when_free(self.store, self.snapshot.name)
