"""SWE-bench datasets: `python -m bench --parts swebench`.

- create -> first call (`echo hi` in bash) for an instance whose image is present,
  through `orsbox serve swebench:FILE` over HTTP, against a same-run baseline of
  `docker run -d` of the same image (create + start, the CLI's wall time). Target:
  ≤ baseline + 100 ms. Also, interleaved, the same figure for a plain bash environment
  on the same image (`bench.envs.CalcShell`): the difference is the format's own cost
  (finding the repository's starting tree), the rest is orsbox's generic cold start.
- grading overhead: a `submit` call's wall time minus the eval script's own time
  (which the verdict's metadata reports), i.e. killing the agent's processes, taking
  the diff, starting the fresh grading container, applying the patch, parsing and
  judging the log, and removing the container. Target: ≤ 1 s.

The instance images are the test suite's (tests/formats/swebench/images.py), built
locally in the official layout and removed afterwards.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from bench.client import Connection
from bench.harness import BENCH_LABEL, Bench
from bench.stats import Row, ms, summary
from tests.formats.swebench import dataset, images

INSTANCE = "calc__calc-5"


async def _session(url: str, env: str = "calc") -> tuple[Connection, str]:
    conn = await Connection.open(url)
    sid = uuid.uuid4().hex
    task = {"instance_id": INSTANCE} if env == "calc" else {}
    body = {"env_name": env, "task_spec": task}
    r = await conn.request("POST", "/create", body, {"X-Session-ID": sid})
    if r.status != 200:
        raise RuntimeError(f"/create answered {r.status}: {r.body[:200]!r}")
    return conn, sid


async def _call(
    conn: Connection, sid: str, name: str, env: str = "calc", **tool_input: object
) -> dict:
    """One tool call; a 503 (setup still running past the server's wait) is retried."""
    body = {"name": name, "input": tool_input}
    while True:
        response = await conn.request("POST", f"/{env}/call", body, {"X-Session-ID": sid})
        if response.status != 503:
            break
    result = response.sse_result()
    if not result.get("ok"):
        raise RuntimeError(f"{name} failed: {result}")
    return result["output"]


async def create_to_first_call(url: str, env: str = "calc") -> float:
    started = time.perf_counter()
    conn, sid = await _session(url, env)
    out = await _call(conn, sid, "bash", env, command="echo hi")
    elapsed = (time.perf_counter() - started) * 1000
    assert out["blocks"][0]["text"] == "hi\n", out
    await conn.request("POST", "/delete", None, {"X-Session-ID": sid})
    await conn.close()
    return elapsed


async def grading_overhead(url: str) -> tuple[float, float]:
    """(submit wall time, eval script time) in ms, for the gold patch."""
    conn, sid = await _session(url)
    gold = dataset.patches().gold
    await _call(conn, sid, "write_file", path="/tmp/gold.diff", content=gold)
    await _call(conn, sid, "bash", command="cd /testbed && git apply /tmp/gold.diff")
    started = time.perf_counter()
    out = await _call(conn, sid, "submit")
    total = (time.perf_counter() - started) * 1000
    assert out["reward"] == 1.0, out
    await conn.request("POST", "/delete", None, {"X-Session-ID": sid})
    await conn.close()
    return total, out["metadata"]["timings_s"]["eval"] * 1000


def docker_run(run_id: str) -> float:
    started = time.perf_counter()
    done = subprocess.run(
        [
            "docker",
            "run",
            "-d",
            "--init",
            "--network",
            "none",
            "--label",
            f"{BENCH_LABEL}={run_id}",
            images.CALC,
            "sleep",
            "infinity",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    elapsed = (time.perf_counter() - started) * 1000
    subprocess.run(["docker", "rm", "-f", done.stdout.strip()], capture_output=True)
    return elapsed


async def run(bench: Bench) -> list[Row]:
    tags = await asyncio.to_thread(images.build_all)
    folder = Path(tempfile.mkdtemp(prefix="orsbox-bench-swe-"))
    path = dataset.write_jsonl(folder / "calc.jsonl", [dataset.v5_row(images.CALC)])
    server = bench.start_server("swebench", [f"swebench:{path}"])
    plain = bench.start_server("swebench-plain", ["CalcShell"])
    repeats = bench.scale(10, 3)
    created: list[float] = []
    plain_created: list[float] = []
    baseline: list[float] = []
    overhead: list[float] = []
    try:
        await create_to_first_call(server.url)  # warm-up: imports, first docker calls
        await create_to_first_call(plain.url, "calcshell")
        for _ in range(repeats):
            created.append(await create_to_first_call(server.url))
            plain_created.append(await create_to_first_call(plain.url, "calcshell"))
            baseline.append(await asyncio.to_thread(docker_run, bench.run_id))
        for _ in range(bench.scale(5, 2)):
            total, eval_ms = await grading_overhead(server.url)
            overhead.append(total - eval_ms)
    finally:
        await bench.stop(server)
        await bench.stop(plain)
        await asyncio.to_thread(images.remove_all, tags)
        shutil.rmtree(folder, ignore_errors=True)
    stats = {"create": summary(created), "docker_run": summary(baseline)}
    stats["plain_create"] = summary(plain_created)
    stats["grading_overhead"] = summary(overhead)
    bench.raw["swebench"] = {"ms": stats}
    c, b, g = stats["create"], stats["docker_run"], stats["grading_overhead"]
    p = stats["plain_create"]
    return [
        Row(
            "swebench",
            "create -> first call p50 (p95), image present",
            f"{ms(c['p50'])} ({ms(c['p95'])})",
            f"docker run -d {ms(b['p50'])}",
            "≤ docker run + 100 ms",
            c["p50"] <= b["p50"] + 100,
        ),
        Row(
            "swebench",
            "the same, plain bash environment on the same image p50 (p95)",
            f"{ms(p['p50'])} ({ms(p['p95'])})",
            f"SWE-bench format {ms(c['p50'])}",
        ),
        Row(
            "swebench",
            "grading overhead beyond the eval script p50 (p95)",
            f"{ms(g['p50'])} ({ms(g['p95'])})",
            "",
            "≤ 1000 ms",
            g["p50"] <= 1000,
        ),
    ]
