"""SWE-style grading that could not run (issue 28), on the real test image: an eval
script that dies before its test-output markers is a grading error naming the cause,
one whose tests fail is a real 0.0, a grading container that cannot start is an error."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from orsbox.errors import GradingError
from orsbox.formats.swebench.families import eval_script
from tests.formats.swebench import dataset, images
from tests.formats.swebench.conftest import load_one

pytestmark = [pytest.mark.docker, pytest.mark.anyio]


def v5_row_dying(instance_id: str, before: list[str]) -> dict[str, object]:
    """The v5 test row, its eval script running `before` ahead of its markers."""
    p = dataset.patches()
    script = eval_script(
        dataset.base_commit(), p.test, "pytest -rA", ["tests/test_ops.py"], "/testbed",
        conda=True, before=before,
    )  # fmt: skip
    return {**dataset.v5_row(images.CALC), "instance_id": instance_id, "eval_script": script}


@pytest.fixture
def env(tmp_path: Path, test_images: list[str]) -> Any:
    rows = [
        dataset.v5_row(images.CALC),
        v5_row_dying("calc__calc-killed", ["kill -9 $$"]),
        v5_row_dying("calc__calc-exits", ["exit 3"]),
    ]
    return load_one(dataset.write_jsonl(tmp_path / "v5.jsonl", rows))


@pytest.mark.parametrize(
    ("instance_id", "cause"),
    [("calc__calc-killed", "eval-killed"), ("calc__calc-exits", "eval-markers-missing")],
)
async def test_an_eval_script_that_dies_before_its_markers_is_a_grading_error(
    env: Any, play: Any, instance_id: str, cause: str
) -> None:
    async with play(env, instance_id) as episode:
        await episode.apply(dataset.patches().gold)
        with pytest.raises(GradingError) as raised:
            await episode.submit()
        with pytest.raises(GradingError):  # graded once: the same error, no second run
            await episode.submit()
    assert raised.value.cause == cause
    assert "before its test output was complete" in raised.value.message


async def test_failing_tests_are_a_real_zero(env: Any, play: Any) -> None:
    async with play(env, "calc__calc-5") as episode:
        await episode.apply(dataset.patches().breaks_p2p)
        out = await episode.submit()
    assert (out.reward, out.finished) == (0.0, True)
    assert out.metadata["reason"] == "some FAIL_TO_PASS or PASS_TO_PASS tests do not pass"


async def test_a_grading_container_that_cannot_start_is_a_grading_error(
    env: Any, play: Any
) -> None:
    async with play(env, "calc__calc-5") as episode:
        await episode.apply(dataset.patches().gold)
        gone = "orsbox-test/no-such-image:gone"  # the grading container's image only
        episode.env.task = dataclasses.replace(episode.env.task, image=gone)
        with pytest.raises(GradingError) as raised:
            await episode.submit()
    assert raised.value.cause == "grading-container"
    assert "no-such-image" in raised.value.message
