"""Run `orsbox eval` as a user does (a subprocess), and read what it left in --out."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from orsbox.authoring.loading import load_environment
from orsbox.cli.run import local_server
from tests.servers import ROOT, STARTED_PIDS

EVAL_TIMEOUT_S = 240
SUMS = "tests/fixture_envs/eval_envs.py"


def argv(target: str, model_url: str, out: Path, *options: str) -> list[str]:
    return [
        sys.executable,
        *("-m", "orsbox.cli.main", "eval", target),
        *("--model", "scripted", "--base-url", model_url, "--out", str(out)),
        *options,
    ]


def environ() -> dict[str, str]:
    # COLUMNS: rich wraps at 80 columns without a terminal; OPENAI_*: the user's own
    # settings must not reach the scripted model
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    return {**env, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}


def run_eval(
    target: str, model_url: str, out: Path, *options: str
) -> subprocess.CompletedProcess[str]:
    """`orsbox eval` to its end; its sandboxes count as this test run's (the leftover
    check of Docker tests covers them)."""
    process = subprocess.Popen(
        argv(target, model_url, out, *options),
        cwd=ROOT,
        env=environ(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    STARTED_PIDS.add(process.pid)
    stdout, stderr = process.communicate(timeout=EVAL_TIMEOUT_S)
    assert "Traceback" not in stderr, stderr  # every failure is a clear message
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def start_eval(target: str, model_url: str, out: Path, *options: str) -> subprocess.Popen[str]:
    """`orsbox eval` in the background; its sandboxes count as this test run's."""
    process = subprocess.Popen(
        argv(target, model_url, out, *options),
        cwd=ROOT,
        env=environ(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    STARTED_PIDS.add(process.pid)
    return process


def records(out: Path) -> list[dict[str, Any]]:
    path = out / "results.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def summary(out: Path) -> dict[str, Any]:
    return json.loads((out / "summary.json").read_text())


def transcript(out: Path, record: dict[str, Any]) -> dict[str, Any]:
    return json.loads((out / record["transcript"]).read_text())


def rewards_by_task(out: Path) -> dict[int, list[float | None]]:
    """Each task's rewards, sorted (which epoch drew which attempt is a race)."""
    found: dict[int, list[float | None]] = {}
    for record in records(out):
        found.setdefault(record["task"], []).append(record["reward"])
    return {task: sorted(r or 0.0 for r in rewards) for task, rewards in found.items()}


@contextlib.contextmanager
def sums_server() -> Iterator[tuple[str, Any]]:
    """tests/fixture_envs/eval_envs.py served in this process (so a test reads its counters),
    a real server on a loopback port; yields (url, the environment class)."""
    (environment,) = load_environment(str(ROOT / SUMS))
    environment.live = environment.most_live = 0
    with local_server([environment]) as url:
        yield url, environment
