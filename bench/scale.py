"""How orsbox's costs grow with live episodes, ramped to this machine's limit:
`python -m bench --parts scale`, or `python -m bench.scale [--steps 100,250] [--svg P]`.

The ramp holds 100, 250, 500, 1,000, then 1,500 and 2,000 live episodes (`STEPS`),
adding each step's new ones to those already live, on one `orsbox serve` of the
bundled `terminal` environment on the main Docker engine (runc). Episodes come in
GRPO groups of 16 (`GROUP`): the sixteen `/create`s of one task at once, the task's
setup cacheable (`[setup] cache = true`, as the bundled folder has it since issue 49;
a copy of it, renamed) so the first episode of a task runs its setup and saves a setup
snapshot, and the others start from it. An episode is live once it answered a call;
then its connection is closed (an idle episode holds none).

At each step, with every live episode idle, then with 10 % of them active:

* memory: the machine's (MemTotal - MemAvailable: everyone's, so noisy on a shared
  machine) and what is accounted to the episodes, which is not: the server's PSS, the
  engine's (dockerd, containerd and the containers' shims, by PSS) and the containers'
  own (cgroup usage less inactive file cache, as `docker stats`). Per episode: the
  growth over the empty (warmed-up) server, divided by the live episodes;
* the server's RSS, fds and threads; dockerd's, containerd's and the shims' fds;
* the time to create the step's new episodes (first `/create` to the last first call);
* calls: 10 % of the live episodes active: first one call each, spread over `PACE_S`
  (the first call after their idle time, which wakes a sleeping guest), then each
  calling `bash` (`true`) every `PACE_S` on its own connection for 15 s, a paced load an agent makes (p50, p99); then
  the same episodes back to back for 5 s, the server's ceiling at that size (calls/s,
  p99); `/health` polled on its own connection meanwhile (p99 of the paced phase);
  the server's full garbage collections during the paced phase (`/metrics`,
  `orsbox_gc_pause_seconds`), each of which holds every call in flight, and how many
  of the paced calls the server itself held past 50 ms (`/metrics`,
  `orsbox_tool_call_duration_seconds`, from a call's arrival to its result, the engine's
  attach path and the guest included): a client p99 past the goal with none held there
  lost its time between the client and the server; and who used the machine's CPU
  during the paced phase (the server, dockerd, the containers' shims, the containers,
  the rest), in % of all its cores.

Baseline, in the same run before the ramp: bare containers of the same image
(`docker run -d --init --network none ... sleep infinity` through the API, labelled),
ramped to the same steps (up to 500: its cost per container is flat, 3.40, 3.42
and 3.48 MiB at 250, 500 and 1,000, and a ramp to 1,000 takes 4 of the 15 minutes),
measured the same way (engine + containers; no server), then removed.

The ramp stops at the first bound: the machine's memory past `MEMORY_BOUND` (also
predicted: a step that would pass it is not started), a paced call p99 or `/health`
p99 past `LATENCY_BOUND_MS`, a failed episode, a host limit `orsbox doctor` checks that
the next step would take past 85 % of its room (pid_max first, here), or the time
budget. The last line names it:
`scale: live=N mem/episode=X MiB p99=Y ms health-p99=Z ms first-limit=WHAT`.
Every container (the episodes', by the server's id; the baseline's, by `orsbox.bench`)
and every setup snapshot is removed at the end, also on Ctrl-C or a failure.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import random
import shutil
import signal
import sys
import tempfile
import time
import tomllib
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench import servers
from bench.client import Connection, metric_samples
from bench.cpu_account import machine_busy
from bench.engine_use import SOCKET, EngineUse, fds, machine_memory_used, pss_bytes, threads
from bench.harness import BENCH_LABEL, Bench, Session
from bench.stats import Row, percentile
from orsbox.sandbox.docker.engine_limits import engine_limits, episode_cost
from orsbox.sandbox.host_limits import first_to_stop, kernel_limits

STEPS = (100, 250, 500, 1000, 1500, 2000)
QUICK_STEPS = (5, 10)
BASELINE_MAX = 500  # the baseline ramp stops here (its per-container cost is flat)
GROUP = 16  # a GRPO group: episodes of one task
TASKS = [("train", 0), ("train", 1), ("test", 0), ("test", 1)]  # terminal's four
ACTIVE = 0.10  # share of live episodes calling during the call phases
PACE_S = 0.5  # an active episode's call period in the paced phase (an agent's pace)
CREATING_AT_ONCE = 48  # episodes in /create..first call at once (max_starting is 64)
MEMORY_BOUND = 0.85
LATENCY_BOUND_MS = 1000.0
HOST_LIMIT_SHARE = 0.85  # a step may use at most this share of a host limit's room
TIME_BUDGET_S = 12 * 60  # baseline and steps; the last step's teardown comes after
DELETE_S = 0.2  # per live episode at the end, to keep the whole run near 15 minutes
MIB = 1024 * 1024
ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SVG = ROOT / "docs" / "operating" / "scale.svg"


@dataclass
class Footprint:
    """Memory and descriptors at one moment; `server` is 0 for the baseline."""

    machine_used: int
    machine_total: int
    server_pss: int
    server_rss: int
    server_fds: int
    server_threads: int
    engine: EngineUse

    @property
    def accounted(self) -> int:
        return self.server_pss + self.engine.engine_memory + self.engine.container_memory


@dataclass
class Step:
    live: int
    added: int = 0
    create_s: float = 0.0
    failures: int = 0
    mem_per_episode_mib: float = math.nan  # accounted growth / live
    machine_per_episode_mib: float = math.nan  # MemAvailable drop / live
    engine_per_episode_mib: float = math.nan
    containers_per_episode_mib: float = math.nan
    server_per_episode_mib: float = math.nan
    server_rss_mib: float = 0.0
    server_fds: int = 0
    server_threads: int = 0
    dockerd_fds: int = 0
    containerd_fds: int = 0
    shim_fds: int = 0
    engine_mib: float = 0.0
    machine_used_share: float = 0.0
    host_tasks: int = 0
    active: int = 0
    # the active episodes' first calls after their idle time (one each): with sleeping
    # guests, the calls that wake them
    first_call_p50_ms: float = math.nan
    first_call_p99_ms: float = math.nan
    paced_calls_per_s: float = 0.0
    call_p50_ms: float = math.nan
    call_p99_ms: float = math.nan
    health_p99_ms: float = math.nan
    ceiling_calls_per_s: float = 0.0
    ceiling_p50_ms: float = math.nan
    ceiling_p99_ms: float = math.nan
    call_errors: int = 0
    seconds: float = 0.0
    # the server's full collections during the paced phase (orsbox_gc_pause_seconds,
    # generation 2): how many and their total; None when /metrics did not say
    gc_full_passes: int | None = None
    gc_full_pause_ms: float | None = None
    # the paced phase's calls as the server timed them (arrival to result): all, and
    # those it held past 50 ms (the p99 goal); None when /metrics did not say
    server_calls: int | None = None
    server_held_over_50ms: int | None = None
    # the paced phase's CPU, in % of all the machine's cores over its wall time: the
    # machine's busy time, and who used it (`CPU_PARTIES`; "rest": the bench's own client,
    # the kernel's threads, anything else running)
    paced_cpu_pct: dict[str, float] | None = None


@dataclass
class BaselineStep:
    live: int
    create_s: float
    mem_per_container_mib: float
    machine_per_container_mib: float
    engine_per_container_mib: float
    containers_per_container_mib: float


@dataclass
class Ramp:
    steps: list[Step] = field(default_factory=list)
    baseline: list[BaselineStep] = field(default_factory=list)
    first_limit: str = ""
    why: str = ""
    # the server's guests sleep after this long idle (DockerConfig.guest_sleep_after_s)
    guest_sleep_after_s: float | None = None


def footprint(container_ids: list[str], server_pid: int | None) -> Footprint:
    used, total = machine_memory_used()
    engine = EngineUse.read(container_ids)
    if server_pid is None:
        return Footprint(used, total, 0, 0, 0, 0, engine)
    return Footprint(
        used,
        total,
        pss_bytes(server_pid),
        servers.rss_bytes(server_pid),
        fds(server_pid),
        threads(server_pid),
        engine,
    )


def host_tasks() -> int:
    with open("/proc/loadavg") as f:
        return int(f.read().split()[3].split("/")[1])


# -- the environment ---------------------------------------------------------------------


def write_environment(folder: Path, name: str) -> Path:
    """The bundled `terminal` environment, copied and renamed (its setup snapshots are
    this run's, removed at the end); its setup is cacheable (checked: the ramp's groups
    start from one setup)."""
    target = folder / "terminal"
    shutil.copytree(ROOT / "environments" / "terminal", target)
    manifest = target / "orsbox.toml"
    text = manifest.read_text()
    if tomllib.loads(text).get("setup", {}).get("cache") is not True:
        raise RuntimeError("the bundled terminal environment's setup is no longer cacheable")
    manifest.write_text(text.replace('name = "terminal"', f'name = "{name}"', 1))
    return target


def remove_setup_snapshots(bench: Bench, env: str) -> int:
    labels = ["orsbox.snapshot=prepared", f"orsbox.environment={env}"]
    images = bench.docker.api.images(filters={"label": labels})
    for image in images:
        with contextlib.suppress(Exception):
            bench.docker.api.remove_image(image["Id"], force=True)
    return len(images)


# -- episodes ----------------------------------------------------------------------------


async def new_episode(url: str, env: str, task: tuple[str, int], gate: asyncio.Semaphore) -> str:
    """`/create` of `task`, then a first call (which waits for the setup); the id."""
    async with gate:
        conn = await Connection.open(url)
        try:
            sid = uuid.uuid4().hex
            body = {"env_name": env, "split": task[0], "index": task[1]}
            r = await conn.request("POST", "/create", body, {"X-Session-ID": sid})
            if r.status != 200:
                raise RuntimeError(f"/create answered {r.status}: {r.body[:200]!r}")
            await Session(conn, sid, env).bash("true")
            return sid
        finally:
            await conn.close()


async def add_episodes(url: str, env: str, first_group: int, count: int) -> tuple[list[str], int]:
    """`count` new live episodes in GRPO groups; (their ids, failures)."""
    gate = asyncio.Semaphore(CREATING_AT_ONCE)
    jobs = [
        new_episode(url, env, TASKS[(first_group + i // GROUP) % len(TASKS)], gate)
        for i in range(count)
    ]
    results = await asyncio.gather(*jobs, return_exceptions=True)
    sids = [r for r in results if isinstance(r, str)]
    errors = [r for r in results if not isinstance(r, str)]
    for error in errors[:3]:
        print(f"scale: an episode failed: {error!r}", file=sys.stderr)
    return sids, len(errors)


async def delete_all(url: str, sids: list[str], at_once: int = 16) -> None:
    async def worker(chunk: list[str]) -> None:
        conn = await Connection.open(url)
        try:
            for sid in chunk:
                await conn.request("POST", "/delete", None, {"X-Session-ID": sid})
        finally:
            await conn.close()

    await asyncio.gather(
        *(worker(sids[i::at_once]) for i in range(at_once)), return_exceptions=True
    )


# -- calls -------------------------------------------------------------------------------


async def caller(
    url: str, env: str, sid: str, until: float, pace_s: float | None, samples: list[float]
) -> int:
    """Call `bash true` until `until`, every `pace_s` (None: back to back); errors."""
    conn = await Connection.open(url)
    session, errors = Session(conn, sid, env), 0
    try:
        if pace_s:
            await asyncio.sleep(random.uniform(0, pace_s))  # spread the phases
        while (now := time.perf_counter()) < until:
            try:
                r = await session.call("bash", command="true")
                ok = r.status == 200 and b'"ok":true' in r.body
            except (OSError, asyncio.IncompleteReadError):
                ok = False
            samples.append((time.perf_counter() - now) * 1000)
            errors += not ok
            if pace_s:
                await asyncio.sleep(max(0.0, now + pace_s - time.perf_counter()))
    finally:
        await conn.close()
    return errors


async def health_poller(url: str, until: float, samples: list[float]) -> None:
    conn = await Connection.open(url)
    try:
        while (now := time.perf_counter()) < until:
            r = await conn.request("GET", "/health")
            samples.append((time.perf_counter() - now) * 1000)
            if r.status != 200:
                samples[-1] = math.inf
            await asyncio.sleep(0.02)
    finally:
        await conn.close()


@dataclass(frozen=True)
class ServerCounts:
    """Counters of the server's `/metrics` that a paced phase is judged by, read before
    and after it: its full (generation 2) collections, (count, seconds); and its tool
    calls, all of them and those it answered within `SERVER_HELD_S` of their arrival
    (`orsbox_tool_call_duration_seconds`, summed over environments). The server's time
    covers the round trip through the engine to the guest (dockerd's attach stream, the
    container's shim) and back; a call the client saw past the goal that the server
    held within it lost its time before the server read it or after it answered (the
    client's own loop, the machine's scheduler)."""

    gc_full: tuple[float, float]
    calls: float
    calls_within: float


SERVER_HELD_S = "0.05"  # a bucket bound of the server's call histogram: the p99 goal


async def server_counts(url: str) -> ServerCounts | None:
    """The counters now; None if the server does not report them."""
    try:
        samples = await metric_samples(url)
    except (RuntimeError, OSError):
        return None
    gc: dict[str, float] = {}
    calls = within = 0.0
    for sample in samples:
        if sample.name.startswith("orsbox_gc_pause_seconds"):
            if sample.labels.get("generation") == "2":
                gc[sample.name] = sample.value
        elif sample.name == "orsbox_tool_call_duration_seconds_bucket":
            bound = sample.labels.get("le")
            calls += sample.value if bound == "+Inf" else 0.0
            within += sample.value if bound == SERVER_HELD_S else 0.0
    if "orsbox_gc_pause_seconds_count" not in gc:
        return None
    passes = (gc["orsbox_gc_pause_seconds_count"], gc["orsbox_gc_pause_seconds_sum"])
    return ServerCounts(passes, calls, within)


CPU_PARTIES = ("server", "dockerd", "shims", "containers")  # servers.cpu_snapshot's


def cpu_now(server_pid: int, container_ids: list[str]) -> dict[str, float]:
    """CPU seconds so far: the machine's busy time, each party's, and the wall clock."""
    busy, wall = machine_busy()
    return {**servers.cpu_snapshot(server_pid, set(container_ids)), "machine": busy, "wall": wall}


def cpu_shares(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """Each party's CPU between two `cpu_now`s, in % of all cores over the wall time
    between them; "rest" is the machine's busy time no party accounts for. The shims'
    share is the containerd shims' own (their forced collection every 30 s, see
    BENCHMARKS.md), which no setting of orsbox's changes."""
    capacity = (after["wall"] - before["wall"]) * (os.cpu_count() or 1) / 100
    used = {key: (after[key] - before[key]) / capacity for key in (*CPU_PARTIES, "machine")}
    used["rest"] = used["machine"] - sum(used[key] for key in CPU_PARTIES)
    return {key: round(value, 1) for key, value in used.items()}


