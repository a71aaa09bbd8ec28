"""Grading on real instance images: the official harness's verdicts, and the ways an
agent might get a reward it did not earn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from orsbox.clock import ManualClock
from tests.formats.swebench import dataset, images
from tests.formats.swebench.conftest import load_one

pytestmark = [pytest.mark.docker, pytest.mark.anyio]


@pytest.fixture
def v4_env(tmp_path: Path, test_images: list[str]) -> Any:
    path = dataset.write_jsonl(tmp_path / "test.jsonl", [dataset.v4_row()])
    return load_one(path)  # the test command comes from SWE-bench 4's spec tables


async def test_gold_patch_resolves(v4_env: Any, play: Any) -> None:
    async with play(v4_env, "pytest-dev__pytest-1") as episode:
        await episode.apply(dataset.patches().gold)
        out = await episode.submit()
    assert (out.reward, out.finished) == (1.0, True), out.metadata
    assert out.metadata["FAIL_TO_PASS"] == {"passed": 1, "total": 1}
    assert out.metadata["PASS_TO_PASS"] == {"passed": 3, "total": 3}
    assert out.metadata["log_parser"] == "parse_log_pytest"


async def test_no_change_is_not_resolved(v4_env: Any, play: Any) -> None:
    async with play(v4_env, "pytest-dev__pytest-1") as episode:
        out = await episode.submit()
    assert out.reward == 0.0 and "empty patch" in out.metadata["reason"]
    # the instance's totals, not 0/0: the tests did not run, nothing passed
    assert out.metadata["FAIL_TO_PASS"] == {"passed": 0, "total": 1}
    assert out.metadata["PASS_TO_PASS"] == {"passed": 0, "total": 3}


async def test_fixing_fail_to_pass_but_breaking_pass_to_pass(v4_env: Any, play: Any) -> None:
    async with play(v4_env, "pytest-dev__pytest-1") as episode:
        await episode.apply(dataset.patches().breaks_p2p)
        out = await episode.submit()
    assert out.reward == 0.0
    assert out.metadata["FAIL_TO_PASS"] == {"passed": 1, "total": 1}
    assert out.metadata["failed_tests"] == ["tests/test_ops.py::test_add"]


async def test_editing_the_tests_to_pass_earns_nothing(v4_env: Any, play: Any) -> None:
    """The agent writes the test the patch will add, but one that passes with the bug,
    and rewrites the others: the harness resets and re-applies the test files."""
    fake = "def test_div_zero():\n    assert True\n\n\ndef test_add():\n    assert True\n"
    async with play(v4_env, "pytest-dev__pytest-1") as episode:
        await episode.write("/testbed/tests/test_ops.py", fake)
        out = await episode.submit()
    assert out.reward == 0.0
    assert out.metadata["failed_tests"] == ["tests/test_ops.py::test_div_zero"]


async def test_background_process_cannot_change_grading(v4_env: Any, play: Any) -> None:
    """A daemon that writes the fix the moment grading would show itself in the agent's
    sandbox (git running, a patch or eval file appearing, pytest starting): it is killed
    before the diff is taken, and the tests run elsewhere, so the unfixed work earns 0."""
    watch = (
        "while true; do if pgrep -x git || pgrep -x pytest || ls /tmp/patch.diff "
        "/tmp/.orsbox-agent.patch /tmp/orsbox-eval.sh /eval.sh 2>/dev/null | grep -q .; then "
        "cp /tmp/fixed.py /testbed/calc/ops.py; fi; sleep 0.01; done"
    )
    async with play(v4_env, "pytest-dev__pytest-1") as episode:
        await episode.write("/tmp/fixed.py", dataset.ops_with(dataset.FIXED_DIV))
        await episode.bash("echo '# not a fix' >> /testbed/calc/ops.py")
        await episode.bash(f"nohup setsid bash -c '{watch}' >/dev/null 2>&1 &")
        before = await episode.bash("sleep 0.2; cat /testbed/calc/ops.py; ps -eo args")
        assert "while true" in before and "raise ValueError" not in before
        out = await episode.submit()
        after = await episode.bash("cat /testbed/calc/ops.py; ps -eo args")
    assert out.reward == 0.0 and out.metadata["failed_tests"] == [dataset.F2P[0]], out.metadata
    assert "# not a fix" in after and "raise ValueError" not in after
    assert "while true" not in after


async def test_patch_touching_a_binary_file(v4_env: Any, play: Any) -> None:
    async with play(v4_env, "pytest-dev__pytest-1") as episode:
        await episode.apply(dataset.patches().binary_and_gold)
        out = await episode.submit()
    assert out.reward == 1.0, out.metadata


async def test_patch_that_does_not_apply_is_zero_with_reason(
    v4_env: Any, play: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A diff the grading container cannot apply (it edits a file the repo lacks)."""
    from orsbox.formats.swebench import grading

    async def wrong_patch(*args: Any) -> str:
        return dataset.patches().gold.replace("calc/ops.py", "calc/missing.py")

    monkeypatch.setattr(grading, "agent_patch", wrong_patch)
    async with play(v4_env, "pytest-dev__pytest-1") as episode:
        out = await episode.submit()
    assert out.reward == 0.0 and out.finished
    assert "does not apply" in out.metadata["reason"]
    assert "patch --batch --fuzz=5" in out.metadata["reason"]


async def test_agent_sandbox_stays_as_it_was(v4_env: Any, play: Any) -> None:
    """Grading takes the diff without touching the agent's index or files."""
    async with play(v4_env, "pytest-dev__pytest-1") as episode:
        await episode.apply(dataset.patches().gold)
        await episode.bash("cd /testbed && echo new > new_file.txt")
        before = await episode.bash("cd /testbed && git status --porcelain")
        await episode.submit()
        after = await episode.bash("cd /testbed && git status --porcelain")
    assert before == after and "?? new_file.txt" in after


async def test_instance_image_with_official_name_after_map(v4_env: Any) -> None:
    env = v4_env({"instance_id": "pytest-dev__pytest-1"})
    assert env.sandbox_spec().image == images.OFFICIAL
    assert v4_env.needed_images() == []


async def test_missing_image_fails_setup_naming_it_and_how_to_provide_it(
    tmp_path: Path, play: Any, test_images: list[str]
) -> None:
    """No registry answers here: the pull fails, and setup says what to do."""
    from orsbox.errors import SetupFailed

    row = dataset.v5_row("orsbox-test/never-built:1")
    env = load_one(dataset.write_jsonl(tmp_path / "t.jsonl", [row]))
    with pytest.raises(SetupFailed) as caught:
        async with play(env, "calc__calc-5"):
            pass
    message = str(caught.value)
    assert "image orsbox-test/never-built:1 is not on this machine" in message
    assert "docker load" in message and "--image-map orsbox-test/never-built:1=LOCAL" in message


async def test_a_call_after_the_episode_limit_grades_and_ends_it(
    tmp_path: Path, play: Any, test_images: list[str]
) -> None:
    path = dataset.write_jsonl(tmp_path / "test.jsonl", [dataset.v4_row()])
    env = load_one(path, test_cmd="pytest -rA", episode_timeout_s=600.0)
    clock = ManualClock()  # the host's: the limit passes without waiting it out
    async with play(env, "pytest-dev__pytest-1", clock) as episode:
        await episode.apply(dataset.patches().gold)
        await clock.advance(599.99)
        assert await episode.env.before_tool("bash") is None  # not yet: the call runs
        await clock.advance(0.01)
        out = await episode.env.before_tool("bash")
    assert out is not None and (out.reward, out.finished) == (1.0, True), out
