"""A GRPO group's reset: 16 sessions of one task at once, with and without the setup
snapshot, on the bundled `terminal` environment (issue 49).

TRL's `GRPOTrainer` resets every rollout of a group on the same task, each a session of
its own: 16 `/create`s of one task at once, each followed by its first call. Measured,
in the same run and on the same server, for two copies of `environments/terminal`
that differ only in `[setup] cache`:

* no snapshot: every session runs the setup (copy the scripts in, build the task's
  files);
* snapshot, first group of a task: one session runs the setup and saves it, the rest
  wait for it, then start from the snapshot;
* snapshot, a later group of the same task: every session starts from the snapshot.

A group's reset time is from the first `/create` to the last first call answered (what
the trainer waits for before it can generate); each session's own create -> first call
is kept too. Groups alternate: for each task, no snapshot, snapshot (first), snapshot
(later), no snapshot. The saved states are removed at the end."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
import uuid
from pathlib import Path

from bench.client import Connection
from bench.harness import Bench, Session, load
from bench.prepared import remove_saved_states
from bench.stats import Row, ms, summary

TERMINAL = Path(__file__).resolve().parent.parent / "environments" / "terminal"
GROUP = 16
TASKS = [("train", 0), ("train", 1), ("test", 0), ("test", 1)]


def write_copy(root: Path, name: str, cache: bool) -> Path:
    """`environments/terminal` under another name, its setup cached or not."""
    folder = root / name
    shutil.copytree(TERMINAL, folder)
    manifest = folder / "orsbox.toml"
    text = manifest.read_text().replace('name = "terminal"', f'name = "{name}"', 1)
    text = text.replace("\ncache = true\n", "\n")  # whatever the bundled one says
    if cache:
        text = text.replace("\n[setup]\n", "\n[setup]\ncache = true\n", 1)
    manifest.write_text(text)
    return folder


async def one(url: str, env: str, split: str, index: int) -> tuple[float, Session]:
    """`/create` of the task -> its first call answered, in ms; the live session."""
    conn = await Connection.open(url)
    sid = uuid.uuid4().hex
    started = time.perf_counter()
    body = {"env_name": env, "split": split, "index": index}
    r = await conn.request("POST", "/create", body, {"X-Session-ID": sid})
    assert r.status == 200, r.body
    session = Session(conn, sid, env)
    listing = await session.bash("ls /workspace")
    assert listing.strip(), f"{env}: the task's files are not there"  # the setup's work
    return (time.perf_counter() - started) * 1000, session


async def group(url: str, env: str, split: str, index: int) -> tuple[float, list[float]]:
    """One group of `GROUP`: its reset time and each session's, in ms."""
    started = time.perf_counter()
    done = await asyncio.gather(*(one(url, env, split, index) for _ in range(GROUP)))
    elapsed = (time.perf_counter() - started) * 1000
    await asyncio.gather(*(session.delete() for _, session in done))
    return elapsed, [t for t, _ in done]


async def run(bench: Bench) -> list[Row]:
    tasks = TASKS[: bench.scale(len(TASKS), 1)]
    plain, cached = f"bench-term-{bench.run_id}", f"bench-term-cached-{bench.run_id}"
    root = Path(tempfile.mkdtemp(prefix="orsbox-bench-grpo-"))
    folders = [write_copy(root, plain, False), write_copy(root, cached, True)]
    server = bench.start_server(
        "grpo", [str(f) for f in folders], max_sessions=4 * GROUP, setup_wait_s=600
    )
    kinds = ("no snapshot", "snapshot, first group", "snapshot, later group")
    groups: dict[str, list[float]] = {k: [] for k in kinds}
    sessions: dict[str, list[float]] = {k: [] for k in kinds}
    loads = [load()]
    try:
        await group(server.url, plain, *tasks[0])  # warm-up: images, the server's paths
        for split, index in tasks:
            for kind, env in (
                ("no snapshot", plain),
                ("snapshot, first group", cached),
                ("snapshot, later group", cached),
                ("no snapshot", plain),
            ):
                elapsed, each = await group(server.url, env, split, index)
                groups[kind].append(elapsed)
                sessions[kind].extend(each)
        loads.append(load())
    finally:
        await bench.stop(server)
        await asyncio.to_thread(remove_saved_states, bench, cached)
        shutil.rmtree(root, ignore_errors=True)
    stats = {k: {"group": summary(groups[k]), "session": summary(sessions[k])} for k in kinds}
    bench.raw["grpo_group"] = {"group_size": GROUP, "ms": stats, "load": loads}
    base = stats["no snapshot"]["group"]["p50"]
    baseline = f"no snapshot {ms(base)} (load {' -> '.join(loads)})"
    return [
        Row(
            "grpo_group",
            f"group of {GROUP}, {kind}: reset p50 (session p50)",
            f"{ms(stats[kind]['group']['p50'])} ({ms(stats[kind]['session']['p50'])})",
            baseline,
        )
        for kind in kinds
    ]
