"""Start a real orsbox server in a subprocess on a free loopback port."""

from __future__ import annotations

import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

from bench.servers import ROOT, free_port, spawn_server, stop_process, wait_healthy

__all__ = ["ROOT", "LiveServer", "free_port", "start_server"]

START_TIMEOUT_S = 30.0
STARTED_PIDS: set[int] = set()  # servers this test run started (their sandboxes are ours)


@dataclass
class LiveServer:
    url: str
    process: subprocess.Popen[bytes]
    log_path: Path
    server_id: str = ""

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM) -> int:
        return stop_process(self.process, sig)


def start_server(
    targets: list[str], tmp_path: Path, cwd: Path | None = None, **settings: object
) -> LiveServer:
    port = free_port()
    log_path = tmp_path / f"server-{port}.log"
    argv = ["-m", "orsbox.cli.main", "serve", *targets, "--port", str(port)]
    process = spawn_server(argv, log_path, cwd or ROOT, **settings)
    STARTED_PIDS.add(process.pid)
    server = LiveServer(f"http://127.0.0.1:{port}", process, log_path)
    wait_healthy(server.url, process, log_path, START_TIMEOUT_S)
    return server