def read_server_counts(step: Step, before: ServerCounts, after: ServerCounts) -> None:
    """What the server did during the phase between `before` and `after`."""
    step.gc_full_passes = round(after.gc_full[0] - before.gc_full[0])
    step.gc_full_pause_ms = round((after.gc_full[1] - before.gc_full[1]) * 1000, 1)
    step.server_calls = round(after.calls - before.calls)
    step.server_held_over_50ms = step.server_calls - round(after.calls_within - before.calls_within)


async def call_phase(
    url: str, env: str, sids: list[str], seconds: float, pace_s: float | None
) -> dict[str, Any]:
    calls: list[float] = []
    health: list[float] = []
    until = time.perf_counter() + seconds
    started = time.perf_counter()
    errors = await asyncio.gather(
        health_poller(url, until, health),
        *(caller(url, env, sid, until, pace_s, calls) for sid in sids),
    )
    elapsed = time.perf_counter() - started
    return {
        "calls_per_s": len(calls) / elapsed,
        "p50": percentile(calls, 50),
        "p99": percentile(calls, 99),
        "health_p99": percentile(health, 99),
        "errors": sum(e for e in errors if e),
    }


# -- the ramp ----------------------------------------------------------------------------


def per_live(now: int, empty: int, live: int) -> float:
    return (now - empty) / live / MIB if live else math.nan


