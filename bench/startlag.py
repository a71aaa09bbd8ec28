"""`/health` while 10 sessions start at once, under runc and under runsc (gVisor), on the
private engine that offers both (`bench.gvisor.backend_setting`), so the runtime is the
only difference (issue 23). Each create is followed by one `echo hi`; `/health` is
polled every 10 ms meanwhile (`bench.burst.poll`), and for 3 s before as the quiet
baseline. The 1-minute load average goes beside the figures: on a loaded machine what
remains is CPU starvation of the server, not blocking (see BENCHMARKS.md)."""

from __future__ import annotations

import asyncio
import os

from bench.burst import one_create, poll
from bench.gvisor import RUNTIMES, backend_setting
from bench.harness import Bench
from bench.stats import Row, ms, summary

SESSIONS = 10
TARGET_MS = {"runc": 50, "runsc": 100}


async def health_during(url: str, work) -> tuple[object, list[float]]:
    stop, health = asyncio.Event(), []
    poller = asyncio.create_task(poll(url, stop, health, None))
    try:
        result = await work()
    finally:
        stop.set()
        await poller
    return result, health


async def run(bench: Bench) -> list[Row]:
    return [await one_runtime(bench, runtime) for runtime in RUNTIMES]


async def one_runtime(bench: Bench, runtime: str) -> Row:
    server = bench.start_server(f"startlag-{runtime}", ["Shell"], backend=backend_setting(runtime))
    try:
        _, quiet = await health_during(server.url, lambda: asyncio.sleep(3))
        load = os.getloadavg()[0]
        outcomes, health = await health_during(
            server.url, lambda: asyncio.gather(*(one_create(server) for _ in range(SESSIONS)))
        )
        sessions = [s for _, s in outcomes if s is not None]
        await asyncio.gather(*(s.delete() for s in sessions))
    finally:
        await bench.stop(server)
    h, q = summary(health), summary(quiet)
    bench.raw[f"startlag-{runtime}"] = {"health_ms": h, "quiet_health_ms": q, "load1": load}
    return Row(
        f"{SESSIONS} sessions starting, {runtime}",
        "/health p99 meanwhile",
        ms(h["p99"]),
        f"quiet {ms(q['p99'])}; {SESSIONS - len(sessions)} failed; load {load:.1f}",
        f"≤ {TARGET_MS[runtime]} ms",
        h["p99"] <= TARGET_MS[runtime],
    )
