"""Where the CPU of one bash call goes at 32 sessions (issue 36): by process, and inside
the server by what its code is doing.

Two phases on one server of the `Shell` environment, 32 sessions calling `echo hi` back
to back (as `throughput`):

1. **Unprofiled**: calls/s and CPU ms per call of each party on the call path (the
   server, dockerd, the containerd shims, the containers, this client), read from
   /proc and the containers' cgroups (`servers.cpu_snapshot`).
2. **Profiled**: the same load while `py-spy` samples the server's on-CPU threads
   (`--nonblocking`: the server is never paused; py-spy's own CPU is its own process).
   Each sample is put in one bucket by the innermost frame of a named component (the
   standard library's frames count to their caller: `transport.write` from the SSE
   response is the SSE response's), and the buckets' shares are applied to phase 1's
   server CPU per call.

The baseline in the same run: the whole machine's CPU per call (both cores / calls/s),
the ceiling it puts on calls/s, and what 2,000 calls/s would allow per call."""

from __future__ import annotations

import asyncio
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import servers
from bench.harness import Bench, Session, open_session
from bench.stats import Row
from bench.throughput import level

SESSIONS = 32
TARGET_CALLS_PER_S = 2000
SAMPLE_RATE_HZ = 200

# Buckets by the source file of a frame (the first match, innermost frame first). The
# standard library is not a bucket: its time counts to the component that called it.
BUCKETS: tuple[tuple[str, str], ...] = (
    ("HTTP/1.1 parsing and writing (uvicorn, httptools)", r"(^|/)uvicorn/|(^|/)httptools/"),
    ("our HTTP protocol bounds (orsbox/server/http_protocol.py)", r"orsbox/server/http_protocol"),
    ("SSE response (orsbox/protocol, event_stream.py)", r"orsbox/protocol/|event_stream"),
    ("call fast path (orsbox/server/fast_path.py)", r"orsbox/server/fast_path"),
    ("recording, metering, logs (orsbox/monitoring)", r"orsbox/monitoring/"),
    ("metrics (prometheus_client)", r"(^|/)prometheus_client/"),
    ("sessions, tools, environments (rest of orsbox/)", r"orsbox/(server|authoring)/"),
    ("guest channel: framing, JSON, the exec stream", r"orsbox/sandbox/"),
    ("Starlette and FastAPI (routing, middleware)", r"(^|/)starlette/|(^|/)fastapi/"),
    ("pydantic", r"(^|/)pydantic"),
    ("docker SDK and its HTTP client", r"(^|/)docker/|(^|/)requests/|(^|/)urllib3/"),
    (EVENT_LOOP := "the event loop (uvloop, asyncio)", r"(^|/)uvloop/"),
)
OTHER = "other (threads, the rest)"
# The standard library's files (py-spy's --full-filenames): not site-packages
STDLIB = re.compile(r"/lib/python3\.\d+/(?!site-packages/)")
FRAME = re.compile(r"^(?P<function>.*) \((?P<file>[^()]*?)(?::\d+)?\)$")


def bucket_of(stack: list[str]) -> str:
    """The bucket of one sample's stack (outermost frame first, as py-spy writes it): the
    innermost frame outside the standard library that a bucket names; the event loop's
    where only the loop and the standard library are on the stack."""
    files = [m["file"] for m in map(FRAME.match, stack) if m is not None]
    for path in reversed(files):
        if STDLIB.search(path):
            continue
        for name, pattern in BUCKETS:
            if re.search(pattern, path):
                return name
    return EVENT_LOOP if any("/asyncio/" in path for path in files) else OTHER


def shares(folded: str) -> tuple[dict[str, float], list[tuple[str, int]]]:
    """Bucket shares of py-spy's raw (folded) output, and the leaf functions with the
    most samples (self time)."""
    buckets: collections.Counter[str] = collections.Counter()
    leaves: collections.Counter[str] = collections.Counter()
    for line in folded.splitlines():
        stack_text, _, count_text = line.rpartition(" ")
        if not stack_text or not count_text.isdigit():
            continue
        frames = stack_text.split(";")[2:]  # after "process ..." and "thread ..."
        count = int(count_text)
        buckets[bucket_of(frames)] += count
        if frames:
            leaves[frames[-1]] += count
    total = sum(buckets.values()) or 1
    return {name: n / total for name, n in buckets.items()}, leaves.most_common(12)


