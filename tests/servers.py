"""Start a real orsbox server in a subprocess on a free loopback port."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
STARTED_PIDS: set[int] = set()  # servers this test run started (their sandboxes are ours)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class LiveServer:
    url: str
    process: subprocess.Popen[bytes]
    log_path: Path
    server_id: str = ""

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, sig: int | None = None) -> int:
        if self.process.poll() is None:
            if sig is None:
                self.process.terminate()
            else:
                self.process.send_signal(sig)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


def start_server(
    targets: list[str], tmp_path: Path, cwd: Path | None = None, **settings: object
) -> LiveServer:
    port = free_port()
    env = dict(os.environ)
    env.update({f"ORSBOX_{k.upper()}": str(v) for k, v in settings.items()})
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    log_path = tmp_path / f"server-{port}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "orsbox.cli.main", "serve", *targets, "--port", str(port)],
            cwd=cwd or ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    STARTED_PIDS.add(process.pid)
    server = LiveServer(f"http://127.0.0.1:{port}", process, log_path)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited early:\n{server.log()}")
        try:
            if httpx.get(f"{server.url}/health", timeout=1).status_code == 200:
                return server
        except httpx.HTTPError:
            time.sleep(0.05)
    server.stop()
    raise RuntimeError(f"server did not become healthy:\n{server.log()}")
