"""`python -m bench.soak [--minutes 10] [--workers 8] [--runtime runsc]`: a bounded soak of
a real server (`--runtime runsc`: sandboxes under gVisor, on the private engine of
scripts/start-runsc-engine.sh, `ORSBOX_RUNSC_SOCKET`).

Workers run episodes back to back, all at once. Most episodes are normal: a few bash,
python and file calls whose exact output is checked. One in `HOSTILE_EVERY` is hostile:
a fork bomb, a memory bomb, a 200 MB flood, a sleep past its timeout, a thousand
zombies, a disk fill, orphans, binary output, or `kill -9 -1` of everything the sandbox
user owns (the agent included). One in `ABANDON_EVERY` is never deleted: the server's
inactivity reaper has to clean it up. `--only KIND` makes every episode that hostile
one (e.g. `--only fork_bomb --runtime runsc`, the removals after gVisor's fork bombs:
docs/gvisor.md). Every `--sample` seconds the soak records the server's RSS and open
file descriptors, its live containers, and the calls so far.
A request that fails or waits past `SLOW_STEP_S` is noted (`failure_notes`,
`slow_steps`) with what it was, its session (whose id names its hostile command) and
when it started: a hang is found by these, not guessed from the samples.

The figures that must stay flat are compared idle to idle: once after a warm-up, once
at the end, each time after every session (abandoned ones too) is gone. The run fails
(exit 1) when a normal call failed, a container outlived the run, open descriptors grew
by more than `FD_SLACK` or RSS by more than `RSS_SLACK_MIB`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import docker
import httpx

from bench.servers import free_port, rss_bytes, spawn_server, stop_process, wait_healthy

HOSTILE_EVERY = 4
ABANDON_EVERY = 10
FD_SLACK = 10
RSS_SLACK_MIB = 64
SESSION_TIMEOUT_S = 8
DRAIN_TIMEOUT_S = 60
MIB = 1024**2
RUN_STARTED = time.monotonic()  # a failed or slow request says when it started, from here
SLOW_STEP_S = 20.0  # past every tool's own timeout (at most 10 s here) and a create's usual

HOSTILE = {  # name -> (tool, input); each must leave the server and other sessions fine
    "fork_bomb": ("bash", {"command": ":(){ :|:& };:; sleep 5", "timeout": 3}),
    "memory_bomb": ("python", {"code": "x = []\nwhile True: x.append(bytearray(2**24))"}),
    "flood": ("bash", {"command": "yes | head -c 200M", "timeout": 30}),
    "sleeper": ("bash", {"command": "sleep 1e9", "timeout": 2}),
    "zombies": ("bash", {"command": "for i in $(seq 1000); do sh -c 'true & exit'; done"}),
    "disk_fill": ("bash", {"command": "head -c 100M /dev/zero > /var/tmp/fill"}),
    "orphans": ("bash", {"command": "for i in 1 2 3; do setsid sleep 900 & done"}),
    "binary": ("bash", {"command": "head -c 1M /dev/urandom"}),
    "kill_all": ("bash", {"command": "kill -9 -1"}),
}


@dataclass
class Sample:
    t_s: float
    rss_mib: float
    fds: int
    containers: int
    calls: int
    failures: int


@dataclass
class Tally:
    normal_calls: int = 0
    hostile_calls: int = 0
    failures: int = 0
    episodes: int = 0
    abandoned: int = 0
    failure_notes: list[str] = field(default_factory=list)
    slow_steps: list[str] = field(default_factory=list)

    def fail(self, note: str) -> None:
        self.failures += 1
        if len(self.failure_notes) < 20:
            self.failure_notes.append(note)

    def slow(self, note: str) -> None:
        if len(self.slow_steps) < 20:
            self.slow_steps.append(note)


# -- the server under test ---------------------------------------------------------------


class SoakServer:
    """`orsbox serve bench/soak_env.py:Soak` in a subprocess, as an operator runs it."""

    def __init__(self, log_dir: Path, runtime: str = "runc") -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server_id = f"soak-{uuid.uuid4().hex[:10]}"
        settings = {
            "SERVER_ID": self.server_id,
            "SESSION_TIMEOUT_S": SESSION_TIMEOUT_S,
            "REAP_INTERVAL_S": 1,
            "SETUP_WAIT_S": 120,
        }
        engine = None
        if runtime != "runc":
            engine = "unix://" + os.environ.get("ORSBOX_RUNSC_SOCKET", "/var/run/orsbox-runsc.sock")
            backend = {"type": "docker", "engine": engine, "runtime": runtime}
            settings["BACKEND"] = json.dumps(backend)
        self.log_path = log_dir / f"soak-server-{self.port}.log"
        command = ["-m", "orsbox.cli.main", "serve", "bench/soak_env.py:Soak"]
        argv = [*command, "--port", str(self.port), "--log-level", "warning"]
        # the engine first: one not running fails here, before a server is left behind
        self.docker = (
            docker.DockerClient(base_url=engine, timeout=60)
            if engine
            else docker.from_env(timeout=60)
        )
        self.process = spawn_server(argv, self.log_path, **settings)

    async def wait_healthy(self) -> None:
        await asyncio.to_thread(wait_healthy, self.url, self.process, self.log_path, 60)

    def fds(self) -> int:
        return len(os.listdir(f"/proc/{self.process.pid}/fd"))

    def rss_mib(self) -> float:
        return rss_bytes(self.process.pid) / MIB

    def containers(self) -> int:
        labels = {"label": ["orsbox=1", f"orsbox.server={self.server_id}"]}
        return len(self.docker.api.containers(all=True, filters=labels))

    def stop(self) -> int:
        """SIGTERM and wait (graceful: sessions and containers torn down)."""
        return stop_process(self.process, timeout_s=120)


# -- episodes ----------------------------------------------------------------------------


class StepFailed(Exception):
    """An HTTP error with the request it cut short (see `step`)."""


@contextmanager
def step(what: str, sid: str, tally: Tally) -> Iterator[None]:
    """One request of an episode. One that fails, or takes longer than `SLOW_STEP_S`,
    is told by what it was, its session, when it started in the run and how long it
    waited: a hung call is found by these, the server's log being at warnings."""
    started, wall = time.monotonic(), time.strftime("%H:%M:%S")

    def told(how: str) -> str:
        waited, at = time.monotonic() - started, started - RUN_STARTED
        return f"{how} after {waited:.1f} s: {what} in {sid}, from +{at:.1f} s ({wall})"

    try:
        yield
    except httpx.HTTPError as e:
        raise StepFailed(told(f"HTTP {type(e).__name__}")) from e
    if time.monotonic() - started > SLOW_STEP_S:
        tally.slow(told("answered"))


