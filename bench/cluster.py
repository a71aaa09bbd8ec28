"""A local cluster (`orsbox.cluster.local`): 3 cells on private engines behind HAProxy.

* Router overhead: one session on cell-1, its bash `echo hi` round trip through the
  router and straight to the cell (the same session, each path on its own keep-alive
  connection), alternating call by call; the figure is the median of the paired
  differences, so both halves of each pair saw the same machine load.
* Aggregate calls/s: `SESSIONS` sessions each calling bash in a loop through the
  router for `seconds`, all on one cell vs spread over the three. On this machine the
  cells share 2 cores, so a third cell adds no CPU: the figure says what the router and
  placement cost, not what more machines would give.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

from bench import servers
from bench.client import Connection
from bench.harness import Bench, Session
from bench.stats import Row, ms, summary
from orsbox.cluster.local import LocalCluster

TARGETS = ["bench/envs.py:Shell"]
ROUNDS = 4
SESSIONS = 12


async def open_session(url: str, create_on: str | None = None) -> Session:
    """A session placed by `url` (the router), or created on the cell at `create_on`;
    its requests then go to `url`."""
    conn = await Connection.open(url)
    minted = await Connection.open(create_on) if create_on else conn
    sid = (await minted.request("POST", "/create_session", None, {})).json()["sid"]
    body = {"env_name": "shell", "task_spec": {}}
    r = await minted.request("POST", "/create", body, {"X-Session-ID": sid})
    if minted is not conn:
        await minted.close()
    if r.status != 200:
        raise RuntimeError(f"/create answered {r.status}: {r.body[:200]!r}")
    session = Session(conn, sid, "shell")
    await session.bash("true")  # setup done
    return session


async def timed(samples: list[float], session: Session, n: int) -> None:
    for _ in range(n):
        started = time.perf_counter()
        await session.call("bash", command="echo hi")
        samples.append((time.perf_counter() - started) * 1000)


async def overhead(cluster: LocalCluster, calls: int) -> tuple[dict, dict, dict]:
    """Routed and straight round trips of one session, alternating call by call, and
    their paired differences (each pair saw nearly the same machine load)."""
    cell = cluster.cells[0]
    routed = await open_session(cluster.url, create_on=cell.url)
    direct = Session(await Connection.open(cell.url), routed.sid, "shell")
    try:
        await timed([], routed, 100)  # warm-up
        await timed([], direct, 100)
        via_router: list[float] = []
        straight: list[float] = []
        for _ in range(calls * ROUNDS):
            await timed(via_router, routed, 1)
            await timed(straight, direct, 1)
    finally:
        await direct.conn.close()
        await routed.delete()
    pairs = [r - s for r, s in zip(via_router, straight, strict=True)]
    return summary(via_router), summary(straight), summary(pairs)


async def calls_per_s(url: str, create_on: list[str | None], seconds: float) -> float:
    sessions = [await open_session(url, where) for where in create_on]
    done = 0
    deadline = time.monotonic() + seconds

    async def loop(session: Session) -> None:
        nonlocal done
        while time.monotonic() < deadline:
            assert await session.bash("echo hi") == "hi\n"
            done += 1

    try:
        started = time.monotonic()
        await asyncio.gather(*(loop(s) for s in sessions))
        return done / (time.monotonic() - started)
    finally:
        await asyncio.gather(*(s.delete() for s in sessions))


async def run(bench: Bench) -> list[Row]:
    calls, seconds = bench.scale(500, 100), bench.scale(10.0, 3.0)
    root = Path(tempfile.mkdtemp(prefix="orsc-", dir="/tmp"))
    cluster = await asyncio.to_thread(
        LocalCluster.up, 3, servers.free_port(), TARGETS, root, [bench.image]
    )
    try:
        routed, straight, extra = await overhead(cluster, calls)
        one_cell = await calls_per_s(cluster.url, [cluster.cells[0].url] * SESSIONS, seconds)
        spread = await calls_per_s(cluster.url, [None] * SESSIONS, seconds)
    finally:
        await asyncio.to_thread(cluster.down)
    bench.raw["cluster"] = {
        "via_router_ms": routed,
        "router_overhead_paired_ms": extra,
        "straight_to_cell_ms": straight,
        "calls_per_s_one_cell": one_cell,
        "calls_per_s_three_cells": spread,
        "sessions": SESSIONS,
    }
    part = "cluster (3 cells, HAProxy)"
    return [
        Row(
            part,
            "router overhead on bash echo, p50 of paired differences",
            ms(extra["p50"]),
            f"straight {ms(straight['p50'])}, routed {ms(routed['p50'])}",
            "≤ 0.3 ms",
            extra["p50"] <= 0.3,
        ),
        Row(
            part,
            "round trip p99 routed / straight",
            f"{ms(routed['p99'])} / {ms(straight['p99'])}",
        ),
        Row(
            part,
            f"calls/s, {SESSIONS} sessions on 3 cells",
            f"{spread:.0f}",
            f"all on 1 cell: {one_cell:.0f}",
            "2 shared cores: no gain expected",
        ),
    ]
