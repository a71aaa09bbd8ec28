"""What a storage bound (`SandboxLimits.writable_layer_bytes`, Harbor's `storage_mb`)
costs per call: the agent's `echo hi` round trip on a sandbox with a bound (the engine
measures the writable layer after calls, off their path) against one without, in interleaved
blocks on the same image so both see the same machine load. The layer holds a few
thousand small files, since the engine's measure walks them."""

from __future__ import annotations

from bench.harness import Bench
from bench.roundtrip import timed
from bench.stats import Row, ms, summary
from orsbox.sandbox import SandboxLimits, SandboxSpec
from orsbox.sandbox.docker import DockerBackend

ROUNDS = 4
FILES = "mkdir -p /tmp/many && for i in $(seq 2000); do echo $i > /tmp/many/$i; done"


async def run(bench: Bench) -> list[Row]:
    calls = bench.scale(200, 40)
    backend = DockerBackend(server_id=f"bench-{bench.run_id}-storage")
    limits = SandboxLimits(writable_layer_bytes=1 << 30, privileges="docker-default")
    try:
        plain = await backend.start(SandboxSpec(image=bench.image, session_id="plain"))
        bound = await backend.start(
            SandboxSpec(image=bench.image, limits=limits, session_id="bound")
        )
        for sandbox in (plain, bound):
            await sandbox.shell(FILES)
        without, with_bound = [], []
        for _ in range(ROUNDS):
            await timed(without, lambda: plain.shell("echo hi"), calls)
            await timed(with_bound, lambda: bound.shell("echo hi"), calls)
    finally:
        await backend.close()
    return rows(bench, summary(with_bound), summary(without))


def rows(bench: Bench, bound: dict, plain: dict) -> list[Row]:
    bench.raw["storage_bound"] = {"bound_ms": bound, "plain_ms": plain}
    part = "storage bound"
    return [
        Row(part, "agent echo hi p50", ms(bound["p50"]), f"no bound {ms(plain['p50'])}"),
        Row(part, "agent echo hi p99", ms(bound["p99"]), f"no bound {ms(plain['p99'])}"),
    ]
