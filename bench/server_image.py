"""The server's own image, `orsbox/server:latest` (`orsbox build --server`).

* Start time: `docker run` of the image (engine socket mounted, the bundled
  environments) until `/health` answers 200, against the same `orsbox serve` of the
  same environments as a process on the host, alternating run by run so each pair saw
  the same machine load. Each run is stopped (SIGTERM: sessions end) before the next.
* Size: the image against its base (`orsbox/debian:bookworm`, what the venv sits on).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import docker

from bench import servers
from bench.harness import Bench
from bench.stats import Row, ms, summary
from orsbox.bundle import root_base
from orsbox.cluster.images import SERVER_IMAGE

ROUNDS = 5
START_TIMEOUT_S = 120
MB = 1000 * 1000


def container_start_ms(client: docker.DockerClient) -> float:
    """`docker run` of the image until its /health answers; the container is removed."""
    port = servers.free_port()
    started = time.perf_counter()
    container = client.containers.run(
        SERVER_IMAGE,
        detach=True,
        name=f"orsbox-bench-server-{uuid.uuid4().hex[:8]}",
        volumes={"/var/run/docker.sock": {"bind": "/var/run/docker.sock", "mode": "rw"}},
        ports={"8080/tcp": ("127.0.0.1", port)},
    )
    try:
        wait_for_health(f"http://127.0.0.1:{port}", START_TIMEOUT_S)
        return (time.perf_counter() - started) * 1000
    finally:
        container.remove(force=True)


def process_start_ms(log_dir: Path) -> float:
    """`orsbox serve` of the bundled environments as a host process, until /health."""
    port = servers.free_port()
    log_path = log_dir / f"serve-{port}.log"
    started = time.perf_counter()
    argv = ["-m", "orsbox.cli.main", "serve", "--port", str(port)]
    process = servers.spawn_server(argv, log_path, server_id=f"bench-image-{port}")
    try:
        servers.wait_healthy(f"http://127.0.0.1:{port}", process, log_path, START_TIMEOUT_S)
        return (time.perf_counter() - started) * 1000
    finally:
        servers.stop_process(process)


def wait_for_health(url: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not servers.answers_health(url):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{SERVER_IMAGE} did not answer /health within {timeout_s:g}s")
        time.sleep(0.05)


def measure(bench: Bench) -> tuple[list[float], list[float]]:
    bench.log_dir.mkdir(parents=True, exist_ok=True)
    in_container: list[float] = []
    on_host: list[float] = []
    for _ in range(bench.scale(ROUNDS, 2)):
        in_container.append(container_start_ms(bench.docker))
        on_host.append(process_start_ms(bench.log_dir))
    return in_container, on_host


async def run(bench: Bench) -> list[Row]:
    in_container, on_host = await asyncio.to_thread(measure, bench)
    image = bench.docker.images.get(SERVER_IMAGE).attrs["Size"] / MB
    base = bench.docker.images.get(root_base()).attrs["Size"] / MB
    container, host = summary(in_container), summary(on_host)
    bench.raw["server_image"] = {
        "start_in_container_ms": container,
        "start_as_process_ms": host,
        "image_mb": image,
        "base_mb": base,
    }
    part = "orsbox/server image"
    return [
        Row(
            part,
            "docker run -> /health 200, p50 (max)",
            f"{ms(container['p50'])} ({ms(container['max'])})",
            f"orsbox serve on the host {ms(host['p50'])} ({ms(host['max'])})",
        ),
        Row(part, "image size", f"{image:.0f} MB", f"its base {root_base()}: {base:.0f} MB"),
    ]