async def call(
    client: httpx.AsyncClient, sid: str, name: str, tool_input: dict, tally: Tally
) -> dict:
    """One tool call; the parsed final result, or {"error": ...} for an error event."""
    body = {"name": name, "input": tool_input}
    headers = {"X-Session-ID": sid}
    events, event, data = [], None, []
    with step(f"call {name} {json.dumps(tool_input)}"[:300], sid, tally):
        async with client.stream("POST", "/soak/call", json=body, headers=headers) as response:
            if response.status_code != 200:
                detail = (await response.aread()).decode()
                return {"http": response.status_code, "detail": detail}
            async for line in response.aiter_lines():
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: "):
                    data.append(line[6:])
                elif not line and event is not None:
                    events.append((event, "\n".join(data)))
                    event, data = None, []
    if events and events[-1][0] == "error":
        return {"error": events[-1][1]}
    if not events or events[-1][0] != "end":
        return {"broken_stream": events}
    return json.loads("".join(d for e, d in events if e in ("chunk", "end")))


def text_of(result: dict) -> str | None:
    if result.get("ok") is not True:
        return None
    return result["output"]["blocks"][0]["text"]


async def normal_calls(client: httpx.AsyncClient, sid: str, tally: Tally) -> None:
    token = uuid.uuid4().hex
    checks = [
        ("bash", {"command": f"echo {token}"}, f"{token}\n"),
        ("bash", {"command": f"cd /tmp && export T={token}"}, "(no output)"),
        ("bash", {"command": "echo $T $PWD"}, f"{token} /tmp\n"),
        ("python", {"code": "print(6 * 7)"}, "42\n"),
        ("write_file", {"path": "/workspace/t.txt", "content": token}, None),
        ("read_file", {"path": "/workspace/t.txt"}, token),
    ]
    for name, tool_input, expected in checks:
        result = await call(client, sid, name, tool_input, tally)
        tally.normal_calls += 1
        got = text_of(result)
        if got is None or (expected is not None and got != expected):
            tally.fail(f"{name} {tool_input}: expected {expected!r}, got {result!r}"[:500])


