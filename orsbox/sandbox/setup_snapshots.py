"""Setup snapshots: a task's sandbox as it was right after its setup, reused.

An environment that marks its setup cacheable (`[setup] cache = true`, or
`setup_cache = True` on a `ContainerEnvironment`) has the first episode of each task
saved after a setup that succeeded (a snapshot of kind "prepared", `snapshots.py`;
the kind and the labels keep their first name, as images on disk carry them);
later episodes of that task start from the snapshot and skip the setup. The key is a
hash of the environment's name, the image's immutable id (a rebuilt image is a new
key) and the setup's inputs as the environment states them (the task, the files copied
in, the setup command): entries are never shared across environments or tasks.

* Bounded: at most `max_entries` entries and `max_bytes` of what they add to their
  images; past either the least recently used go (an entry a sandbox still runs from is
  kept until it is free). Last use is kept on the image, so the order survives restarts.
* One setup per key at a time in a server: a burst of episodes of one new task runs its
  setup once; the others wait, then start from the entry.
* Only a setup that succeeded is saved; a failed save only costs the next episode its
  shortcut (it runs the setup again).

Listed and pruned by `orsbox gc`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

from orsbox.sandbox.base import Sandbox
from orsbox.sandbox.snapshots import Snapshot, SnapshotStore

log = logging.getLogger("orsbox.sandbox.prepared")  # the name operators filter on; kept

KIND = "prepared"  # on images already saved: kept
KEY = "orsbox.prepared.key"  # likewise
ENVIRONMENT = "orsbox.environment"
MAX_ENTRIES = 64
MAX_BYTES = 20 * 1024**3


def cache_key(environment: str, image_id: str, inputs: Any) -> str:
    """The entry's key: what the setup snapshot depends on, hashed."""
    document = {"environment": environment, "image": image_id, "inputs": inputs}
    encoded = json.dumps(document, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(encoded.encode()).hexdigest()


class SetupSnapshots:
    """The bounded store of setup snapshots, one per key, least recently used out."""

    def __init__(
        self,
        store: SnapshotStore,
        *,
        max_entries: int = MAX_ENTRIES,
        max_bytes: int = MAX_BYTES,
        scope: dict[str, str] | None = None,
    ) -> None:
        """`scope`: labels every entry of this cache carries and the only entries it
        lists, counts and evicts (tests sharing an engine keep to their own)."""
        self.store = store
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.scope = dict(scope or {})
        self._locks: dict[str, asyncio.Lock] = {}
        self._users: dict[str, int] = {}

    async def key(self, environment: str, image: str, inputs: Any) -> str:
        return cache_key(environment, await self.store.image_id(image), inputs)

    @contextlib.asynccontextmanager
    async def preparing(self, key: str) -> AsyncIterator[None]:
        """Held from the look-up to the save: one setup per key at a time."""
        lock = self._locks.setdefault(key, asyncio.Lock())
        self._users[key] = self._users.get(key, 0) + 1
        try:
            async with lock:
                yield
        finally:
            self._users[key] -= 1
            if self._users[key] == 0:
                del self._users[key], self._locks[key]

    async def lookup(self, key: str) -> Snapshot | None:
        """The entry for `key`, marked as used now; None when there is none."""
        found = await self.store.find(KIND, {**self.scope, KEY: key})
        if not found:
            return None
        entry = max(found, key=lambda s: s.last_used)
        await self.store.touch(entry)
        return entry

    async def save(self, sandbox: Sandbox, key: str, environment: str, name: str) -> Snapshot:
        """Save `sandbox` (just after its setup succeeded) as `key`'s entry, then evict
        what the bounds no longer hold."""
        labels = {**self.scope, KEY: key, ENVIRONMENT: environment}
        entry = await self.store.commit(sandbox, kind=KIND, name=name, labels=labels)
        log.info("setup snapshot of %s saved as %s", name, entry.name)
        await self.evict(keep=entry.ref)
        return entry

    async def entries(self) -> list[Snapshot]:
        """Every entry, least recently used first, with its size."""
        found = await self.store.find(KIND, self.scope, sizes=True)
        return sorted(found, key=lambda s: s.last_used)

    async def evict(self, *, keep: str | None = None) -> list[Snapshot]:
        """Remove least recently used entries until within both bounds; return them."""
        entries = await self.entries()
        count, total = len(entries), sum(e.size_bytes for e in entries)
        removed = []
        for entry in entries:
            if count <= self.max_entries and total <= self.max_bytes:
                break
            if entry.ref == keep or not await self.store.remove(entry.ref):
                continue  # the newest, or a sandbox still runs from it
            removed.append(entry)
            count, total = count - 1, total - entry.size_bytes
            log.info("setup snapshot %s evicted (%d bytes)", entry.name, entry.size_bytes)
        return removed
