"""A private Docker engine for one cell, beside the machine's own engine.

Each cell of a local cluster runs its sandboxes on its own `dockerd`: its own data-root,
exec-root, socket and pid file, so killing a cell touches no other cell's containers and
`orsbox cluster down` knows exactly what to remove. The machine's engine sets the
forward policy to DROP, so a second engine's bridge would pass no traffic: these run
with `iptables: false`, and orsbox sandboxes use no network unless an environment asks
(and the policy allows it).

Not `bridge: none`: a dockerd started with it *deletes the host's `docker0`* (moby's
`removeDefaultBridgeInterface`; every engine shares the host's network namespace), which
breaks bridge networking for the machine's own engine. Each private engine gets a bridge
of its own instead (`orsc-<hash>`, an address in 198.18.0.0/15, the benchmarking range),
created before it starts and deleted after it stops. Images are copied in with `docker save |
docker load` (about 3 s for the 214 MB base image). Everything is found again by its
pid file and socket, never by process name: other engines run on this machine.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orsbox.cluster.processes import Tracked
from orsbox.sandbox.procfs import process_start_time

READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class PrivateEngine:
    """One engine's files, all under `root` (short: a socket path must stay < 108 bytes)."""

    root: Path
    # Registries this engine asks first for Docker Hub names (`registry-mirrors`): the
    # cluster's own (orsbox.cluster.registry), `127.0.0.1:PORT` on loopback.
    mirrors: tuple[str, ...] = ()

    @property
    def socket(self) -> Path:
        return self.root / "docker.sock"

    @property
    def pidfile(self) -> Path:
        return self.root / "docker.pid"

    @property
    def host(self) -> str:
        """What DOCKER_HOST (and `docker -H`) take."""
        return f"unix://{self.socket}"

    @property
    def bridge(self) -> str:
        """This engine's own bridge interface (at most 15 characters)."""
        return "orsc-" + hashlib.sha256(str(self.root).encode()).hexdigest()[:10]

    def bridge_address(self) -> str:
        digest = hashlib.sha256(str(self.root).encode()).digest()
        return f"198.{18 + digest[0] % 2}.{digest[1]}.1/24"

    def config(self) -> dict[str, object]:
        return {
            "data-root": str(self.root / "data"),
            "exec-root": str(self.root / "exec"),
            "hosts": [self.host],
            "pidfile": str(self.pidfile),
            "bridge": self.bridge,
            "iptables": False,
            "ip-forward": False,
            "ip-masq": False,
            "log-level": "warn",
            "registry-mirrors": [f"http://{address}" for address in self.mirrors],
        }

    def _add_bridge(self) -> None:
        self._remove_bridge()
        for args in (
            ["link", "add", self.bridge, "type", "bridge"],
            ["addr", "add", self.bridge_address(), "dev", self.bridge],
            ["link", "set", self.bridge, "up"],
        ):
            subprocess.run(["ip", *args], check=True, capture_output=True)

    def _remove_bridge(self) -> None:
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)

    def start(self) -> int:
        """Start dockerd in its own process group; return its pid (not yet ready)."""
        self.root.mkdir(parents=True, exist_ok=True)
        self._add_bridge()
        config = self.root / "daemon.json"
        config.write_text(json.dumps(self.config(), indent=2))
        with (self.root / "dockerd.log").open("ab") as log:
            process = subprocess.Popen(
                ["dockerd", "--config-file", str(config)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        return process.pid

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.docker("version", check=False).returncode == 0:
                return
            time.sleep(0.1)
        log = (self.root / "dockerd.log").read_text(errors="replace")[-2000:]
        raise RuntimeError(f"the engine in {self.root} did not answer in {timeout_s:g}s:\n{log}")

    def docker(self, *args: str, check: bool = True, **kw: Any) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["docker", "-H", self.host, *args], capture_output=True, check=check, **kw
        )

    def load(self, archive: Path) -> None:
        """Load images from a `docker save` archive."""
        with archive.open("rb") as data:
            self.docker("load", "-q", stdin=data)

    def containers(self) -> list[str]:
        """Every container on this engine, running or not (all are the cluster's)."""
        answer = self.docker("ps", "-aq", "--no-trunc", check=False)
        return answer.stdout.decode().split() if answer.returncode == 0 else []

    def stop(self) -> None:
        """Remove every container, stop dockerd by its pid file, delete its files."""
        pid = self._pid()
        if pid is not None:
            left = self.containers()
            if left:
                self.docker("rm", "-f", *left, check=False)
            Tracked(pid, process_start_time(pid) or "").stop(STOP_TIMEOUT_S)
        self._remove_bridge()
        shutil.rmtree(self.root, ignore_errors=True)

    def _pid(self) -> int | None:
        try:
            pid = int(self.pidfile.read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if process_start_time(pid) is not None else None
