"""Process creation under gVisor (issue 23): the loop that leaves 1000 short-lived
orphans, `for i in $(seq 1000); do (sleep 0 &); done`, under runc, runsc on systrap
(`runsc`) and runsc on ptrace (`runsc-ptrace`), timed two ways in interleaved rounds so
every runtime and way sees the same load:

  - through orsbox's agent: one call of a session's bash tool, end to end (HTTP, SSE,
    the agent's shell), one server per runtime;
  - through a bare `docker exec bash -c` on a plain container of the same image (no
    orsbox at all): the runtime's own cost.

Their difference is what orsbox's agent adds. All runtimes are on one engine, the
private runsc engine (`ORSBOX_RUNSC_SOCKET`, default /var/run/orsbox-runsc.sock), so
the runtime is the only difference.

Needs that engine started by scripts/start-runsc-engine.sh as of this part (it
registers `runsc-ptrace`, runsc with `--platform=ptrace`, beside `runsc` on systrap).
An engine started by an older script keeps the runtimes it started with: the ptrace
rows then say it is missing; restart that engine with the script (when nothing else
uses it), or start a private one beside it (the script's header says how) and point
`ORSBOX_RUNSC_SOCKET` at it."""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

import docker

from bench.client import Connection
from bench.gvisor import ENGINE, backend_setting
from bench.harness import Bench, Session, open_session
from bench.stats import Row

RUNTIMES = ("runc", "runsc", "runsc-ptrace")
PLATFORM = {"runc": "runc", "runsc": "runsc systrap", "runsc-ptrace": "runsc ptrace"}
ORPHANS = 1000
LOOP = f"for i in $(seq {ORPHANS}); do (sleep 0 &); done; echo done"
CALL_TIMEOUT_S = 600  # systrap takes ~40 s on a loaded 2-core machine


async def run(bench: Bench) -> list[Row]:
    rounds = bench.scale(3, 1)
    client = docker.DockerClient(base_url=ENGINE, timeout=CALL_TIMEOUT_S)
    offered = set(client.info().get("Runtimes", {}))
    runtimes = [r for r in RUNTIMES if r in offered]
    found: dict[str, dict[str, list[float]]] = {r: {"agent": [], "exec": []} for r in runtimes}
    boxes: list[Any] = []
    try:
        sessions, urls = {}, {}
        for r in runtimes:
            server = bench.start_server(f"orphans-{r}", ["Shell"], backend=backend_setting(r))
            urls[r] = server.url
            sessions[r] = await open_session(server.url, "shell")
            await sessions[r].bash("true")  # the sandbox is up before the clock starts
            await sessions[r].conn.close()
            boxes.append(session_container(client, sessions[r].sid))
        for _ in range(rounds):
            for r, box in zip(runtimes, boxes, strict=True):
                found[r]["agent"].append(await through_agent(urls[r], sessions[r]))
                found[r]["exec"].append(await asyncio.to_thread(through_exec, client, box))
        for r, session in sessions.items():
            await (await reopened(urls[r], session)).delete()
    finally:
        client.close()
    bench.raw["orphans"] = {"seconds": found, "offered": sorted(offered)}
    return [row(r, found.get(r)) for r in RUNTIMES]


def session_container(client: docker.DockerClient, sid: str) -> Any:
    """The container orsbox started for session `sid` (its owner labels)."""
    found = client.containers.list(filters={"label": f"orsbox.session={sid}"})
    if len(found) != 1:
        raise RuntimeError(f"expected one container for session {sid}, found {len(found)}")
    return found[0]


async def reopened(url: str, session: Session) -> Session:
    """The session on a fresh connection: its own has been idle longer than the server
    keeps one open (uvicorn: 5 s) while the other runtimes ran."""
    return Session(await Connection.open(url), session.sid, session.env)


async def through_agent(url: str, session: Session) -> float:
    call = await reopened(url, session)
    try:
        started = time.perf_counter()
        result = (await call.call("bash", command=LOOP, timeout=CALL_TIMEOUT_S)).sse_result()
        elapsed = time.perf_counter() - started
    finally:
        await call.conn.close()
    if not result.get("ok") or "done" not in result["output"]["blocks"][0]["text"]:
        raise RuntimeError(f"the orphan loop failed through the agent: {result}")
    return elapsed


def through_exec(client: docker.DockerClient, box: Any) -> float:
    started = time.perf_counter()
    exec_id = client.api.exec_create(box.id, ["bash", "-c", LOOP])["Id"]
    output = client.api.exec_start(exec_id)
    elapsed = time.perf_counter() - started
    if client.api.exec_inspect(exec_id)["ExitCode"] != 0 or b"done" not in output:
        raise RuntimeError(f"the orphan loop failed through docker exec: {output[-200:]!r}")
    return elapsed


def row(runtime: str, seconds: dict[str, list[float]] | None) -> Row:
    part = f"{ORPHANS} orphans, {PLATFORM[runtime]}"
    if seconds is None:
        missing = f"the engine at {ENGINE} has no {runtime} runtime"
        return Row(part, "through the agent", "not measured", missing + " (see bench/orphans.py)")
    agent, bare = seconds["agent"], seconds["exec"]
    return Row(
        part,
        "through the agent (bash tool), median (min-max)",
        spread(agent),
        f"bare docker exec {spread(bare)}; the agent's part "
        f"{statistics.median(agent) - statistics.median(bare):+.1f} s",
    )


def spread(samples: list[float]) -> str:
    return f"{statistics.median(samples):.1f} s ({min(samples):.1f}-{max(samples):.1f})"
