"""A 1 GiB output flood (`yes | head -c 1G` in the persistent shell): time until the
call returns, and the server's peak memory growth while it runs (sampled every 5 ms),
with the default 64 KiB output cap. Baseline, same run: the same command through one
`docker exec` per call, its output streamed through the docker SDK and discarded."""

from __future__ import annotations

import asyncio
import threading
import time

from bench.harness import Bench, open_session
from bench.stats import Row

MIB = 1024 * 1024


def sample_peak(pid: int, stop: threading.Event, peak: list[int]) -> None:
    from bench.servers import rss_bytes

    while not stop.is_set():
        peak[0] = max(peak[0], rss_bytes(pid))
        time.sleep(0.005)


def docker_exec_flood(container, command: str) -> float:
    started = time.perf_counter()
    result = container.exec_run(["bash", "-c", command], stream=True)
    for _ in result.output:
        pass
    return time.perf_counter() - started


async def run(bench: Bench) -> list[Row]:
    size = bench.scale(1024, 128) * MIB
    command = f"yes | head -c {size}"
    server = bench.start_server("flood", ["Shell"])
    container = await asyncio.to_thread(bench.baseline_container)
    session = await open_session(server.url, "shell")
    try:
        await session.bash("echo warm")
        before, peak, stop = server.rss(), [0], threading.Event()
        sampler = threading.Thread(target=sample_peak, args=(server.pid, stop, peak))
        sampler.start()
        started = time.perf_counter()
        result = (await session.call("bash", command=command, timeout=300)).sse_result()
        seconds = time.perf_counter() - started
        stop.set()
        sampler.join()
        meta = result["output"]["metadata"]
        assert meta["output_bytes"] == size and meta["truncated"], meta
        baseline_s = await asyncio.to_thread(docker_exec_flood, container, command)
    finally:
        await session.delete()
        await asyncio.to_thread(container.remove, force=True)
        await bench.stop(server)
    growth = max(0, peak[0] - before)
    bench.raw["flood"] = {
        "bytes": size,
        "seconds": seconds,
        "rss_before": before,
        "rss_peak": peak[0],
        "docker_exec_seconds": baseline_s,
    }
    part = f"{size // MIB} MiB flood"
    return [
        Row(part, "time to return", f"{seconds:.2f} s", f"docker exec stream {baseline_s:.2f} s"),
        Row(
            part,
            "server memory growth (peak)",
            f"{growth / MIB:.1f} MiB",
            "",
            "≤ 64 MiB",
            growth <= 64 * MIB,
        ),
    ]
