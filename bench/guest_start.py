"""The guest's start, through the sandbox API (`DockerBackend`) on the main engine: the
payload bytes sent per sandbox start and per `exec(user=...)`, cold start (start +
`shell("true")`) and a `user=` exec (`exec(["true"], user="nobody")`), p50 and p95.

    PYTHONPATH=<a checkout> python bench/guest_start.py [SAMPLES] [--image IMAGE]

A script, not a part of `python -m bench`: it uses only what every orsbox since the
guest's loader has (`DockerBackend`, `GuestChannel.send_raw`), so the same file measures
an older checkout put first on PYTHONPATH (BENCHMARKS.md, "The guest as a package").
Bytes are counted where the host writes anything outside the guest's framing
(`send_raw`: the payload); the first `user=` exec of a sandbox is reported apart (after
the change it asks the main guest to keep its copy). Prints one JSON object."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time

from orsbox.sandbox import SandboxSpec
from orsbox.sandbox.docker import DockerBackend
from orsbox.sandbox.guest.channel import GuestChannel

SENT: list[int] = []


def count_raw_bytes() -> None:
    original = GuestChannel.send_raw

    async def counted(self: GuestChannel, data: bytes) -> None:
        SENT.append(len(data))
        await original(self, data)

    GuestChannel.send_raw = counted  # type: ignore[method-assign]


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"p50": round(statistics.median(ordered), 2), "p95": round(p95, 2), "n": len(values)}


async def measure(samples: int, image: str) -> dict[str, object]:
    count_raw_bytes()
    backend = DockerBackend(server_id=f"bench-guest-start-{os.getpid()}")
    cold: list[float] = []
    first_user: list[float] = []
    user: list[float] = []
    start_bytes: list[int] = []
    user_bytes: list[int] = []
    try:
        for round_ in range(samples + 1):  # the first round warms up (imports, engine)
            SENT.clear()
            started = time.perf_counter()
            sandbox = await backend.start(SandboxSpec(image=image, session_id="bench-guest"))
            await sandbox.shell("true")
            cold_ms = (time.perf_counter() - started) * 1000
            sent_at_start = sum(SENT)
            try:
                times = []
                for _ in range(4):
                    began = time.perf_counter()
                    result = await sandbox.exec(["true"], user="nobody")
                    times.append((time.perf_counter() - began) * 1000)
                    assert result.exit_code == 0, result
            finally:
                await sandbox.close()
            if round_:
                cold.append(cold_ms)
                first_user.append(times[0])
                user += times[1:]
                start_bytes.append(sent_at_start)
                user_bytes.append((sum(SENT) - sent_at_start) // 4)
    finally:
        await backend.close()
    return {
        "load": os.getloadavg(),
        "payload_bytes_per_start": max(start_bytes),
        "payload_bytes_per_user_exec": max(user_bytes),
        "cold_start_ms": summary(cold),
        "first_user_exec_ms": summary(first_user),
        "user_exec_ms": summary(user),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("samples", type=int, nargs="?", default=10)
    parser.add_argument("--image", default="orsbox/base:latest")
    args = parser.parse_args()
    print(json.dumps(asyncio.run(measure(args.samples, args.image))))


if __name__ == "__main__":
    main()
