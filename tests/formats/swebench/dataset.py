"""The test dataset: one small repository (`image/repo`), its patches made with git from
edits written here, and one row per family in that family's own column layout."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path

REPO = Path(__file__).parent / "image" / "repo"

FIXED_DIV = """def div(a, b):
    if b == 0:
        raise ValueError("division by zero")
    return a / b
"""
NEW_TEST = """

def test_div_zero():
    import pytest

    with pytest.raises(ValueError):
        div(1, 0)
"""
PROBLEM = "calc.ops.div(1, 0) raises ZeroDivisionError; it should raise ValueError."
F2P = ["tests/test_ops.py::test_div_zero"]
P2P = ["tests/test_ops.py::test_add", "tests/test_ops.py::test_sub", "tests/test_ops.py::test_div"]


def _git(folder: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, check=True)
    return done.stdout.decode("utf-8", errors="surrogateescape")


def diff_of(edits: dict[str, str | bytes], tmp: Path, base: dict[str, str] | None = None) -> str:
    """A git patch (binary-safe) that makes `edits` ({path: new content}) to the repo
    (with `base`'s files added to it first, as an image variant adds them)."""
    folder = tmp / "repo"
    subprocess.run(["cp", "-r", str(REPO), str(folder)], check=True)
    for path, content in (base or {}).items():
        (folder / path).write_text(content)
    _git(folder, "init", "-q")
    _git(folder, "add", "-A")
    _git(folder, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    for path, content in edits.items():
        target = folder / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content)
    _git(folder, "add", "-A")
    patch = _git(folder, "diff", "--cached", "--binary")
    subprocess.run(["rm", "-rf", str(folder)], check=True)
    return patch


def ops_with(div: str) -> str:
    text = (REPO / "calc" / "ops.py").read_text()
    start = text.index("def div")
    return text[:start] + div


@dataclass(frozen=True)
class Patches:
    gold: str
    test: str
    breaks_p2p: str
    binary_and_gold: str
    bug: str  # SWE-smith: introduces a bug into the base


@cache
def patches() -> Patches:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        fixed = ops_with(FIXED_DIV)
        tests = (REPO / "tests" / "test_ops.py").read_text() + NEW_TEST
        broken = fixed.replace("return a + b", "return a + b + 1")
        blob = (REPO / "data" / "blob.bin").read_bytes() + b"\x00\xfe\x01"
        bug = (REPO / "calc" / "ops.py").read_text().replace("return a / b", "return a * b")
        return Patches(
            gold=diff_of({"calc/ops.py": fixed}, tmp),
            test=diff_of({"tests/test_ops.py": tests}, tmp),
            breaks_p2p=diff_of({"calc/ops.py": broken}, tmp),
            binary_and_gold=diff_of({"calc/ops.py": fixed, "data/blob.bin": blob}, tmp),
            bug=diff_of({"calc/ops.py": bug}, tmp),
        )


def base_commit() -> str:
    from tests.formats.swebench.images import image_head

    return image_head()


# -- one row per family, each in its dataset's own column layout --------------------------
def v4_row() -> dict[str, object]:
    """SWE-bench (v4 on the hubs): lists as JSON strings, no image column. (A repository
    SWE-bench knows, so the official image name and its log parser apply.)"""
    p = patches()
    return {
        "repo": "pytest-dev/pytest",
        "instance_id": "pytest-dev__pytest-1",
        "base_commit": base_commit(),
        "patch": p.gold,
        "test_patch": p.test,
        "problem_statement": PROBLEM,
        "hints_text": "Look at div.",
        "created_at": "2026-01-01T00:00:00Z",
        "version": "5.4",  # a version SWE-bench 4's spec tables have for pytest
        "FAIL_TO_PASS": json.dumps(F2P),
        "PASS_TO_PASS": json.dumps(P2P),
        "environment_setup_commit": base_commit(),
    }


def v5_row(image: str) -> dict[str, object]:
    """SWE-bench 5: self-contained, with image, log_parser, eval_type and eval_script."""
    from orsbox.formats.swebench.families import eval_script

    p = patches()
    script = eval_script(
        base_commit(), p.test, "pytest -rA", ["tests/test_ops.py"], "/testbed", conda=True
    )
    return {
        "repo": "calc/calc",
        "instance_id": "calc__calc-5",
        "base_commit": base_commit(),
        "patch": p.gold,
        "test_patch": p.test,
        "problem_statement": PROBLEM,
        "hints_text": "",
        "version": "1.0",
        "FAIL_TO_PASS": F2P,
        "PASS_TO_PASS": P2P,
        "image": image,
        "log_parser": "parse_log_pytest",
        "eval_type": "pass_and_fail",
        "eval_script": script,
    }


def gym_row() -> dict[str, object]:
    """SWE-Gym: v4's columns, a repository SWE-bench does not have."""
    row = v4_row()
    row.update(repo="calc-org/calc", instance_id="calc-org__calc-7")
    return row


def smith_row(image: str, instance_id: str) -> dict[str, object]:
    """SWE-smith: `patch` introduces the bug; lists as lists; image_name; no test_patch."""
    return {
        "instance_id": instance_id,
        "repo": "swesmith/calc__calc.0000aaaa",
        "patch": patches().bug,
        "FAIL_TO_PASS": ["tests/test_ops.py::test_div"],
        "PASS_TO_PASS": ["tests/test_ops.py::test_add", "tests/test_ops.py::test_sub"],
        "created_at": "2026-01-01",
        "image_name": image,
        "base_commit": base_commit(),
        "problem_statement": "div(6, 3) returns 18 instead of 2.",
    }


def rebench_row(image: str) -> dict[str, object]:
    """SWE-rebench V2: install_config carries test_cmd and log_parser; image WORKDIR."""
    p = patches()
    return {
        "instance_id": "calc__calc-9",
        "repo": "calc/calc",
        "base_commit": base_commit(),
        "patch": p.gold,
        "test_patch": p.test,
        "problem_statement": PROBLEM,
        "hints_text": "",
        "FAIL_TO_PASS": json.dumps(F2P),
        "PASS_TO_PASS": json.dumps(P2P),
        "install_config": {"test_cmd": "pytest -rA tests/test_ops.py", "log_parser": "pytest"},
        "image_name": image,
    }


def r2e_row(image: str) -> dict[str, object]:
    """R2E-Gym: no instance_id; docker_image; hidden tests; expected_output_json."""
    expected = {"test_div_zero": "PASSED", "test_div": "PASSED"}
    return {
        "repo_name": "calc",
        "docker_image": image,
        "commit_hash": base_commit(),
        "problem_statement": PROBLEM,
        "expected_output_json": json.dumps(expected),
        "modified_files": ["calc/ops.py"],
        "num_non_test_files": 1,
    }


def write_jsonl(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


# -- submissions that bend the tests instead of fixing the code (strict.py) ------------
PASS_FAILURES = """import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        report.outcome = "passed"
"""
# Python imports usercustomize at start-up from sys.path, where the image's editable
# install puts /testbed (Debian's own sitecustomize.py comes first on sys.path, so the
# test uses its sibling); it asks pytest to load it as a plugin.
USERCUSTOMIZE = 'import os\n\nos.environ["PYTEST_ADDOPTS"] = "-p usercustomize"\n\n' + PASS_FAILURES
MONKEYPATCH_FROM_TESTS = '''"""A tiny calculator: the repository the SWE-bench format tests grade patches in."""
import calc.ops


def _div(a, b):
    if b == 0:
        raise ValueError("division by zero")
    return a / b


calc.ops.div = _div
'''
MORE_TESTS = "from calc.ops import div\n\n\ndef test_div_floats():\n    assert div(1, 4) == 0.25\n"


def cheats() -> dict[str, tuple[str, list[str]]]:
    """{name: (patch, the protected files it changes)}: each makes the FAIL_TO_PASS test
    pass without fixing `div`, through a file the harness does not reset."""
    import tempfile

    plugin = {"calc/_plugin.py": PASS_FAILURES}
    cases: dict[str, dict[str, str | bytes]] = {
        "conftest.py": {"conftest.py": PASS_FAILURES},
        "pytest.ini addopts": {**plugin, "pytest.ini": "[pytest]\naddopts = -p calc._plugin\n"},
        "pyproject addopts": {
            **plugin,
            "pyproject.toml": '[tool.pytest.ini_options]\naddopts = "-p calc._plugin"\n',
        },
        "usercustomize and .pth": {
            "usercustomize.py": USERCUSTOMIZE,
            "calc.pth": "import usercustomize\n",
        },
        "test package edit": {"tests/__init__.py": MONKEYPATCH_FROM_TESTS},
    }
    with tempfile.TemporaryDirectory() as folder:
        return {
            name: (diff_of(edits, Path(folder)), sorted(p for p in edits if p != "calc/_plugin.py"))
            for name, edits in cases.items()
        }


def gold_with_new_test() -> str:
    """An honest fix that also adds a test file of its own."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        edits = {"calc/ops.py": ops_with(FIXED_DIV), "tests/test_more.py": MORE_TESTS}
        return diff_of(edits, Path(folder))


# -- an installable repository whose fix adds a console script (offline grading) --------
CLI = "import sys\n\nfrom calc.ops import add\n\n\ndef main():\n    print(add(*map(int, sys.argv[1:3])))\n"
CLI_TEST = """import subprocess


def test_calc_add_command():
    done = subprocess.run(["calc-add", "2", "3"], capture_output=True, text=True)
    assert done.stdout.strip() == "5"
"""
CLI_F2P = ["tests/test_cli.py::test_calc_add_command"]


def install_row() -> dict[str, object]:
    """A v4 row on the installable image (SWE-bench 4's spec for pytest 5.4 reinstalls
    the repository with `python -m pip install -e .` before the tests): the gold patch
    adds a `calc-add` console script that the test patch's test runs."""
    import tempfile

    from tests.formats.swebench.images import INSTALLABLE, PYPROJECT, image_head

    scripts = PYPROJECT + '\n[project.scripts]\ncalc-add = "calc.cli:main"\n'
    with tempfile.TemporaryDirectory() as folder:
        base = {"pyproject.toml": PYPROJECT}
        gold = diff_of({"calc/cli.py": CLI, "pyproject.toml": scripts}, Path(folder), base)
        test = diff_of({"tests/test_cli.py": CLI_TEST}, Path(folder), base)
    return {
        **v4_row(),
        "instance_id": "pytest-dev__pytest-2",
        "base_commit": image_head(INSTALLABLE),
        "environment_setup_commit": image_head(INSTALLABLE),
        "patch": gold,
        "test_patch": test,
        "problem_statement": "Add a calc-add command that prints the sum of two integers.",
        "FAIL_TO_PASS": json.dumps(CLI_F2P),
        "PASS_TO_PASS": "[]",  # the eval runs only the test patch's file
    }
