"""A whole cluster on one machine: N cells on loopback, each on its own private Docker
engine, behind HAProxy. For tests, demos and benchmarks (`orsbox cluster up/down`).

`LocalCluster.up` records everything it starts in a state file as it goes (the
registry, engines, cells, the router: pid and start time each), so `down` — even from
another process, or after a failed `up` — removes exactly that: cells first (their
sessions end and their containers with them), then the router, then each engine with
whatever containers it still holds, then the registry it started (with its storage), and
the state folder with its logs. With a registry, every engine pulls through it as a
mirror (`orsbox.cluster.registry`).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

import orsbox
from orsbox.cluster.engines import PrivateEngine
from orsbox.cluster.processes import Tracked
from orsbox.cluster.registry import LocalRegistry, start_on_free_port
from orsbox.cluster.router import CellAddress, RouterOptions, render, write_errors

PACKAGE_ROOT = Path(orsbox.__file__).resolve().parent.parent
STATE_FILE = "cluster.json"
HEALTHY_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 40.0


@dataclass
class CellRecord:
    cell: str
    port: int
    engine: str  # the engine's folder
    pid: int = 0
    started: str = ""
    settings: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def process(self) -> Tracked:
        return Tracked(self.pid, self.started)


@dataclass
class ClusterState:
    root: str
    port: int
    targets: list[str]
    engines: list[str] = field(default_factory=list)
    cells: list[CellRecord] = field(default_factory=list)
    router_pid: int = 0
    router_started: str = ""
    # The registry the engines pull through (orsbox.cluster.registry): its address, and
    # when this cluster started it, its folder, pid and start time (else "" and 0).
    registry: str = ""
    registry_root: str = ""
    registry_pid: int = 0
    registry_started: str = ""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def save(self) -> None:
        path = Path(self.root) / STATE_FILE
        path.write_text(json.dumps(asdict(self), indent=2))

    @classmethod
    def load(cls, root: Path) -> ClusterState:
        raw = json.loads((root / STATE_FILE).read_text())
        raw["cells"] = [CellRecord(**c) for c in raw["cells"]]
        return cls(**raw)


class LocalCluster:
    """`up` builds one; `LocalCluster(ClusterState.load(root))` finds it again."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state

    @property
    def url(self) -> str:
        return self.state.url

    @property
    def root(self) -> Path:
        return Path(self.state.root)

    @property
    def cells(self) -> list[CellRecord]:
        return self.state.cells

    # -- up -------------------------------------------------------------------------
    @classmethod
    def up(
        cls,
        n: int,
        port: int,
        targets: Sequence[str],
        root: Path,
        images: Sequence[str] = (),
        settings: dict[str, str] | None = None,
        cell_settings: dict[int, dict[str, str]] | None = None,
        registry: bool | str = False,
    ) -> LocalCluster:
        """Start `n` cells serving `targets` with `images` loaded into their engines, and
        the router on `port`; return once every cell answers through the router. With
        `registry`, the engines pull through a registry: True starts one of the
        cluster's own on loopback (removed by `down`), a string names one already running
        (`127.0.0.1:PORT`). On any failure, everything started so far is removed before
        the error propagates."""
        root.mkdir(parents=True, exist_ok=True)
        state = ClusterState(root=str(root), port=port, targets=list(targets))
        cluster = cls(state)
        state.save()
        try:
            if registry is True:
                cluster._start_registry()
            elif isinstance(registry, str) and registry:
                state.registry = registry
            cluster._start_engines(n, images)
            for i in range(1, n + 1):
                merged = {**(settings or {}), **(cell_settings or {}).get(i, {})}
                record = CellRecord(
                    f"cell-{i}", _free_port(), state.engines[i - 1], settings=merged
                )
                state.cells.append(record)
                cluster.start_cell(record)
            cluster.wait_healthy(through_router=False)
            cluster._start_router()
            cluster.wait_healthy()
        except BaseException:
            cluster.down()
            raise
        return cluster

    def _start_registry(self) -> None:
        folder = self.root / "registry"
        self.state.registry_root = str(folder)  # `down` removes it even if the start fails
        self.state.save()
        registry = start_on_free_port(folder)
        self.state.registry = registry.address
        self.state.registry_pid, self.state.registry_started = registry.pid, registry.started
        self.state.save()

    def _owned_registry(self) -> LocalRegistry | None:
        if not self.state.registry_root:
            return None
        return LocalRegistry(
            Path(self.state.registry_root),
            self.state.registry,
            self.state.registry_pid,
            self.state.registry_started,
        )

    def _start_engines(self, n: int, images: Sequence[str]) -> None:
        mirrors = (self.state.registry,) if self.state.registry else ()
        engines = [PrivateEngine(self.root / f"e{i}", mirrors) for i in range(1, n + 1)]
        for engine in engines:
            self.state.engines.append(str(engine.root))
            self.state.save()
            engine.start()
        archive = self._save_images(images)
        with ThreadPoolExecutor(len(engines)) as pool:
            list(pool.map(lambda e: _ready_and_loaded(e, archive), engines))
        if archive is not None:
            archive.unlink()

    def _save_images(self, images: Sequence[str]) -> Path | None:
        if not images:
            return None
        archive = self.root / "images.tar"
        subprocess.run(
            ["docker", "save", "-o", str(archive), *images], check=True, capture_output=True
        )
        return archive

    def start_cell(self, record: CellRecord) -> None:
        """Start (or restart, on the same port and engine) one cell's server."""
        env = dict(os.environ)
        env.update({f"ORSBOX_{k.upper()}": str(v) for k, v in record.settings.items()})
        env["ORSBOX_CELL"] = record.cell
        env["DOCKER_HOST"] = PrivateEngine(Path(record.engine)).host
        env["PYTHONPATH"] = os.pathsep.join([str(PACKAGE_ROOT), env.get("PYTHONPATH", "")])
        argv = [sys.executable, "-m", "orsbox.cli.main", "serve", *self.state.targets]
        argv += ["--port", str(record.port), "--no-build"]
        with (self.root / f"{record.cell}.log").open("ab") as log:
            process = subprocess.Popen(
                argv,
                cwd=PACKAGE_ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        tracked = Tracked.of(process.pid)
        record.pid, record.started = tracked.pid, tracked.started
        self.state.save()

    def router_config(self) -> Path:
        cells = [CellAddress(c.cell, f"127.0.0.1:{c.port}") for c in self.cells]
        errors = self.root / "errors"
        write_errors(errors)
        options = RouterOptions(bind=f"127.0.0.1:{self.state.port}")
        path = self.root / "haproxy.cfg"
        path.write_text(render(cells, errors, options))
        return path

    def _start_router(self) -> None:
        config = self.router_config()
        check = subprocess.run(["haproxy", "-c", "-q", "-f", str(config)], capture_output=True)
        if check.returncode != 0:
            raise RuntimeError(f"haproxy refused {config}: {check.stderr.decode()}")
        with (self.root / "haproxy.log").open("ab") as log:
            process = subprocess.Popen(
                ["haproxy", "-db", "-f", str(config)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        tracked = Tracked.of(process.pid)
        self.state.router_pid, self.state.router_started = tracked.pid, tracked.started
        self.state.save()

    def wait_healthy(
        self, timeout_s: float = HEALTHY_TIMEOUT_S, through_router: bool = True
    ) -> None:
        """Until each cell answers /health directly and, `through_router`, both pinned to
        it (an id naming it) and by placement (the router's health checks see it up)."""
        deadline = time.monotonic() + timeout_s
        for record in self.cells:
            probes: list[tuple[str, dict[str, str]]] = [(record.url, {})]
            if through_router:
                probes.append((self.url, {"X-Session-ID": f"probe.{record.cell}"}))
            while any(_cell_answering(url, headers) != record.cell for url, headers in probes):
                if not record.process.alive():
                    raise RuntimeError(f"{record.cell} exited:\n{self.log(record.cell)[-3000:]}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{record.cell} did not become healthy in {timeout_s:g}s")
                time.sleep(0.1)
        if through_router:
            self._wait_placement(deadline)

    def _wait_placement(self, deadline: float) -> None:
        """Until unpinned requests have reached every cell (leastconn turns among idle
        cells, so a few rounds of /health see them all once all are up)."""
        missing = {c.cell for c in self.cells}
        while missing:
            missing.discard(_cell_answering(self.url, {}) or "")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the router does not place on {sorted(missing)}")
            if missing:
                time.sleep(0.05)

    def log(self, name: str) -> str:
        path = self.root / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def engine(self, record: CellRecord) -> PrivateEngine:
        return PrivateEngine(Path(record.engine))

    # -- down -----------------------------------------------------------------------
    def down(self) -> None:
        """Stop what `up` started, in an order that leaves nothing behind."""
        with ThreadPoolExecutor(max(1, len(self.cells))) as pool:
            list(pool.map(lambda c: c.process.stop(STOP_TIMEOUT_S), self.cells))
        Tracked(self.state.router_pid, self.state.router_started).stop(STOP_TIMEOUT_S)
        engines = [PrivateEngine(Path(root)) for root in self.state.engines]
        with ThreadPoolExecutor(max(1, len(engines))) as pool:
            list(pool.map(lambda e: e.stop(), engines))
        registry = self._owned_registry()
        if registry is not None:
            registry.stop()
        shutil.rmtree(self.root, ignore_errors=True)


def _cell_answering(url: str, headers: dict[str, str]) -> str | None:
    """The cell that answers `url`/health with `headers`, or None."""
    try:
        request = urllib.request.Request(f"{url}/health", headers=headers)
        with urllib.request.urlopen(request, timeout=2) as answer:
            return json.load(answer).get("cell")
    except (OSError, ValueError):
        return None


def _ready_and_loaded(engine: PrivateEngine, archive: Path | None) -> None:
    engine.wait_ready()
    if archive is not None:
        engine.load(archive)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
