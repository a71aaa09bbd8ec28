"""A new format joins by one entry of the registry: the skeleton format
(tests/skeleton_format/, two files) listed in `FORMATS` is a target of `serve` and
`run`, its own option is a flag of every dataset command, and it gets the shared
dataset environment's task look-up, tool check and grading with no line of orsbox
changed (docs/benchmarks.md, "Adding a format")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from orsbox.errors import BadRequest, ManifestError
from orsbox.formats import FormatOptions, registry
from orsbox.formats.dataset import DatasetEnvironment
from orsbox.formats.harbor.environment import HarborEnvironment
from orsbox.formats.swebench.environment import SWEDatasetEnvironment
from orsbox.targets import resolve_target
from tests.servers import ROOT
from tests.skeleton_format import FORMAT, SkeletonOptions
from tests.skeleton_format.environment import SkeletonEnvironment
from tests.test_layering import ALLOWED, TESTS_ROOT, layer_of, package_imports, reaches, top_levels

SKELETON = "tests.skeleton_format"
SKELETON_ROOT = TESTS_ROOT / "skeleton_format"
REGISTER_SKELETON = (
    "import orsbox.formats.registry as registry\n"
    "from tests.skeleton_format import FORMAT\n"
    "registry.FORMATS = (*registry.FORMATS, FORMAT)\n"
    "from orsbox.cli.main import app\n"
    "app()\n"
)
TASKS = [
    {"name": "touch", "prompt": "Create /tmp/done.", "check": "test -e /tmp/done"},
    {"name": "never", "prompt": "Nothing to do.", "check": "false"},
]


@pytest.fixture
def listed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The skeleton listed by the registry: the one change to orsbox a new format makes."""
    monkeypatch.setattr(registry, "FORMATS", (*registry.FORMATS, FORMAT))


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    path = tmp_path / "checks.jsonl"
    path.write_text("".join(json.dumps(task) + "\n" for task in TASKS))
    return path


def skeleton_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """`orsbox ARGS` with the skeleton listed."""
    return subprocess.run(
        [sys.executable, "-c", REGISTER_SKELETON, *args],
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_listed_format_is_a_target_served_as_a_dataset(listed: None, dataset: Path) -> None:
    given = FormatOptions(name="checks", check_timeout_s=5)  # as the CLI hands them down
    (env_cls,) = resolve_target(f"skeleton:{dataset}", given)
    assert issubclass(env_cls, SkeletonEnvironment) and env_cls.check_timeout_s == 5
    assert env_cls.name() == "checks" and [s.name for s in env_cls.list_splits()] == ["test"]
    assert env_cls.list_tasks("test") == [{"name": "touch"}, {"name": "never"}]  # no check
    tools = {t.name for t in env_cls.list_tools().tools}
    assert tools == {"bash", "read_file", "write_file", "edit_file", "list_dir", "submit"}
    with pytest.raises(BadRequest, match="checks has no task named 'other'"):
        env_cls(task_spec={"name": "other"})
    with pytest.raises(ManifestError, match="--tools: unknown tool 'bsh'"):
        resolve_target(f"skeleton:{dataset}", FormatOptions(tools=("bash", "bsh")))
    with pytest.raises(ManifestError, match="check_timeout_s"):
        resolve_target(f"skeleton:{dataset}", FormatOptions(check_timeout_s=-1))


def test_every_format_shares_one_dataset_environment() -> None:
    """One task look-up, one tool check, one grading path for Harbor and SWE-bench too."""
    for cls in (HarborEnvironment, SWEDatasetEnvironment, SkeletonEnvironment):
        assert issubclass(cls, DatasetEnvironment)
        assert cls.grade_episode is DatasetEnvironment.grade_episode
        assert cls.list_tasks.__func__ is DatasetEnvironment.list_tasks.__func__  # type: ignore[attr-defined]  # a classmethod's function


def test_the_cli_offers_a_listed_formats_options() -> None:
    for command in ("serve", "run", "build"):
        done = skeleton_cli(command, "--help")
        assert done.returncode == 0, done.stderr
        assert "skeleton:PATH" in done.stdout and "--check-timeout" in done.stdout
        assert "seconds a skeleton task's check may run" in done.stdout
    for command in (("serve",), ("eval",), ("images", "list")):  # their targets' help
        done = skeleton_cli(*command, "--help")
        assert "skeleton:FILE (JSON lines of checks)" in done.stdout, done.stdout
    done = skeleton_cli("build", "skeleton:x.jsonl", "--check-timeout", "-1")
    assert done.returncode == 2 and "--check-timeout" in done.stderr, done.stderr


@pytest.mark.docker
def test_orsbox_run_plays_a_skeleton_episode(base_image: str, dataset: Path) -> None:
    actions = dataset.parent / "actions.jsonl"
    calls = [{"name": "bash", "input": {"command": "touch /tmp/done"}}, {"name": "submit"}]
    actions.write_text("".join(json.dumps(call) + "\n" for call in calls))
    done = skeleton_cli("run", f"skeleton:{dataset}", "--actions", str(actions))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Create /tmp/done." in done.stdout and "solved" in done.stdout
    assert done.stdout.rstrip().endswith("final reward: 1.0  finished: true")


def test_the_skeleton_imports_no_other_format_and_nothing_above_formats() -> None:
    """What a format may import (tests/test_layering.py's `ALLOWED` for orsbox.formats),
    and of the formats layer only the shared modules: no other format's package."""
    imports = package_imports(SKELETON_ROOT, root=TESTS_ROOT)
    assert {m for m, _, _ in imports} == {SKELETON, f"{SKELETON}.environment"}
    tops = top_levels(ROOT / "orsbox")
    may = {"orsbox.formats", *ALLOWED["orsbox.formats"]}
    found = [
        f"{module} (line {line}) imports {imported}"
        for module, line, imported in imports
        if reaches(imported, "orsbox")
        and (
            layer_of(imported, tops) not in may
            or reaches(imported, "orsbox.formats.harbor")
            or reaches(imported, "orsbox.formats.swebench")
        )
    ]
    assert not found, "\n".join(found)


def test_the_skeleton_is_two_files() -> None:
    """docs/benchmarks.md's count: two new files, one entry in the registry, one page."""
    assert sorted(p.name for p in SKELETON_ROOT.glob("*.py")) == ["__init__.py", "environment.py"]
    options = SkeletonOptions()
    assert FORMAT.own_fields() == ["check_timeout_s"] and options.check_timeout_s == 60