async def hostile_call(client: httpx.AsyncClient, sid: str, tally: Tally, kind: str) -> bool:
    """Run one hostile command; True when the sandbox should still be usable."""
    name, tool_input = HOSTILE[kind]
    result = await call(client, sid, name, tool_input, tally)
    tally.hostile_calls += 1
    if "http" in result or "broken_stream" in result:  # the server itself misbehaved
        tally.fail(f"hostile {kind}: {result!r}"[:500])
    if kind == "kill_all":
        return False
    # bash reports the jobs a timeout killed ("Killed ...") with the next command, as a
    # terminal would: that call's output is not checked, the ones after it are
    await call(client, sid, "bash", {"command": "true"}, tally)
    return True


async def episode(
    client: httpx.AsyncClient, n: int, tally: Tally, rng: random.Random, only: str | None = None
) -> None:
    """One episode; `only`: every episode runs that hostile command (`--only`)."""
    hostile = only or (rng.choice(sorted(HOSTILE)) if n % HOSTILE_EVERY == 0 else None)
    sid = f"soak-{n}-{hostile or 'normal'}-{uuid.uuid4().hex[:8]}"  # in every note and log
    headers = {"X-Session-ID": sid}
    with step("create", sid, tally):
        created = await client.post(
            "/create", headers=headers, json={"env_name": "soak", "task_spec": {}}
        )
    if created.status_code != 200:
        tally.fail(f"create: {created.status_code} {created.text[:200]}")
        return
    tally.episodes += 1
    usable = True
    if hostile is not None:
        usable = await hostile_call(client, sid, tally, hostile)
    if usable:
        await normal_calls(client, sid, tally)
    if n % ABANDON_EVERY == 0:
        tally.abandoned += 1  # left for the reaper
        return
    with step("delete", sid, tally):
        await client.post("/delete", headers=headers)


# -- the run -----------------------------------------------------------------------------


async def work(
    url: str, workers: int, seconds: float, tally: Tally, start_n: int, only: str | None = None
) -> int:
    """Episodes back to back in `workers` lanes until `seconds` pass; returns the next n."""
    deadline = time.monotonic() + seconds
    counter = iter(range(start_n, 10**9))
    limits = httpx.Limits(max_connections=workers * 2, max_keepalive_connections=workers * 2)

    async def lane(seed: int) -> None:
        rng = random.Random(seed)
        async with httpx.AsyncClient(base_url=url, timeout=180, limits=limits) as client:
            while time.monotonic() < deadline:
                try:
                    await episode(client, next(counter), tally, rng, only)
                except StepFailed as e:
                    tally.fail(str(e)[:500])

    await asyncio.gather(*(lane(start_n + i) for i in range(workers)))
    return next(counter)


async def sample_forever(
    server: SoakServer, tally: Tally, every_s: float, into: list[Sample]
) -> None:
    started = time.monotonic()
    while True:
        containers = await asyncio.to_thread(server.containers)
        into.append(
            Sample(
                t_s=round(time.monotonic() - started, 1),
                rss_mib=round(server.rss_mib(), 1),
                fds=server.fds(),
                containers=containers,
                calls=tally.normal_calls + tally.hostile_calls,
                failures=tally.failures,
            )
        )
        print(_row(into[-1]), flush=True)
        await asyncio.sleep(every_s)


