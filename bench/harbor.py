"""A Harbor task's `/create` -> first call completed, against `docker run -d` of the
same image in the same run (issue 11's target: within 100 ms of it).

The task is a Harbor folder written here (`FROM ubuntu:24.04`, mapped onto the local
Debian base as a user without a registry would), its image built first with orsbox's
builder, so the figure is the cost of serving a task whose image is built: the create
request, setup (starting the sandbox with the task's limits, user and workdir) and one
`echo hi`. The baseline is `containers.run(image, detach=True)` through the docker SDK,
alternated with the orsbox samples so both see the same load. The image is removed at
the end."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
import time
import uuid
from pathlib import Path

from bench.client import Connection
from bench.harness import BENCH_LABEL, Bench, Session
from bench.stats import Row, ms, summary

IMAGE_MAP = "ubuntu:24.04=orsbox/debian:bookworm"
TARGET_MARGIN_MS = 100.0
TASK = "bench-task"


def write_task(root: Path) -> Path:
    folder = root / TASK
    (folder / "environment").mkdir(parents=True)
    (folder / "tests").mkdir()
    (folder / "task.toml").write_text(
        '[agent]\ntimeout_sec = 600\n[environment]\nnetwork_mode = "no-network"\n'
        'cpus = 1\nmemory_mb = 1024\nworkdir = "/app"\n'
    )
    (folder / "instruction.md").write_text("Say hi.\n")
    (folder / "environment" / "Dockerfile").write_text("FROM ubuntu:24.04\nWORKDIR /app\n")
    (folder / "tests" / "test.sh").write_text("#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n")
    return folder


def build(folder: Path) -> str:
    """Build the task's image with orsbox's builder; return its tag."""
    from orsbox.formats import FormatOptions
    from orsbox.formats.harbor import load
    from orsbox.sandbox.config import with_backend
    from orsbox.sandbox.image_map import ImageMap
    from orsbox.sandbox.images import ensure_built

    (env_cls,) = load(folder, FormatOptions(image_map=ImageMap.parse([IMAGE_MAP])))
    (recipe,) = env_cls.image_recipes()  # type: ignore[attr-defined]
    with_backend(None, lambda backend: ensure_built(backend.images, recipe, lambda line: None))
    return recipe.tag


async def create_to_first_call(url: str, env: str) -> float:
    started = time.perf_counter()
    conn = await Connection.open(url)
    sid = uuid.uuid4().hex
    body = {"env_name": env, "task_spec": {"name": TASK}}
    r = await conn.request("POST", "/create", body, {"X-Session-ID": sid})
    if r.status != 200:
        await conn.close()
        raise RuntimeError(f"/create answered {r.status}: {r.body[:200]!r}")
    session = Session(conn, sid, env)
    assert await session.bash("echo hi") == "hi\n"
    elapsed = (time.perf_counter() - started) * 1000
    await session.delete()
    return elapsed


def docker_run(bench: Bench, image: str) -> float:
    """`docker run -d` of the image, timed; the container is removed afterwards."""
    started = time.perf_counter()
    container = bench.docker.containers.run(
        image, ["sleep", "infinity"], detach=True, init=True, network_mode="none",
        labels={BENCH_LABEL: bench.run_id},
    )  # fmt: skip
    elapsed = (time.perf_counter() - started) * 1000
    container.remove(force=True)
    return elapsed


async def run(bench: Bench) -> list[Row]:
    repeats = bench.scale(12, 3)
    root = Path(tempfile.mkdtemp(prefix="orsbox-bench-harbor-"))
    folder = write_task(root)
    image = await asyncio.to_thread(build, folder)
    server = bench.start_server("harbor", [f"harbor:{folder}"], image_map=IMAGE_MAP)
    samples: dict[str, list[float]] = {"orsbox": [], "docker": []}
    try:
        await create_to_first_call(server.url, TASK)  # warm-up
        await asyncio.to_thread(docker_run, bench, image)
        for _ in range(repeats):
            samples["orsbox"].append(await create_to_first_call(server.url, TASK))
            samples["docker"].append(await asyncio.to_thread(docker_run, bench, image))
    finally:
        await bench.stop(server)
        with contextlib.suppress(Exception):
            bench.docker.images.remove(image)
        shutil.rmtree(root, ignore_errors=True)
    stats = {name: summary(values) for name, values in samples.items()}
    bench.raw["harbor"] = {"create_to_first_call_ms": stats}
    o, d = stats["orsbox"], stats["docker"]
    return [
        Row(
            "harbor",
            "Harbor task (image built): create -> first call p50 (p95)",
            f"{ms(o['p50'])} ({ms(o['p95'])})",
            f"docker run -d {ms(d['p50'])} ({ms(d['p95'])})",
            f"≤ docker run + {TARGET_MARGIN_MS:g} ms",
            o["p50"] <= d["p50"] + TARGET_MARGIN_MS,
        )
    ]