def next_step_blocked(added: int, per_episode_used: float, per_episode_tasks: float) -> str:
    """Why adding `added` episodes would pass a bound, or "" if none: the machine's
    memory (predicted from the cost so far) or a host limit doctor checks."""
    used, total = machine_memory_used()
    if used + added * per_episode_used > MEMORY_BOUND * total:
        return "memory-85%"
    limits = kernel_limits(episode_cost()) + engine_limits(f"unix://{SOCKET}")
    first = first_to_stop(limits)
    if (
        first is not None
        and first.headroom is not None
        and added > HOST_LIMIT_SHARE * first.headroom
    ):
        return first.name.split()[0].replace(".", "-")
    if per_episode_tasks:  # measured, not doctor's constant: the same limit, checked twice
        pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
        if host_tasks() + added * per_episode_tasks > HOST_LIMIT_SHARE * pid_max:
            return "kernel-pid_max"
    return ""


async def baseline_ramp(bench: Bench, steps: list[int], ramp: Ramp) -> None:
    """Bare containers of the same image, ramped to `steps`, measured like the episodes."""
    api = bench.docker.api
    ids: list[str] = []  # appended by the threads as each container is created
    starts = ThreadPoolExecutor(8, thread_name_prefix="bare-run")

    def run_one() -> None:
        config = api.create_host_config(init=True, network_mode="none")
        labels = {BENCH_LABEL: bench.run_id}
        cid = api.create_container(
            bench.image, ["sleep", "infinity"], labels=labels, host_config=config
        )["Id"]
        ids.append(cid)
        api.start(cid)

    empty = await asyncio.to_thread(footprint, [], None)
    try:
        for target in steps:
            started = time.perf_counter()
            jobs = [starts.submit(run_one) for _ in range(target - len(ids))]
            await asyncio.gather(*(asyncio.wrap_future(job) for job in jobs))
            created = time.perf_counter() - started
            await asyncio.sleep(2)  # let the new containers settle
            now = await asyncio.to_thread(footprint, ids, None)
            n = len(ids)
            ramp.baseline.append(
                BaselineStep(
                    n,
                    round(created, 1),
                    per_live(now.accounted, empty.accounted, n),
                    per_live(now.machine_used, empty.machine_used, n),
                    per_live(now.engine.engine_memory, empty.engine.engine_memory, n),
                    now.engine.container_memory / n / MIB,
                )
            )
            print(f"scale: baseline {asdict(ramp.baseline[-1])}", file=sys.stderr, flush=True)
    finally:
        # starts in flight finish first (a cancelled await does not stop its thread)
        await asyncio.to_thread(starts.shutdown, wait=True, cancel_futures=True)
        await remove_containers(bench, ids)


