"""One row of each family, in its dataset's own column layout, played with the gold fix
(resolved) and without it (not resolved) on a real image."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.formats.swebench import dataset, images
from tests.formats.swebench.conftest import load_one

pytestmark = [pytest.mark.docker, pytest.mark.anyio]


async def _play(play: Any, env: Any, instance_id: str, patch: str | None) -> Any:
    async with play(env, instance_id) as episode:
        if patch is not None:
            await episode.apply(patch)
        return await episode.submit()


@pytest.mark.parametrize("fixed", [True, False])
async def test_v5_self_contained_row(
    tmp_path: Path, play: Any, test_images: Any, fixed: bool
) -> None:
    env = load_one(dataset.write_jsonl(tmp_path / "v5.jsonl", [dataset.v5_row(images.CALC)]))
    out = await _play(play, env, "calc__calc-5", dataset.patches().gold if fixed else None)
    assert out.reward == (1.0 if fixed else 0.0), out.metadata


async def test_swe_gym_row_uses_its_image_names(
    tmp_path: Path, play: Any, test_images: Any
) -> None:
    env = load_one(
        dataset.write_jsonl(tmp_path / "gym.jsonl", [dataset.gym_row()]), test_cmd="pytest -rA"
    )
    assert env.tasks["calc-org__calc-7"].family == "swe-gym"
    assert env.tasks["calc-org__calc-7"].image == images.GYM
    out = await _play(play, env, "calc-org__calc-7", dataset.patches().gold)
    assert out.reward == 1.0, out.metadata


@pytest.mark.parametrize("image", [images.SMITH, images.CALC], ids=["branch", "patch"])
async def test_swe_smith_row(tmp_path: Path, play: Any, test_images: Any, image: str) -> None:
    """The bug comes from the instance's branch (image has it) or from `patch`; the
    agent sees the buggy code, and undoing the bug resolves it."""
    row = dataset.smith_row(image, images.SMITH_BRANCH)
    env = load_one(dataset.write_jsonl(tmp_path / "smith.jsonl", [row]), test_cmd="pytest -rA")
    async with play(env, images.SMITH_BRANCH) as episode:
        assert "return a * b" in await episode.bash("cat /testbed/calc/ops.py")
        unfixed = await episode.submit()
    assert unfixed.reward == 0.0
    async with play(env, images.SMITH_BRANCH) as episode:
        await episode.bash("sed -i 's|return a \\* b|return a / b|' /testbed/calc/ops.py")
        fixed = await episode.submit()
    assert fixed.reward == 1.0, fixed.metadata


async def test_swe_rebench_row_in_the_images_workdir(
    tmp_path: Path, play: Any, test_images: Any
) -> None:
    env = load_one(
        dataset.write_jsonl(tmp_path / "rebench.jsonl", [dataset.rebench_row(images.REBENCH)])
    )
    assert env.tasks["calc__calc-9"].workdir is None
    async with play(env, "calc__calc-9") as episode:
        assert (await episode.bash("pwd")).strip() == "/work"
        await episode.write("/tmp/gold.diff", dataset.patches().gold)
        await episode.bash("git apply /tmp/gold.diff")
        out = await episode.submit()
    assert out.reward == 1.0, out.metadata


@pytest.mark.parametrize("fixed", [True, False])
async def test_r2e_gym_row(tmp_path: Path, play: Any, test_images: Any, fixed: bool) -> None:
    """Hidden tests are out of the agent's reach; the verdict is an exact match."""
    row = dataset.r2e_row(images.R2E)
    env = load_one(dataset.write_jsonl(tmp_path / "r2e.jsonl", [row]))
    async with play(env, images.R2E) as episode:
        assert "No such file" in await episode.bash("ls /r2e_tests")
        if fixed:
            await episode.apply(dataset.patches().gold)
        out = await episode.submit()
    assert out.reward == (1.0 if fixed else 0.0), out.metadata
