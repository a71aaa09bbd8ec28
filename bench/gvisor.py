"""runc vs runsc (gVisor) in the same run, on one engine that offers both (the private
engine of scripts/start-runsc-engine.sh, `ORSBOX_RUNSC_SOCKET`), so the runtime is
the only difference:

  - bash `echo hi` round trip through orsbox end to end (HTTP, SSE, session, agent),
    one server per runtime, in interleaved blocks so both see the same load, and the
    agent alone (a sandbox's shell called in-process, no HTTP);
  - the baselines: a bare `docker exec bash -c 'echo hi'` per call, and `echo hi` on a
    bash kept open over one exec socket (what the runtime itself adds to a round trip,
    with no orsbox in the way);
  - `/create` -> first call completed;
  - memory per idle sandbox: the container's cgroup (rss + mapped files; under gVisor
    that holds the Sentry and gofer, gVisor's own cost) and the server's growth.

The target: orsbox under runsc within 1 ms (p50) of orsbox under runc plus what gVisor
adds to the bare round trip (persistent bash over an exec socket), same run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import time
from pathlib import Path
from typing import Any

import docker

from bench.create import create_to_first_call
from bench.harness import BENCH_LABEL, Bench, open_session
from bench.roundtrip import docker_execs, timed
from bench.stats import Row, ms, summary
from orsbox.sandbox import SandboxSpec
from orsbox.sandbox.docker import DockerBackend
from orsbox.sandbox.docker.config import DockerConfig

RUNTIMES = ("runc", "runsc")
ENGINE = "unix://" + os.environ.get("ORSBOX_RUNSC_SOCKET", "/var/run/orsbox-runsc.sock")
ROUNDS = 4
MEMORY_CGROUP = Path("/sys/fs/cgroup/memory/docker")  # cgroup v1, as on this machine
MIB = 1024 * 1024


def backend_setting(runtime: str) -> str:
    return json.dumps({"type": "docker", "engine": ENGINE, "runtime": runtime})


def baseline_container(client: docker.DockerClient, image: str, runtime: str, run_id: str) -> Any:
    return client.containers.run(
        image, ["sleep", "infinity"], detach=True, init=True, network_mode="none",
        runtime=runtime, labels={BENCH_LABEL: run_id},
    )  # fmt: skip


def open_pipe(client: docker.DockerClient, container: Any) -> socket.socket:
    """A bash kept open on one attached exec socket."""
    api = client.api
    exec_id = api.exec_create(container.id, ["bash"], stdin=True)["Id"]
    raw = api.exec_start(exec_id, socket=True)
    return raw._sock  # type: ignore[no-any-return]


def pipe_round_trips(sock: socket.socket, n: int) -> list[float]:
    """`echo hi` on the open bash: write the line, read docker's 8-byte frame header
    and the 3 bytes of output."""
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        sock.sendall(b"echo hi\n")
        got = b""
        while len(got) < 11:
            chunk = sock.recv(64)
            if not chunk:
                raise RuntimeError("the bash exec closed")
            got += chunk
        samples.append((time.perf_counter() - started) * 1000)
        assert got.endswith(b"hi\n"), got
    return samples


def idle_memory(container_ids: list[str]) -> float:
    """Mean rss + mapped files of the containers' memory cgroups, in bytes."""
    total = 0
    for cid in container_ids:
        stat = dict(
            line.split() for line in (MEMORY_CGROUP / cid / "memory.stat").read_text().splitlines()
        )
        total += int(stat["total_rss"]) + int(stat["total_mapped_file"])
    return total / max(len(container_ids), 1)