async def remove_containers(bench: Bench, ids: list[str]) -> None:
    gate = asyncio.Semaphore(8)

    async def remove(cid: str) -> None:
        async with gate:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(bench.docker.api.remove_container, cid, force=True)

    await asyncio.gather(*(remove(c) for c in ids))


def container_ids(bench: Bench, server_id: str) -> list[str]:
    listed = bench.containers(**{"orsbox.server": server_id})
    return [c["Id"] for c in listed if c.get("State") == "running"]


async def episode_ramp(
    bench: Bench, steps: list[int], ramp: Ramp, started: float, budget_s: float
) -> None:
    name = f"scale-{bench.run_id}"
    folder = Path(tempfile.mkdtemp(prefix="orsbox-bench-scale-"))
    env_dir = write_environment(folder, name)
    server = start_serve(bench, env_dir, max(steps), ramp.guest_sleep_after_s)
    sids: list[str] = []
    try:
        warm, failed = await add_episodes(server.url, name, 0, len(TASKS) * 2)  # snapshots made
        if failed:
            raise RuntimeError("the warm-up episodes failed: see the server's log")
        await delete_all(server.url, warm)
        await asyncio.sleep(2)
        empty = await asyncio.to_thread(footprint, [], server.pid)
        tasks_empty = host_tasks()
        # the call phases: paced, then ceiling. At 1,000 live a 5 s paced phase was 1,000
        # calls, its p99 the 10th slowest
        seconds = (bench.scale(15, 2), bench.scale(5, 2))
        per_used = per_tasks = 0.0
        group = 0
        for target in steps:
            added = target - len(sids)
            last = ramp.steps[-1] if ramp.steps else None
            rate = last.create_s / max(1, last.added) if last else 0.5
            needs = added * (rate * 1.3 + DELETE_S) + sum(seconds) + 15  # create, calls, delete
            if needs > budget_s - (time.monotonic() - started):
                ramp.first_limit, ramp.why = "time-budget", f"{target} would not fit"
            elif blocked := next_step_blocked(added, per_used, per_tasks):
                ramp.first_limit, ramp.why = blocked, f"before {target}"
            if ramp.first_limit:
                break
            step_started = time.perf_counter()
            print(f"scale: adding {added} episodes", file=sys.stderr, flush=True)
            new, failed = await add_episodes(server.url, name, group, added)
            group += math.ceil(added / GROUP)
            sids += new
            step = Step(len(sids), len(new), round(time.perf_counter() - step_started, 1))
            step.failures = failed
            # settled; and with sleeping guests, every idle one asleep (it sleeps one
            # period after its last call, at the latest two)
            await asyncio.sleep(2 + 2 * (ramp.guest_sleep_after_s or 0))
            await measure_step(bench, server, name, sids, empty, step, seconds)
            step.seconds = round(time.perf_counter() - step_started, 1)
            ramp.steps.append(step)
            per_used = max(step.machine_per_episode_mib, step.mem_per_episode_mib) * MIB
            per_tasks = max(0.0, (step.host_tasks - tasks_empty) / len(sids))
            print(f"scale: step {asdict(step)}", file=sys.stderr, flush=True)
            if failed:
                ramp.first_limit, ramp.why = "episode-failed", f"{failed} at {target}"
            elif step.machine_used_share > MEMORY_BOUND:
                ramp.first_limit, ramp.why = "memory-85%", f"at {target}"
            elif step.call_p99_ms > LATENCY_BOUND_MS:
                ramp.first_limit, ramp.why = "call-p99>1s", f"at {target}"
            elif step.health_p99_ms > LATENCY_BOUND_MS:
                ramp.first_limit, ramp.why = "health-p99>1s", f"at {target}"
            elif step.call_errors:
                ramp.first_limit, ramp.why = "call-errors", f"{step.call_errors} at {target}"
            if ramp.first_limit:
                break
        if not ramp.first_limit:
            ramp.first_limit, ramp.why = "none", f"the ramp's last step ({steps[-1]}) held"
    finally:
        await delete_all(server.url, sids)
        await bench.stop(server)
        await asyncio.to_thread(remove_setup_snapshots, bench, name)
        shutil.rmtree(folder, ignore_errors=True)