async def idle_figures(server: SoakServer) -> dict[str, float]:
    """Wait until no container is live (reaper included); then fds and RSS."""
    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    while await asyncio.to_thread(server.containers) and time.monotonic() < deadline:
        await asyncio.sleep(0.5)
    await asyncio.sleep(2)  # let connections close and results expire from view
    containers = await asyncio.to_thread(server.containers)
    return {"fds": server.fds(), "rss_mib": round(server.rss_mib(), 1), "containers": containers}


async def soak(
    seconds: float,
    workers: int,
    sample_s: float,
    log_dir: Path,
    runtime: str = "runc",
    only: str | None = None,
) -> dict[str, Any]:
    server = SoakServer(log_dir, runtime)
    samples: list[Sample] = []
    tally = Tally()
    try:
        await server.wait_healthy()
        sampler = asyncio.create_task(sample_forever(server, tally, sample_s, samples))
        warmup_s = min(max(seconds * 0.1, 15.0), 60.0)
        n = await work(server.url, workers, warmup_s, tally, 0, only)
        baseline = await idle_figures(server)
        print(f"-- idle after warm-up: {baseline}", flush=True)
        started = time.monotonic()
        await work(server.url, workers, seconds - warmup_s, tally, n, only)
        run_s = time.monotonic() - started + warmup_s
        end = await idle_figures(server)
        print(f"-- idle at the end:    {end}", flush=True)
        sampler.cancel()
    finally:
        exit_code = server.stop()
    left = await asyncio.to_thread(server.containers)
    report = {
        "duration_s": round(run_s, 1),
        "workers": workers,
        "only": only,
        **asdict(tally),
        "idle_after_warmup": baseline,
        "idle_at_end": end,
        "fd_growth": end["fds"] - baseline["fds"],
        "rss_growth_mib": round(end["rss_mib"] - baseline["rss_mib"], 1),
        "containers_left_after_stop": left,
        "server_exit_code": exit_code,
        "samples": [asdict(s) for s in samples],
    }
    report["problems"] = problems(report)
    return report


def problems(report: dict[str, Any]) -> list[str]:
    found = []
    if report["failures"]:
        found.append(f"{report['failures']} failed calls")
    if report["containers_left_after_stop"] or report["idle_at_end"]["containers"]:
        found.append("containers left behind")
    if report["fd_growth"] > FD_SLACK:
        found.append(f"open descriptors grew by {report['fd_growth']} (bound {FD_SLACK})")
    if report["rss_growth_mib"] > RSS_SLACK_MIB:
        found.append(f"RSS grew by {report['rss_growth_mib']} MiB (bound {RSS_SLACK_MIB})")
    return found


def _row(s: Sample) -> str:
    return (
        f"{s.t_s:8.1f}s  rss {s.rss_mib:7.1f} MiB  fds {s.fds:5d}  containers {s.containers:3d}"
        f"  calls {s.calls:6d}  failures {s.failures}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.soak", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--sample", type=float, default=10.0, help="seconds between samples")
    parser.add_argument("--json", type=Path, help="write the report here")
    parser.add_argument("--log-dir", type=Path, default=Path("/tmp"))
    parser.add_argument("--runtime", default="runc", help="runc, or runsc (gVisor)")
    parser.add_argument(
        "--only", choices=sorted(HOSTILE), help="every episode runs this hostile command"
    )
    args = parser.parse_args(argv)
    run = soak(args.minutes * 60, args.workers, args.sample, args.log_dir, args.runtime, args.only)
    report = asyncio.run(run)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    summary = {k: v for k, v in report.items() if k != "samples"}
    print(json.dumps(summary, indent=1))
    return 1 if report["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
