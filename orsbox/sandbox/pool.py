"""`WarmPool`: started, idle sandboxes kept ready, so a session's start is a hand-over.

A `SandboxBackend` that wraps another one; environments and the server do not know it
is there. Sandboxes are pooled per *shelf*: everything in a `SandboxSpec` but the
session id (image, limits, user, workdir, env, labels). For each shelf in demand the
pool keeps `size` sandboxes started and idle:

* `start(spec)` takes one off its shelf when there is one — used once, never handed to
  two sessions, never returned to the pool — and otherwise starts a fresh sandbox for
  the session through the wrapped backend, as if there were no pool. Either way the
  shelf is refilled in the background. A pooled sandbox's persistent shell is already
  started (a fresh one, no command run in it), so the first call does not wait for it.
* Refills run at most `refill_concurrency` at a time over all shelves (one by default)
  and queue behind sessions' own starts in the wrapped backend's start limit, so
  refilling never competes hard with sessions for a small machine.
* A shelf nobody asked for in `idle_ttl_s` is emptied and no longer refilled until the
  next `start` for it: an idle server holds no sandboxes.
* A refill that fails is retried after a growing pause (a missing image stops the
  shelf until the next demand); a pooled sandbox that died while idle is thrown away.
* `close()` removes every sandbox, pooled or handed out, as the wrapped backend does.
* `fill(spec, n)` asks for `n` idle sandboxes of one spec ahead of a burst (the server's
  `POST /orsbox/warm`); they start `FILL_BATCH` at a time. With a `memory_budget`, the
  idle sandboxes' memory limits together stay within it: a fill past it keeps fewer.

Pooled sandboxes are started with the session id `pool`, so their containers carry the
owner labels like any other (sweeps treat them alike) and `orsbox.session=pool`
(docker labels cannot change later); `list()` reports the session a pooled sandbox
went to.

The TTL, the tidying pace and the retry pauses read the pool's clock (`orsbox.clock`),
which a test may move by hand.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass, field

from orsbox.clock import SYSTEM_CLOCK, Clock
from orsbox.errors import ImageNotFound
from orsbox.sandbox.base import BackendWrapper, Sandbox, SandboxBackend, SandboxInfo, SandboxSpec

log = logging.getLogger("orsbox.sandbox.pool")

POOL_SESSION = "pool"
IDLE_TTL_S = 600.0
RETRY_FIRST_S = 1.0
RETRY_MAX_S = 60.0
FILL_BATCH = 8  # sandboxes a requested fill starts at once


def shelf_key(spec: SandboxSpec) -> str:
    """What makes two specs interchangeable: everything but the session id."""
    return json.dumps(spec.model_dump(mode="json", exclude={"session_id"}), sort_keys=True)


@dataclass(eq=False)
class Shelf:
    """Idle sandboxes of one spec, and the filler task keeping them at the pool size."""

    spec: SandboxSpec
    idle: list[Sandbox] = field(default_factory=list)
    last_demand: float = 0.0  # when a start or a fill last asked for it
    filler: asyncio.Task[None] | None = None
    target: int | None = None  # asked for ahead of a burst (`fill`); None: the pool size

    def drop_dead(self) -> list[Sandbox]:
        """Take the idle sandboxes that died (killed, engine restarted) off the shelf."""
        dead = [s for s in self.idle if not s.alive]
        self.idle = [s for s in self.idle if s.alive]
        return dead


class WarmPool(BackendWrapper):
    """Keeps `size` idle sandboxes per spec in demand; see the module docstring."""

    def __init__(
        self,
        backend: SandboxBackend,
        size: int,
        *,
        idle_ttl_s: float = IDLE_TTL_S,
        refill_concurrency: int = 1,
        memory_budget: int | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        """`memory_budget`: idle sandboxes' memory limits together stay within it."""
        super().__init__(backend)
        self.clock = clock
        self.size = size
        self.memory_budget = memory_budget
        self.idle_ttl_s = idle_ttl_s
        self._shelves: dict[str, Shelf] = {}
        self._refill_slots = asyncio.Semaphore(refill_concurrency)
        self._handed_out: dict[str, tuple[str, Sandbox]] = {}  # id -> (session, sandbox)
        self._janitor: asyncio.Task[None] | None = None
        self._closing: set[asyncio.Task[None]] = set()
        self._closed = False
        self.hits = 0  # starts answered from a shelf (for metrics)
        self.misses = 0  # starts that found the shelf empty

    # -- handing out

    async def start(self, spec: SandboxSpec) -> Sandbox:
        shelf = self._demand(spec)
        self._discard(shelf.drop_dead())
        sandbox = shelf.idle.pop(0) if shelf.idle else None
        self._refill(shelf)
        if sandbox is None:
            self.misses += 1
            return await self.backend.start(spec)
        self.hits += 1
        self._handed_out[sandbox.id] = (spec.session_id, sandbox)
        log.info("session %s: took a warm sandbox", spec.session_id)
        return sandbox

    def prewarm(self, specs: list[SandboxSpec]) -> None:
        """Start filling the shelves of `specs` now (e.g. the served environments' at
        startup); they empty again after `idle_ttl_s` without demand."""
        for spec in specs:
            self._refill(self._demand(spec))

    def fill(self, spec: SandboxSpec, count: int) -> int:
        """Keep `count` idle sandboxes of `spec` ready (ahead of a burst), started
        `FILL_BATCH` at a time, until no demand for `idle_ttl_s` (0 removes the idle
        ones now); return how many the memory budget lets the pool keep."""
        shelf = self._demand(spec)
        shelf.target = count
        if len(shelf.idle) > count:  # fewer asked for: the rest are removed
            self._discard(shelf.idle[count:])
            shelf.idle = shelf.idle[:count]
        self._refill(shelf)
        return min(count, len(shelf.idle) + self._room(shelf))

    def _wanted(self, shelf: Shelf) -> int:
        target = self.size if shelf.target is None else shelf.target
        return max(0, min(target - len(shelf.idle), self._room(shelf)))

    def _room(self, shelf: Shelf) -> int:
        """How many more sandboxes of `shelf` the memory budget allows."""
        if self.memory_budget is None:
            return 1 << 30
        held = sum(s.spec.limits.memory_bytes * len(s.idle) for s in self._shelves.values())
        return max(0, (self.memory_budget - held) // shelf.spec.limits.memory_bytes)

    def idle_count(self, spec: SandboxSpec | None = None) -> int:
        """Idle sandboxes on `spec`'s shelf, or on all shelves."""
        shelves = self._shelves.values() if spec is None else [self._shelf(spec)]
        return sum(len(s.idle) for s in shelves)

    def _shelf(self, spec: SandboxSpec) -> Shelf:
        key = shelf_key(spec)
        if key not in self._shelves:
            pooled = spec.model_copy(update={"session_id": POOL_SESSION})
            self._shelves[key] = Shelf(pooled, last_demand=self.clock.monotonic())
        return self._shelves[key]

    def _demand(self, spec: SandboxSpec) -> Shelf:
        shelf = self._shelf(spec)
        shelf.last_demand = self.clock.monotonic()
        if self._janitor is None and not self._closed:
            self._janitor = asyncio.create_task(self._tidy_forever())
        return shelf

    # -- refilling

    def _refill(self, shelf: Shelf) -> None:
        if self._closed or self._wanted(shelf) <= 0:
            return
        if shelf.filler is None or shelf.filler.done():
            shelf.filler = asyncio.create_task(self._fill(shelf))

    async def _fill(self, shelf: Shelf) -> None:
        pause = RETRY_FIRST_S
        while (wanted := self._wanted(shelf)) > 0:
            batch = min(wanted, FILL_BATCH if shelf.target else 1)
            try:
                async with self._refill_slots:
                    await self._start_batch(shelf, batch)
            except ImageNotFound as e:
                log.warning("warm pool: stopped filling for %s: %s", shelf.spec.image, e)
                return
            except Exception as e:  # a refill failure must not end the pool
                log.warning("warm pool: start failed (retry in %gs): %s", pause, e)
                await self.clock.sleep(pause)
                pause = min(pause * 2, RETRY_MAX_S)
                continue
            pause = RETRY_FIRST_S

    async def _start_batch(self, shelf: Shelf, count: int) -> None:
        """Start `count` at once (the backend's start limit still paces them); shelve
        the ones that started, then raise the first failure."""
        starts = [self._start_warm(shelf.spec) for _ in range(count)]
        results = await asyncio.gather(*starts, return_exceptions=True)
        started = [r for r in results if isinstance(r, Sandbox)]
        keep = self._wanted(shelf)  # fewer when asked meanwhile (a fill of 0, the TTL)
        shelf.idle.extend(started[:keep])
        self._discard(started[keep:])
        for result in results:
            if isinstance(result, BaseException):
                raise result

    async def _start_warm(self, spec: SandboxSpec) -> Sandbox:
        """Start a sandbox and its persistent shell: the shell starts on first use
        otherwise, which is most of a warm session's first call (~20 ms)."""
        sandbox = await self.backend.start(spec)
        try:
            await sandbox.restart_shell()
        except BaseException:
            await self._close_quietly(sandbox)
            raise
        return sandbox

    # -- shrinking

    async def _tidy_forever(self) -> None:
        interval = max(0.05, min(self.idle_ttl_s / 4, 30.0))
        while True:
            await self.clock.sleep(interval)
            self.tidy()

    def tidy(self, now: float | None = None) -> None:
        """Empty shelves idle past the TTL; drop dead sandboxes and refill the rest."""
        now = self.clock.monotonic() if now is None else now
        for shelf in self._shelves.values():
            if now - shelf.last_demand > self.idle_ttl_s:
                self._empty(shelf)
            else:
                self._discard(shelf.drop_dead())
                self._refill(shelf)
        self._handed_out = {k: v for k, v in self._handed_out.items() if v[1].alive}

    def _empty(self, shelf: Shelf) -> None:
        if shelf.filler is not None:
            shelf.filler.cancel()
        if shelf.idle:
            log.info(
                "warm pool: no demand for %gs, removing %d idle", self.idle_ttl_s, len(shelf.idle)
            )
        self._discard(shelf.idle)
        shelf.idle = []
        shelf.target = None

    def _discard(self, sandboxes: list[Sandbox]) -> None:
        for sandbox in sandboxes:
            task = asyncio.create_task(self._close_quietly(sandbox))
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    async def _close_quietly(self, sandbox: Sandbox) -> None:
        try:
            await sandbox.close()
        except Exception as e:
            log.warning("warm pool: could not remove an idle sandbox: %s", e)

    # -- the rest of the contract

    async def list(self, *, all_servers: bool = False) -> list[SandboxInfo]:
        infos = await self.backend.list(all_servers=all_servers)
        for info in infos:
            if info.id in self._handed_out:
                info.session_id = self._handed_out[info.id][0]
        return infos

    async def close(self) -> None:
        self._closed = True
        tasks = [s.filler for s in self._shelves.values() if s.filler is not None]
        if self._janitor is not None:
            tasks.append(self._janitor)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for shelf in self._shelves.values():
            self._discard(shelf.idle)
            shelf.idle = []
        await asyncio.gather(*self._closing, return_exceptions=True)
        await self.backend.close()
