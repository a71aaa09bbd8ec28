"""The scale bench (`bench/scale.py`) at CI size: two steps of a few live episodes on
the real engine print the line the checks read, measure every step beside its bare
containers, and leave no container or setup snapshot behind, also when interrupted
(SIGINT, as Ctrl-C) half-way. The full ramp is `python -m bench --parts scale`."""

from __future__ import annotations

import json
import re
import secrets
import signal
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import docker
import pytest

from bench.harness import BENCH_LABEL
from bench.svg_plot import Panel, Series, nice_ticks, write_svg
from tests.servers import ROOT

LINE = re.compile(
    r"^scale: live=(\d+) mem/episode=([\d.]+) MiB p99=([\d.]+) ms "
    r"health-p99=([\d.]+) ms first-limit=(\S+)$",
    re.MULTILINE,
)
TIMEOUT_S = 240


def scale_command(run_id: str, steps: str, folder: Path) -> list[str]:
    return [
        sys.executable,
        *("-m", "bench.scale", "--quick", "--steps", steps, "--run-id", run_id),
        *("--json", str(folder / "scale.json"), "--svg", str(folder / "scale.svg")),
    ]


def left_behind(client: docker.DockerClient, run_id: str) -> list[str]:
    """This run's containers (baseline and episodes) and setup snapshots still there."""
    api = client.api
    bare = api.containers(all=True, filters={"label": f"{BENCH_LABEL}={run_id}"})
    served = api.containers(all=True, filters={"label": f"orsbox.server=bench-{run_id}-scale"})
    images = api.images(filters={"label": f"orsbox.environment=scale-{run_id}"})
    return [c["Id"] for c in bare + served] + [i["Id"] for i in images]


@pytest.mark.docker
def test_a_tiny_ramp_prints_its_line_and_leaves_nothing(
    tmp_path: Path, base_image: str, docker_client: docker.DockerClient
) -> None:
    run_id = secrets.token_hex(4)
    done = subprocess.run(
        scale_command(run_id, "2,3", tmp_path),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = LINE.findall(done.stdout)
    assert len(found) == 1, done.stdout
    live, _, p99, health, limit = found[0]
    assert live == "3" and limit == "none", done.stdout
    assert float(p99) > 0 and float(health) > 0
    report = json.loads((tmp_path / "scale.json").read_text())
    assert [s["live"] for s in report["steps"]] == [2, 3]
    assert [b["live"] for b in report["baseline"]] == [2, 3]
    for step in report["steps"]:
        assert step["failures"] == 0 and step["call_errors"] == 0, step
        assert step["mem_per_episode_mib"] > 0 and step["server_fds"] > 0, step
        assert step["shim_fds"] > 0 and step["engine_mib"] > 0, step
        assert step["gc_full_passes"] >= 0 and step["gc_full_pause_ms"] >= 0, step  # read
        # the paced phase's calls (one active episode, one call per 0.5 s for 2 s)
        assert 1 <= step["server_calls"] <= 5, step
        assert 0 <= step["server_held_over_50ms"] <= step["server_calls"], step
        assert step["first_call_p50_ms"] > 0 and step["first_call_p99_ms"] > 0, step
        cpu = step["paced_cpu_pct"]  # the server answered /health every 20 ms meanwhile
        assert cpu["server"] > 0 and cpu["machine"] >= cpu["server"] + cpu["shims"], step
    assert "| 3 |" in done.stdout  # the table's row for the step
    assert (tmp_path / "scale.svg").read_text().startswith("<svg")
    assert left_behind(docker_client, run_id) == []


@pytest.mark.docker
def test_an_interrupted_ramp_leaves_nothing(
    tmp_path: Path, base_image: str, docker_client: docker.DockerClient
) -> None:
    run_id = secrets.token_hex(4)
    ramp = subprocess.Popen(
        [*scale_command(run_id, "40", tmp_path), "--no-baseline"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert ramp.stderr is not None
        # interrupted as the step's 40 episodes start to be made, which takes seconds (an
        # interrupt after a step could find the ramp ending at a bound on a busy machine)
        for line in ramp.stderr:
            if line.startswith("scale: adding 40 episodes"):
                break
        assert left_behind(docker_client, run_id), "the ramp's setup snapshots are made"
        ramp.send_signal(signal.SIGINT)
        _, said = ramp.communicate(timeout=TIMEOUT_S)
    finally:
        if ramp.poll() is None:
            ramp.kill()
            ramp.communicate()
    assert ramp.returncode == 130, said[-3000:]  # interrupted, not finished
    assert "scale: interrupted" in said, said[-3000:]
    assert left_behind(docker_client, run_id) == []


@pytest.mark.docker
def test_a_ramp_stops_at_its_bound_and_names_it(
    tmp_path: Path, base_image: str, docker_client: docker.DockerClient
) -> None:
    """A time budget too short for the first step: no step is started, the line says
    which bound stopped the ramp."""
    run_id = secrets.token_hex(4)
    command = [*scale_command(run_id, "2,3", tmp_path), "--no-baseline", "--budget-s", "5"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines()[-1] == (
        "scale: live=0 mem/episode=nan MiB p99=nan ms health-p99=nan ms first-limit=time-budget"
    )
    assert json.loads((tmp_path / "scale.json").read_text())["steps"] == []
    assert left_behind(docker_client, run_id) == []


def test_the_plot_draws_each_series_and_escapes_labels() -> None:
    panels = [
        Panel("memory <MiB>", [Series("a & b", [(0, 1.0), (100, 2.0)]), Series("c", [])]),
        Panel("fds", [Series("server", [(100, 10.0), (250, float("nan")), (500, 30.0)])]),
    ]
    svg = write_svg("title", "live episodes", panels)
    assert svg.count("<polyline") == 2  # the empty series draws no line
    assert "memory &lt;MiB&gt;" in svg and "a &amp; b" in svg
    assert svg.count("<circle") == 4  # the NaN point is left out


def test_ticks_are_round_and_cover_the_range() -> None:
    assert nice_ticks(0, 1000) == [0, 200, 400, 600, 800, 1000]
    assert nice_ticks(0, 7.3) == [0, 2, 4, 6, 8]
    ticks = nice_ticks(0, 0)  # one value: still an axis
    assert ticks[0] == 0 and ticks[-1] > 0


def test_replot_merges_runs_by_size(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--replot`: the steps of several reports in one table and plot, a later report's
    step replacing an earlier one of the same size."""
    from bench.scale import BaselineStep, Step, replot

    def report(name: str, sizes: list[int], p99: float, limit: str) -> Path:
        steps = [asdict(Step(n, n, 1.0, call_p99_ms=p99, mem_per_episode_mib=9.0)) for n in sizes]
        base = [asdict(BaselineStep(n, 1.0, 3.0, 3.0, 2.5, 0.5)) for n in sizes]
        path = tmp_path / name
        path.write_text(
            json.dumps({"steps": steps, "baseline": base, "first_limit": limit, "why": ""})
        )
        return path

    svg = tmp_path / "plot.svg"
    replot(
        [
            report("a.json", [100, 250], 5.0, "time-budget"),
            report("b.json", [250, 1000], 7.0, "none"),
        ],
        svg,
    )
    out = capsys.readouterr().out
    assert [
        line.split("|")[1].strip()
        for line in out.splitlines()
        if line.startswith("| 1") or line.startswith("| 2")
    ] == ["100", "250", "1000"]
    assert out.splitlines()[-1].startswith("scale: live=1000 mem/episode=9.0 MiB p99=7.0 ms")
    assert out.splitlines()[-1].endswith("first-limit=none")
    assert svg.read_text().count("<polyline") >= 6
