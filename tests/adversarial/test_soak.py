"""The soak (`bench/soak.py`) in a CI-sized run: half a minute of normal and hostile
episodes at once, then zero failed normal calls, zero containers left, and open
descriptors and RSS, compared idle to idle, within the soak's stated bounds
(`FD_SLACK`, `RSS_SLACK_MIB`), under runc and under gVisor (runsc, on the private engine
of tests/runtimes.py). The full run is `python -m bench.soak [--runtime runsc]` (10
minutes)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.soak import FD_SLACK, RSS_SLACK_MIB
from tests.runtimes import runtime_available
from tests.servers import ROOT

pytestmark = pytest.mark.docker


@pytest.mark.parametrize("runtime", ["runc", "runsc"])  # the OCI runtimes of the main backend
def test_a_short_soak_leaks_nothing(tmp_path: Path, base_image: str, runtime: str) -> None:
    runtime_available(runtime)
    report_path = tmp_path / "soak.json"
    command = [sys.executable, "-m", "bench.soak", "--minutes", "0.5", "--workers", "4"]
    command += ["--runtime", runtime]
    command += ["--sample", "5", "--json", str(report_path), "--log-dir", str(tmp_path)]
    run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert report_path.exists(), run.stdout + run.stderr
    report = json.loads(report_path.read_text())
    summary = {k: v for k, v in report.items() if k != "samples"}
    assert report["failures"] == 0, summary
    assert report["normal_calls"] > 50 and report["hostile_calls"] > 3, summary
    assert report["containers_left_after_stop"] == 0 and report["idle_at_end"]["containers"] == 0
    assert report["fd_growth"] <= FD_SLACK, summary
    assert report["rss_growth_mib"] <= RSS_SLACK_MIB, summary
    assert run.returncode == 0, run.stdout[-3000:]