async def measure_step(
    bench: Bench,
    server: servers.BenchServer,
    env: str,
    sids: list[str],
    empty: Footprint,
    step: Step,
    seconds: tuple[float, float],  # the paced and the ceiling phase
) -> None:
    ids = await asyncio.to_thread(container_ids, bench, server.server_id)
    now = await asyncio.to_thread(footprint, ids, server.pid)
    live = len(sids)
    step.mem_per_episode_mib = per_live(now.accounted, empty.accounted, live)
    step.machine_per_episode_mib = per_live(now.machine_used, empty.machine_used, live)
    step.engine_per_episode_mib = per_live(
        now.engine.engine_memory, empty.engine.engine_memory, live
    )
    step.containers_per_episode_mib = now.engine.container_memory / live / MIB
    step.server_per_episode_mib = per_live(now.server_pss, empty.server_pss, live)
    step.server_rss_mib = now.server_rss / MIB
    step.server_fds, step.server_threads = now.server_fds, now.server_threads
    step.dockerd_fds, step.containerd_fds = now.engine.dockerd_fds, now.engine.containerd_fds
    step.shim_fds = now.engine.shim_fds
    step.engine_mib = now.engine.engine_memory / MIB
    step.machine_used_share = now.machine_used / now.machine_total
    step.host_tasks = host_tasks()
    active = random.sample(sids, max(1, round(live * ACTIVE)))
    step.active = len(active)
    # each active episode's first call after its idle time, spread over one PACE_S: the
    # call that wakes a sleeping guest (--guest-sleep-after-s); the paced phase after it
    # is the active episodes' steady pace
    first = await call_phase(server.url, env, active, PACE_S, PACE_S)
    step.first_call_p50_ms, step.first_call_p99_ms = first["p50"], first["p99"]
    before = await server_counts(server.url)
    cpu_before = await asyncio.to_thread(cpu_now, server.pid, ids)
    paced = await call_phase(server.url, env, active, seconds[0], PACE_S)
    step.paced_cpu_pct = cpu_shares(cpu_before, await asyncio.to_thread(cpu_now, server.pid, ids))
    if before is not None and (after := await server_counts(server.url)) is not None:
        read_server_counts(step, before, after)
    ceiling = await call_phase(server.url, env, active, seconds[1], None)
    step.paced_calls_per_s = paced["calls_per_s"]
    step.call_p50_ms, step.call_p99_ms = paced["p50"], paced["p99"]
    step.health_p99_ms = paced["health_p99"]
    step.ceiling_calls_per_s = ceiling["calls_per_s"]
    step.ceiling_p50_ms, step.ceiling_p99_ms = ceiling["p50"], ceiling["p99"]
    step.call_errors = first["errors"] + paced["errors"] + ceiling["errors"]


