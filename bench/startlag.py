"""`/health` while 10 sessions start at once, under runc and under runsc (gVisor), on the
private engine that offers both (`bench.gvisor.backend_setting`), so the runtime is the
only difference (issue 23). Each create is followed by one `echo hi`; `/health` is
polled every 10 ms meanwhile (`bench.burst.poll`), and for 3 s before as the quiet
baseline. Beside `/health`, the server's own event-loop lag over the same stretches
(its `orsbox_event_loop_lag_seconds` histogram, `bench.loop_lag`): a slow `/health`
with a small lag is the HTTP path, a lag as long as the slow polls is the loop held
(blocking) or starved of CPU. The 1-minute load average goes beside the figures: on a
loaded machine what remains is CPU starvation of the server (see BENCHMARKS.md)."""

from __future__ import annotations

import asyncio
import os

from bench import loop_lag
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
    rows: list[Row] = []
    for runtime in RUNTIMES:
        rows += await one_runtime(bench, runtime)
    return rows


async def one_runtime(bench: Bench, runtime: str) -> list[Row]:
    server = bench.start_server(f"startlag-{runtime}", ["Shell"], backend=backend_setting(runtime))
    try:
        start = await loop_lag.scrape(server.url)
        _, quiet = await health_during(server.url, lambda: asyncio.sleep(3))
        before_burst = await loop_lag.scrape(server.url)
        load = os.getloadavg()[0]
        outcomes, health = await health_during(
            server.url, lambda: asyncio.gather(*(one_create(server) for _ in range(SESSIONS)))
        )
        after_burst = await loop_lag.scrape(server.url)
        sessions = [s for _, s in outcomes if s is not None]
        await asyncio.gather(*(s.delete() for s in sessions))
    finally:
        await bench.stop(server)
    h, q = summary(health), summary(quiet)
    lag, quiet_lag = (
        loop_lag.between(before_burst, after_burst),
        loop_lag.between(start, before_burst),
    )
    bench.raw[f"startlag-{runtime}"] = {
        "health_ms": h,
        "quiet_health_ms": q,
        "loop_lag_ms": lag,
        "quiet_loop_lag_ms": quiet_lag,
        "load1": load,
    }
    part = f"{SESSIONS} sessions starting, {runtime}"
    return [
        Row(
            part,
            "/health p99 meanwhile",
            ms(h["p99"]),
            f"quiet {ms(q['p99'])}; {SESSIONS - len(sessions)} failed; load {load:.1f}",
            f"≤ {TARGET_MS[runtime]} ms",
            h["p99"] <= TARGET_MS[runtime],
        ),
        Row(
            part,
            "server's event-loop lag meanwhile, p50 / p99 / max",
            f"{ms(lag['p50'])} / {ms(lag['p99'])} / ≤ {ms(lag['max'])}",
            f"quiet {ms(quiet_lag['p50'])} / {ms(quiet_lag['p99'])} / ≤ {ms(quiet_lag['max'])}",
        ),
    ]
