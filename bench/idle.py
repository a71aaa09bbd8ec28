"""Idle live sessions held: container sessions are created in waves until the goal,
every one is checked with a call, and the server's resident memory is read; memory
per session is the growth over an empty, warmed-up server divided by the sessions
(the total RSS divided by the sessions is given too). Connections are closed once a
session is ready: an idle session holds no HTTP connection."""

from __future__ import annotations

import asyncio
import gc

from bench import servers
from bench.harness import Bench, Session, open_session
from bench.stats import Row

WAVE = 50  # below the server's limit on sessions starting at once (max_starting)
MIB = 1024 * 1024


async def ready_session(server: servers.BenchServer) -> str:
    session = await open_session(server.url, "shell")
    await session.bash("true")
    await session.conn.close()
    return session.sid


async def check_and_delete(url: str, sids: list[str]) -> int:
    """Call `echo ok` on each session, then delete it; return how many answered."""
    from bench.client import Connection

    conn = await Connection.open(url)
    answered = 0
    try:
        for sid in sids:
            session = Session(conn, sid, "shell")
            answered += await session.bash("echo ok") == "ok\n"
            await conn.request("POST", "/delete", None, {"X-Session-ID": sid})
    finally:
        await conn.close()
    return answered


async def run(bench: Bench) -> list[Row]:
    goal = bench.scale(300, 40)
    server = bench.start_server("idle", ["Shell"], setup_wait_s=300)
    sids: list[str] = []
    try:
        await check_and_delete(server.url, [await ready_session(server)])  # warm-up
        gc.collect()
        empty = server.rss()
        while len(sids) < goal:
            wave = min(WAVE, goal - len(sids))
            sids += await asyncio.gather(*(ready_session(server) for _ in range(wave)))
        await asyncio.sleep(1)
        held = server.rss()
        chunks = [sids[i::8] for i in range(8)]
        answered = sum(await asyncio.gather(*(check_and_delete(server.url, c) for c in chunks)))
    finally:
        await bench.stop(server)
    per_session = (held - empty) / len(sids)
    bench.raw["idle"] = {
        "sessions": len(sids),
        "answered": answered,
        "rss_empty": empty,
        "rss_held": held,
        "growth_per_session": per_session,
    }
    return [
        Row(
            "idle sessions",
            "held, all answering a call",
            f"{answered} of {len(sids)}",
            "",
            "≥ 300",
            answered >= 300,
        ),
        Row(
            "idle sessions",
            "server memory per session (growth)",
            f"{per_session / MIB:.2f} MiB",
            f"total RSS/sessions {held / len(sids) / MIB:.2f} MiB",
            "≤ 2 MiB",
            per_session <= 2 * MIB,
        ),
    ]
