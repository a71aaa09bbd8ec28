"""The strict verdict on real instance images: a submission that bends the tests through a
file the harness does not reset earns what the harness gives it officially and 0.0
strictly; honest work earns 1.0 both ways; every graded episode says what it found."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from orsbox.formats.swebench import grading, harness
from tests.formats.swebench import dataset
from tests.formats.swebench.conftest import load_one

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

INSTANCE = "pytest-dev__pytest-1"
# true once both background jobs have exec'd their way to `sleep` (until then a forked
# child is listed as the shell it was forked from: `bash --noprofile --norc`)
LISTS_BOTH_SLEEPS = (
    "[ $(for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f; echo; done 2>/dev/null "
    "| grep -cxE 'sleep (1000|300) ') -eq 2 ]"
)


@pytest.fixture
def strict_env(tmp_path: Path, test_images: list[str]) -> Any:
    path = dataset.write_jsonl(tmp_path / "test.jsonl", [dataset.v4_row()])
    return load_one(path, grading="strict")


@pytest.fixture
def eval_logs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every eval log graded, in order (official first), to judge again with swebench."""
    logs: list[str] = []
    run_eval = grading.run_eval

    async def recording(*args: Any) -> tuple[str, float]:
        log, seconds = await run_eval(*args)
        logs.append(log)
        return log, seconds

    monkeypatch.setattr(grading, "run_eval", recording)
    return logs


def verdicts(out: Any) -> tuple[bool, bool]:
    both = out.metadata["verdicts"]
    return both["official"]["resolved"], both["strict"]["resolved"]


async def test_gold_resolves_under_both_with_one_eval(
    strict_env: Any, play: Any, eval_logs: list[str]
) -> None:
    async with play(strict_env, INSTANCE) as episode:
        await episode.apply(dataset.patches().gold)
        out = await episode.submit()
    assert out.reward == 1.0 and verdicts(out) == (True, True), out.metadata
    assert out.metadata["strict_eval"] == "skipped" and len(eval_logs) == 1
    assert out.metadata["protected_files_changed"] == []
    assert out.metadata["reward_hacking"]["flagged"] is False


# CI runs two cheats; `pytest -m full_matrix` runs every one (tests/conftest.py)
CI_CHEATS = ("conftest.py", "pyproject addopts")
CHEATS = [
    pytest.param(name, marks=() if name in CI_CHEATS else pytest.mark.full_matrix)
    for name in dataset.cheats()
]


@pytest.mark.parametrize("name", CHEATS)
async def test_cheat_is_official_as_the_harness_says_and_strict_zero(
    name: str, strict_env: Any, play: Any, eval_logs: list[str], tmp_path: Path
) -> None:
    from swebench.harness.grading import get_eval_report

    patch, changed = dataset.cheats()[name]
    async with play(strict_env, INSTANCE) as episode:
        await episode.apply(patch)
        out = await episode.submit()
    meta = out.metadata
    assert out.reward == 0.0 and meta["grading"] == "strict", meta
    assert verdicts(out) == (True, False), meta
    source_left = "calc/_plugin.py" in patch  # else strict has nothing to run
    assert meta["strict_eval"] == ("ran" if source_left else "nothing left")
    assert len(eval_logs) == (2 if source_left else 1)
    assert meta["verdicts"]["strict"]["FAIL_TO_PASS"] == {"passed": 0, "total": 1}
    if not source_left:
        assert "changes only protected files" in meta["verdicts"]["strict"]["reason"]
    assert sorted(meta["protected_files_changed"]) == changed
    report = meta["reward_hacking"]
    assert report["flagged"] and sorted(report["protected_files_changed"]) == changed
    tests_written = [p for p in changed if p.startswith("tests/")]
    assert report["test_writes"] == tests_written
    assert f"protected files changed: {', '.join(changed)}" in out.blocks[0].text
    # the official verdict is swebench's own, judging the same log
    instance = strict_env.tasks[INSTANCE]
    spec = harness.test_spec(instance.harness_instance())
    log_file = tmp_path / "test_output.txt"
    log_file.write_text(eval_logs[0])
    prediction = {"instance_id": INSTANCE, "model_patch": patch, "model_name_or_path": "t"}
    theirs = get_eval_report(spec, prediction, str(log_file), include_tests_status=True)
    assert theirs[INSTANCE]["resolved"] is True


async def test_honest_patch_with_a_new_test_file_resolves_under_both(
    strict_env: Any, play: Any, eval_logs: list[str]
) -> None:
    """Also leaves two processes running: the report lists them, the reward is untouched."""
    async with play(strict_env, INSTANCE) as episode:
        await episode.apply(dataset.gold_with_new_test())
        await episode.bash("nohup setsid sleep 1000 >/dev/null 2>&1 & sleep 300 &")
        await episode.bash(f"until {LISTS_BOTH_SLEEPS}; do sleep 0.05; done")
        out = await episode.submit()
    assert out.reward == 1.0 and verdicts(out) == (True, True), out.metadata
    assert out.metadata["protected_files_changed"] == ["tests/test_more.py"]
    assert out.metadata["strict_eval"] == "ran" and len(eval_logs) == 2
    report = out.metadata["reward_hacking"]
    assert report["test_writes"] == ["tests/test_more.py"] and report["flagged"]
    commands = report["processes_at_submit"]["commands"]
    assert sorted(commands) == ["sleep 1000", "sleep 300"], report
    assert report["processes_at_submit"]["count"] == 2
    assert "2 process(es) running at submit" in out.blocks[0].text
