"""The images a server pulled: one pull per image at a time, and a disk budget.

`ImageCache` sits in front of any backend's `ImageStore` (neutral: a Kubernetes
backend gets it as Docker does); `ImageCachingBackend` puts it on the pull and start
path of a server's backend, so every session's and the sandbox API's sandbox goes
through it.

* One pull per image per server (single-flight): sessions that need the same missing
  image together share one pull, run as a task of its own so that a waiter cancelled
  (a session deleted in setup) stops nobody else's. A pull that fails fails every
  waiter with `ImagePullFailed`, naming the image and how to provide it.
* A disk budget (`image_disk_budget`, None: unbounded). Only images this server pulled
  count and can go: what the server was started with (the bundled images, the base,
  anything built or loaded by hand) is never evicted. Past the budget, after a pull,
  the least recently used pulled image is removed, unless it is awaited (being pulled,
  or pulled for sessions whose sandboxes have not started yet) or in use: a sandbox
  runs from it (a session's, the sandbox API's, the warm pool's idle ones), or an image
  is built on it (a setup snapshot or a fork's saved image), as the store and the
  backend's listing of live sandboxes say. An image in use stays even when that leaves
  the disk over the budget; it can go once it is free, at the next pull.
* "Recently used" is the last start of a sandbox from the image or its pull.
* Sizes are the store's (`ImageStore.size`): a layer two images share counts in both,
  so the budget errs on the side of less disk.

Counts for the metrics and the status page are in `stats`.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from orsbox.errors import ImageNotFound, SandboxError
from orsbox.sandbox.base import BackendWrapper, Sandbox, SandboxBackend, SandboxSpec
from orsbox.sandbox.images import ImageStore, provide_hint

log = logging.getLogger("orsbox.sandbox.images")

Progress = Callable[[str], None]


class ImagePullFailed(SandboxError):
    """A pull that failed, for every session that waited on it."""

    def __init__(self, image: str, why: str) -> None:
        self.image = image
        self.why = why
        super().__init__(
            f"image {image} is not on this machine and could not be pulled ({why}). "
            f"{provide_hint(image)}"
        )


@dataclass
class Pulled:
    """One image this server pulled and still holds."""

    ref: str
    size_bytes: int
    last_used: int  # a tick of the cache's own counter: later is larger


@dataclass
class ImageCacheStats:
    pulls: int = 0  # pulls that ran (one per image per burst of sessions)
    pull_failures: int = 0
    bytes_pulled: int = 0
    hits: int = 0  # sandbox starts that found their image
    misses: int = 0  # sandbox starts that did not (a pull follows where a registry serves)
    evictions: int = 0
    disk_bytes: int = 0  # what the pulled images still held take
    budget_bytes: int | None = None
    images: int = 0  # pulled images held
    evicted: list[str] = field(default_factory=list)  # the last few, newest last


EVICTED_SHOWN = 20


class ImageCache:
    """Single-flight pulls and LRU eviction under a byte budget over `store`.

    `in_use` answers which images must stay: a set holding image refs and/or ids.
    """

    def __init__(
        self,
        store: ImageStore,
        *,
        budget_bytes: int | None = None,
        in_use: Callable[[], Awaitable[set[str]]] | None = None,
    ) -> None:
        self.store = store
        self.budget_bytes = budget_bytes
        self._in_use = in_use
        self._pulled: dict[str, Pulled] = {}
        self._pulling: dict[str, asyncio.Task[None]] = {}
        self._after_pull: Counter[str] = Counter()  # starts that follow a miss, not hits
        self._tick = itertools.count(1)
        self._evicting = asyncio.Lock()
        self.stats = ImageCacheStats(budget_bytes=budget_bytes)

    # -- pulls
    async def pull(
        self,
        ref: str,
        progress: Progress | None = None,
        fetch: Callable[[str, Progress | None], Awaitable[None]] | None = None,
    ) -> None:
        """Pull `ref` unless a pull of it is already running, then wait for that one;
        nothing when it has come meanwhile (a session whose start missed it just before
        another's pull ended). `fetch` does the pull (default: the store's). Raises
        `ImagePullFailed`."""
        if ref not in self._pulling and await self._arrived(ref):
            self._after_pull[ref] += 1  # its start is still the one that missed
            return
        task = self._pulling.get(ref)
        if task is None:
            task = asyncio.ensure_future(self._pull(ref, progress, fetch or self.store.pull))
            self._pulling[ref] = task
            task.add_done_callback(lambda done: self._pulled_by(ref, done))
        self._after_pull[ref] += 1
        await asyncio.shield(task)

    async def _arrived(self, ref: str) -> bool:
        try:
            return await self.store.has(ref)
        except SandboxError:
            return False

    def _pulled_by(self, ref: str, task: asyncio.Task[None]) -> None:
        self._pulling.pop(ref, None)
        if not task.cancelled():
            task.exception()  # every waiter may have gone: retrieved, not warned about

    async def _pull(
        self, ref: str, progress: Progress | None, fetch: Callable[..., Awaitable[None]]
    ) -> None:
        self.stats.pulls += 1
        log.info("pulling %s", ref)
        try:
            await fetch(ref, progress)
        except SandboxError as e:
            self.stats.pull_failures += 1
            self._after_pull.pop(ref, None)
            raise ImagePullFailed(ref, _short(str(e))) from None
        size = await self._size(ref)
        self.stats.bytes_pulled += size
        self._pulled[ref] = Pulled(ref, size, next(self._tick))
        self._count()
        log.info("pulled %s (%.0f MB)", ref, size / 1e6)
        await self.evict()

    async def _size(self, ref: str) -> int:
        try:
            return await self.store.size(ref)
        except SandboxError as e:
            log.warning("could not read the size of %s: %s", ref, e)
            return 0

    # -- use
    def started(self, ref: str) -> None:
        """A sandbox started from `ref`: a hit, unless it is the start a pull was for."""
        if self._after_pull[ref] > 0:
            self._after_pull[ref] -= 1
        else:
            self.stats.hits += 1
        if ref in self._pulled:
            self._pulled[ref].last_used = next(self._tick)

    def missed(self, ref: str) -> None:
        """A sandbox start did not find `ref`."""
        self.stats.misses += 1

    def failed(self, ref: str) -> None:
        """A sandbox start from `ref` failed otherwise: if a pull was for it, that
        pull's image no longer waits for it."""
        if self._after_pull[ref] > 0:
            self._after_pull[ref] -= 1

    # -- eviction
    def lru_order(self) -> list[str]:
        """The pulled images held, least recently used first."""
        return [p.ref for p in sorted(self._pulled.values(), key=lambda p: p.last_used)]

    async def evict(self) -> list[str]:
        """Remove least recently used pulled images, never one in use or being pulled,
        until the disk is within the budget; return the refs removed."""
        if self.budget_bytes is None:
            return []
        async with self._evicting:
            removed: list[str] = []
            if self._over() <= 0:
                return removed
            keep = await self._kept()
            for ref in self.lru_order():
                if self._over() <= 0:
                    break
                if self._awaited(ref) or await self._is_kept(ref, keep):
                    continue
                if await self._remove(ref):
                    removed.append(ref)
            if self._over() > 0:
                log.warning(
                    "images take %.0f MB, over the budget of %.0f MB: the rest are in use",
                    self.stats.disk_bytes / 1e6,
                    self.budget_bytes / 1e6,
                )
            return removed

    def _awaited(self, ref: str) -> bool:
        """Being pulled, or pulled for sessions whose sandboxes have not started yet."""
        return ref in self._pulling or self._after_pull[ref] > 0

    def _over(self) -> int:
        return sum(p.size_bytes for p in self._pulled.values()) - (self.budget_bytes or 0)

    async def _kept(self) -> set[str]:
        if self._in_use is None:
            return set()
        return await self._in_use()

    async def _is_kept(self, ref: str, keep: set[str]) -> bool:
        if ref in keep:
            return True
        try:
            return await self.store.image_id(ref) in keep
        except ImageNotFound:
            return False
        except SandboxError:
            return True  # cannot tell: keep it

    async def _remove(self, ref: str) -> bool:
        try:
            gone = await self.store.remove([ref]) > 0
        except SandboxError as e:
            log.warning("could not evict image %s: %s", ref, e)
            return False
        if not gone:  # the engine says something still uses it
            return False
        del self._pulled[ref]
        self.stats.evictions += 1
        self.stats.evicted = [*self.stats.evicted, ref][-EVICTED_SHOWN:]
        self._count()
        log.info("evicted image %s (least recently used, over the disk budget)", ref)
        return True

    def _count(self) -> None:
        self.stats.disk_bytes = sum(p.size_bytes for p in self._pulled.values())
        self.stats.images = len(self._pulled)


