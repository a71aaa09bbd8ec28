"""Benchmark servers in subprocesses on free loopback ports, stopped by PID."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from subprocess import Popen

ROOT = Path(__file__).resolve().parent.parent
START_TIMEOUT_S = 60.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_bytes(pid: int) -> int:
    """Resident memory of a process now."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def spawn_server(
    argv: list[str], log_path: Path, cwd: Path = ROOT, **settings: object
) -> Popen[bytes]:
    """Start a server process (`argv` after the interpreter) with `settings` as its
    ORSBOX_* environment and this checkout importable, its output in `log_path`."""
    env = dict(os.environ)
    env.update({f"ORSBOX_{k.upper()}": str(v) for k, v in settings.items()})
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    with log_path.open("wb") as log:
        return subprocess.Popen(
            [sys.executable, *argv], cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT
        )


def answers_health(url: str) -> bool:
    """`url`/health answers 200 now."""
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=1) as r:
            return r.status == 200
    except OSError:
        return False


def wait_healthy(url: str, process: Popen[bytes], log_path: Path, timeout_s: float) -> None:
    """Return once `url`/health answers 200; raise, with the server's log, if the
    process exits first or `timeout_s` passes (the process is then stopped)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited early:\n{log_path.read_text(errors='replace')}")
        if answers_health(url):
            return
        time.sleep(0.05)
    stop_process(process)
    raise RuntimeError(f"server did not become healthy:\n{log_path.read_text(errors='replace')}")


def stop_process(process: Popen[bytes], sig: int = signal.SIGTERM, timeout_s: float = 60) -> int:
    """Send `sig` (SIGTERM: graceful, sessions and containers are torn down) unless the
    process has ended, wait up to `timeout_s`, then SIGKILL; return its exit code."""
    if process.poll() is None:
        process.send_signal(sig)
        try:
            return process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
    return process.wait()


@dataclass
class BenchServer:
    kind: str
    url: str
    process: subprocess.Popen[bytes]
    log_path: Path
    server_id: str = ""

    @property
    def pid(self) -> int:
        return self.process.pid

    def rss(self) -> int:
        return rss_bytes(self.pid)

    def stop(self) -> None:
        stop_process(self.process)


def start(kind: str, envs: list[str], log_dir: Path, **settings: object) -> BenchServer:
    """Start `python -m bench.serve kind port envs...`; return once /health answers."""
    port = free_port()
    log_path = log_dir / f"{kind}-{port}.log"
    argv = ["-m", "bench.serve", kind, str(port), *envs]
    process = spawn_server(argv, log_path, **settings)
    server = BenchServer(kind, f"http://127.0.0.1:{port}", process, log_path)
    server.server_id = str(settings.get("server_id", ""))
    wait_healthy(server.url, process, log_path, START_TIMEOUT_S)
    return server


ENGINE_PIDFILE = Path("/var/run/docker.pid")
DOCKER_CGROUP = Path("/sys/fs/cgroup/cpuacct/docker")  # cgroup v1, as on this machine


def _shim_pids(container_ids: set[str]) -> list[int]:
    found = subprocess.run(["pgrep", "-a", "containerd-shim"], capture_output=True, text=True)
    return [
        int(line.split()[0])
        for line in found.stdout.splitlines()
        if any(cid in line for cid in container_ids)
    ]


def _total_cpu(pids: list[int]) -> float:
    seconds = 0.0
    for pid in pids:
        with contextlib.suppress(OSError):
            seconds += cpu_seconds(pid)
    return seconds


def _engine_pids() -> list[int]:
    """The default socket's dockerd, by the pid file it writes (other engines may run
    beside it: gVisor's, a cluster's cells)."""
    with contextlib.suppress(OSError, ValueError):
        return [int(ENGINE_PIDFILE.read_text().split()[0])]
    return []


def cpu_snapshot(server_pid: int, container_ids: set[str]) -> dict[str, float]:
    """CPU seconds used so far by each party on the call path: the server; the docker
    engine (dockerd: shared, so anyone else's use of it counts too); the containerd
    shims of `container_ids`; and those containers themselves (agent, bash, commands)."""
    containers = 0.0
    for cid in container_ids:
        with contextlib.suppress(OSError):
            containers += int((DOCKER_CGROUP / cid / "cpuacct.usage").read_text()) / 1e9
    return {
        "server": cpu_seconds(server_pid),
        "dockerd": _total_cpu(_engine_pids()),
        "shims": _total_cpu(_shim_pids(container_ids)),
        "containers": containers,
    }


def cpu_used(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {key: after[key] - before[key] for key in after}
