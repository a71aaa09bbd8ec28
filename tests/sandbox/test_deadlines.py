"""Every wait on Docker ends: an engine that accepts connections and then never answers
(or stops halfway through an answer), and a guest that stops answering, each end in a
clear error instead of a thread or a session held forever."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import anyio
import docker
import pytest

from orsbox.clock import ManualClock
from orsbox.errors import SandboxError, SandboxGone
from orsbox.sandbox import SandboxSpec
from orsbox.sandbox.docker import DockerBackend
from orsbox.sandbox.docker.engine import Engine
from orsbox.server.health import PROBE_TIMEOUT_S, HealthProbe

pytestmark = pytest.mark.anyio

STALL_AFTER_HEADERS = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/x-tar\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"
)


@contextlib.contextmanager
def hung_engine(folder: Path, answer: bytes = b"") -> Iterator[str]:
    """A unix socket that accepts every connection, reads the request, sends `answer`
    (nothing by default) and then nothing more, until the test ends."""
    path = folder / "engine.sock"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.listen(64)
    listener.settimeout(0.1)
    held: list[socket.socket] = []
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            held.append(conn)
            conn.recv(65536)
            conn.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"unix://{path}"
    finally:
        done.set()
        thread.join()
        for conn in held:  # the abandoned client threads see EOF and end
            conn.close()
        listener.close()


def client(url: str, timeout: float) -> docker.DockerClient:
    return docker.DockerClient(base_url=url, version="1.41", timeout=timeout)


async def test_health_says_degraded_in_time_when_the_engine_hangs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("orsbox.server.health.CACHE_S", 0.0)  # every report probes
    with hung_engine(tmp_path) as url:
        clock = ManualClock()  # the probe's timeout passes when the test says so
        probe = HealthProbe(DockerBackend(client=client(url, timeout=60)), clock)
        with anyio.fail_after(10):  # the ping's own deadline is 60 s: it must be abandoned
            reporting = asyncio.create_task(probe.report())
            await clock.sleepers(1)
            await clock.advance(PROBE_TIMEOUT_S)
            report = await reporting
        assert report == {
            "status": "degraded",
            "sandbox": f"the sandbox backend did not answer within {PROBE_TIMEOUT_S:g}s",
        }
        with anyio.fail_after(1):  # while the first ping hangs, no second: an answer at once
            report = await probe.report()
        assert "a ping has waited" in report["sandbox"], report


async def test_an_archive_read_that_stalls_midway_ends(tmp_path: Path) -> None:
    """The SDK's get_archive turns the socket timeout off for the body; ours keeps it."""
    with hung_engine(tmp_path, STALL_AFTER_HEADERS) as url:
        engine = Engine(client(url, timeout=1))
        with anyio.fail_after(20), pytest.raises(SandboxError, match="read /etc from container"):
            await engine.get_archive("some-container", "/etc")


@pytest.mark.docker
async def test_a_guest_that_stops_answering_is_given_up(
    backend: DockerBackend,
    base_image: str,
    docker_client: docker.DockerClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A stopped guest neither answers nor reads: a large write blocks on a full socket.
    Both the send and the wait for the answer are bounded, and the sandbox is then given
    up for good, so later calls fail at once instead of waiting as long again."""
    monkeypatch.setattr("orsbox.sandbox.guest.sandbox.REPLY_GRACE_S", 0.5)
    monkeypatch.setattr("orsbox.sandbox.guest.sandbox.FILE_OP_TIMEOUT_S", 1.0)
    sandbox = await backend.start(SandboxSpec(image=base_image))
    assert (await sandbox.shell("echo up")).output == "up\n"
    stop = ["pkill", "-STOP", "-f", "orsbox-guest"]
    assert docker_client.containers.get(sandbox.id).exec_run(stop).exit_code == 0
    with anyio.fail_after(20):
        with pytest.raises(SandboxGone, match=r"guest did not answer within 1\.5s"):
            await sandbox.write_file("/tmp/big", b"x" * 64 * 1024**2)
        with pytest.raises(SandboxGone, match="guest did not answer"):
            await sandbox.shell("echo again")
    assert not sandbox.alive