async def profiled(
    server: servers.BenchServer, sessions: list[Session], seconds: float, ids: set[str]
) -> tuple[dict, str]:
    """`level()` while py-spy records the server; its folded samples."""
    with tempfile.TemporaryDirectory(prefix="orsbox-cpu-account-") as folder:
        out = Path(folder) / "server.folded"
        command = ["py-spy", "record", "--pid", str(server.pid), "--nonblocking"]
        command += ["--full-filenames", "--rate", str(SAMPLE_RATE_HZ)]
        command += ["--duration", str(int(seconds) + 1), "--format", "raw", "--output", str(out)]
        spy = subprocess.Popen(
            command,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        await asyncio.sleep(0.5)  # py-spy attached
        result = await level(server, sessions, seconds, ids)
        _, err = await asyncio.to_thread(spy.communicate)
        if spy.returncode != 0 or not out.exists():
            raise RuntimeError(f"py-spy failed: {err[-2000:]}")
        return result, out.read_text()


def machine_busy() -> tuple[float, float]:
    """CPU seconds the whole machine has spent busy, and wall time now."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK"), time.monotonic()


async def run(bench: Bench) -> list[Row]:
    if shutil.which("py-spy") is None:  # the profiler is the bench's, not orsbox's
        return [Row("cpu_account", "skipped", "py-spy not found: pip install 'py-spy>=0.4,<0.5'")]
    seconds = bench.scale(10, 3)
    server = bench.start_server("cpu-account", ["Shell"], setup_wait_s=120)
    sessions = await asyncio.gather(*(open_session(server.url, "shell") for _ in range(SESSIONS)))
    try:
        await asyncio.gather(*(s.bash("echo ready") for s in sessions))
        ids = {c["Id"] for c in bench.containers(**{"orsbox.server": server.server_id})}
        await level(server, sessions, 1.0, ids)  # warm-up
        busy_before = machine_busy()
        plain = await level(server, sessions, seconds, ids)
        busy_after = machine_busy()
        spied, folded = await profiled(server, sessions, seconds, ids)
    finally:
        await asyncio.gather(*(s.delete() for s in sessions), return_exceptions=True)
        await bench.stop(server)
    bucket_shares, leaves = shares(folded)
    machine_ms = (busy_after[0] - busy_before[0]) / (busy_after[1] - busy_before[1])
    machine_ms = machine_ms / plain["calls_per_s"] * 1000
    bench.raw["cpu_account"] = {
        "unprofiled": plain,
        "profiled": spied,
        "machine_cpu_ms_per_call": machine_ms,
        "server_buckets": bucket_shares,
        "server_leaves": leaves,
    }
    return rows(plain, machine_ms, bucket_shares)


def rows(plain: dict, machine_ms: float, bucket_shares: dict[str, float]) -> list[Row]:
    per_call = plain["cpu_ms_per_call"]
    parties = ", ".join(f"{k} {v:.2f}" for k, v in per_call.items())
    cores = 2 * 1000 / TARGET_CALLS_PER_S
    out = [
        Row(
            "cpu_account",
            f"{SESSIONS} sessions: calls/s; machine CPU ms per call",
            f"{plain['calls_per_s']:.0f}/s; {machine_ms:.2f} ms",
            f"{TARGET_CALLS_PER_S}/s on 2 cores allows {cores:.2f} ms",
        ),
        Row("cpu_account", "CPU ms per call by party", parties),
    ]
    server_ms = per_call["server"]
    for name, share in sorted(bucket_shares.items(), key=lambda kv: -kv[1]):
        out.append(
            Row("cpu_account", f"server: {name}", f"{share * server_ms:.3f} ms ({share:.0%})")
        )
    return out


async def main() -> None:
    bench = Bench(quick="--quick" in sys.argv)
    try:
        result = await run(bench)
    finally:
        await bench.cleanup()
    for row in result:
        print(" | ".join(row.cells()[:4]))
    leaves = bench.raw["cpu_account"]["server_leaves"]
    print("\nserver leaf functions (samples):")
    for frame, n in leaves:
        print(f"  {n:6d}  {frame}")


if __name__ == "__main__":
    asyncio.run(main())
