"""Aggregate bash tool calls per second with 1, 8, 32 and 64 concurrent sessions, each
on its own keep-alive connection, calling `echo hi` back to back for a fixed time;
baseline: `docker exec` per call from 16 threads at once, in the same run."""

from __future__ import annotations

import asyncio
import threading
import time

from bench import servers
from bench.harness import Bench, Session, open_session
from bench.stats import Row, ms, summary

LEVELS = (1, 8, 32, 64)
EXEC_THREADS = 16


async def hammer(session: Session, deadline: float, samples: list[float]) -> None:
    while time.perf_counter() < deadline:
        started = time.perf_counter()
        response = await session.call("bash", command="echo hi")
        samples.append((time.perf_counter() - started) * 1000)
        assert b'"ok":true' in response.body, response.body[-300:]


async def level(
    server: servers.BenchServer, sessions: list[Session], seconds: float, ids: set[str]
) -> dict:
    """Calls/s, latencies and CPU per call (by party) with `sessions` calling at once."""
    samples: list[float] = []
    cpu_before, started = servers.cpu_snapshot(server.pid, ids), time.perf_counter()
    client_before = time.process_time()
    deadline = started + seconds
    await asyncio.gather(*(hammer(s, deadline, samples) for s in sessions))
    elapsed = time.perf_counter() - started
    cpu = servers.cpu_used(cpu_before, servers.cpu_snapshot(server.pid, ids))
    cpu["client"] = time.process_time() - client_before
    return {
        "calls_per_s": len(samples) / elapsed,
        "latency_ms": summary(samples),
        "cpu_ms_per_call": {k: v / len(samples) * 1000 for k, v in cpu.items()},
        "cores_busy": {k: v / elapsed for k, v in cpu.items()},
    }


def docker_exec_rate(container, seconds: float) -> float:
    done = 0
    lock = threading.Lock()
    deadline = time.perf_counter() + seconds

    def worker() -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            container.exec_run(["bash", "-c", "echo hi"])
            with lock:
                done += 1

    threads = [threading.Thread(target=worker) for _ in range(EXEC_THREADS)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return done / (time.perf_counter() - started)


async def run(bench: Bench) -> list[Row]:
    seconds = bench.scale(5, 1.5)
    server = bench.start_server("throughput", ["Shell"], setup_wait_s=120)
    container = await asyncio.to_thread(bench.baseline_container)
    sessions = await asyncio.gather(
        *(open_session(server.url, "shell") for _ in range(max(LEVELS)))
    )
    try:
        await asyncio.gather(*(s.bash("echo ready") for s in sessions))
        ids = {c["Id"] for c in bench.containers(**{"orsbox.server": server.server_id})}
        await level(server, sessions, 1.0, ids)  # warm-up
        results = {n: await level(server, sessions[:n], seconds, ids) for n in LEVELS}
        exec_rate = await asyncio.to_thread(docker_exec_rate, container, seconds)
    finally:
        await asyncio.gather(*(s.delete() for s in sessions), return_exceptions=True)
        await asyncio.to_thread(container.remove, force=True)
        await bench.stop(server)
    bench.raw["throughput"] = {"levels": results, "docker_exec_calls_per_s": exec_rate}
    return rows(results, exec_rate)


def rows(results: dict[int, dict], exec_rate: float) -> list[Row]:
    cpu = results[32]["cpu_ms_per_call"]
    where = ", ".join(f"{k} {v:.2f}" for k, v in cpu.items())
    out = [Row("throughput", "CPU ms per call at 32 sessions", where)]
    for n, r in results.items():
        lat = r["latency_ms"]
        out.append(
            Row(
                "throughput",
                f"{n} session(s): calls/s (p50, p99)",
                f"{r['calls_per_s']:.0f}/s ({ms(lat['p50'])}, {ms(lat['p99'])})",
                f"docker exec x{EXEC_THREADS}: {exec_rate:.0f}/s" if n == 32 else "",
                "≥ 1000/s" if n == 32 else "",
                r["calls_per_s"] >= 1000 if n == 32 else None,
            )
        )
    return out
