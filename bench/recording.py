"""Episode recording's cost on the hot path: 64 sessions x 50 bash `echo hi` calls on a
server that records every call (SQLite, the default) and on one that records nothing,
in the same run, in interleaved blocks (recording on, then off, five times) so both
see the same machine load. The figures are the round trip the client sees and the
server's CPU per call (recording included: its writer is a thread of the server); the
noise is how far the two halves of the unrecorded runs differ from each other."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time

from bench import servers
from bench.harness import Bench, Session, open_session
from bench.stats import Row, ms, summary

SESSIONS = 64
CALLS = 50
BLOCKS = 5


async def block(sessions: list[Session], calls: int, samples: list[float]) -> None:
    async def one(session: Session) -> None:
        for _ in range(calls):
            started = time.perf_counter()
            response = await session.call("bash", command="echo hi")
            samples.append((time.perf_counter() - started) * 1000)
            assert b'"ok":true' in response.body, response.body[-300:]

    await asyncio.gather(*(one(s) for s in sessions))


async def run(bench: Bench) -> list[Row]:
    sessions_n, calls = bench.scale(SESSIONS, 8), bench.scale(CALLS, 10)
    db = bench.log_dir / f"episodes-recording-{bench.run_id}.sqlite3"
    on = bench.start_server("recording-on", ["Shell"], setup_wait_s=120, episodes_db=db)
    off = bench.start_server("recording-off", ["Shell"], setup_wait_s=120, record_episodes=0)
    servers_sessions = {}
    try:
        for name, server in (("on", on), ("off", off)):
            opened = await asyncio.gather(
                *(open_session(server.url, "shell") for _ in range(sessions_n))
            )
            await asyncio.gather(*(s.bash("echo ready") for s in opened))
            servers_sessions[name] = opened
        samples: dict[str, list[list[float]]] = {"on": [], "off": []}
        cpu = {"on": 0.0, "off": 0.0}
        pids = {"on": on.pid, "off": off.pid}
        for _ in range(BLOCKS):
            for name in ("on", "off"):
                samples[name].append([])
                before = servers.cpu_seconds(pids[name])
                await block(servers_sessions[name], calls // BLOCKS, samples[name][-1])
                cpu[name] += servers.cpu_seconds(pids[name]) - before
    finally:
        for opened in servers_sessions.values():
            await asyncio.gather(*(s.delete() for s in opened), return_exceptions=True)
        await bench.stop(on)
        await bench.stop(off)
    recorded = count_calls(db)
    flat = {k: [x for b in v for x in b] for k, v in samples.items()}
    halves = [[x for b in samples["off"][i::2] for x in b] for i in (0, 1)]
    noise = abs(summary(halves[0])["p50"] - summary(halves[1])["p50"])
    result = {
        "on_ms": summary(flat["on"]),
        "off_ms": summary(flat["off"]),
        "off_halves_p50_ms": [summary(h)["p50"] for h in halves],
        "server_cpu_ms_per_call": {k: v / len(flat[k]) * 1000 for k, v in cpu.items()},
        "calls_recorded": recorded,
        "calls_made_with_recording": len(flat["on"]) + sessions_n,  # + the "ready" calls
    }
    bench.raw["recording"] = result
    return rows(result, noise, sessions_n, calls)


def count_calls(db) -> int:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return conn.execute("SELECT COUNT(*) FROM calls").fetchone()[0]


def rows(result: dict, noise: float, sessions: int, calls: int) -> list[Row]:
    on, off = result["on_ms"], result["off_ms"]
    part = f"recording ({sessions} sessions x {calls} calls)"
    return [
        Row(
            part,
            "bash round trip p50 (p99): recording on vs off",
            f"{ms(on['p50'])} ({ms(on['p99'])})",
            f"off: {ms(off['p50'])} ({ms(off['p99'])}); noise {ms(noise)}",
            "p50 within noise",
            on["p50"] - off["p50"] <= max(noise, 0.05 * off["p50"]),
        ),
        Row(
            part,
            "server CPU per call: recording on vs off",
            f"{result['server_cpu_ms_per_call']['on']:.2f} ms",
            f"off: {result['server_cpu_ms_per_call']['off']:.2f} ms",
        ),
        Row(
            part,
            "calls recorded",
            f"{result['calls_recorded']}",
            f"{result['calls_made_with_recording']} made",
            "all",
            result["calls_recorded"] == result["calls_made_with_recording"],
        ),
    ]
