"""`/create` -> first call completed: cold (a server without a warm pool) and warm (a
server with `warm_pool=2`, measured once its pool is full), alternating between the
two servers so both see the same load. The time covers the create request, setup
(starting or taking the sandbox) and one `echo hi` tool call."""

from __future__ import annotations

import asyncio
import time

import docker

from bench import servers
from bench.harness import Bench, open_session
from bench.stats import Row, ms, summary

POOL = 2


async def create_to_first_call(server: servers.BenchServer) -> float:
    started = time.perf_counter()
    session = await open_session(server.url, "shell")
    assert await session.bash("echo hi") == "hi\n"
    elapsed = (time.perf_counter() - started) * 1000
    await session.delete()
    return elapsed


def pool_full(bench: Bench, server: servers.BenchServer) -> bool:
    """Every pooled container of the server runs its guest's shell (the guest starts it
    just after its hello)."""
    pooled = bench.containers(**{"orsbox.server": server.server_id, "orsbox.session": "pool"})
    if len(pooled) != POOL or any(c.get("State") != "running" for c in pooled):
        return False
    try:
        tops = [bench.docker.api.top(c["Id"]) for c in pooled]
    except docker.errors.NotFound:  # taken by a session between the list and the top
        return False
    return all(any("bash --noprofile" in " ".join(p) for p in t["Processes"]) for t in tops)


async def wait_pool_full(bench: Bench, server: servers.BenchServer) -> None:
    deadline = time.monotonic() + 60
    while not await asyncio.to_thread(pool_full, bench, server):
        if time.monotonic() > deadline:
            raise TimeoutError("the warm pool did not fill")
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.2)  # the agent's hello, just after its exec started


async def run(bench: Bench) -> list[Row]:
    repeats = bench.scale(12, 3)
    cold = bench.start_server("cold", ["Shell"])
    warm = bench.start_server("warm", ["Shell"], warm_pool=POOL)
    samples: dict[str, list[float]] = {"cold": [], "warm": []}
    try:
        await create_to_first_call(cold)  # warm-up: imports, first docker calls
        for _ in range(repeats):
            samples["cold"].append(await create_to_first_call(cold))
            await wait_pool_full(bench, warm)
            samples["warm"].append(await create_to_first_call(warm))
    finally:
        await bench.stop(cold)
        await bench.stop(warm)
    stats = {name: summary(values) for name, values in samples.items()}
    bench.raw["create"] = {"create_to_first_call_ms": stats}
    c, w = stats["cold"], stats["warm"]
    return [
        Row(
            "create",
            "cold: create -> first call p50 (p95)",
            f"{ms(c['p50'])} ({ms(c['p95'])})",
            "",
            "≤ 300 ms",
            c["p50"] <= 300,
        ),
        Row(
            "create",
            "warm pool: create -> first call p50 (p95)",
            f"{ms(w['p50'])} ({ms(w['p95'])})",
            f"cold {ms(c['p50'])}",
            "≤ 15 ms",
            w["p50"] <= 15,
        ),
    ]
