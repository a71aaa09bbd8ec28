"""Bursts of 50 and of 200 creates at once, each followed by one `echo hi` call: time
to that call's answer (p50, p95) and failures; meanwhile `/health` is polled every 10 ms
and an existing session calls `echo hi` back to back (their p99 says whether the server
stays responsive). Baseline, same run, right after each burst: as many `docker run` +
first `docker exec` at once through the docker SDK, with no bound on concurrency. The
server's start limit is its default: measured (`orsbox.sandbox.start_limit`); its
`max_starting` is at least the burst's size."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor

from bench import servers
from bench.client import Connection
from bench.harness import BENCH_LABEL, Bench, Session, open_session
from bench.stats import Row, ms, summary


async def one_create(server: servers.BenchServer) -> tuple[float | None, Session | None]:
    started = time.perf_counter()
    try:
        session = await open_session(server.url, "shell")
        assert await session.bash("echo hi") == "hi\n"
    except Exception as e:  # counted as a failure, and said why
        print(f"   burst create failed: {e}")
        return None, None
    return (time.perf_counter() - started) * 1000, session


async def poll(
    url: str, stop: asyncio.Event, samples: list[float], session: Session | None
) -> None:
    conn = await Connection.open(url)
    try:
        while not stop.is_set():
            started = time.perf_counter()
            if session is None:
                assert (await conn.request("GET", "/health")).status == 200
            else:
                await session.call("bash", command="echo hi")
            samples.append((time.perf_counter() - started) * 1000)
            if session is None:
                await asyncio.sleep(0.01)  # a poll every 10 ms, not a flood
    finally:
        await conn.close()


def docker_burst(bench: Bench, n: int) -> list[float]:
    def one(_: int) -> float:
        started = time.perf_counter()
        container = bench.docker.containers.run(
            bench.image,
            ["sleep", "infinity"],
            detach=True,
            init=True,
            network_mode="none",
            labels={BENCH_LABEL: bench.run_id},
        )
        container.exec_run(["true"])
        return (time.perf_counter() - started) * 1000

    with ThreadPoolExecutor(n) as pool:
        samples = list(pool.map(one, range(n)))
    ids = [c["Id"] for c in bench.containers(**{BENCH_LABEL: bench.run_id})]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda cid: bench.docker.api.remove_container(cid, force=True), ids))
    return samples


async def polled(server: servers.BenchServer, existing: Session, work) -> tuple:
    """Run `work` while /health and the existing session are polled; their latencies."""
    stop, health, calls = asyncio.Event(), [], []
    pollers = [
        asyncio.create_task(poll(server.url, stop, health, None)),
        asyncio.create_task(poll(server.url, stop, calls, existing)),
    ]
    try:
        result = await work()
    finally:
        stop.set()
        await asyncio.gather(*pollers)
    return result, health, calls


async def run(bench: Bench) -> list[Row]:
    out: list[Row] = []
    for n in (bench.scale(50, 10), bench.scale(200, 20)):
        out += await one_burst(bench, n)
    return out


async def one_burst(bench: Bench, n: int) -> list[Row]:
    # max_starting (64 by default; past it /create answers 503 + Retry-After) is raised
    # to the burst's size: this part measures starts, not a client's retry policy.
    settings = {"setup_wait_s": 300, "max_starting": max(64, n)}
    server = bench.start_server(f"burst{n}", ["Shell"], **settings)
    existing = await open_session(server.url, "shell")
    try:
        await existing.bash("echo ready")
        _, quiet_health, quiet_calls = await polled(server, existing, lambda: asyncio.sleep(3))
        outcomes, health, calls = await polled(
            server, existing, lambda: asyncio.gather(*(one_create(server) for _ in range(n)))
        )
        sessions = [s for _, s in outcomes if s is not None]
        await asyncio.gather(*(s.delete() for s in [*sessions, existing]))
    finally:
        await bench.stop(server)
    docker_ms = await asyncio.to_thread(docker_burst, bench, n)
    times = [t for t, _ in outcomes if t is not None]
    quiet = summary(quiet_health), summary(quiet_calls)
    return rows(bench, n, times, health, calls, docker_ms, quiet)


def rows(
    bench: Bench,
    n: int,
    times: list[float],
    health: list[float],
    calls: list[float],
    docker_ms: list[float],
    quiet: tuple[dict, dict],
) -> list[Row]:
    t, h, c, d = summary(times), summary(health), summary(calls), summary(docker_ms)
    bench.raw[f"burst{n}"] = {
        "creates": n,
        "create_to_first_call_ms": t,
        "health_ms": h,
        "existing_session_call_ms": c,
        "docker_run_exec_ms": d,
        "before_burst": {"health_ms": quiet[0], "existing_session_call_ms": quiet[1]},
    }
    failures = n - len(times)
    part = f"burst of {n}"
    return [
        Row(
            part,
            "create -> first call p50 / p95",
            f"{ms(t['p50'])} / {ms(t['p95'])}",
            f"docker run+exec {ms(d['p50'])} / {ms(d['p95'])}",
            "p95 ≤ 1.1 x docker's p95",
            t["p95"] <= 1.1 * d["p95"],
        ),
        Row(part, "failures", f"{failures} of {n}", "", "0", failures == 0),
        Row(
            part,
            "/health p99 meanwhile",
            ms(h["p99"]),
            f"before the burst {ms(quiet[0]['p99'])}",
            "≤ 50 ms",
            h["p99"] <= 50,
        ),
        Row(
            part,
            "existing session's call p50 / p99 meanwhile",
            f"{ms(c['p50'])} / {ms(c['p99'])}",
            f"before the burst {ms(quiet[1]['p50'])} / {ms(quiet[1]['p99'])}",
        ),
    ]
