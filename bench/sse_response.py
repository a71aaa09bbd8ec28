"""Why orsbox has its own 60-line SSE response instead of sse-starlette: measured.

`python -m bench.sse_response [--calls N]` serves `bench/sse_app.py` with uvicorn
(httptools, uvloop: what `orsbox serve` runs) in a subprocess and sends the same trivial
call stream to both routes over one keep-alive connection each, in alternating rounds,
so both see the same machine load. Per route: latency p50/p99 (client side, until the
stream's end) and the server's CPU per call (its /proc utime + stime over the round,
divided by the calls). Needs `pip install sse-starlette` (not an orsbox dependency).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from bench.client import Connection
from bench.servers import cpu_seconds, free_port, spawn_server, stop_process, wait_healthy
from bench.stats import summary

ROUTES = ("/lean", "/sse-starlette")
ROUNDS = 10


async def one_round(url: str, route: str, calls: int, pid: int) -> tuple[list[float], float]:
    conn = await Connection.open(url)
    try:
        for _ in range(20):  # warm the connection and the route
            await conn.request("POST", route, {})
        latencies = []
        cpu_before = cpu_seconds(pid)
        for _ in range(calls):
            started = time.perf_counter()
            response = await conn.request("POST", route, {})
            latencies.append((time.perf_counter() - started) * 1000)
            if b"event: end" not in response.body:
                raise RuntimeError(f"{route}: no end event in {response.body[:200]!r}")
        return latencies, (cpu_seconds(pid) - cpu_before) / calls * 1000
    finally:
        await conn.close()


async def measure(url: str, calls: int, pid: int) -> dict[str, dict[str, float]]:
    latencies: dict[str, list[float]] = {route: [] for route in ROUTES}
    cpu: dict[str, list[float]] = {route: [] for route in ROUTES}
    for number in range(ROUNDS):
        order = ROUTES if number % 2 == 0 else ROUTES[::-1]
        for route in order:
            lat, cpu_ms = await one_round(url, route, calls // ROUNDS, pid)
            latencies[route] += lat
            cpu[route].append(cpu_ms)
    return {
        route: {**summary(latencies[route]), "server_cpu_ms": sum(cpu[route]) / len(cpu[route])}
        for route in ROUTES
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000, help="calls per route")
    args = parser.parse_args()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = Path(tempfile.mkstemp(prefix="sse-bench-", suffix=".log")[1])
    argv = ["-m", "uvicorn", "bench.sse_app:app", "--port", str(port), "--log-level", "warning"]
    argv += ["--http", "httptools", "--loop", "uvloop", "--no-access-log"]
    process = spawn_server(argv, log)
    try:
        wait_healthy(url, process, log, 30)
        results = asyncio.run(measure(url, args.calls, process.pid))
    finally:
        stop_process(process)
        log.unlink(missing_ok=True)
    print(json.dumps({"load_avg": os.getloadavg(), "results": results}, indent=2))
    for route, r in results.items():
        print(
            f"{route:15} p50 {r['p50']:.3f} ms  p99 {r['p99']:.3f} ms  "
            f"server CPU {r['server_cpu_ms']:.3f} ms/call",
            file=sys.stderr,
        )


if __name__ == "__main__":
    main()