class ImageCachingBackend(BackendWrapper):
    """A backend whose pulls go through an `ImageCache` and whose starts tell it which
    images are used. Images in use: the store's answer (`ImageStore.in_use`) and the
    images of this server's live sandboxes (`list`)."""

    def __init__(self, backend: SandboxBackend, *, budget_bytes: int | None = None) -> None:
        super().__init__(backend)
        self.cache = ImageCache(backend.images, budget_bytes=budget_bytes, in_use=self._in_use)

    def __getattr__(self, name: str) -> Any:  # server_id, engine ... of the wrapped one
        return getattr(self.backend, name)

    async def start(self, spec: SandboxSpec) -> Sandbox:
        try:
            sandbox = await self.backend.start(spec)
        except ImageNotFound:
            self.cache.missed(spec.image)
            raise
        except BaseException:
            self.cache.failed(spec.image)
            raise
        self.cache.started(spec.image)
        return sandbox

    async def pull_image(self, image: str, progress: Progress | None = None) -> None:
        await self.cache.pull(image, progress, self.backend.pull_image)

    async def _in_use(self) -> set[str]:
        used = set(await self.backend.images.in_use())
        used.update(info.image for info in await self.backend.list())
        return used


def _short(text: str) -> str:
    return text if len(text) < 300 else text[:300] + "..."
