"""The real platoon against two real orsbox servers (docs/train-with-platoon.md).

platoon 0.4.0 is on PyPI but needs Python >= 3.12, so it runs in a venv of its own,
named by `ORSBOX_PLATOON_PYTHON` (its `python`); `ORSBOX_PLATOON_SOURCE`, when set, is a
platoon source tree put first on that Python's path (a checkout, or the wheel unpacked),
to test a version that is not installed. scripts/test.sh (CI) makes that venv in
/opt/orsbox-platoon-venv and sets the variable; without it the test is skipped:

    /root/.pyenv/versions/3.12.1/bin/python -m venv /tmp/platoon-venv
    /tmp/platoon-venv/bin/pip install 'platoon[ors]==0.4.0' openreward==0.1.167
    ORSBOX_PLATOON_PYTHON=/tmp/platoon-venv/bin/python \\
        python3 -m pytest tests/integrations/trainers/test_platoon_source.py

platoon_driver.py (our code) drives platoon's `OrsEnvironmentService` as its trainer's
rollout does, with a scripted policy: `get_service(uri)`, `get_task`, `open_session`,
`tools`, `call_tool`, `grade`, `close`. What it finds is what the docs page says.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from orsbox.bundle import environments_dir
from tests.integrations.trainers.platoon_support import SUMS, assert_nothing_left, servers_of
from tests.servers import ROOT, LiveServer

PYTHON = os.environ.get("ORSBOX_PLATOON_PYTHON")
if not PYTHON:
    pytest.skip(
        "ORSBOX_PLATOON_PYTHON is not set: the python of a Python >= 3.12 venv with "
        "`pip install 'platoon[ors]==0.4.0' openreward==0.1.167` (docs/train-with-platoon.md)",
        allow_module_level=True,
    )
pytestmark = pytest.mark.docker

HERE = Path(__file__).parent
GRADED = "tests/fixture_envs/grading_envs.py:Graded"  # task 1: the grader's runner is missing
MASK = ROOT / "orsbox" / "integrations" / "platoon.py"
EXAMPLES = environments_dir() / "coding" / "examples"


@pytest.fixture(scope="module")
def servers(
    tmp_path_factory: pytest.TempPathFactory, base_image: str
) -> Iterator[list[LiveServer]]:
    targets = ["math", "coding", SUMS, GRADED]
    with servers_of([targets, targets], tmp_path_factory) as both:
        yield both


def run_platoon(plan: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    """The driver's results, and what platoon logged."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENREWARD_SESSION_URL")}
    path = [str(ROOT)]
    if os.environ.get("ORSBOX_PLATOON_SOURCE"):
        path.insert(0, os.environ["ORSBOX_PLATOON_SOURCE"])
    env["PYTHONPATH"] = os.pathsep.join(path)
    assert PYTHON is not None
    done = subprocess.run(
        [PYTHON, str(HERE / "platoon_driver.py")],
        input=json.dumps({**plan, "mask_module": str(MASK)}),
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout), done.stderr


def _example(name: str) -> list[list[Any]]:
    return [
        [c["name"], c["input"]] for c in map(json.loads, (EXAMPLES / name).read_text().splitlines())
    ]


