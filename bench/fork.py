"""Fork of 16 from a session with a 50 MB change, against 16 bare `docker run`s.

A source session on the base image writes 50 MB of random bytes (a 50 MB layer for the
commit to copy), then `POST /orsbox/fork` with n = 16; the time is from the request to
the moment all 16 new sessions have answered a first `bash` call (`cat` of the source's
file size), the forks' calls made concurrently as soon as their ids are known. Baseline
in the same run: 16 SDK `docker run -d` + `exec true` at once (the same image, init, no
network), to the last one's end. Each round deletes its forks (their image is removed
with the last one). Target (issue 17): all 16 answering <= 3 s p50."""

from __future__ import annotations

import asyncio
import time

from bench import coldstart
from bench.client import Connection
from bench.harness import Bench, Session, load, open_session
from bench.stats import Row, ms, summary

FORKS = 16
CHANGE = "head -c 50000000 /dev/urandom > /workspace/big && stat -c %s /workspace/big"


async def fork_round(url: str, source: Session) -> tuple[float, float]:
    """(ms to the fork's answer, ms until all forks answered their first call)."""
    conn = await Connection.open(url)
    started = time.perf_counter()
    r = await conn.request("POST", "/orsbox/fork", {"n": FORKS}, {"X-Session-ID": source.sid})
    answered = (time.perf_counter() - started) * 1000
    await conn.close()
    assert r.status == 200, r.body
    sids = r.json()["sids"]
    forks = [Session(await Connection.open(url), sid, source.env) for sid in sids]
    sizes = await asyncio.gather(*(f.bash("stat -c %s /workspace/big") for f in forks))
    elapsed = (time.perf_counter() - started) * 1000
    assert sizes == ["50000000\n"] * FORKS, sizes
    await asyncio.gather(*(f.delete() for f in forks))
    return answered, elapsed


async def docker_round(bench: Bench) -> float:
    started = time.perf_counter()
    await asyncio.gather(*(asyncio.to_thread(coldstart.sdk_run, bench, True) for _ in range(FORKS)))
    return (time.perf_counter() - started) * 1000


async def run(bench: Bench) -> list[Row]:
    repeats = bench.scale(6, 2)
    server = bench.start_server("fork", ["Shell"], max_starting=max(64, FORKS))
    samples: dict[str, list[float]] = {"fork answered": [], "all answering": [], "docker": []}
    loads = [load()]
    try:
        source = await open_session(server.url, "shell")
        assert await source.bash(CHANGE) == "50000000\n"
        await fork_round(server.url, source)  # warm-up
        for _ in range(repeats):
            answered, elapsed = await fork_round(server.url, source)
            samples["fork answered"].append(answered)
            samples["all answering"].append(elapsed)
            samples["docker"].append(await docker_round(bench))
        await source.conn.close()  # idle past the keep-alive: a fresh connection
        source.conn = await Connection.open(server.url)
        assert await source.bash("stat -c %s /workspace/big") == "50000000\n"  # untouched
        await source.delete()
        loads.append(load())
    finally:
        await bench.stop(server)
    stats = {k: summary(v) for k, v in samples.items()}
    bench.raw["fork"] = {"ms": stats, "load": loads}
    every = stats["all answering"]
    baseline = (
        f"16 docker run + exec at once {ms(stats['docker']['p50'])} (load {' -> '.join(loads)})"
    )
    return [
        Row(
            "fork",
            f"fork of {FORKS} (50 MB change): all answering p50 (p95)",
            f"{ms(every['p50'])} ({ms(every['p95'])})",
            baseline,
            "≤ 3 s",
            every["p50"] <= 3000,
        ),
        Row("fork", "fork request answered (commit) p50", ms(stats["fork answered"]["p50"]), ""),
    ]
