"""`orsbox cluster up/down` as a user runs them: one cell of a Python environment (no
images to load), the URL printed, everything tracked in the state file and removed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx
import pytest

from orsbox.cluster.processes import Tracked
from tests.servers import ROOT, free_port

pytestmark = pytest.mark.cluster


def orsbox(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "orsbox.cli.main", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=180,
    )  # fmt: skip


def test_cluster_up_prints_the_url_and_down_removes_everything() -> None:
    state = Path(tempfile.mkdtemp(prefix="orsc-", dir="/tmp")) / "state"
    port = free_port()
    target = "tests/fixture_envs/protocol_envs.py:Protocol"
    up = orsbox("cluster", "up", "1", target, "--port", str(port), "--state", str(state))
    try:
        assert up.returncode == 0, up.stderr
        assert up.stdout.strip().splitlines()[-1] == f"http://127.0.0.1:{port}"
        health = httpx.get(f"http://127.0.0.1:{port}/health").json()
        assert health["cell"] == "cell-1" and health["status"] == "ok"
        again = orsbox("cluster", "up", "1", "--port", str(free_port()), "--state", str(state))
        assert again.returncode != 0 and "already up" in again.stderr
        recorded = json.loads((state / "cluster.json").read_text())
        processes = [Tracked(c["pid"], c["started"]) for c in recorded["cells"]]
        processes.append(Tracked(recorded["router_pid"], recorded["router_started"]))
        engine_pid = int((Path(recorded["engines"][0]) / "docker.pid").read_text())
        processes.append(Tracked.of(engine_pid))
        assert all(p.alive() for p in processes)
    finally:
        down = orsbox("cluster", "down", "--state", str(state))
        shutil.rmtree(state.parent, ignore_errors=True)
    assert down.returncode == 0, down.stderr
    assert not any(p.alive() for p in processes)
    assert not state.exists()
