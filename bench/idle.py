"""Idle live sessions held: container sessions are created in waves until the goal,
every one is checked with a call, and the server's resident memory is read; memory
per session is the growth over an empty, warmed-up server divided by the sessions
(the total RSS divided by the sessions is given too). Connections are closed once a
session is ready: an idle session holds no HTTP connection."""

from __future__ import annotations

import asyncio

from bench import servers
from bench.harness import Bench, Session, open_session
from bench.stats import Row

WAVE = 50  # below the server's limit on sessions starting at once (max_starting)
MIB = 1024 * 1024


def mem_available() -> int:
    """The machine's available memory (shared with everyone else on it)."""
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


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
    # the figure is memory, not start speed: start 8 at a time to fill faster
    server = bench.start_server("idle", ["Shell"], setup_wait_s=300, sandbox_start_concurrency=8)
    sids: list[str] = []
    try:
        await check_and_delete(server.url, [await ready_session(server)])  # warm-up
        empty, machine_before = server.rss(), mem_available()
        while len(sids) < goal:
            wave = min(WAVE, goal - len(sids))
            sids += await asyncio.gather(*(ready_session(server) for _ in range(wave)))
        await asyncio.sleep(1)
        held, machine_after = server.rss(), mem_available()
        chunks = [sids[i::8] for i in range(8)]
        answered = sum(await asyncio.gather(*(check_and_delete(server.url, c) for c in chunks)))
    finally:
        await bench.stop(server)
    per_session = (held - empty) / len(sids)
    machine = (machine_before - machine_after) / len(sids)
    bench.raw["idle"] = {
        "sessions": len(sids),
        "answered": answered,
        "rss_empty": empty,
        "rss_held": held,
        "growth_per_session": per_session,
        "machine_memory_per_session": machine,
    }
    part = "idle sessions"
    return [
        Row(
            part,
            "held, all answering a call",
            f"{answered} of {len(sids)}",
            "",
            "≥ 300",
            answered >= 300,
        ),
        Row(
            part,
            "server memory per session (RSS growth)",
            f"{per_session / MIB:.2f} MiB",
            f"total RSS/sessions {held / len(sids) / MIB:.2f} MiB",
            "≤ 2 MiB",
            per_session <= 2 * MIB,
        ),
        Row(
            part, "machine memory per session (container, shim, engine)", f"{machine / MIB:.1f} MiB"
        ),
    ]