async def run(bench: Bench) -> list[Row]:
    calls, execs = bench.scale(400, 60), bench.scale(20, 5)
    creates, idle_n = bench.scale(8, 2), bench.scale(10, 3)
    client = docker.DockerClient(base_url=ENGINE, timeout=120)
    found: dict[str, dict[str, Any]] = {
        r: {"e2e": [], "exec": [], "pipe": [], "agent": []} for r in RUNTIMES
    }
    made: list[Any] = []
    made_backends: list[DockerBackend] = []
    try:
        svs = {
            r: bench.start_server(f"gvisor-{r}", ["Shell"], backend=backend_setting(r))
            for r in RUNTIMES
        }
        sessions = {r: await open_session(svs[r].url, "shell") for r in RUNTIMES}
        boxes = {r: baseline_container(client, bench.image, r, bench.run_id) for r in RUNTIMES}
        made += boxes.values()
        pipes = {r: open_pipe(client, boxes[r]) for r in RUNTIMES}
        direct = {r: direct_backend(bench, r) for r in RUNTIMES}
        made_backends.extend(direct.values())
        agents = {
            r: await direct[r].start(SandboxSpec(image=bench.image, session_id="direct"))
            for r in RUNTIMES
        }
        for r in RUNTIMES:  # warm-up
            await timed([], lambda r=r: sessions[r].call("bash", command="echo hi"), 100)
            pipe_round_trips(pipes[r], 50)
        for _ in range(ROUNDS):
            for r in RUNTIMES:
                call = lambda r=r: sessions[r].call("bash", command="echo hi")  # noqa: E731
                await timed(found[r]["e2e"], call, calls)
                await timed(found[r]["agent"], lambda r=r: agents[r].shell("echo hi"), calls)
                found[r]["pipe"] += await asyncio.to_thread(pipe_round_trips, pipes[r], calls)
                found[r]["exec"] += await asyncio.to_thread(docker_execs, boxes[r], execs)
        for r in RUNTIMES:
            found[r]["create"] = [await create_to_first_call(svs[r]) for _ in range(creates)]
            await sessions[r].delete()
        for r in RUNTIMES:
            held = [await open_session(svs[r].url, "shell") for _ in range(idle_n)]
            for session in held:
                await session.bash("true")
            ids = [c["Id"] for c in bench_containers(client, svs[r].server_id)]
            found[r]["idle_bytes"] = await asyncio.to_thread(idle_memory, ids)
            for session in held:
                await session.delete()
    finally:
        for backend in made_backends:
            await backend.close()
        for box in made:
            with contextlib.suppress(docker.errors.APIError):
                box.remove(force=True)
        client.close()
    return rows(bench, found)


def direct_backend(bench: Bench, runtime: str) -> DockerBackend:
    config = DockerConfig(engine=ENGINE, runtime=runtime)
    return DockerBackend(f"bench-{bench.run_id}-direct-{runtime}", config=config)


def bench_containers(client: docker.DockerClient, server_id: str) -> list[dict[str, Any]]:
    return client.api.containers(filters={"label": f"orsbox.server={server_id}"})


def rows(bench: Bench, found: dict[str, dict[str, Any]]) -> list[Row]:
    kinds = ("e2e", "agent", "exec", "pipe", "create")
    s = {r: {k: summary(found[r][k]) for k in kinds} for r in RUNTIMES}
    bench.raw["gvisor"] = {r: {**s[r], "idle_mib": found[r]["idle_bytes"] / MIB} for r in RUNTIMES}
    runc, runsc = s["runc"], s["runsc"]
    gvisor_adds = runsc["pipe"]["p50"] - runc["pipe"]["p50"]
    allowed = runc["e2e"]["p50"] + gvisor_adds + 1.0
    part = "gVisor (runsc) vs runc"
    return [
        Row(
            part, "bash round trip p50, runsc",
            ms(runsc["e2e"]["p50"]),
            f"runc {ms(runc['e2e']['p50'])} + gVisor's {ms(gvisor_adds)} (bare pipe)",
            f"≤ {ms(allowed)} (+1 ms)", runsc["e2e"]["p50"] <= allowed,
        ),
        Row(
            part, "bash round trip p99, runc / runsc",
            f"{ms(runc['e2e']['p99'])} / {ms(runsc['e2e']['p99'])}",
        ),
        Row(
            part, "the agent alone (in-process, no HTTP) p50, runc / runsc",
            f"{ms(runc['agent']['p50'])} / {ms(runsc['agent']['p50'])}",
        ),
        Row(
            part, "bare bash pipe over an exec p50, runc / runsc",
            f"{ms(runc['pipe']['p50'])} / {ms(runsc['pipe']['p50'])}",
        ),
        Row(
            part, "bare docker exec p50, runc / runsc",
            f"{ms(runc['exec']['p50'])} / {ms(runsc['exec']['p50'])}",
        ),
        Row(
            part, "create -> first call p50, runc / runsc",
            f"{ms(runc['create']['p50'])} / {ms(runsc['create']['p50'])}",
        ),
        Row(
            part, "memory per idle sandbox (cgroup rss+mapped), runc / runsc",
            f"{found['runc']['idle_bytes'] / MIB:.1f} / {found['runsc']['idle_bytes'] / MIB:.1f} MiB",
        ),
    ]  # fmt: skip