def start_serve(
    bench: Bench, env_dir: Path, most: int, guest_sleep_after_s: float | None = None
) -> servers.BenchServer:
    """`orsbox serve` of the environment, as an operator runs it for this many episodes
    (with `guest_sleep_after_s`, its guests sleep when idle that long)."""
    bench.log_dir.mkdir(parents=True, exist_ok=True)
    port = servers.free_port()
    log_path = bench.log_dir / f"scale-{port}.log"
    argv = ["-m", "orsbox.cli.main", "serve", str(env_dir), "--host", "127.0.0.1"]
    argv += ["--port", str(port), "--log-level", "warning", "--no-build"]
    argv += ["--session-timeout", "3600", "--setup-wait", "600"]
    server_id = f"bench-{bench.run_id}-scale"
    settings: dict[str, object] = {}
    if guest_sleep_after_s is not None:
        backend = {"type": "docker", "guest_sleep_after_s": guest_sleep_after_s}
        settings["backend"] = json.dumps(backend)
    process = servers.spawn_server(
        argv,
        log_path,
        server_id=server_id,
        max_sessions=most + 64,
        episodes_db=bench.log_dir / "episodes-scale.sqlite3",
        **settings,
    )
    server = servers.BenchServer("orsbox", f"http://127.0.0.1:{port}", process, log_path, server_id)
    bench._servers.append(server)
    servers.wait_healthy(server.url, process, log_path, servers.START_TIMEOUT_S)
    return server


# -- the report --------------------------------------------------------------------------


def scale_line(ramp: Ramp) -> str:
    """The line the checks read, for the largest step measured."""
    if not ramp.steps:
        return f"scale: live=0 mem/episode=nan MiB p99=nan ms health-p99=nan ms first-limit={ramp.first_limit}"
    last = ramp.steps[-1]
    return (
        f"scale: live={last.live} mem/episode={last.mem_per_episode_mib:.1f} MiB "
        f"p99={last.call_p99_ms:.1f} ms health-p99={last.health_p99_ms:.1f} ms "
        f"first-limit={ramp.first_limit}"
    )


def baseline_at(ramp: Ramp, live: int) -> BaselineStep | None:
    """The baseline step of the same size, else the largest measured."""
    same = [b for b in ramp.baseline if b.live == live]
    return same[0] if same else (ramp.baseline[-1] if ramp.baseline else None)