def test_platoon_trains_on_orsbox(
    servers: list[LiveServer], docker_client: docker.DockerClient
) -> None:
    hosts = ",".join(s.url.removeprefix("http://") for s in servers)
    pool = f"ors+http://{hosts}"
    sums_class = {"env_class": "tests.integrations.trainers.platoon_envs:Sums"}
    plan = {
        "services": [
            {"uri": f"{pool}/sums?variant=sums", "kwargs": sums_class},  # 0
            {"uri": f"{pool}/math"},  # 1: math is each server's first environment
            {"uri": f"{pool}/coding?variant=coding"},  # 2
            {"uri": f"{pool}/sums?variant=sums", "kwargs": sums_class, "mask": True},  # 3
            {"uri": f"{pool}/graded?variant=graded"},  # 4: submit not declared terminal
            {"uri": f"{pool}/graded?variant=graded", "kwargs": {"terminal_tools": ["submit"]}},
            {"uri": f"{pool}/graded?variant=graded", "mask": True},  # 6
            {  # 7: a class the servers do not serve
                "uri": f"{pool}/sums?variant=sums",
                "kwargs": {"env_class": "tests.fixture_envs.openreward_grading_env:BrokenGrader"},
            },
            {"uri": f"{pool}/coding"},  # 8: no variant, and coding is not the default
        ],
        "rollouts": [
            {
                "service": 0,
                "task": "train:0",
                "rollout_id": f"sums-{i}",
                "actions": [["scratch", {"text": "2+3"}], ["answer", {"answer": a}]],
            }
            for i, a in enumerate(["5", "6", "5", "7", "5", "4"])
        ]
        + [
            {
                "service": 0,
                "task": "train:2",
                "rollout_id": "sums-grading",
                "actions": [["answer", {"answer": "2"}]],
            },
            {
                "service": 0,
                "task": "train:3",
                "rollout_id": "sums-gone",
                "actions": [["scratch", {"text": "x"}], ["answer", {"answer": "4"}]],
            },
            {
                "service": 3,
                "task": "train:3",
                "rollout_id": "sums-gone-masked",
                "actions": [["scratch", {"text": "x"}], ["answer", {"answer": "4"}]],
            },
            {
                "service": 1,
                "task": "train:0",
                "rollout_id": "math-right",
                "actions": [["submit", {"answer": "7"}]],
            },
            {
                "service": 1,
                "task": "train:0",
                "rollout_id": "math-wrong",
                "actions": [["submit", {"answer": "8"}]],
            },
            {
                "service": 2,
                "task": "train:0",
                "rollout_id": "coding-right",
                "actions": _example("train-0-correct.jsonl"),
            },
            {
                "service": 2,
                "task": "train:0",
                "rollout_id": "coding-wrong",
                "actions": _example("train-0-wrong.jsonl"),
            },
            {
                "service": 4,
                "task": "train:1",
                "rollout_id": "graded",
                "actions": [["submit", {"answer": "6"}]],
            },
            {
                "service": 5,
                "task": "train:1",
                "rollout_id": "graded-terminal",
                "actions": [["submit", {"answer": "6"}]],
            },
            {
                "service": 6,
                "task": "train:1",
                "rollout_id": "graded-masked",
                "actions": [["submit", {"answer": "6"}]],
            },
            {"service": 7, "task": "train:0", "rollout_id": "mismatch", "actions": []},
            {"service": 8, "task": "train:0", "rollout_id": "no-variant", "actions": []},
        ],
    }
    results, log = run_platoon(plan)
    *rollouts, left = results
    by_id = {r["rollout_id"]: r for r in rollouts}

    def outcome(rollout_id: str) -> tuple[str, float | None]:
        found = by_id[rollout_id]["outcome"]
        return found["status"], found["reward"]

    # the group of six on env_class Sums: rewards right, spread over both servers, and
    # platoon lists the @terminal tool as terminal (orsbox advertises terminal_tool)
    sums = [by_id[f"sums-{i}"] for i in range(6)]
    assert [r["outcome"]["reward"] for r in sums] == [1.0, 0.0, 1.0, 0.0, 1.0, 0.0]
    urls = [s.url for s in servers]
    assert (
        [urls.index(r["url"]) for r in sums]
        == [int(hashlib.sha1(f"sums-{i}".encode()).hexdigest(), 16) % 2 for i in range(6)]
        == [1, 0, 1, 0, 0, 0]
    )  # platoon's pick: SHA-1 of the rollout id, both servers used
    assert sums[0]["tools"] == {"scratch": False, "answer": True}
    assert [outcome(f"math-{k}") for k in ("right", "wrong")] == [("scored", 1.0), ("scored", 0.0)]
    assert [outcome(f"coding-{k}") for k in ("right", "wrong")] == [
        ("scored", 1.0),
        ("scored", 0.0),
    ]
    assert {
        by_id[k]["url"] for k in ("math-right", "math-wrong", "coding-right", "coding-wrong")
    } <= {s.url for s in servers}

    # infrastructure failures: the terminal tool's grading error is platoon's own
    # untrainable error; a non-terminal tool's sandbox_gone ends the session and is a
    # trained 0.0 (no_submit) unless masked; orsbox's own `submit` (no @terminal) is a
    # 0.0 too unless named in terminal_tools or masked
    assert outcome("sums-grading") == ("error", None)
    assert by_id["sums-grading"]["outcome"]["failure_kind"] == "env_error"
    assert "[infra] grading_error: " in by_id["sums-grading"]["results"][0]["text"]
    assert outcome("sums-gone") == ("scored", 0.0)
    assert by_id["sums-gone"]["outcome"]["reason"] == "no_submit"
    assert by_id["sums-gone"]["results"][1]["error_reason"] == "dead"
    assert outcome("sums-gone-masked") == ("error", None)
    assert by_id["sums-gone-masked"]["outcome"]["failure_kind"] == "orsbox_infra"
    assert outcome("graded") == ("scored", 0.0)
    assert by_id["graded"]["outcome"]["reason"] == "no_submit"
    assert outcome("graded-terminal") == ("error", None)
    assert outcome("graded-masked") == ("error", None)

    # refused before any session: a class that is not what the servers serve, and a
    # multi-environment server's other environment without ?variant=
    mismatch = by_id["mismatch"]["setup_error"]
    assert mismatch["kind"] == "env_config" and "the server lists no submit" in mismatch["message"]
    no_variant = by_id["no-variant"]["setup_error"]
    assert no_variant["kind"] == "env_config" and "?variant=coding" in no_variant["message"]

    # nothing left running: platoon closed every session, the servers hold none, and
    # coding's containers are gone
    assert left == {"sessions_left": 0}
    assert_nothing_left(servers, docker_client)
    assert "ORS tool scratch failed (tool_raised)" in log
