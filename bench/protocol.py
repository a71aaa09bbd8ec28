"""Protocol overhead: a trivial tool (`Echo`, answers its input) on orsbox vs the same
environment class on the ors-sdk reference server (`ors.Server`), both under uvicorn
with the same options, driven by the same lean client in interleaved blocks."""

from __future__ import annotations

from bench import servers
from bench.harness import Bench, open_session
from bench.roundtrip import timed
from bench.stats import Row, ms, summary

ROUNDS = 4


async def measure(server: servers.BenchServer, calls: int) -> tuple[list[float], float]:
    """Latencies of `calls` echo calls on one session, and the server's CPU for them."""
    session = await open_session(server.url, "echo")
    try:

        async def echo() -> None:
            result = (await session.call("echo", text="hi")).sse_result()
            assert result["ok"], result

        await timed([], echo, 20)
        samples: list[float] = []
        before = servers.cpu_seconds(server.pid)
        await timed(samples, echo, calls)
        return samples, servers.cpu_seconds(server.pid) - before
    finally:
        await session.delete()


async def run(bench: Bench) -> list[Row]:
    calls = bench.scale(1000, 200)
    ours, reference = bench.start_server("protocol", ["Echo"]), bench.start_ors_server()
    results = {"orsbox": ([], 0.0), "ors-sdk": ([], 0.0)}
    try:
        for _ in range(ROUNDS):
            for name, server in (("orsbox", ours), ("ors-sdk", reference)):
                samples, cpu = await measure(server, calls)
                results[name][0].extend(samples)
                results[name] = (results[name][0], results[name][1] + cpu)
    finally:
        await bench.stop(ours)
        await bench.stop(reference)
    return rows(bench, results)


def rows(bench: Bench, results: dict[str, tuple[list[float], float]]) -> list[Row]:
    stats = {name: summary(samples) for name, (samples, _) in results.items()}
    cpu = {name: cpu_s / len(samples) * 1000 for name, (samples, cpu_s) in results.items()}
    bench.raw["protocol"] = {"latency_ms": stats, "server_cpu_ms_per_call": cpu}
    ours, ref = stats["orsbox"], stats["ors-sdk"]
    part = "trivial tool"
    return [
        Row(
            part,
            "round trip p50",
            ms(ours["p50"]),
            f"ors-sdk {ms(ref['p50'])}",
            "≤ ors-sdk",
            ours["p50"] <= ref["p50"],
        ),
        Row(
            part,
            "round trip p99",
            ms(ours["p99"]),
            f"ors-sdk {ms(ref['p99'])}",
            "≤ ors-sdk",
            ours["p99"] <= ref["p99"],
        ),
        Row(
            part,
            "server CPU per call",
            ms(cpu["orsbox"]),
            f"ors-sdk {ms(cpu['ors-sdk'])}",
            "≤ ors-sdk",
            cpu["orsbox"] <= cpu["ors-sdk"],
        ),
    ]
