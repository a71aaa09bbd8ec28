"""The warm pool's rules, on an in-memory backend (the real engine: test_pool_docker.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from orsbox.clock import ManualClock
from orsbox.errors import ImageNotFound, SandboxStartError
from orsbox.sandbox import ExecResult, Sandbox, SandboxBackend, SandboxInfo, SandboxSpec
from orsbox.sandbox.pool import POOL_SESSION, RETRY_FIRST_S, WarmPool
from tests.waiting import wait_until_async

pytestmark = pytest.mark.anyio

SPEC = SandboxSpec(image="img", session_id="s1")


class MemorySandbox(Sandbox):
    def __init__(self, backend: MemoryBackend, spec: SandboxSpec) -> None:
        self.id = f"sb{len(backend.started)}"
        self.spec = spec
        self.backend = backend
        self.closed = False

    @property
    def alive(self) -> bool:
        return not self.closed

    async def close(self) -> None:
        self.closed = True
        self.backend.live.pop(self.id, None)

    async def shell(self, command: str, **kw: object) -> ExecResult:
        return ExecResult(output="", exit_code=0)

    async def restart_shell(self) -> None: ...

    async def kill_processes(self) -> int:
        return 0

    async def exec(self, command: str | list[str], **kw: object) -> ExecResult:
        return ExecResult(output="", exit_code=0)

    async def read_file(self, path: str, *, max_bytes: int | None = None) -> bytes:
        return b""

    async def write_file(self, path: str, data: bytes, *, mode: int | None = 0o644) -> None: ...

    async def copy_in(self, local_dir: Path, sandbox_dir: str) -> None: ...


class MemoryBackend(SandboxBackend):
    """Starts instantly (or after `delay_s`); `failures` are raised by the next starts,
    and images in `missing` are not found."""

    def __init__(self, failures: list[Exception] | None = None, delay_s: float = 0) -> None:
        self.started: list[MemorySandbox] = []
        self.live: dict[str, MemorySandbox] = {}
        self.failures = list(failures or [])
        self.missing: set[str] = set()
        self.attempts = 0
        self.delay_s = delay_s
        self.closed = False

    async def start(self, spec: SandboxSpec) -> MemorySandbox:
        self.attempts += 1
        await asyncio.sleep(self.delay_s)
        if spec.image in self.missing:
            raise ImageNotFound(f"no image {spec.image}")
        if self.failures:
            raise self.failures.pop(0)
        sandbox = MemorySandbox(self, spec)
        self.started.append(sandbox)
        self.live[sandbox.id] = sandbox
        return sandbox

    async def list(self, *, all_servers: bool = False) -> list[SandboxInfo]:
        return [
            SandboxInfo(s.id, s.id, s.spec.image, s.spec.session_id, "me", "running")
            for s in self.live.values()
        ]

    async def sweep(self) -> int:
        return 0

    async def close(self) -> None:
        self.closed = True
        for sandbox in list(self.live.values()):
            await sandbox.close()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def fillers_done(pool: WarmPool) -> bool:
    """No shelf has a refill running: nothing more starts until someone asks."""
    return all(shelf.filler is None or shelf.filler.done() for shelf in pool._shelves.values())


async def test_prewarmed_sandboxes_are_handed_out_once_and_refilled() -> None:
    backend = MemoryBackend()
    pool = WarmPool(backend, 2)
    pool.prewarm([SPEC])
    await wait_until_async(lambda: pool.idle_count() == 2, 5)
    assert all(s.spec.session_id == POOL_SESSION for s in backend.started)

    taken = await asyncio.gather(
        *(pool.start(SPEC.model_copy(update={"session_id": f"s{i}"})) for i in range(6))
    )
    assert len({s.id for s in taken}) == 6  # never one sandbox for two sessions
    assert [s.spec.session_id for s in taken[:2]] == [POOL_SESSION] * 2  # warm ones first
    assert [s.spec.session_id for s in taken[2:]] == ["s2", "s3", "s4", "s5"]  # then cold

    await wait_until_async(lambda: pool.idle_count() == 2, 5)  # refilled
    assert not {s.id for s in taken} & {s.id for s in pool._shelves[next(iter(pool._shelves))].idle}
    await pool.close()


async def test_specs_differing_only_in_session_share_a_shelf_others_do_not() -> None:
    pool = WarmPool(MemoryBackend(), 1)
    other = SPEC.model_copy(update={"env": {"A": "1"}})
    pool.prewarm([SPEC, SPEC.model_copy(update={"session_id": "s9"}), other])
    await wait_until_async(lambda: pool.idle_count() == 2, 5)
    assert pool.idle_count(SPEC) == 1 and pool.idle_count(other) == 1
    taken = await pool.start(other.model_copy(update={"session_id": "x"}))
    assert taken.spec.env == {"A": "1"}
    await pool.close()


async def test_list_names_the_session_a_pooled_sandbox_went_to() -> None:
    pool = WarmPool(MemoryBackend(), 1)
    pool.prewarm([SPEC])
    await wait_until_async(lambda: pool.idle_count() == 1, 5)
    taken = await pool.start(SPEC)
    await wait_until_async(lambda: pool.idle_count() == 1, 5)
    sessions = {info.id: info.session_id for info in await pool.list()}
    assert sessions[taken.id] == "s1" and sorted(sessions.values()) == ["pool", "s1"]
    await pool.close()


async def test_the_pool_empties_after_the_idle_ttl_and_fills_again_on_demand() -> None:
    backend, clock = MemoryBackend(), ManualClock()
    pool = WarmPool(backend, 2, idle_ttl_s=600, clock=clock)  # tidied every 30 s
    pool.prewarm([SPEC])
    await wait_until_async(lambda: pool.idle_count() == 2, 5)
    await clock.sleepers(1)  # the janitor waits for its first look
    await clock.advance(600)
    assert pool.idle_count() == 2  # a TTL is not over at its last second
    await clock.advance(30)  # the next look
    assert pool.idle_count() == 0
    await wait_until_async(lambda: not backend.live, 5, message="the idle removed")
    await clock.advance(3600)
    assert len(backend.started) == 2  # not refilled while nobody asks

    taken = await pool.start(SPEC)
    assert taken.spec.session_id == "s1"  # cold: the shelf was empty
    await wait_until_async(lambda: pool.idle_count() == 2, 5)
    await pool.close()


async def test_close_removes_idle_and_handed_out_sandboxes() -> None:
    backend = MemoryBackend(delay_s=0.05)
    pool = WarmPool(backend, 3)
    pool.prewarm([SPEC])
    await wait_until_async(lambda: pool.idle_count() >= 1, 5)
    taken = await pool.start(SPEC)
    await pool.close()  # a refill may be half-way: it is cancelled
    assert taken.closed and not backend.live and backend.closed
    await wait_until_async(lambda: fillers_done(pool), 5, message="the refills ended")
    assert not backend.live  # and nothing starts afterwards


async def test_a_failed_refill_is_retried_after_a_growing_pause() -> None:
    backend, clock = MemoryBackend(failures=[SandboxStartError("engine busy")] * 3), ManualClock()
    pool = WarmPool(backend, 2, clock=clock)
    pool.prewarm([SPEC])
    await clock.sleepers(2)  # the janitor, and the filler pausing after its first failure
    for pause in (RETRY_FIRST_S, 2 * RETRY_FIRST_S, 4 * RETRY_FIRST_S):
        attempts = backend.attempts
        await clock.advance(pause - 0.01)
        assert backend.attempts == attempts  # not retried before the pause is over
        await clock.advance(0.01)
        assert backend.attempts > attempts
    await wait_until_async(lambda: pool.idle_count() == 2, 5)
    assert (await pool.start(SPEC)).spec.session_id == POOL_SESSION
    await pool.close()


async def test_a_missing_image_stops_refilling_and_fails_the_session() -> None:
    backend = MemoryBackend()
    backend.missing.add(SPEC.image)
    pool = WarmPool(backend, 2)
    pool.prewarm([SPEC])
    await wait_until_async(lambda: fillers_done(pool), 5, message="the refill stopped")
    assert pool.idle_count() == 0 and backend.attempts == 1  # tried once, then stopped
    with pytest.raises(ImageNotFound):
        await pool.start(SPEC)  # the session's own start says so
    backend.missing.clear()  # built meanwhile: the next demand fills the pool again
    assert (await pool.start(SPEC)).alive
    await wait_until_async(lambda: pool.idle_count() == 2, 5)
    await pool.close()


async def test_a_pooled_sandbox_that_died_is_not_handed_out() -> None:
    backend = MemoryBackend()
    pool = WarmPool(backend, 1)
    pool.prewarm([SPEC])
    await wait_until_async(lambda: pool.idle_count() == 1, 5)
    [dead] = backend.started
    dead.closed = True  # killed while idle
    taken = await pool.start(SPEC)
    assert taken is not dead and taken.alive
    await pool.close()


async def test_refills_run_one_at_a_time_over_all_shelves() -> None:
    backend = MemoryBackend(delay_s=0.05)
    running = 0
    peak = 0
    real_start = backend.start

    async def counting_start(spec: SandboxSpec) -> MemorySandbox:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        try:
            return await real_start(spec)
        finally:
            running -= 1

    backend.start = counting_start  # type: ignore[method-assign]
    pool = WarmPool(backend, 3)
    pool.prewarm([SPEC, SPEC.model_copy(update={"image": "other"})])
    await wait_until_async(lambda: pool.idle_count() == 6, 5)
    assert peak == 1
    await pool.close()


async def test_a_requested_fill_starts_ahead_of_a_burst_within_the_memory_budget() -> None:
    backend = MemoryBackend()
    gib = 1024**3
    pool = WarmPool(backend, 0, memory_budget=5 * gib)
    big = SandboxSpec(image="big", limits={"memory_bytes": 2 * gib})  # type: ignore[arg-type]
    assert pool.fill(SPEC, 3) == 3  # 1 GiB each
    await wait_until_async(lambda: pool.idle_count(SPEC) == 3, 5)
    assert pool.fill(big, 4) == 1  # 3 GiB held: room for one of 2 GiB
    await wait_until_async(lambda: pool.idle_count(big) == 1, 5)
    await asyncio.sleep(0.05)
    assert pool.idle_count() == 4 and len(backend.started) == 4  # no more than the budget

    taken = await pool.start(SPEC.model_copy(update={"session_id": "s9"}))
    assert taken.spec.session_id == POOL_SESSION  # the burst gets a warm one
    await wait_until_async(lambda: pool.idle_count(SPEC) == 3, 5)  # kept at the target
    await pool.close()
    assert backend.live == {}


async def test_a_pool_of_size_zero_starts_nothing_unasked() -> None:
    backend = MemoryBackend()
    pool = WarmPool(backend, 0, memory_budget=1024**4)
    sandbox = await pool.start(SPEC)
    await asyncio.sleep(0.05)
    assert backend.started == [sandbox] and pool.idle_count() == 0
    await pool.close()


async def test_a_fill_of_zero_removes_the_idle_and_what_was_starting() -> None:
    backend = MemoryBackend(delay_s=0.2)
    pool = WarmPool(backend, 0)
    pool.fill(SPEC, 2)
    await wait_until_async(lambda: pool.idle_count(SPEC) == 2, 5)
    await pool.start(SPEC)  # the refill starts one more ...
    await wait_until_async(lambda: backend.attempts == 3, 5)
    pool.fill(SPEC, 0)  # ... and the pool is asked to hold none meanwhile
    await wait_until_async(lambda: fillers_done(pool), 5)
    await wait_until_async(lambda: len(backend.live) == 1, 5)  # only the session's
    assert pool.idle_count() == 0
    await pool.close()


async def test_a_stack_of_wrappers_passes_the_whole_contract_through() -> None:
    """The warm pool in front of the metered backend in front of the real one (as the
    server stacks them): removing a listed sandbox reaches the real backend, and so do
    its capabilities and snapshot store."""
    from orsbox.monitoring.metered_backend import MeteredBackend
    from orsbox.monitoring.metrics import Metrics
    from orsbox.sandbox.fake import FakeBackend

    real = FakeBackend()
    stack = WarmPool(MeteredBackend(real, Metrics()), 0)
    sandbox = await stack.start(SandboxSpec(image="img", session_id="wrapped"))
    assert [info.id for info in await stack.list()] == [sandbox.id]
    assert stack.capabilities is real.capabilities and stack.snapshots is real.snapshots is None
    await stack.remove(sandbox.id)
    assert not sandbox.alive and await real.list() == []
    assert await stack.usage_of(sandbox.id) is None
    await stack.close()
