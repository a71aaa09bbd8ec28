"""The soak (`bench/soak.py`) in a CI-sized run: half a minute of normal and hostile
episodes at once, then zero failed normal calls, zero containers left, and open
descriptors and RSS, compared idle to idle, within the soak's stated bounds
(`FD_SLACK`, `RSS_SLACK_MIB`), under runc and under gVisor (runsc, on the private engine
of tests/runtimes.py). CI soaks both runtimes side by side (each on its own engine and
server: the fixed costs, start, warm-up and the two idle drains, are paid once, not
twice); `pytest -m full_matrix` soaks each alone for two minutes. The full run is
`python -m bench.soak [--runtime runsc]` (10 minutes)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from bench.soak import FD_SLACK, RSS_SLACK_MIB
from tests.runtimes import runtime_available
from tests.servers import ROOT

# serial: its leak bounds and its time budget assume the machine to itself (scripts/test.sh)
pytestmark = [pytest.mark.docker, pytest.mark.serial]

RUNTIMES = ["runc", "runsc"]  # the OCI runtimes of the main backend
TIMEOUT_S = 240
STOP_TIMEOUT_S = 60  # a soak asked to stop removes its containers within this


def start_soak(runtime: str, minutes: float, folder: Path) -> subprocess.Popen[str]:
    """`python -m bench.soak` for `runtime`, its report and logs in `folder`."""
    folder.mkdir()
    command = [sys.executable, "-m", "bench.soak", "--minutes", str(minutes), "--workers", "4"]
    command += ["--runtime", runtime]
    command += ["--sample", "5", "--json", str(folder / "soak.json"), "--log-dir", str(folder)]
    return subprocess.Popen(
        command,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its server with it, should it have to be killed
    )


def stop_soak(soak: subprocess.Popen[str]) -> None:
    """A soak still running past its time: Ctrl-C (it removes what it started), then
    its whole process group, the server it started included."""
    if soak.poll() is not None:
        return
    soak.send_signal(signal.SIGINT)
    try:
        soak.communicate(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(soak.pid, signal.SIGKILL)
        soak.communicate()


def check_soak(soak: subprocess.Popen[str], folder: Path, timeout_s: float) -> None:
    """Wait for the soak, then its report: no failed call, nothing left, flat fds and RSS."""
    try:
        output, _ = soak.communicate(timeout=timeout_s)
    finally:
        stop_soak(soak)
    report_path = folder / "soak.json"
    assert report_path.exists(), output
    report = json.loads(report_path.read_text())
    summary = {k: v for k, v in report.items() if k != "samples"}
    assert report["failures"] == 0, summary
    assert report["normal_calls"] > 50 and report["hostile_calls"] > 3, summary
    assert report["containers_left_after_stop"] == 0 and report["idle_at_end"]["containers"] == 0
    assert report["fd_growth"] <= FD_SLACK, summary
    assert report["rss_growth_mib"] <= RSS_SLACK_MIB, summary
    assert soak.returncode == 0, output[-3000:]


def test_a_short_soak_leaks_nothing(tmp_path: Path, base_image: str) -> None:
    for runtime in RUNTIMES:
        runtime_available(runtime)
    soaks = {runtime: start_soak(runtime, 0.5, tmp_path / runtime) for runtime in RUNTIMES}
    try:
        for runtime, soak in soaks.items():
            check_soak(soak, tmp_path / runtime, TIMEOUT_S)
    finally:
        for soak in soaks.values():
            stop_soak(soak)


@pytest.mark.full_matrix
@pytest.mark.timeout(600)
@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_two_minute_soak_per_runtime_leaks_nothing(
    tmp_path: Path, base_image: str, runtime: str
) -> None:
    runtime_available(runtime)
    check_soak(start_soak(runtime, 2, tmp_path / runtime), tmp_path / runtime, 2 * TIMEOUT_S)
