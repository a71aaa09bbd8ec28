"""bash `echo hi` round trip, end to end through orsbox (HTTP, SSE, session, agent, back)
vs a `docker exec` per call through the docker SDK on the same image, and vs the
agent alone (a sandbox's shell called in-process, no HTTP), in interleaved blocks so
all three see the same machine load."""

from __future__ import annotations

import asyncio
import time

from bench import servers
from bench.harness import Bench, open_session
from bench.stats import Row, ms, summary
from orsbox.sandbox import SandboxSpec
from orsbox.sandbox.docker import DockerBackend

ROUNDS = 4


async def timed(samples: list[float], coro_fn, n: int) -> None:
    for _ in range(n):
        started = time.perf_counter()
        await coro_fn()
        samples.append((time.perf_counter() - started) * 1000)


def docker_execs(container, n: int) -> list[float]:
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        result = container.exec_run(["bash", "-c", "echo hi"])
        samples.append((time.perf_counter() - started) * 1000)
        assert result.output == b"hi\n", result
    return samples


async def run(bench: Bench) -> list[Row]:
    calls, execs = bench.scale(600, 100), bench.scale(25, 5)
    server = bench.start_server("roundtrip", ["Shell"])
    container = await asyncio.to_thread(bench.baseline_container)
    backend = DockerBackend(server_id=f"bench-{bench.run_id}-direct")
    session = await open_session(server.url, "shell")
    try:
        sandbox = await backend.start(SandboxSpec(image=bench.image, session_id="direct"))
        assert await session.bash("echo hi") == "hi\n"

        async def via_orsbox() -> None:
            await session.call("bash", command="echo hi")

        async def via_agent() -> None:
            await sandbox.shell("echo hi")

        await timed([], via_orsbox, 200)  # warm-up
        await timed([], via_agent, 200)
        e2e, agent, dexec, cpu = [], [], [], 0.0
        for _ in range(ROUNDS):
            before = servers.cpu_seconds(server.pid)
            await timed(e2e, via_orsbox, calls)
            cpu += servers.cpu_seconds(server.pid) - before
            await timed(agent, via_agent, calls)
            dexec += await asyncio.to_thread(docker_execs, container, execs)
    finally:
        await session.delete()
        await backend.close()
        await asyncio.to_thread(container.remove, force=True)
        await bench.stop(server)
    return rows(bench, summary(e2e), summary(agent), summary(dexec), cpu / len(e2e) * 1000)


def rows(bench: Bench, e2e: dict, agent: dict, dexec: dict, cpu_ms: float) -> list[Row]:
    bench.raw["roundtrip"] = {
        "orsbox_ms": e2e,
        "agent_only_ms": agent,
        "docker_exec_ms": dexec,
        "server_cpu_ms_per_call": cpu_ms,
    }
    part = "bash echo hi"
    return [
        Row(
            part,
            "round trip p50",
            ms(e2e["p50"]),
            f"docker exec {ms(dexec['p50'])}",
            "≤ 2 ms",
            e2e["p50"] <= 2,
        ),
        Row(
            part,
            "round trip p99",
            ms(e2e["p99"]),
            f"docker exec {ms(dexec['p99'])}",
            "≤ 10 ms",
            e2e["p99"] <= 10,
        ),
        Row(part, "agent alone (no HTTP) p50 / p99", f"{ms(agent['p50'])} / {ms(agent['p99'])}"),
        Row(part, "server CPU per call", ms(cpu_ms)),
    ]