def markdown_table(ramp: Ramp) -> str:
    """One row per step, for BENCHMARKS.md."""
    head = [
        "live",
        "create (s)",
        "MiB/episode (server+engine+container)",
        "bare container MiB (same run)",
        "ratio",
        "machine MiB/episode",
        "server RSS MiB",
        "server fds",
        "server threads",
        "dockerd fds",
        "containerd fds",
        "shim fds",
        "engine MiB",
        "active",
        "first call after idle p50 / p99 ms",
        "paced calls/s",
        "call p50 / p99 ms",
        "/health p99 ms",
        "back-to-back calls/s (p99 ms)",
        "full GC passes, paced (ms)",
        "paced calls the server held > 50 ms",
        "paced CPU % of the machine: busy (server / dockerd / shims / containers / rest)",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in ramp.steps:
        base = baseline_at(ramp, s.live)
        bare = base.mem_per_container_mib if base else math.nan
        cells = [
            str(s.live),
            f"{s.create_s:.1f}",
            f"{s.mem_per_episode_mib:.2f}",
            f"{bare:.2f}"
            + ("" if base and base.live == s.live else f" (at {base.live})" if base else ""),
            f"{s.mem_per_episode_mib / bare:.2f}" if bare else "",
            f"{s.machine_per_episode_mib:.1f}",
            f"{s.server_rss_mib:.0f}",
            str(s.server_fds),
            str(s.server_threads),
            str(s.dockerd_fds),
            str(s.containerd_fds),
            str(s.shim_fds),
            f"{s.engine_mib:.0f}",
            str(s.active),
            f"{s.first_call_p50_ms:.1f} / {s.first_call_p99_ms:.1f}",
            f"{s.paced_calls_per_s:.0f}",
            f"{s.call_p50_ms:.1f} / {s.call_p99_ms:.1f}",
            f"{s.health_p99_ms:.1f}",
            f"{s.ceiling_calls_per_s:.0f} ({s.ceiling_p99_ms:.0f})",
            "" if s.gc_full_passes is None else f"{s.gc_full_passes} ({s.gc_full_pause_ms:.0f})",
            ""
            if s.server_held_over_50ms is None
            else f"{s.server_held_over_50ms} of {s.server_calls}",
            cpu_cell(s.paced_cpu_pct),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def cpu_cell(shares: dict[str, float] | None) -> str:
    if shares is None:
        return ""
    parts = " / ".join(f"{shares[key]:.0f}" for key in (*CPU_PARTIES, "rest"))
    return f"{shares['machine']:.0f} ({parts})"


def write_plot(ramp: Ramp, path: Path) -> None:
    """Each cost against live episodes, one panel per unit, as an SVG."""
    from bench.svg_plot import Panel, Series, write_svg

    xs = [float(s.live) for s in ramp.steps]
    bx = [float(b.live) for b in ramp.baseline]

    def series(label: str, values: list[float], x: list[float] | None = None) -> Series:
        return Series(label, list(zip(xs if x is None else x, values, strict=True)))

    steps = ramp.steps
    panels = [
        Panel(
            "memory per episode (MiB)",
            [
                series("orsbox: server+engine+container", [s.mem_per_episode_mib for s in steps]),
                series("bare docker run -d", [b.mem_per_container_mib for b in ramp.baseline], bx),
                series(
                    "orsbox: machine (MemAvailable)", [s.machine_per_episode_mib for s in steps]
                ),
            ],
        ),
        Panel(
            "memory (MiB)",
            [
                series("server RSS", [s.server_rss_mib for s in steps]),
                series("engine (dockerd+containerd+shims)", [s.engine_mib for s in steps]),
            ],
        ),
        Panel(
            "open file descriptors",
            [
                series("server", [float(s.server_fds) for s in steps]),
                series("dockerd", [float(s.dockerd_fds) for s in steps]),
                series("containerd", [float(s.containerd_fds) for s in steps]),
                series("shims", [float(s.shim_fds) for s in steps]),
            ],
        ),
        Panel(
            "latency at 10% active (ms)",
            [
                series("call p50", [s.call_p50_ms for s in steps]),
                series("call p99", [s.call_p99_ms for s in steps]),
                series("/health p99", [s.health_p99_ms for s in steps]),
            ],
        ),
        Panel(
            "calls/s, 10% active",
            [
                series("paced (one per 0.5 s each)", [s.paced_calls_per_s for s in steps]),
                series("back to back", [s.ceiling_calls_per_s for s in steps]),
            ],
        ),
        Panel(
            "time to create the step's episodes (s)",
            [
                series("orsbox (GRPO groups of 16)", [s.create_s for s in steps]),
                series("bare docker run -d", [b.create_s for b in ramp.baseline], bx),
            ],
        ),
    ]
    title = f"orsbox on one host: cost against live episodes (first limit: {ramp.first_limit})"
    path.write_text(write_svg(title, "live episodes", panels))


def rows(ramp: Ramp) -> list[Row]:
    out = []
    for s in ramp.steps:
        base = baseline_at(ramp, s.live)
        bare = base.mem_per_container_mib if base else math.nan
        out.append(
            Row(
                "scale",
                f"{s.live} live: MiB/episode, call p99, /health p99 (10% active)",
                f"{s.mem_per_episode_mib:.2f} MiB, {s.call_p99_ms:.1f} ms, {s.health_p99_ms:.1f} ms",
                f"bare container {bare:.2f} MiB",
                "≤ 1.5 x bare, p99 ≤ 50 ms" if s.live >= 1000 else "",
                (s.mem_per_episode_mib <= 1.5 * bare and s.call_p99_ms <= 50)
                if s.live >= 1000
                else None,
            )
        )
    out.append(Row("scale", "first limit", f"{ramp.first_limit} ({ramp.why})"))
    return out


async def measure(
    bench: Bench,
    steps: list[int],
    baseline: bool = True,
    budget_s: float = TIME_BUDGET_S,
    guest_sleep_after_s: float | None = None,
) -> Ramp:
    """The baseline ramp, then the episodes' ramp; nothing left behind."""
    ramp = Ramp(guest_sleep_after_s=guest_sleep_after_s)
    started = time.monotonic()
    if baseline:
        sizes = [n for n in steps if n <= BASELINE_MAX] or steps[:1]
        await baseline_ramp(bench, sizes, ramp)
    await episode_ramp(bench, steps, ramp, started, budget_s)
    return ramp


def report(bench: Bench, ramp: Ramp, svg: Path | None) -> None:
    bench.raw["scale"] = {
        "steps": [asdict(s) for s in ramp.steps],
        "baseline": [asdict(b) for b in ramp.baseline],
        "first_limit": ramp.first_limit,
        "why": ramp.why,
        "guest_sleep_after_s": ramp.guest_sleep_after_s,
    }
    if ramp.guest_sleep_after_s is not None:
        print(f"(the guests sleep after {ramp.guest_sleep_after_s:g} s idle)")
    print(markdown_table(ramp))
    if svg is not None and ramp.steps:
        write_plot(ramp, svg)
        print(f"plot written to {svg}")
    print(scale_line(ramp), flush=True)


async def run(bench: Bench) -> list[Row]:
    steps = list(QUICK_STEPS if bench.quick else STEPS)
    ramp = await measure(bench, steps)
    report(bench, ramp, None if bench.quick else DEFAULT_SVG)
    return rows(ramp)


def replot(reports: list[Path], svg: Path) -> None:
    """One plot and table of several runs' JSON reports (`--json`), their steps merged by
    live episodes (a later report's step replaces an earlier one of the same size)."""
    steps: dict[int, Step] = {}
    baseline: dict[int, BaselineStep] = {}
    ramp = Ramp()
    for path in reports:
        report = json.loads(path.read_text())
        steps.update({s["live"]: Step(**s) for s in report["steps"]})
        baseline.update({b["live"]: BaselineStep(**b) for b in report["baseline"]})
        ramp.first_limit, ramp.why = report["first_limit"], report["why"]
    ramp.steps = [steps[n] for n in sorted(steps)]
    ramp.baseline = [baseline[n] for n in sorted(baseline)]
    write_plot(ramp, svg)
    print(markdown_table(ramp))
    print(scale_line(ramp))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", default=",".join(map(str, STEPS)), help="live episodes")
    parser.add_argument("--svg", type=Path, default=None, help="write the plot here")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    parser.add_argument("--run-id", default=None, help="labels of this run (tests find them)")
    parser.add_argument("--quick", action="store_true", help="2 s call phases (not 15 and 5)")
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--budget-s", type=float, default=TIME_BUDGET_S, help="ramp time")
    parser.add_argument("--replot", type=Path, nargs="+", help="--json reports: plot, no run")
    parser.add_argument(
        "--guest-sleep-after-s",
        type=float,
        default=None,
        help="the server's guests sleep when idle this long (default: never)",
    )
    args = parser.parse_args()
    if args.replot:
        replot(args.replot, args.svg or DEFAULT_SVG)
        return
    bench = Bench(quick=args.quick)
    if args.run_id is not None:
        bench.run_id = args.run_id
    steps = sorted({int(n) for n in args.steps.split(",") if n})

    interrupted: list[int] = []

    async def go() -> Ramp | None:
        # SIGINT cancels the ramp and is remembered: a step may take the cancellation
        # for an error of its own (a failed episode: the ramp "ends at a bound"), and
        # the task's cancel count is not kept by every library it passes through
        task = asyncio.current_task()
        assert task is not None
        asyncio.get_running_loop().add_signal_handler(
            signal.SIGINT, lambda: (interrupted.append(signal.SIGINT), task.cancel())
        )
        try:
            return await measure(
                bench, steps, not args.no_baseline, args.budget_s, args.guest_sleep_after_s
            )
        except asyncio.CancelledError:
            if not interrupted:
                raise
            return None
        finally:
            await bench.cleanup()

    ramp = asyncio.run(go())
    if interrupted or ramp is None:
        # cleaned up; the ramp did not finish, so it must not exit as though it had
        print("scale: interrupted, everything it started removed", file=sys.stderr)
        sys.exit(130)
    report(bench, ramp, args.svg)
    if args.json is not None:
        args.json.write_text(json.dumps(bench.raw["scale"], indent=2, default=str))


if __name__ == "__main__":
    main()
