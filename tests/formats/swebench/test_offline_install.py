"""Offline grading installs the patch: the grading container has no network, and the
eval script reinstalls the repository (`python -m pip install -e .`, SWE-bench 4's install
step) before the tests, so a fix that adds a console script is tested with it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from orsbox.formats.swebench import grading
from tests.formats.swebench import dataset
from tests.formats.swebench.conftest import load_one

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

INSTANCE = "pytest-dev__pytest-2"


@pytest.fixture
def install_env(tmp_path: Path, test_images: list[str]) -> Any:
    path = dataset.write_jsonl(tmp_path / "test.jsonl", [dataset.install_row()])
    return load_one(path)


async def test_a_new_console_script_is_installed_before_the_tests(
    install_env: Any, play: Any
) -> None:
    async with play(install_env, INSTANCE) as episode:
        await episode.apply(dataset.install_row()["patch"])  # type: ignore[arg-type]
        out = await episode.submit()
    assert out.reward == 1.0, out.metadata
    assert out.metadata["FAIL_TO_PASS"] == {"passed": 1, "total": 1}
    assert out.metadata["strict_eval"] == "skipped"  # [project.scripts] is source
    assert "Successfully installed calc" in out.metadata["log_tail"]


@pytest.mark.full_matrix
async def test_with_build_isolation_offline_the_old_install_is_graded(
    install_env: Any, play: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the fix is for: pip's isolated build cannot fetch setuptools offline, the
    install fails and the tests run against the image's install, without the script."""
    monkeypatch.setattr(grading, "OFFLINE_PIP_ENV", {})
    async with play(install_env, INSTANCE) as episode:
        await episode.apply(dataset.install_row()["patch"])  # type: ignore[arg-type]
        out = await episode.submit()
    assert out.reward == 0.0
    assert out.metadata["failed_tests"] == dataset.CLI_F2P
