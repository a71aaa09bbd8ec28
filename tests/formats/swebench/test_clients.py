"""Two clients play an instance end to end over ORS: the `ors-sdk` reference client
against `orsbox serve swebench:FILE`, and `orsbox run swebench:FILE --actions FILE`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from ors.client import ORS

from tests.environments.conftest import orsbox
from tests.formats.swebench import dataset, images
from tests.servers import LiveServer, start_server

pytestmark = pytest.mark.docker

FLAGS = ["--test-cmd", "pytest -rA", *(f"--image-map={rule}" for rule in images.IMAGE_MAP)]


@pytest.fixture(scope="module")
def dataset_file(tmp_path_factory: pytest.TempPathFactory, test_images: list[str]) -> Path:
    folder = tmp_path_factory.mktemp("swe")
    rows = [dataset.v4_row(), dataset.v5_row(images.CALC)]
    return dataset.write_jsonl(folder / "calc.jsonl", rows)


@pytest.fixture(scope="module")
def server(dataset_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = start_server(
        [f"swebench:{dataset_file}", *FLAGS], tmp_path_factory.mktemp("srv"), setup_wait_s=60
    )
    yield live
    live.stop()


def gold_actions() -> list[dict[str, object]]:
    return [
        {
            "name": "write_file",
            "input": {"path": "/tmp/fix.diff", "content": dataset.patches().gold},
        },
        {
            "name": "bash",
            "input": {"command": "cd /testbed && git apply /tmp/fix.diff && git status --short"},
        },
        {"name": "submit", "input": {}},
    ]


def test_ors_sdk_client_plays_an_instance(server: LiveServer) -> None:
    with ORS(base_url=server.url) as client:
        env = client.environment("calc")
        assert env.list_splits() == ["calc"]
        tasks = env.list_tasks(split="calc")
        assert [t.task_spec["instance_id"] for t in tasks] == [
            "pytest-dev__pytest-1",
            "calc__calc-5",
        ]
        names = sorted(t.name for t in env.list_tools())
        assert names == ["bash", "edit_file", "list_dir", "read_file", "submit", "write_file"]
        with env.session(task=tasks[0]) as session:
            assert session.get_prompt()[0].text == dataset.PROBLEM
            outputs = [session.call_tool(a["name"], a["input"]) for a in gold_actions()]
    assert "M calc/ops.py" in outputs[1].blocks[0].text
    assert (outputs[-1].reward, outputs[-1].finished) == (1.0, True)
    assert outputs[-1].metadata["FAIL_TO_PASS"] == {"passed": 1, "total": 1}


def test_orsbox_run_with_an_actions_file(dataset_file: Path, tmp_path: Path) -> None:
    actions = tmp_path / "gold.jsonl"
    actions.write_text("".join(json.dumps(a) + "\n" for a in gold_actions()))
    done = orsbox(
        "run", f"swebench:{dataset_file}", *FLAGS, "--index", "1", "--actions", str(actions)
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "final reward: 1.0  finished: true" in done.stdout, done.stdout
