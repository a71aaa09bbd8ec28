"""What every benchmark part shares: its servers, the Docker client, sessions, cleanup.

Servers get ids `bench-<run>-<name>`, and baseline containers the label
`orsbox.bench=<run>`, so cleanup removes exactly what this run started, even after a
crash half-way (it runs in a `finally`)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker

from bench import servers
from bench.client import Connection, Response
from orsbox.sandbox.docker import BASE_IMAGE

BENCH_LABEL = "orsbox.bench"


@dataclass
class Session:
    """One episode on a server, with its own keep-alive connection."""

    conn: Connection
    sid: str
    env: str

    async def call(self, name: str, **tool_input: Any) -> Response:
        body = {"name": name, "input": tool_input}
        return await self.conn.request(
            "POST", f"/{self.env}/call", body, {"X-Session-ID": self.sid}
        )

    async def bash(self, command: str) -> str:
        """Run a command; raise unless the call succeeded."""
        result = (await self.call("bash", command=command)).sse_result()
        if not result.get("ok"):
            raise RuntimeError(f"bash failed: {result}")
        return result["output"]["blocks"][0]["text"]

    async def delete(self) -> None:
        await self.conn.request("POST", "/delete", None, {"X-Session-ID": self.sid})
        await self.conn.close()


async def open_session(url: str, env: str) -> Session:
    """POST /create on a fresh connection; the session may still be in setup."""
    conn = await Connection.open(url)
    sid = uuid.uuid4().hex
    body = {"env_name": env, "task_spec": {}}
    r = await conn.request("POST", "/create", body, {"X-Session-ID": sid})
    if r.status != 200:
        await conn.close()
        raise RuntimeError(f"/create answered {r.status}: {r.body[:200]!r}")
    return Session(conn, sid, env)


def default_log_dir() -> Path:
    """Where a run's servers write their logs and episodes: `$ORSBOX_BENCH_LOG_DIR`
    (the tests point it into their own temporary folder, so they leave nothing in
    /tmp), else /tmp/orsbox-bench-PID, kept for a person to read after the run."""
    configured = os.environ.get("ORSBOX_BENCH_LOG_DIR")
    return Path(configured) if configured else Path("/tmp") / f"orsbox-bench-{os.getpid()}"


@dataclass
class Bench:
    quick: bool = False
    run_id: str = field(default_factory=lambda: secrets.token_hex(4))
    log_dir: Path = field(default_factory=lambda: default_log_dir())
    image: str = BASE_IMAGE
    raw: dict[str, Any] = field(default_factory=dict)
    _servers: list[servers.BenchServer] = field(default_factory=list)
    _docker: docker.DockerClient | None = None

    @property
    def docker(self) -> docker.DockerClient:
        if self._docker is None:
            self._docker = docker.from_env(timeout=120, max_pool_size=100)
        return self._docker

    def scale(self, full: int, quick: int) -> int:
        return quick if self.quick else full

    def start_server(self, name: str, envs: list[str], **settings: Any) -> servers.BenchServer:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        settings.setdefault("server_id", f"bench-{self.run_id}-{name}")
        # servers record episodes as by default, into the run's folder, not the user's
        settings.setdefault("episodes_db", self.log_dir / f"episodes-{name}.sqlite3")
        server = servers.start("orsbox", envs, self.log_dir, **settings)
        self._servers.append(server)
        return server

    def start_ors_server(self) -> servers.BenchServer:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        server = servers.start("ors", [], self.log_dir)
        self._servers.append(server)
        return server

    async def stop(self, server: servers.BenchServer) -> None:
        await asyncio.to_thread(server.stop)
        with contextlib.suppress(ValueError):
            self._servers.remove(server)

    def baseline_container(self) -> Any:
        """A plain container of the sandbox image, for `docker exec` baselines."""
        return self.docker.containers.run(
            self.image,
            ["sleep", "infinity"],
            detach=True,
            init=True,
            network_mode="none",
            labels={BENCH_LABEL: self.run_id},
        )

    def containers(self, **labels: str) -> list[dict[str, Any]]:
        """Containers with these labels, as the engine lists them (no inspect per
        container: one may disappear between the list and the inspect)."""
        filters = [f"{k}={v}" for k, v in labels.items()]
        return self.docker.api.containers(all=True, filters={"label": filters})

    async def cleanup(self) -> None:
        """Stop every server (they remove their containers); remove what is left."""
        for server in list(self._servers):
            await self.stop(server)
        left = self.containers(**{BENCH_LABEL: self.run_id})
        left += [
            c
            for c in self.containers(orsbox="1")
            if (c.get("Labels") or {}).get("orsbox.server", "").startswith(f"bench-{self.run_id}-")
        ]
        for container in left:
            with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
                self.docker.api.remove_container(container["Id"], force=True)
        if self._docker is not None:
            self._docker.close()


def load() -> str:
    """The 1, 5 and 15 minute load averages."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


async def wait_for(predicate: Any, timeout_s: float, interval_s: float = 0.05) -> None:
    deadline = time.monotonic() + timeout_s
    while not await asyncio.to_thread(predicate):
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met in time")
        await asyncio.sleep(interval_s)
